"""Integer and float-representation functions: gcd, lcm, bitwise shifts, frexp, nextafter.

All are standard ONNX. ``gcd`` is Euclid's algorithm unrolled to the number of steps the dtype can
need (Lame's theorem: consecutive Fibonacci numbers are the worst case, so 92 steps cover int64),
each step a Mod guarded by Where. The shifts use ONNX BitShift, which is defined on unsigned
integers only: signed values are reinterpreted as unsigned of their width (Cast wraps), and a right
shift of a negative value is ``~((~a) >> b)``, PyTorch's arithmetic shift. ``frexp`` and ``nextafter``
read the exponent from ``log2`` and correct it by one where rounding put it off, so every result is
exact. None of these has a gradient except frexp's mantissa (``grad / 2^exponent``, as PyTorch's) and
nextafter's ``input`` (the gradient passed on where ``input != other``, as PyTorch's).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ...ir.registry import non_differentiable, shape_rules
from ._common import Tensor, apply_op, broadcast_values, check_tensor_operands, promote_operands
from . import comparison as _c
from . import elementwise as _e
from . import division as _division
from .pointwise import bitwise_not, signbit

__all__ = ["gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift", "frexp", "nextafter"]

FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


@shape_rules.register("BitShift")
def _bit_shift_shape(inputs, attrs):
    return [(broadcast_values(inputs), inputs[0].dtype)]


non_differentiable.mark("BitShift")


# PyTorch's CPU kernels of these ops take uint8 and the signed dtypes. int16 is computed in int32 (where
# onnxruntime's Where has a kernel) and wrapped back, which gives the same bits.
_SUPPORTED = {
    "uint8": dtypes.uint8,
    "int8": dtypes.int8,
    "int16": dtypes.int32,
    "int32": dtypes.int32,
    "int64": dtypes.int64,
}


def _integer_operands(input, other, name: str) -> tuple[Tensor, Tensor, dtypes.dtype]:
    """The operands promoted and cast to the dtype the op runs in, and the result dtype."""
    (a, b), result = promote_operands([input, other])
    if result.name not in _SUPPORTED:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_type_name(result)}'")
    a = a if isinstance(a, Tensor) else Tensor._from_value(a)  # promoted numbers come back as Values
    b = b if isinstance(b, Tensor) else Tensor._from_value(b)
    work = _SUPPORTED[result.name]
    return a.to(result).to(work), b.to(result).to(work), result


def _euclid_steps(value_dtype: dtypes.dtype) -> int:
    """The most steps Euclid's algorithm takes on values of ``value_dtype`` (Lame's theorem)."""
    largest = int(np.iinfo(value_dtype.numpy_dtype).max)
    previous, current, steps = 1, 2, 1
    while current <= largest:
        previous, current, steps = current, previous + current, steps + 1
    return steps + 1


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The greatest common divisor of each pair of integers (non-negative; ``gcd(0, 0) = 0``).

    Example::

        >>> onnxnn.gcd(onnxnn.tensor([12, -9, 0]), onnxnn.tensor([18, 6, 0]))
        tensor([6, 3, 0])
    """
    check_tensor_operands("gcd", input=input, other=other)  # the shifts and bitwise ops take numbers
    a, b, result = _integer_operands(input, other, "gcd")
    shape = broadcast_values([a._value, b._value])
    # PyTorch's C++ (calc_gcd): abs in the dtype, so abs(INT_MIN) stays INT_MIN (int16 runs in int32:
    # the cast back wraps 32768 as int16 does), then C's truncating %. Both make gcd(INT_MIN, 4) = 4
    # and gcd(INT_MIN, 0) = INT_MIN, as PyTorch.
    work = a.dtype
    a, b = (_e.abs(operand).to(result).to(work).expand(*shape) for operand in (a, b))
    # (a, b) -> (b % a, a) while a != 0; then b is the gcd. A zero a takes a safe divisor of 1. C's %
    # is b - (b / a) * a with ONNX's truncating integer Div (onnxruntime's Mod with fmod=1 goes through
    # double: inexact for int64). Only a start value can be INT_MIN, divided by the other start value
    # (non-negative, or INT_MIN): no INT_MIN / -1, so the plain Div cannot trap.
    for _ in range(_euclid_steps(result)):
        running = _c.ne(a, 0)
        divisor = _e.where(running, a, 1)
        remainder = _e.sub(b, _e.mul(apply_op("Div", (b, divisor)), divisor))
        a, b = _e.where(running, remainder, a), _e.where(running, a, b)
    return b.to(result)


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The least common multiple of each pair of integers (``|a / gcd * b|``; 0 when either is 0)."""
    check_tensor_operands("lcm", input=input, other=other)
    a, b, result = _integer_operands(input, other, "lcm")
    divisor = gcd(a, b)
    zero = _c.eq(divisor, 0)
    quotient = _division.div(a, _e.where(zero, 1, divisor), rounding_mode="trunc")
    if np.iinfo(result.numpy_dtype).bits < 32:  # (int16 runs in int32: the product is exact there)
        # PyTorch's C++ promotes 8- and 16-bit operands to int: |a / g * b| is taken before wrapping.
        product = _e.abs(quotient) * _e.abs(b)
    else:
        product = _e.abs(quotient * b)
    return _e.where(zero, 0, product).to(result)


# Each integer dtype shifts as the unsigned dtype of its width that onnxruntime's BitShift has.
_UNSIGNED_OF = {
    "int8": dtypes.uint8,
    "uint8": dtypes.uint8,
    "int16": dtypes.uint32,
    "uint16": dtypes.uint32,
    "int32": dtypes.uint32,
    "uint32": dtypes.uint32,
    "int64": dtypes.uint64,
    "uint64": dtypes.uint64,
}


def _shift(a: Tensor, amount: Tensor, direction: str, unsigned: dtypes.dtype) -> Tensor:
    return apply_op("BitShift", (a.to(unsigned), amount.to(unsigned)), {"direction": direction})


def bitwise_left_shift(input, other) -> Tensor:
    """``input << other`` (two's complement, wrapping); 0 where ``other`` is negative or at least the width."""
    a, b, result = _integer_operands(input, other, "lshift")
    width = np.iinfo(result.numpy_dtype).bits
    valid = _c.logical_and(_c.ge(b, 0), _c.lt(b, width))
    shifted = _shift(a, _e.where(valid, b, 0), "LEFT", _UNSIGNED_OF[result.name]).to(result).to(a.dtype)
    return _e.where(valid, shifted, 0).to(result)


def bitwise_right_shift(input, other) -> Tensor:
    """``input >> other``, arithmetic for signed dtypes; a shift outside ``[0, width)`` gives the sign fill."""
    a, b, result = _integer_operands(input, other, "rshift")
    width = np.iinfo(result.numpy_dtype).bits
    unsigned = _UNSIGNED_OF[result.name]
    valid = _c.logical_and(_c.ge(b, 0), _c.lt(b, width))
    amount = _e.where(valid, b, width - 1)
    if result is dtypes.uint8:
        return _e.where(valid, _shift(a, amount, "RIGHT", unsigned).to(result), 0).to(result)
    negative = _c.lt(a, 0)
    # For negative a, ~a >= 0: shift it logically and complement back (PyTorch's arithmetic shift).
    magnitude = _e.where(negative, bitwise_not(a), a)
    shifted = _shift(magnitude, amount, "RIGHT", unsigned).to(a.dtype)
    return _e.where(negative, bitwise_not(shifted), shifted).to(result)


def _exponent(x64: Tensor) -> Tensor:
    """``e`` with ``|x| = m 2^e``, ``0.5 <= m < 1``, for finite non-zero float64 ``x`` (float64 result).

    ``floor(log2 |x|) + 1`` can be one off near powers of two (log2 rounds); the scaled value says
    which way, and the correction is exact.
    """
    magnitude = x64.abs()
    exponent = (magnitude.log() * (1 / math.log(2))).floor() + 1.0
    scaled = _scale(magnitude, exponent.neg())
    exponent = exponent + _c.ge(scaled, 1.0).to(dtypes.float64) - _c.lt(scaled, 0.5).to(dtypes.float64)
    return exponent


def _scale(x64: Tensor, exponent: Tensor) -> Tensor:
    """``x 2^exponent`` in two exact steps, so neither power overflows or goes subnormal."""
    half = (exponent * 0.5).floor()
    return x64 * _pow2(half) * _pow2(exponent - half)


def _pow2(exponent: Tensor) -> Tensor:
    return _e.pow(Tensor._full((), 2.0, dtypes.float64, exponent.device), exponent)


def frexp(input: Tensor) -> FrexpResult:
    """``(mantissa, exponent)`` with ``input = mantissa * 2^exponent`` and ``0.5 <= |mantissa| < 1``.

    Zero, infinities and NaN give ``(input, 0)``; the exponent is int32, as PyTorch's. Example::

        >>> onnxnn.frexp(onnxnn.tensor([8.0, -3.0]))
        frexp(mantissa=tensor([ 0.5000, -0.7500]), exponent=tensor([4, 2], dtype=onnxnn.int32))
    """
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    x64 = input.to(dtypes.float64)
    plain = x64.detach()
    regular = _c.logical_and(_c.isfinite(plain), _c.ne(plain, 0))
    exponent = _e.where(regular, _exponent(_e.where(regular, plain, 1.0)), 0.0)
    mantissa = _scale(x64, exponent.neg()).to(input.dtype)
    return FrexpResult(mantissa, exponent.to(dtypes.int32))


# The significand bits and the smallest subnormal's exponent of each float dtype.
_PRECISION = {"float64": (53, -1074), "float32": (24, -149), "float16": (11, -24), "bfloat16": (8, -133)}
_LARGEST = {
    "float64": np.finfo(np.float64).max,
    "float32": np.finfo(np.float32).max,
    "float16": np.finfo(np.float16).max,
    "bfloat16": 3.3895313892515355e38,
}


def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next representable value after ``input`` toward ``other`` (``other`` itself when equal).

    Computed in float64, where ``input`` plus or minus its spacing in its own dtype is exact. The
    gradient is PyTorch's (NextafterBackward0): passed to ``input`` where ``input != other`` (but 0
    from an infinite ``input`` to a finite value), zeros to ``other``.
    """
    (a, b), result = promote_operands([input, other])
    if not result.is_floating_point:
        raise RuntimeError(f"\"nextafter_cpu\" not implemented for '{result.name.capitalize()}'")
    a = a if isinstance(a, Tensor) else Tensor._from_value(a)
    b = b if isinstance(b, Tensor) else Tensor._from_value(b)
    x, y = a.detach().to(dtypes.float64), b.detach().to(dtypes.float64)
    bits, tiny_exponent = _PRECISION[result.name]
    regular = _c.logical_and(_c.isfinite(x), _c.ne(x, 0))
    exponent = _exponent(_e.where(regular, x, 1.0))
    # Away from zero the spacing is 2^(e - bits); toward zero from a power of two it halves.
    toward_zero = _c.lt(_e.abs(y), _e.abs(x))
    power_of_two = _c.eq(_scale(x.abs(), exponent.neg()), 0.5)
    step_exponent = exponent - float(bits) - _c.logical_and(toward_zero, power_of_two).to(dtypes.float64)
    spacing = _pow2(_e.maximum(step_exponent, Tensor._full((), float(tiny_exponent), dtypes.float64, x.device)))
    spacing = _e.where(regular, spacing, math.ldexp(1.0, tiny_exponent))  # from zero: the smallest subnormal
    moved = x + _e.sign(y - x) * spacing
    largest = float(_LARGEST[result.name])
    moved = _e.where(_c.isinf(x), _e.sign(x) * largest, moved)  # from +-inf toward anything: the largest finite
    same = _c.eq(x, y)
    nan = _c.logical_or(_c.isnan(x), _c.isnan(y))
    value = _e.where(nan, math.nan, _e.where(same, y, moved))
    if a._requires_grad or b._requires_grad:
        value = _with_gradient_to_input(value, a.to(dtypes.float64), b.to(dtypes.float64))
    return value.to(result)


def _with_gradient_to_input(value: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """``value`` (computed from ``x`` and ``y`` detached) with PyTorch's nextafter gradient: ``x``'s
    passed on where ``x != y`` (0 where they are equal), zeros for ``y``.

    ``x + (value - x)`` is ``value`` exactly for a finite x, its neighbour (the difference is one
    spacing); a -0.0 value is ``-(-x - (value - x))``, as the sum would round it to +0.0. From an
    infinite x to the largest finite value the sum is inf - inf: the value is taken as it is there,
    and x's gradient is 0 (PyTorch's is the gradient; no sum of standard ops carries it).
    """
    step = _e.sub(value, x.detach())
    # The -0.0 second: onnxruntime's Where makes one taken from its first input +0.0.
    moved = _e.where(_c.logical_not(signbit(value)), _e.add(x, step), _e.neg(_e.sub(_e.neg(x), step)))
    unreachable = _c.logical_and(_c.isinf(x.detach()), _c.isfinite(value))
    passed = _e.where(_c.logical_and(_c.ne(x.detach(), y.detach()), _c.logical_not(unreachable)), moved, value)
    # ``y`` joins the graph through a Where that never takes it: its gradient is zeros, as PyTorch's.
    nowhere = Tensor._full((), False, dtypes.bool, value.device)
    return _e.where(nowhere, y, passed)
