"""Pointwise functions of PyTorch's API built from existing ops: lerp, addcmul/addcdiv, nan_to_num,
log1p and friends, bitwise ops (BitwiseAnd/Or/Xor shape rules here), atan2, copysign, fmax/fmin, and
the aliases PyTorch keeps (absolute, multiply, greater, ...). Searching and counting (bucketize,
searchsorted, isin, diff, aminmax, count_nonzero) are in ``searching.py``.

ONNX has no log1p or expm1: they are recorded as the plain formula corrected by Kahan's
rounding-error compensation (``_accurate_with_gradient_of``), so that a tiny ``x`` keeps its digits
as in PyTorch's fused kernels.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...ir.registry import non_differentiable, shape_rules
from ._common import (
    Tensor,
    apply_op,
    broadcast_values,
    check_tensor_operands,
    promote_operands,
    with_closed_form_gradient,
    with_zero_gradients,
)
from . import clamping as _clamping
from . import comparison as _c
from . import elementwise as _e
from . import division as _division
from . import reduce as _r
from .opmath import float_operands, rounded, widened
from ..grad_mode import is_grad_enabled
from .derivative_formulas import derivative_formula, hypot_of, with_derivative_formula, x_log_gradients

__all__ = [
    "nan_to_num",
    "square",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "exp2",
    "logaddexp",
    "logaddexp2",
    "xlogy",
    "hypot",
    "deg2rad",
    "rad2deg",
    "frac",
    "fmod",
    "clamp_min",
    "clamp_max",
    "sgn",
    "positive",
    "negative",
    "absolute",
    "multiply",
    "subtract",
    "divide",
    "true_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "float_power",
    "heaviside",
    "signbit",
    "nansum",
    "nanmean",
    "logit",
    "isposinf",
    "isneginf",
    "isreal",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
]


@shape_rules.register("BitwiseAnd", "BitwiseOr", "BitwiseXor")
def _bitwise_shape(inputs, attrs):
    return [(broadcast_values(inputs), inputs[0].dtype)]


non_differentiable.mark("BitwiseAnd", "BitwiseOr", "BitwiseXor")


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """NaN becomes ``nan``, +inf ``posinf`` and -inf ``neginf`` (default: the dtype's largest/lowest finite value)."""
    if not input.dtype.is_floating_point:
        return input.clone()
    info = np.finfo(np.float32 if input.dtype is dtypes.bfloat16 else input.dtype.numpy_dtype)
    if input.dtype is dtypes.bfloat16:
        largest = float(np.frombuffer(np.array([0x7F7F], np.uint16).tobytes(), dtype=input.dtype.numpy_dtype)[0])
        info_max, info_min = largest, -largest
    else:
        info_max, info_min = float(info.max), float(info.min)
    posinf = info_max if posinf is None else posinf
    neginf = info_min if neginf is None else neginf
    result = _e.where(_c.isnan(input), nan, input)
    result = _e.where(_c.eq(input, math.inf), posinf, result)
    return _e.where(_c.eq(input, -math.inf), neginf, result)


def square(input: Tensor) -> Tensor:
    if input.dtype is dtypes.bool:  # PyTorch's pow(x, 2): bool counts as an integer
        input = input.to(dtypes.int64)
    return _e.mul(input, input)


def _accurate_with_gradient_of(plain: Tensor, accurate: Tensor) -> Tensor:
    """``accurate``'s values (computed from detached inputs) with ``plain``'s gradient.

    Where ``plain`` is finite, ``accurate - (plain - plain)``: the difference is +0, so the result
    is ``accurate`` exactly, its -0 included (``plain + (accurate - plain)`` made it +0). Elsewhere
    (+-inf, NaN) the two agree: ``plain``. (Each -0 is taken by Where's second input: onnxruntime's
    Where makes one it takes from its first +0. The conditions are not Not's, which onnxruntime
    folds into Where by swapping its inputs back.)
    """
    settled = plain.detach()
    overflowed = _c.logical_or(_c.isinf(settled), _c.isnan(settled))
    return _e.where(overflowed, plain, _e.sub(accurate, _e.sub(settled, plain)))


def _moved_off_one(u: Tensor) -> Tensor:
    """``u != 1`` (NaN excepted) without Not, for a Where that takes ``x`` itself where u rounds to 1
    as its second input: log1p(-0) and expm1(-0) are -0, which onnxruntime's Where keeps from its
    second input only, and it folds a Not of the condition into Where by swapping the inputs back."""
    return _c.logical_or(_c.lt(u, 1), _c.gt(u, 1))


def log1p(input: Tensor) -> Tensor:
    """``log(1 + x)``, accurate for tiny ``x`` (``log1p(1e-10)`` is 1e-10 in float32, not 0).

    Kahan's compensation: with ``u = 1 + x`` rounded, ``log(u) * x / (u - 1)`` corrects the
    rounding of u (``x`` itself where u rounds to 1).
    """
    result_dtype = _e._floating(input).dtype
    x = widened(_e._floating(input))  # float16/bfloat16 in float32, rounded once (PyTorch's kernel)
    settled = x.detach()
    u = _e.add(settled, 1)
    rounds_to_one = _c.eq(u, 1)
    ratio = _division.div(settled, _e.where(rounds_to_one, 1.0, _e.sub(u, 1)))
    accurate = _e.where(_moved_off_one(u), _e.mul(_e.log(u), ratio), settled)
    return rounded(_accurate_with_gradient_of(_e.log(_e.add(x, 1)), accurate), result_dtype)


def expm1(input: Tensor) -> Tensor:
    """``exp(x) - 1``, accurate for tiny ``x`` (``expm1(1e-10)`` is 1e-10 in float32, not 0).

    Kahan's compensation: with ``u = exp(x)`` rounded, ``(u - 1) * x / log(u)``; ``x`` where u
    rounds to 1, and -1 where u - 1 does.
    """
    result_dtype = _e._floating(input).dtype
    x = widened(_e._floating(input))  # float16/bfloat16 in float32, rounded once (PyTorch's kernel)
    settled = x.detach()
    u = _e.exp(settled)
    u_minus_one = _e.sub(u, 1)
    rounds_to_one = _c.eq(u, 1)
    ordinary = _c.logical_and(_c.logical_not(rounds_to_one), _c.ne(u_minus_one, -1))
    log_u = _e.log(_e.where(ordinary, u, 2.0))
    accurate = _e.mul(u_minus_one, _division.div(settled, log_u))
    accurate = _e.where(_moved_off_one(u), _e.where(ordinary, accurate, -1.0), settled)
    return rounded(_accurate_with_gradient_of(_e.sub(_e.exp(x), 1), accurate), result_dtype)


def log2(input: Tensor) -> Tensor:
    return _division.div(_e.log(_e._floating(input)), math.log(2.0))


def log10(input: Tensor) -> Tensor:
    return _division.div(_e.log(_e._floating(input)), math.log(10.0))


def exp2(input: Tensor) -> Tensor:
    """``2 ** x``, to a few ulps: ``exp(x ln 2)`` is off by |x ln 2| roundings of x ln 2 (67 float32
    ulps at x = 99, 700 float64 ulps at -939).

    ``x = n + f`` with n = floor(x), so f (0 <= f < 1) is exact and ``exp(f ln 2)`` accurate; ``2^n``
    is exact, taken as two factors ``2^h * 2^(n - h)`` (h = floor(n / 2)), each representable where
    the result is, so that a subnormal result rounds once (2^-150 is 0 in float32, 1.5 * 2^-150 is
    not). n is bounded (+-1100: beyond, the result is 0 or inf in float64) so that f stays finite
    except for x = +-inf, where exp(f ln 2) gives the 0 or inf itself. The gradient is exp(f ln 2)'s
    times 2^n: ``2^x ln 2`` (floor, not round: 2^n stays finite wherever 2^x is).
    float16/bfloat16 compute in float32 and round once.
    """
    x = _e._floating(input)
    return rounded(_exp2(widened(x)), x.dtype)


def _exp2(x: Tensor) -> Tensor:
    n = _e.floor(_clamping.clamp(x.detach(), -1100.0, 1100.0))
    half = _e.floor(_e.mul(n, 0.5))
    fraction = _e.exp(_e.mul(_e.sub(x, n), math.log(2.0)))
    return _e.mul(_e.mul(fraction, _e.pow(2.0, half)), _e.pow(2.0, _e.sub(n, half)))


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(a) + exp(b))`` as ``high + log1p(exp(low - high))`` (no overflow); float16/bfloat16
    compute in float32 and round once.

    ``high``/``low`` are chosen by ``where``, not ``maximum``/``abs``: on a tie the formula is then
    ``a + log1p(exp(b - a))``, smooth, so the second derivative there is sigma'(0) = 1/4 (abs's
    derivative, 0 at 0, would make it 0).
    """
    (a, b), result_dtype = float_operands([input, other], "logaddexp")
    return rounded(_logaddexp(widened(a), widened(b)), result_dtype)


def _logaddexp(a: Tensor, b: Tensor) -> Tensor:
    first_higher = _c.ge(a, b)
    high, low = _e.where(first_higher, a, b), _e.where(first_higher, b, a)
    # Equal infinities give NaN differences; the result there is the infinity itself (a NaN
    # operand compares unequal and stays NaN).
    equal_infinities = _c.logical_and(_c.isinf(high.detach()), _c.eq(high.detach(), low.detach()))
    return _e.where(equal_infinities, high, _e.add(high, log1p(_e.exp(_e.sub(low, high)))))


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2^a + 2^b)``, in the operands' promoted float dtype (float16/bfloat16 in float32, rounded once).

    ``high + log1p(2^(low - high)) / ln 2``, with exp2's accurate power: scaling a and b by ln 2
    first cost |a ln 2| roundings (200 float32 ulps at (0, -100)). Chosen by where as logaddexp's.
    """
    (a, b), result_dtype = float_operands([input, other], "logaddexp2")
    a, b = widened(a), widened(b)
    first_higher = _c.ge(a, b)
    high, low = _e.where(first_higher, a, b), _e.where(first_higher, b, a)
    equal_infinities = _c.logical_and(_c.isinf(high.detach()), _c.eq(high.detach(), low.detach()))
    tail = _division.div(log1p(_exp2(_e.sub(low, high))), math.log(2.0))
    return rounded(_e.where(equal_infinities, high, _e.add(high, tail)), result_dtype)


def xlogy(input, other) -> Tensor:
    """``x * log(y)``, 0 where ``x == 0`` (unless y is NaN); either operand may be a Python number.

    The gradient is PyTorch's formula (derivative_formulas.py): ``d/dx = log(y)``, also at ``x == 0``
    (+inf at ``y = inf``) except 0 there where ``y <= 0``, and ``d/dy = x / y``, NaN at the origin.
    """
    # Straight to the float dtype: a 0-d int tensor keeps its value (no wrap to the integer common dtype).
    operands, _ = float_operands([input, other])
    x, y = (operand.detach() for operand in operands)
    # A literal +0 where x == 0 (0 * log(y) is -0, NaN or -0 * log(y) otherwise); y == y: not NaN.
    value = _e.where(_c.logical_and(_c.eq(x, 0), _c.eq(y, y)), 0.0, _e.mul(x, _e.log(y)))
    return with_derivative_formula("Xlogy", value, tuple(operands))


@derivative_formula("Xlogy", "XlogyBackward0")
def _xlogy_gradient(ctx, g):
    return x_log_gradients(ctx, g, xlogy, 0)


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input^2 + other^2)`` without overflow, as C's hypot (PyTorch's): the larger magnitude
    times ``sqrt(1 + r^2)``, r the ratio of the smaller to it (``hypot(1e38, 3)`` is 1e38, not the
    inf that squaring gives), and +inf where either is infinite, even beside a NaN."""
    # In the float dtype first: abs of int8 -128 is -128 (PyTorch casts, then takes the magnitude).
    (x, y), result_dtype = float_operands([input, other], "hypot")
    # float16/bfloat16 in float32, rounded once; the gradient is PyTorch's formula (derivative_formulas.py).
    return rounded(hypot_of(widened(x), widened(y)), result_dtype)


def deg2rad(input: Tensor) -> Tensor:
    return _e.mul(_e._floating(input), math.pi / 180)


def rad2deg(input: Tensor) -> Tensor:
    return _e.mul(_e._floating(input), 180 / math.pi)


def frac(input: Tensor) -> Tensor:
    """``x - trunc(x)``."""
    if not input.dtype.is_floating_point:
        return _e.sub(input, _division.trunc(input))
    # trunc's derivative is zero: no backward node for it
    return apply_op("Sub", (input, _division.trunc(input.detach())), None, "FracBackward0")


def fmod(input, other) -> Tensor:
    """Remainder with the sign of the dividend (C's fmod), unlike ``remainder``."""
    (a, b), result_dtype = promote_operands([input, other])
    a = a if isinstance(a, Tensor) else Tensor._from_value(a)
    b = b if isinstance(b, Tensor) else Tensor._from_value(b)
    if not result_dtype.is_floating_point:
        # a - trunc(a / b) * b: onnxruntime's integer Mod(fmod=1) goes through double (int64 past 2**53
        # loses its last digits), its Div is exact.
        return _e.sub(a, _e.mul(_division.integer_division_op("Div", a, b), b))
    return apply_op("Mod", (a, b), {"fmod": 1}, "FmodBackward0")


def clamp_min(input: Tensor, min) -> Tensor:
    return _clamping.clamp(input, min=min)


def clamp_max(input: Tensor, max) -> Tensor:
    return _clamping.clamp(input, max=max)


def sgn(input: Tensor) -> Tensor:
    return _e.signed_unit(input, "SgnBackward0")


def positive(input: Tensor) -> Tensor:
    if input.dtype is dtypes.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


negative = _e.neg
absolute = _e.abs
multiply = _e.mul
subtract = _e.sub
divide = _division.div
greater = _c.gt
greater_equal = _c.ge
less = _c.lt
less_equal = _c.le
not_equal = _c.ne


def true_divide(dividend, divisor) -> Tensor:
    return _division.div(dividend, divisor)


def float_power(input, exponent) -> Tensor:
    """``input ** exponent`` in float64."""
    base = input.to(dtypes.float64) if isinstance(input, Tensor) else input
    power = exponent.to(dtypes.float64) if isinstance(exponent, Tensor) else float(exponent)
    if not isinstance(base, Tensor):
        base = float(base)
    return _e.pow(base, power)


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """0 for negative, ``values`` at zero, 1 for positive inputs (two tensors of one dtype, as PyTorch's)."""
    check_tensor_operands("heaviside", input=input, values=values)
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    step = _e.where(_c.gt(input, 0), 1, 0).to(input.dtype)
    return _e.where(_c.eq(input, 0), values.to(input.dtype), step)


def signbit(input: Tensor) -> Tensor:
    """Whether the sign bit is set (true for -0.0 too)."""
    if not input.dtype.is_floating_point:
        return _c.lt(input, 0)
    # 1 / -0.0 is -inf: the sign of a zero shows in its reciprocal.
    return _c.logical_or(_c.lt(input, 0), _c.logical_and(_c.eq(input, 0), _c.lt(_e.reciprocal(input), 0)))


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``sum`` treating NaN as zero."""
    if not input.dtype.is_floating_point:
        return _r.sum(input, dim, keepdim, dtype=dtype)
    value = _r.sum(_e.where(_c.isnan(input), 0, input), dim, keepdim, dtype=dtype)
    if not (input._requires_grad and is_grad_enabled()):
        return value
    return with_closed_form_gradient(value, (input,), (input,), _nansum_gradient(input, dim), "NansumBackward0")


def _nansum_gradient(input: Tensor, dim):
    """PyTorch's gradient of nansum (``nansum_backward``): the output's gradient times ``x is not NaN``,
    a product where the Where's own rule selects. They differ where x is NaN and the gradient is not
    finite: nanmean's ``G / 0`` over an all-NaN slice is inf there, and ``inf * 0`` makes the slice's
    gradient NaN, as PyTorch's (the selection gave 0)."""
    dims = _r._dims(input, dim)
    if not dims:  # None or []: every dim, as sum reduces them
        dims = list(range(input.dim()))
    kept_shape = tuple(1 if axis in dims else size for axis, size in enumerate(input.shape))

    def gradient(G: Tensor, x: Tensor) -> tuple:
        present = _c.logical_not(_c.isnan(x)).to(x.dtype)
        return (G.reshape(kept_shape).to(x.dtype) * present,)

    return gradient


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``mean`` of the non-NaN elements; ``dtype``, a float dtype, is the dtype of the sum and result."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "nanmean(): expected input to have floating point or complex dtype but got "
            f"{dtypes.scalar_type_name(input.dtype)}"
        )
    if dtype is not None and not dtype.is_floating_point:
        raise RuntimeError(
            "nanmean(): could not infer output dtype. Optional dtype must be either a floating point or "
            f"complex dtype. Got: {dtypes.scalar_type_name(dtype)}"
        )
    # The count stays int64 (PyTorch's): divided into the sum, it keeps the sum's dtype.
    count = _r.sum(_c.logical_not(_c.isnan(input)), dim, keepdim)
    return _division.div(nansum(input, dim, keepdim, dtype=dtype), count)


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to [eps, 1 - eps] when eps is given."""
    p = _e._floating(input)
    if eps is not None:
        p = _clamping.clamp(p, eps, 1 - eps)
    return _e.log(_division.div(p, _e.sub(1, p)))


def isposinf(input: Tensor) -> Tensor:
    return _c.eq(input, math.inf) if input.dtype.is_floating_point else _c.ne(input, input)


def isneginf(input: Tensor) -> Tensor:
    return _c.eq(input, -math.inf) if input.dtype.is_floating_point else _c.ne(input, input)


def isreal(input: Tensor) -> Tensor:
    return Tensor._full(tuple(input.shape), True, dtypes.bool, input.device)


def _bitwise(op_type: str, logical, input, other, name: str) -> Tensor:
    (a, b), result_dtype = promote_operands([input, other])
    if result_dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_type_name(result_dtype)}'")
    if result_dtype is dtypes.bool:
        return logical(
            a if isinstance(a, Tensor) else Tensor._from_value(a), b if isinstance(b, Tensor) else Tensor._from_value(b)
        )
    return apply_op(op_type, (a, b), None, name)


def bitwise_and(input, other) -> Tensor:
    return _bitwise("BitwiseAnd", _c.logical_and, input, other, "bitwise_and")


def bitwise_or(input, other) -> Tensor:
    return _bitwise("BitwiseOr", _c.logical_or, input, other, "bitwise_or")


def bitwise_xor(input, other) -> Tensor:
    return _bitwise("BitwiseXor", _c.logical_xor, input, other, "bitwise_xor")


def bitwise_not(input: Tensor) -> Tensor:
    if input.dtype is dtypes.bool:
        return _c.logical_not(input)
    if input.dtype.is_floating_point:
        raise NotImplementedError(f"\"bitwise_not_cpu\" not implemented for '{dtypes.scalar_type_name(input.dtype)}'")
    return apply_op("BitwiseNot", (input,), None, "BitwiseNotBackward0")


def _float_unary(op_type: str, name: str):
    def function(input: Tensor) -> Tensor:
        return apply_op(op_type, (_e._floating(input),), None, name)

    function.__name__ = function.__qualname__ = op_type.lower()
    function.__doc__ = f"Elementwise {op_type.lower()}; ONNX {op_type} (its gradient rule lives with the op's rules)."
    return function


tan = _float_unary("Tan", "TanBackward0")
asin = arcsin = _float_unary("Asin", "AsinBackward0")
acos = arccos = _float_unary("Acos", "AcosBackward0")
atan = arctan = _float_unary("Atan", "AtanBackward0")
sinh = _float_unary("Sinh", "SinhBackward0")
cosh = _float_unary("Cosh", "CoshBackward0")
asinh = arcsinh = _float_unary("Asinh", "AsinhBackward0")
acosh = arccosh = _float_unary("Acosh", "AcoshBackward0")
atanh = arctanh = _float_unary("Atanh", "AtanhBackward0")

__all__ += [
    "tan",
    "asin",
    "arcsin",
    "acos",
    "arccos",
    "atan",
    "arctan",
    "sinh",
    "cosh",
    "asinh",
    "arcsinh",
    "acosh",
    "arccosh",
    "atanh",
    "arctanh",
]


def atan2(input: Tensor, other: Tensor) -> Tensor:
    """The angle of the point ``(other, input)``, in (-pi, pi]; ``atan(y / x)`` moved to the right quadrant."""
    # One float dtype first (pi in float32 beside a float64 operand would cost 1e-7 of the result),
    # each operand converted from its own dtype; float16/bfloat16 in float32, rounded once.
    (y, x), result_dtype = float_operands([input, other])
    operands = widened(y), widened(x)
    # The value from the operands detached: its gradient is PyTorch's formula (derivative_formulas.py);
    # the chain rule through atan(y / x) loses the second derivative's digits near the y axis.
    y, x = operands[0].detach(), operands[1].detach()
    on_y_axis = _c.eq(x, 0)
    # x == 0 is answered below: there ``base`` reads y times 0 (it serves only the origin; a product
    # keeps the sign of a zero, which onnxruntime's Where loses from its second input), and a safe
    # divisor keeps NaN out.
    off_axis = _c.ne(x, 0).to(y.dtype)
    base = atan(_division.div(_e.mul(y, off_axis), _e.where(on_y_axis, 1.0, x)))
    pi = Tensor._full((), math.pi, y.dtype, y.device)
    # By sign bits, as C's atan2: a -0.0 counts as negative (atan2(-0, -1) = -pi, atan2(+-0, -0) = +-pi).
    shift = _e.where(signbit(y), _e.neg(pi), pi)
    quadrant = _e.where(signbit(x), _e.add(base, shift), base)
    # x == 0 and y != 0: the angle is +-pi/2 (at the origin the quadrants answer: +-0 or +-pi).
    # ``- x / y`` is a zero there (it once carried the gradient; it still makes a NaN y's angle NaN).
    safe_y = _e.where(_c.eq(y, 0), 1.0, y)
    on_axis = _e.sub(_e.mul(_e.sign(y), math.pi / 2), _division.div(x, safe_y))
    angle = _e.where(_c.logical_and(on_y_axis, _c.ne(y, 0)), on_axis, quadrant)
    # Both infinite: inf / inf is NaN; C99 (PyTorch) gives the diagonals, +-pi/4 and +-3pi/4.
    diagonal = Tensor._full((), math.pi / 4, y.dtype, y.device)
    diagonal = _e.where(signbit(x), Tensor._full((), 3 * math.pi / 4, y.dtype, y.device), diagonal)
    diagonal = _e.where(signbit(y), _e.neg(diagonal), diagonal)
    both_infinite = _c.logical_and(_c.isinf(x), _c.isinf(y))
    return rounded(with_derivative_formula("Atan2", _e.where(both_infinite, diagonal, angle), operands), result_dtype)


arctan2 = atan2


def copysign(input, other) -> Tensor:
    """``|input|`` with the sign of ``other`` (-0.0 counts as negative)."""
    if isinstance(other, Tensor):  # the promoted float dtype of both (float32 beside float64 is float64)
        (input, other), _ = float_operands([input, other])
    magnitude = _e.abs(_e._floating(input))
    sign_source = other if isinstance(other, Tensor) else Tensor._full((), other, magnitude.dtype, magnitude.device)
    result = _e.where(signbit(sign_source), _e.neg(magnitude), magnitude)
    return with_zero_gradients(result, (other,), "CopysignBackward0")


# Selected as PyTorch's gradient selects (``input`` on ties), which is also the value: ``other``
# where ``input`` is NaN, ``input`` where ``other`` is, NaN only where both are.


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum that ignores a NaN operand (NaN only where both are NaN)."""
    check_tensor_operands("fmax", input=input, other=other)
    return _e.where(_c.logical_or(_c.ge(input, other), _c.isnan(other)), input, other)


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise minimum that ignores a NaN operand (NaN only where both are NaN)."""
    check_tensor_operands("fmin", input=input, other=other)
    return _e.where(_c.logical_or(_c.le(input, other), _c.isnan(other)), input, other)


def sinc(input: Tensor) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0."""
    result_dtype = _e._floating(input).dtype
    x = widened(_e._floating(input))  # float16/bfloat16 in float32, rounded once
    scaled = _e.mul(x, math.pi)
    safe = _e.where(_c.eq(x, 0), 1.0, scaled)
    return rounded(_e.where(_c.eq(x, 0), 1.0, _division.div(_e.sin(safe), safe)), result_dtype)


def fix(input: Tensor) -> Tensor:
    return _division.trunc(input)


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2 ** other``, in the operands' promoted float dtype (float16/bfloat16 in float32, rounded once)."""
    (mantissa, exponent), result_dtype = float_operands([input, other])
    return rounded(_e.mul(widened(mantissa), _e.pow(2.0, widened(exponent))), result_dtype)


def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input``."""
    return _e.sub(other, input, alpha=alpha)


__all__ += ["atan2", "arctan2", "copysign", "fmax", "fmin", "sinc", "fix", "ldexp", "rsub"]
