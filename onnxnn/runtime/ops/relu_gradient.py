"""ReLU's gradient as one node: onnxnn's ``ReluGradient`` op.

    ReluGradient(G, Y) -> dX

For ``Y = Relu(X)`` and ``G`` a gradient of ``Y``: ``dX = 0`` where ``Y <= 0``, else ``G`` (so ``G`` where
``Y`` is NaN, as PyTorch's ``threshold_backward``: ``Y <= threshold ? 0 : G``). ``build_model`` writes it
out as a LessOrEqual and a Where; onnxnn's CPU sessions run it as a compiled loop where one takes the
node (kernels/compiled_normalization.py): onnxruntime's Where takes three times a Mul's time, and the
comparison is a pass of its own.

It is linear in ``G``, so ``G``'s gradient is ``ReluGradient(H, Y)``; ``Y``'s is zero wherever it is
defined (Relu's second derivative).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir.domains import ONNXNN_DOMAIN
from ...ir.registry import decompositions, gradient_rules, shape_rules
from ..tensor import Tensor, apply_op
from ._common import expanded_zeros, same_shape_pair
from .training import node_emitter

__all__ = ["relu_gradient", "emit_relu_gradient"]

OP_TYPE = "ReluGradient"


def relu_gradient(g: Tensor, y: Tensor) -> Tensor:
    """0 where ``y <= 0``, else ``g`` (NaN included): the gradient of ``Relu`` from its output ``y``."""
    return apply_op(OP_TYPE, (g, y), None, "ThresholdBackwardBackward0", domain=ONNXNN_DOMAIN)


@shape_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _shape(inputs, attrs):
    return same_shape_pair(OP_TYPE, "G and Y", inputs)


@decompositions.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    nodes: list = []
    initializers: list = []
    g, y = input_names
    emit_relu_gradient(
        node_emitter(nodes, fresh_name), initializers, fresh_name, g, y, node.inputs[1].dtype, output_names[0]
    )
    return nodes, initializers


def emit_relu_gradient(emit, initializers: list, fresh_name, g: str, y: str, dtype, output: str | None = None) -> str:
    """Emits the op as ONNX, ``Where(LessOrEqual(y, 0), 0, g)`` (``emit``: ``training.node_emitter``'s), its
    zero of ``dtype`` appended to ``initializers``; returns the name of the result."""
    zero = fresh_name("zero")
    initializers.append(numpy_helper.from_array(np.zeros((), dtype.numpy_dtype), zero))
    return emit("Where", emit("LessOrEqual", y, zero), zero, g, output=output)


@gradient_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient(ctx, h):
    # Y's: zero wherever defined, as PyTorch's ThresholdBackwardBackward0 gives it (a leaf reached only
    # through Y gets zeros, not None).
    return relu_gradient(h, ctx.input(1)), expanded_zeros(ctx.input_shape(1), h.dtype, h.device)
