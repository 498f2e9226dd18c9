"""onnxnn's custom op domain and the layout of its ops' inputs, shared by rules, kernels and importers."""
from __future__ import annotations

__all__ = ["MOMENTUM_TENSORS_START", "ONNXNN_DOMAIN", "TRAINING_DOMAIN"]

# onnxnn's custom-op domain (DESIGN principle 1): ops that onnxnn's kernels run directly and that
# ``decompositions`` write as standard ONNX whenever a model is built (linalg's Solve).
ONNXNN_DOMAIN = "ai.onnxnn"
# onnxnn records its fused optimizer updates (Momentum, as in ai.onnx.preview.training) in it.
TRAINING_DOMAIN = ONNXNN_DOMAIN
MOMENTUM_TENSORS_START = 5  # R, T, alpha, beta, norm_coefficient come first
