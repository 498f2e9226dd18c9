"""Comparisons and logic: Equal, Less, Greater (and their OrEqual forms), And, Or, Xor, Not, IsNaN,
IsInf: shape rules and the tensor functions that emit them (eq, lt, logical_and, isnan, ...), with
isclose/allclose/equal built on them. Their outputs are bool, so none has a gradient.
"""

from __future__ import annotations

import builtins

from ...ir import dtypes
from ...ir.registry import non_differentiable, shape_rules
from ._common import Tensor, apply_op, broadcast_values, promote_operands, same_shape
from .elementwise import _is_bool, abs, add, mul, sub

# ---------------------------------------------------------------- shape rules


@shape_rules.register("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")
def _comparison_shape(inputs, attrs):
    return [(broadcast_values(inputs), dtypes.bool)]


@shape_rules.register("IsNaN", "IsInf")
def _predicate_shape(inputs, attrs):
    return [(inputs[0].shape, dtypes.bool)]


shape_rules.register("Not")(same_shape)

non_differentiable.mark(
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Not",
    "IsNaN",
    "IsInf",
)

# ---------------------------------------------------------------- tensor functions


def _comparison(op_type: str, a, b) -> Tensor:
    (a, b), operand_dtype = promote_operands([a, b])
    if operand_dtype is dtypes.bool and op_type != "Equal":
        # onnxruntime orders no bools; False < True holds for their uint8 values too.
        a, b = (apply_op("Cast", (operand,), {"to": dtypes.uint8}) for operand in (a, b))
    return apply_op(op_type, (a, b))


def eq(input, other) -> Tensor:
    return _comparison("Equal", input, other)


def ne(input, other) -> Tensor:
    return logical_not(eq(input, other))


def lt(input, other) -> Tensor:
    return _comparison("Less", input, other)


def le(input, other) -> Tensor:
    return _comparison("LessOrEqual", input, other)


def gt(input, other) -> Tensor:
    return _comparison("Greater", input, other)


def ge(input, other) -> Tensor:
    return _comparison("GreaterOrEqual", input, other)


def _as_bool(x):
    if isinstance(x, Tensor):
        return x if x._value.dtype is dtypes.bool else x.to(dtypes.bool)
    return x


def logical_and(input, other) -> Tensor:
    return apply_op("And", tuple(promote_operands([_as_bool(input), _as_bool(other)])[0]))


def logical_or(input, other) -> Tensor:
    return apply_op("Or", tuple(promote_operands([_as_bool(input), _as_bool(other)])[0]))


def logical_xor(input, other) -> Tensor:
    return apply_op("Xor", tuple(promote_operands([_as_bool(input), _as_bool(other)])[0]))


def logical_not(input: Tensor) -> Tensor:
    return apply_op("Not", (_as_bool(input),))


def isnan(input: Tensor) -> Tensor:
    return apply_op("IsNaN", (input,)) if input.dtype.is_floating_point else input != input


def isinf(input: Tensor) -> Tensor:
    return apply_op("IsInf", (input,)) if input.dtype.is_floating_point else input != input


def isfinite(input: Tensor) -> Tensor:
    return logical_not(logical_or(isnan(input), isinf(input))) if input.dtype.is_floating_point else input == input


def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    if _is_bool(input) and _is_bool(other):
        return eq(input, other)  # bools have no difference to measure
    tolerance = add(mul(abs(other) if isinstance(other, Tensor) else builtins.abs(other), rtol), atol)
    close = le(abs(sub(input, other)), tolerance)
    if equal_nan:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    return logical_or(close, eq(input, other))


def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True when every element satisfies ``|input - other| <= atol + rtol * |other|`` (computed, then read)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and elements."""
    return input.shape == other.shape and bool(eq(input, other).all().item())
