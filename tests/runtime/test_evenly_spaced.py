"""``linspace`` and ``logspace`` round as PyTorch 2.13's CPU kernels do: ``linspace`` counts from the nearer
end with one fused multiply-add per value (half types: every operation rounded to the dtype), ``logspace``
takes the ends in the dtype and the exponents and the C library's ``pow`` in double."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import onnxnn

try:
    import torch
except ImportError:  # the comparisons with PyTorch itself need it
    torch = None

RANGES = [(0.1, 7.3, 9), (-3.7, 11.2, 101), (5.0, -2.25, 64), (1e-3, 1.0, 1000), (-1.0, 1.0, 2), (2.5, 2.5, 4)]
NUMPY_TYPES = {
    onnxnn.float16: np.float16,
    onnxnn.bfloat16: ml_dtypes.bfloat16,
    onnxnn.float32: np.float32,
    onnxnn.float64: np.float64,
}


def rounded_once(exact: Fraction, kind) -> float:
    """``exact`` rounded to the nearest ``kind`` (float32 or float64), ties to even."""
    nearest = kind(float(exact))  # float() rounds correctly; float32 may then be one neighbour off
    candidates = [np.nextafter(nearest, kind(-np.inf)), nearest, np.nextafter(nearest, kind(np.inf))]
    return min(
        candidates,
        key=lambda value: (
            abs(Fraction(float(value)) - exact),
            int(value.view(np.uint64 if kind is np.float64 else np.uint32)) & 1,
        ),
    )


def fused_linspace(start: float, end: float, steps: int, kind) -> list[float]:
    first, last = kind(start), kind(end)
    step = Fraction(float((last - first) / kind(steps - 1)))
    values = []
    for i in range(steps):
        exact = step * i + Fraction(float(first)) if i < steps // 2 else Fraction(float(last)) - step * (steps - 1 - i)
        values.append(rounded_once(exact, kind))
    return values


@pytest.mark.parametrize("start, end, steps", [(-18, 14, 137), (0, 10, 4), (7, -30, 38), (-5, 5, 1001)])
def test_integer_linspace_truncates_one_fused_multiply_add_per_value(start, end, steps):
    step = Fraction((float(end) - float(start)) / (steps - 1))
    exact = [step * i + start if i < steps // 2 else end - step * (steps - 1 - i) for i in range(steps)]
    expected = [math.trunc(rounded_once(value, np.float64)) for value in exact]
    assert onnxnn.linspace(start, end, steps, dtype=onnxnn.int64).tolist() == expected


def half_linspace(start: float, end: float, steps: int, kind) -> list[float]:
    first, last = kind(start), kind(end)
    step = (last - first) / kind(steps - 1)
    return [
        float(first + step * kind(i)) if i < steps // 2 else float(last - step * kind(steps - 1 - i))
        for i in range(steps)
    ]


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("start, end, steps", RANGES)
def test_linspace_rounds_each_value_once_from_the_nearer_end(start, end, steps, dtype):
    kind = NUMPY_TYPES[dtype]
    actual = onnxnn.linspace(start, end, steps, dtype=dtype)
    assert actual.dtype == dtype
    np.testing.assert_array_equal(actual.numpy(), np.asarray(fused_linspace(start, end, steps, kind), kind))


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
@pytest.mark.parametrize("start, end, steps", RANGES + [(-40.0, 3000.0, 700)])  # bfloat16 rounds indices past 256
def test_half_linspace_rounds_every_operation_to_the_dtype(start, end, steps, dtype):
    actual = onnxnn.linspace(start, end, steps, dtype=dtype)
    assert actual.dtype == dtype
    np.testing.assert_array_equal(actual.float().numpy(), half_linspace(start, end, steps, NUMPY_TYPES[dtype]))


def library_logspace(start: float, end: float, steps: int, base: float, kind) -> list[float]:
    first, last = float(kind(start)), float(kind(end))
    step = float(kind(end) - kind(start)) / (steps - 1) if steps > 1 else 0.0  # the difference in the dtype
    exponents = [first + step * i if i < steps // 2 else last - step * (steps - 1 - i) for i in range(steps)]
    powers = [math.pow(base, exponent) for exponent in exponents]
    return [float(kind(np.float32(power) if kind in (np.float16, ml_dtypes.bfloat16) else power)) for power in powers]


@pytest.mark.parametrize("dtype", list(NUMPY_TYPES))
@pytest.mark.parametrize("start, end, steps", RANGES)
@pytest.mark.parametrize("base", [10.0, 2.0, math.e])
def test_logspace_takes_the_c_librarys_power_of_double_exponents(start, end, steps, base, dtype):
    actual = onnxnn.logspace(start, end, steps, base=base, dtype=dtype)
    assert actual.dtype == dtype
    expected = library_logspace(start, end, steps, base, NUMPY_TYPES[dtype])
    np.testing.assert_array_equal(actual.double().numpy(), expected)


@pytest.mark.parametrize("steps, expected", [(0, []), (1, [2.0])])
def test_zero_and_one_steps(steps, expected):
    assert onnxnn.linspace(2.0, 5.0, steps).tolist() == expected
    assert onnxnn.logspace(math.log10(2.0), 5.0, steps).tolist() == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("factory", [onnxnn.linspace, onnxnn.logspace])
def test_negative_steps_are_refused(factory):
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        factory(0.0, 1.0, -1)


@pytest.mark.skipif(torch is None, reason="compares with PyTorch")
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "int32", "int64"])
def test_random_ranges_equal_pytorchs_bit_for_bit(name):
    rng = np.random.default_rng(7)
    for _ in range(100):
        start, end = (float(value) for value in rng.normal(0, 3, 2))
        steps, base = int(rng.integers(1, 400)), float(rng.choice([10.0, 2.0, 3.3]))
        for factory, arguments in (("linspace", (10 * start, 10 * end, steps)), ("logspace", (start, end, steps))):
            keywords = {"base": base} if factory == "logspace" else {}
            ours = getattr(onnxnn, factory)(*arguments, dtype=getattr(onnxnn, name), **keywords)
            theirs = getattr(torch, factory)(*arguments, dtype=getattr(torch, name), **keywords)
            np.testing.assert_array_equal(
                ours.double().numpy(), theirs.double().numpy(), err_msg=f"{factory}{arguments}"
            )
