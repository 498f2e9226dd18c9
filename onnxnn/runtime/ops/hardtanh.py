"""``hardtanh`` as a node of its own: onnxnn's ``Hardtanh`` op.

    Hardtanh(X, min, max) -> Y

``Y`` is ``Clip(X, min, max)`` (``min``/``max`` 0-d tensors of X's dtype), and ``build_model`` writes
it as that Clip, so onnxruntime's sessions and served exports run (and fuse) the standard op. It is
a node of its own for its gradient, which is PyTorch's ``hardtanh_backward``: ``G`` where neither
``X <= min`` nor ``X >= max`` holds, so none at the bounds themselves and all of it at a NaN, where
``clamp``'s passes it at the bounds and none at a NaN. The gradient rules are keyed by op, and a
backward replay by the nodes' structure: a Clip that remembered which function it came from would
be replayed for the other.
"""

from __future__ import annotations

from ...ir import dtypes
from ...ir.domains import ONNXNN_DOMAIN
from ...ir.registry import decompositions, gradient_rules, shape_rules, value_blind_decompositions
from ..tensor import Tensor, apply_op
from ._common import as_tensor_operand, same_shape, static_scalar
from .training import node_emitter

__all__ = ["hardtanh"]

OP_TYPE = "Hardtanh"


def hardtanh(input: Tensor, min_val: float, max_val: float) -> Tensor:
    """``input`` clamped to ``[min_val, max_val]``, with PyTorch's hardtanh gradient."""
    if input.dtype is dtypes.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if not input.dtype.is_floating_point:
        min_val, max_val = int(min_val), int(max_val)  # bounds in the input's dtype, as PyTorch's: integers stay
    low, high = as_tensor_operand(min_val, input), as_tensor_operand(max_val, input)
    return apply_op(OP_TYPE, (input, low, high), None, "HardtanhBackward0", domain=ONNXNN_DOMAIN)


shape_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)(same_shape)


@decompositions.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    nodes: list = []
    node_emitter(nodes, fresh_name)("Clip", *input_names, output=output_names[0])
    return nodes, []


value_blind_decompositions.mark(OP_TYPE, domain=ONNXNN_DOMAIN)


@gradient_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient(ctx, g):
    x = ctx.input(0)
    outside = (x <= ctx.input(1)) | (x >= ctx.input(2))
    return apply_op("Where", (outside, static_scalar(0, g._value.dtype), g)), None, None
