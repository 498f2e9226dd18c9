"""Comparisons and logic: Equal, Less, Greater (and their OrEqual forms), And, Or, Xor, Not, IsNaN,
IsInf: shape rules and the tensor functions that emit them (eq, lt, logical_and, isnan, ...), with
isclose/allclose/equal built on them. Their outputs are bool, so none has a gradient.
"""

from __future__ import annotations

from ...ir import dtypes
from ...ir.registry import non_differentiable, shape_rules
from ._common import Tensor, apply_op, broadcast_values, check_tensor_operands, promote_operands, same_shape
from .elementwise import abs, add, mul, sub

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
    # A Python number (PyTorch takes only tensors) is taken by its truth, NaN true as in a bool cast:
    # And/Or/Xor exist for bools only.
    return bool(x)


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


def _check_closeness_arguments(name: str, input, other, rtol, atol) -> None:
    """PyTorch's checks: two tensors (no Python numbers) of one dtype, and non-negative tolerances."""
    check_tensor_operands(name, input=input, other=other)
    if input._value.dtype is not other._value.dtype:
        names = (dtypes.scalar_type_name(operand._value.dtype) for operand in (input, other))
        raise RuntimeError("{} did not match {}".format(*names))
    for argument, value in (("rtol", rtol), ("atol", atol)):
        if not value >= 0:  # NaN fails too
            raise RuntimeError(f"{argument} must be greater than or equal to zero, but got {value}")


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    r"""Where ``input`` and ``other`` are close: equal, or both NaN when ``equal_nan``, or a finite
    difference with :math:`|\text{input} - \text{other}| \leq \text{atol} + \text{rtol} \times |\text{other}|`.

    Non-finite values are close only to an equal value (``inf`` is not close to ``-inf`` nor to a
    number). Both must be tensors of one dtype; the tolerances must be non-negative. As PyTorch,
    floating values are compared in their dtype; integer and bool ones in the default float dtype.

    Example::

        >>> onnxnn.isclose(onnxnn.tensor([1.0, float("inf")]), onnxnn.tensor([1.0 + 1e-6, float("-inf")]))
        tensor([ True, False])
    """
    _check_closeness_arguments("isclose", input, other, rtol, atol)
    return _isclose(input, other, rtol, atol, equal_nan)


def _isclose(input: Tensor, other: Tensor, rtol: float, atol: float, equal_nan: bool) -> Tensor:
    close = eq(input, other)
    floating = input._value.dtype.is_floating_point
    if equal_nan and floating:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    if rtol == 0 and atol == 0:
        return close
    if not floating:  # PyTorch's: no wrapping difference of integers, and bools have none
        input, other = input.to(dtypes.get_default_dtype()), other.to(dtypes.get_default_dtype())
    allowed = add(abs(mul(other, rtol)), atol)
    error = abs(sub(input, other))
    # A non-finite error (inf - inf is NaN, inf - 1 is inf) is never within an infinite allowance.
    return logical_or(close, logical_and(isfinite(error), le(error, allowed)))


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True when every element of ``input`` is close to ``other``'s, as :func:`isclose` (computed, then read)."""
    _check_closeness_arguments("allclose", input, other, rtol, atol)
    return bool(_isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and elements."""
    return input.shape == other.shape and bool(eq(input, other).all().item())
