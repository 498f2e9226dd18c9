"""Division: ``div`` (true, or rounded toward zero or down), ``floor_divide``, ``remainder`` and
``trunc``, as PyTorch computes them: rounded quotients from the exact remainder (C's fmod), integer
quotients without a float detour, and a rounded quotient's zero gradient.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.mode import MODE
from ._common import Tensor, apply_op, promote_operands, static_scalar
from .elementwise import ceil, clone, floor, refuse_bool, where
from .opmath import REDUCED_FLOATS, rounded, widened, with_float32_number
from ..realization import host_data


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """True division (integers give floats), or ``rounding_mode`` "trunc" / "floor".

    A rounded float quotient has zero gradient for both operands, as PyTorch's (DivBackward2).
    """
    if rounding_mode is None:
        widened = with_float32_number("Div", input, other, "DivBackward0")
        if widened is not None:
            return widened
        (a, b), result_dtype = promote_operands([input, other])
        if not result_dtype.is_floating_point:
            (a, b), _ = promote_operands([_to_float(input), _to_float(other)])
        return apply_op("Div", (a, b), None, "DivBackward0")
    result = _rounded_division(input, other, rounding_mode)
    if not result.dtype.is_floating_point or not MODE.grad.enabled:
        return result
    # A Where whose condition never holds passes the result on and sends each operand zeros: never
    # a product with the upstream gradient, and never through Div's rule (0 / 0 where b == 0).
    never = None
    for operand in (input, other):
        if isinstance(operand, Tensor) and operand._requires_grad:
            never = never or static_scalar(False, dtypes.bool)
            result = apply_op("Where", (never, operand.to(result.dtype), result), None, "DivBackward2")
    return result


def _rounded_division(input, other, rounding_mode: str) -> Tensor:
    """The quotient rounded toward zero ("trunc") or down ("floor"), without gradient."""
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    (a, b), result_dtype = promote_operands([input, other])
    if not result_dtype.is_floating_point:
        return _integer_division(_as_tensor(a), _as_tensor(b), rounding_mode)
    if result_dtype in REDUCED_FLOATS and not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        # PyTorch's opmath: a Python number divides a half-precision tensor in float32, unrounded (0.7
        # in bfloat16 is 0.69921875, and 5.59375 // it would be 8, not 7), and the quotient rounds once.
        wide = [widened(operand) if isinstance(operand, Tensor) else operand for operand in (input, other)]
        return rounded(_rounded_division(wide[0], wide[1], rounding_mode), result_dtype)
    a, b = _as_tensor(a).detach(), _as_tensor(b).detach()
    quotient = apply_op("Div", (a, b), None, "DivBackward0")
    if rounding_mode == "trunc":
        return trunc(quotient)
    return _floor_division(quotient, a, b)


def _floor_division(quotient: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """PyTorch's float floor division of ``a`` by ``b``, whose rounded quotient is ``quotient``.

    ``floor(a / b)`` is not it: the quotient is rounded before the floor (88.8 // 0.3 in float32
    is 295, the rounded quotient 296.0), and it underflows to zero (1e-45 // -3 is -1). PyTorch
    takes the exact remainder (C's fmod) instead: ``(a - fmod(a, b)) / b``, one less when the
    remainder's sign differs from the divisor's, then rounded to the nearest integer; a zero takes
    the quotient's sign, and b == 0 gives the quotient's IEEE result. All operands are detached.
    """
    remainder = apply_op("Mod", (a, b), {"fmod": 1})
    exact = (a - remainder) / b
    exact = where((remainder != 0) & ((b < 0) != (remainder < 0)), exact - 1, exact)
    floored = floor(exact)
    floored = where(exact - floored > 0.5, floored + 1, floored)
    # Where exact is 0 the quotient is finite (|a| < |b|, or b infinite), and times 0 it is the
    # zero with its sign: copysign(0, quotient).
    signed_zero = quotient * 0.0
    return where(b == 0, floor(quotient), where(exact == 0, signed_zero, floored))


def _as_tensor(operand) -> Tensor:
    return operand if isinstance(operand, Tensor) else Tensor._from_value(operand)


# x86 integer division traps at INT_MIN / -1 (SIGFPE: onnxruntime's Div and Mod end the process there);
# PyTorch's quotient wraps to INT_MIN and its remainder is 0.
_TRAPPING_DTYPES = (dtypes.int32, dtypes.int64)


def integer_division_op(op_type: str, a: Tensor, b: Tensor, attributes: dict | None = None, name: str = "") -> Tensor:
    """ONNX's integer ``Div`` or ``Mod`` of ``a`` by ``b``, with PyTorch's results at INT_MIN / -1: where
    ``b`` may hold -1 (its values unknown, or known to), it divides by 1 there and takes ``-a`` (wrapping)
    or 0 instead. An empty result divides nothing: it is made without a node, as onnxruntime's Div
    and Mod refuse a zero divisor even beside an empty dividend (PyTorch returns the empty tensor)."""
    shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    if 0 in shape:
        return Tensor._full(shape, 0, a.dtype, a.device)
    data = host_data(b._value)
    if a.dtype not in _TRAPPING_DTYPES or (data is not None and not np.any(data == -1)):
        return apply_op(op_type, (a, b), attributes, name or None)
    minus_one = b == -1
    result = apply_op(op_type, (a, where(minus_one, 1, b)), attributes, name or None)
    return where(minus_one, -a if op_type == "Div" else 0, result)


def _integer_division(a: Tensor, b: Tensor, rounding_mode: str) -> Tensor:
    """Exact integer quotients (a float64 detour would round int64 values above 2**53).

    ONNX's integer Div truncates toward zero; floor division steps one down where the remainder
    is nonzero and has the opposite sign of the divisor.
    """
    quotient = integer_division_op("Div", a, b)
    if rounding_mode == "trunc":
        return quotient
    remainder = a - quotient * b
    step_down = (remainder != 0) & ((remainder < 0) != (b < 0))
    return quotient - step_down.to(quotient.dtype)


def _to_float(operand, float_dtype=None):
    """A tensor cast to a float dtype (the default one unless given), or a number made a float."""
    if isinstance(operand, Tensor):
        if operand._value.dtype.is_floating_point:
            return operand
        return operand.to(float_dtype or dtypes.get_default_dtype())
    return float(operand)


def trunc(input: Tensor) -> Tensor:
    refuse_bool(input, "trunc")
    if not input.dtype.is_floating_point:
        return clone(input)  # a new tensor, as PyTorch's: an in-place change must not reach the input
    return apply_op("Where", (input < 0, ceil(input), floor(input)), None, "TruncBackward0")


true_divide = divide = div


def floor_divide(input, other) -> Tensor:
    """``input // other``, rounded down. Its result has no gradient (PyTorch: "derivative for
    floor_divide is not implemented"), unlike ``div(rounding_mode="floor")``'s zeros."""
    return _rounded_division(input, other, "floor")


def remainder(input, other) -> Tensor:
    """Python-style modulo (the result has the sign of the divisor).

    For floats, PyTorch's: C's exact fmod, plus the divisor where their signs differ (not
    ``a - floor(a / b) * b``, which rounds: -1e38 % 3 is 1, and 0 % inf is 0, not NaN).
    """
    (a, b), result_dtype = promote_operands([input, other])
    if not result_dtype.is_floating_point:
        return integer_division_op("Mod", _as_tensor(a), _as_tensor(b), {"fmod": 0})
    a, b = _as_tensor(a), _as_tensor(b)
    fmod = apply_op("Mod", (a, b), {"fmod": 1}, "RemainderBackward0")
    divisor, result = b.detach(), fmod.detach()
    wrong_sign = (result != 0) & ((divisor < 0) != (result < 0))
    return where(wrong_sign, fmod + b, fmod)
