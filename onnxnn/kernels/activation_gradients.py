"""The gradients of ReLU and Hardtanh from their outputs: onnxnn's ``ReluGradient`` and ``HardtanhGradient``.

Both pass ``G`` where the activation's output ``A`` lies strictly inside its bounds and give 0 where it
is at or beyond one (NaN passes): ReLU's bounds are ``(0, None)``, no upper one (runtime/ops/relu_gradient.py,
runtime/ops/hardtanh.py). A large float32 one runs as a compiled loop (kernels/compiled_normalization.py),
here and, through ``compiled_forms``, between onnxnn's onnxruntime sessions; a batch normalization's
gradient folds them in (kernels/normalization.py).
"""

from __future__ import annotations

import numpy as np

from . import compiled_normalization
from ..ir.domains import ONNXNN_DOMAIN
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.registry import compiled_forms

__all__ = ["masked_by_activation"]


def masked_by_activation(xp, g, output, bounds: tuple):
    """0 where ``output`` is at most ``bounds``' low or at least its high (None: no upper bound), else
    ``g``, NaN passing ``g``: the formula the loops compute."""
    low, high = bounds
    dropped = output <= low if high is None else (output <= low) | (output >= high)
    return xp.where(dropped, g.dtype.type(0), g)


def _hardtanh_bounds(inputs) -> tuple:
    return float(inputs[2]), float(inputs[3])


@kernels.register("ReluGradient", domain=ONNXNN_DOMAIN, types=FLOATING)
def relu_gradient(xp, inputs, attrs):
    return [_activation_gradient(xp, inputs[0], inputs[1], compiled_normalization.RELU_BOUNDS)]


@kernels.register("HardtanhGradient", domain=ONNXNN_DOMAIN, types=FLOATING)
def hardtanh_gradient(xp, inputs, attrs):
    return [_activation_gradient(xp, inputs[0], inputs[1], _hardtanh_bounds(inputs))]


def _activation_gradient(xp, g, output, bounds: tuple):
    """The compiled loop where it takes the arrays, else the formula."""
    if xp is np and compiled_normalization.eligible(g.shape, g.dtype, per_channel=False):
        return compiled_normalization.activation_gradient(g, output, bounds)
    return masked_by_activation(xp, g, output, bounds)


@compiled_forms.register("ReluGradient", domain=ONNXNN_DOMAIN)
def _compiled_relu_gradient(node, threads: int):
    """onnxnn's sessions run a large float32 ReLU gradient as the compiled loop, outside onnxruntime."""
    if not _eligible(node):
        return None
    bounds = compiled_normalization.RELU_BOUNDS
    return lambda arrays, threads: [compiled_normalization.activation_gradient(arrays[0], arrays[1], bounds, threads)]


@compiled_forms.register("HardtanhGradient", domain=ONNXNN_DOMAIN)
def _compiled_hardtanh_gradient(node, threads: int):
    """As ReLU's: its bounds are read at each run (fed scalars)."""
    if not _eligible(node):
        return None

    def run(arrays, threads: int) -> list:
        return [compiled_normalization.activation_gradient(arrays[0], arrays[1], _hardtanh_bounds(arrays), threads)]

    return run


def _eligible(node) -> bool:
    g = node.inputs[0]
    return compiled_normalization.eligible(g.shape, g.dtype.numpy_dtype, per_channel=False)
