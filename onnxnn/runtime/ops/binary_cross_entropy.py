"""``binary_cross_entropy``'s elementwise loss as a node of its own: onnxnn's ``BinaryCrossEntropy`` op.

    BinaryCrossEntropy(X, T) -> L

``L = -(T * max(log(X), -100) + (1 - T) * max(log1p(-X), -100))`` elementwise, for ``X`` and ``T`` of
one shape and dtype; ``build_model`` writes it as standard ops (Log, Clip, Sub, Mul, Add, Neg; log1p
compensated with Div, Equal and Where), which onnxruntime's sessions and exported graphs run.
It is a node of its own for its gradient, PyTorch's ``binary_cross_entropy_backward``:
``G * (X - T) / max((1 - X) * X, 1e-12)`` (1e-12 rounded to float32), finite where ``X`` is 0 or 1 (a saturated float32
sigmoid), where the chain rule through the clamped logs multiplies a zero by an infinite
``1 / X`` and gives NaN; and for ``T``, ``-logit(X) * G``, unclamped as PyTorch's. The weight and
the reduction stay ordinary ops around the node.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir.domains import ONNXNN_DOMAIN
from ...ir.graph import static_constant
from ...ir.registry import decompositions, gradient_rules, shape_rules, value_blind_decompositions
from ..tensor import Tensor, apply_op
from ._common import same_shape_pair
from .training import node_emitter

__all__ = ["binary_cross_entropy_terms"]

OP_TYPE = "BinaryCrossEntropy"

# Where PyTorch's logs are clamped (the loss of a certain, wrong prediction is 100).
_LOG_FLOOR = -100.0
# What PyTorch's backward divides by at least: X * (1 - X) is 0 at a saturated probability. PyTorch's
# constant is a C float, so float64 divides by float32's 1e-12 too.
_EPSILON = float(np.float32(1e-12))


def binary_cross_entropy_terms(input: Tensor, target: Tensor) -> Tensor:
    """The unreduced, unweighted binary cross entropy of probabilities ``input``, with PyTorch's gradient."""
    return apply_op(OP_TYPE, (input, target), None, "BinaryCrossEntropyBackward0", domain=ONNXNN_DOMAIN)


@shape_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _shape(inputs, attrs):
    result = same_shape_pair(OP_TYPE, "X and T", inputs)
    if not inputs[0].dtype.is_floating_point:
        raise RuntimeError(f"{OP_TYPE}: X must be of a floating-point dtype, got {inputs[0].dtype.name}")
    return result


@decompositions.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    x, t = input_names
    numpy_dtype = node.inputs[0].dtype.numpy_dtype
    one, floor = fresh_name("one"), fresh_name("log_floor")
    initializers = [
        numpy_helper.from_array(np.array(1, numpy_dtype), one),
        numpy_helper.from_array(np.array(_LOG_FLOOR, numpy_dtype), floor),
    ]
    log_x = emit("Clip", emit("Log", x), floor)
    # log1p(-X), as PyTorch's kernel takes it: log(1 - X) is 0 for X below float32's eps / 2, where the
    # loss is X (Kahan's compensation: log(u) * (-X / (u - 1)), -X where u = 1 - X rounds to 1).
    u, negated = emit("Sub", one, x), emit("Neg", x)
    compensated = emit("Mul", emit("Log", u), emit("Div", negated, emit("Sub", u, one)))
    log_one_minus_x = emit("Clip", emit("Where", emit("Equal", u, one), negated, compensated), floor)
    total = emit("Add", emit("Mul", t, log_x), emit("Mul", emit("Sub", one, t), log_one_minus_x))
    emit("Neg", total, output=output_names[0])
    return nodes, initializers


value_blind_decompositions.mark(OP_TYPE, domain=ONNXNN_DOMAIN)


@gradient_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient(ctx, g):
    x, t = ctx.input(0), ctx.input(1)
    dtype = g._value.dtype
    one = static_constant(1, dtype)
    one_minus_x = apply_op("Sub", (one, x))
    input_gradient = target_gradient = None
    if ctx.needs_input_grad(0):
        variance = apply_op("Clip", (apply_op("Mul", (one_minus_x, x)), static_constant(_EPSILON, dtype), None))
        input_gradient = apply_op("Div", (apply_op("Mul", (g, apply_op("Sub", (x, t)))), variance))
    if ctx.needs_input_grad(1):
        # -logit(X) = log((1 - X) / X): inf at X = 0 and -inf at X = 1, as PyTorch's.
        logit = apply_op("Log", (apply_op("Div", (x, one_minus_x)),))
        target_gradient = apply_op("Mul", (apply_op("Neg", (logit,)), g))
    return input_gradient, target_gradient
