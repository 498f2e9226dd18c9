"""Abs's gradient as one node: onnxnn's ``AbsGradient`` op.

    AbsGradient(G, X) -> dX

For ``Y = Abs(X)`` and ``G`` a gradient of ``Y``: ``dX = G * sgn(X)``, with PyTorch's ``sgn`` (0 at NaN,
where ONNX's Sign gives NaN), so an L1 loss with a NaN element gives that element no gradient.
Written with standard ops it is four nodes (Sign, IsNaN, Where, Mul); ``build_model`` writes it out
so, while onnxnn's kernels run it as one, which saves small training steps (the modules note's loop,
whose loss is ``abs``) three nodes' overhead each.

It is linear in ``G``, so ``G``'s gradient is ``AbsGradient(H, X)``; ``X``'s is zero wherever it is
defined (``sgn`` is piecewise constant).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir.domains import ONNXNN_DOMAIN
from ...ir.registry import decompositions, gradient_rules, shape_rules
from ..tensor import Tensor, apply_op
from ._common import expanded_zeros, same_shape_pair
from .training import node_emitter

__all__ = ["abs_gradient"]

OP_TYPE = "AbsGradient"


def abs_gradient(g: Tensor, x: Tensor) -> Tensor:
    """``g * sgn(x)``, 0 where ``x`` is NaN: the gradient of ``Abs`` at its input ``x``."""
    return apply_op(OP_TYPE, (g, x), None, "MulBackward0", domain=ONNXNN_DOMAIN)


@shape_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _shape(inputs, attrs):
    return same_shape_pair(OP_TYPE, "G and X", inputs)


@decompositions.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    g, x = input_names
    zero = fresh_name("zero")
    initializer = numpy_helper.from_array(np.zeros((), node.inputs[1].dtype.numpy_dtype), zero)
    sign = emit("Where", emit("IsNaN", x), zero, emit("Sign", x))
    emit("Mul", g, sign, output=output_names[0])
    return nodes, [initializer]


@gradient_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient(ctx, h):
    # X's gradient is zeros, not None: a leaf reached only through it (abs's second derivative,
    # hessian(lambda t: t.abs().sum())) gets zeros, as PyTorch's SgnBackward gives.
    return abs_gradient(h, ctx.input(1)), expanded_zeros(ctx.input_shape(1), h.dtype, h.device)
