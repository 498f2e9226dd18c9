"""onnxnn's custom op domain and the layout of its ops' inputs, shared by rules, kernels and importers."""

from __future__ import annotations

__all__ = [
    "ONNXNN_DOMAIN",
    "TRAINING_DOMAIN",
    "OPTIMIZER_UPDATES",
    "MOMENTUM_TENSORS_START",
    "ADAM_TENSORS_START",
    "ADAGRAD_TENSORS_START",
    "RMSPROP_TENSORS_START",
]

# onnxnn's custom-op domain (DESIGN principle 1): ops that onnxnn's kernels run directly and that
# ``decompositions`` write as standard ONNX whenever a model is built (linalg's Solve).
ONNXNN_DOMAIN = "ai.onnxnn"
# onnxnn records its fused optimizer updates (Momentum, Adam, Adagrad, RMSprop, after
# ai.onnx.preview.training's, and those of update_formulas.py) in it.
TRAINING_DOMAIN = ONNXNN_DOMAIN
OPTIMIZER_UPDATES = frozenset(
    {"Momentum", "SGD", "Adam", "Adagrad", "RMSprop", "Adamax", "NAdam", "RAdam", "Adadelta", "ASGD", "Rprop"}
)  # their op types there
MOMENTUM_TENSORS_START = 5  # R, T, alpha, beta, norm_coefficient come first
ADAM_TENSORS_START = 6  # R, T, beta1, beta2, epsilon, weight_decay come first
ADAGRAD_TENSORS_START = 5  # R, T, lr_decay, epsilon, weight_decay come first
RMSPROP_TENSORS_START = 5  # R, alpha, epsilon, weight_decay, momentum come first
