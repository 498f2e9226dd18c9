"""``hardtanh`` as a node of its own: onnxnn's ``Hardtanh`` op, and its gradient's ``HardtanhGradient``.

    Hardtanh(X, min, max) -> Y
    HardtanhGradient(G, Y, min, max) -> dX

``Y`` is ``Clip(X, min, max)`` (``min``/``max`` 0-d tensors of X's dtype), and ``build_model`` writes
it as that Clip, so onnxruntime's sessions and served exports run (and fuse) the standard op. It is
a node of its own for its gradient, which is PyTorch's ``hardtanh_backward``: ``G`` where neither
``X <= min`` nor ``X >= max`` holds, so none at the bounds themselves and all of it at a NaN, where
``clamp``'s passes it at the bounds and none at a NaN. The gradient rules are keyed by op, and a
backward replay by the nodes' structure: a Clip that remembered which function it came from would
be replayed for the other.

The gradient is one node that reads the output ``Y``, not ``X``: ``Y`` is ``X`` clamped, so it lies on
the same side of each bound (at it where ``X`` is at it or beyond) and is NaN where ``X`` is. So, as
ReLU's gradient (``ReluGradient``), it folds into a batch normalization's compiled loops when the
Hardtanh reads the normalization's output (MobileNet's ReLU6): the forward loop writes ``Y`` in
place of the normalization's output, which then exists nowhere, and the gradient loop masks ``G``
with ``Y`` (runtime/ops/batch_norm_training.py, kernels/compiled_normalization.py). Alone, it is
``Where(Or(LessOrEqual(Y, min), GreaterOrEqual(Y, max)), 0, G)`` in onnxruntime's sessions and a
compiled loop where one takes it (kernels/activation_gradients.py). It is linear in ``G``, so
``G``'s gradient is ``HardtanhGradient(H, Y, min, max)``; ``Y``'s is zero wherever it is defined.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir import dtypes
from ...ir.domains import ONNXNN_DOMAIN
from ...ir.registry import decompositions, gradient_rules, shape_rules, value_blind_decompositions
from ..tensor import Tensor, apply_op
from ._common import as_tensor_operand, expanded_zeros, same_shape, same_shape_pair
from .training import node_emitter

__all__ = ["hardtanh", "hardtanh_gradient", "emit_hardtanh_gradient", "check_bounds"]

OP_TYPE = "Hardtanh"
GRADIENT_OP_TYPE = "HardtanhGradient"


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
    return hardtanh_gradient(g, ctx.output(), ctx.input(1), ctx.input(2)), None, None


def hardtanh_gradient(g: Tensor, y: Tensor, low: Tensor, high: Tensor) -> Tensor:
    """0 where ``y <= low`` or ``y >= high``, else ``g`` (NaN included): Hardtanh's gradient from its output."""
    return apply_op(GRADIENT_OP_TYPE, (g, y, low, high), None, "HardtanhBackwardBackward0", domain=ONNXNN_DOMAIN)


@shape_rules.register(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient_shape(inputs, attrs):
    g, y, low, high = inputs
    check_bounds(GRADIENT_OP_TYPE, (low, high), y.dtype)
    return same_shape_pair(GRADIENT_OP_TYPE, "G and Y", (g, y))


def check_bounds(op_type: str, bounds, dtype) -> None:
    """Raises RuntimeError naming the first of a gradient node's ``(min, max)`` that is not 0-d of ``dtype``."""
    for name, bound in zip(("min", "max"), bounds):
        if bound.shape != () or bound.dtype is not dtype:
            raise RuntimeError(
                f"{op_type}: {name} must be a 0-d {dtype.name} tensor, got {bound.dtype.name} of "
                f"shape {list(bound.shape)}"
            )


@decompositions.register(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient_decomposition(node, input_names: list, output_names: list, fresh_name):
    nodes: list = []
    initializers: list = []
    g, y, low, high = input_names
    emit_hardtanh_gradient(
        node_emitter(nodes, fresh_name),
        initializers,
        fresh_name,
        g,
        y,
        low,
        high,
        node.inputs[1].dtype,
        output_names[0],
    )
    return nodes, initializers


value_blind_decompositions.mark(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)


def emit_hardtanh_gradient(
    emit, initializers: list, fresh_name, g: str, y: str, low: str, high: str, dtype, output: str | None = None
) -> str:
    """Emits the op as ONNX, ``Where(Or(LessOrEqual(y, low), GreaterOrEqual(y, high)), 0, g)`` (``emit``:
    ``training.node_emitter``'s), its zero of ``dtype`` appended to ``initializers``; returns the result's name."""
    zero = fresh_name("zero")
    initializers.append(numpy_helper.from_array(np.zeros((), dtype.numpy_dtype), zero))
    outside = emit("Or", emit("LessOrEqual", y, low), emit("GreaterOrEqual", y, high))
    return emit("Where", outside, zero, g, output=output)


@gradient_rules.register(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient_of_gradient(ctx, h):
    # Y's: zero wherever defined, as PyTorch's HardtanhBackwardBackward0 gives it (a leaf reached only
    # through Y gets zeros, not None).
    zeros = expanded_zeros(ctx.input_shape(1), h.dtype, h.device)
    return hardtanh_gradient(h, ctx.input(1), ctx.input(2), ctx.input(3)), zeros, None, None
