"""cumprod, logcumsumexp, cummax and cummin as log-depth scans (``runtime/ops/scans.py``).

Expectations come from formulas, not from the implementation:

- cumprod: exact prefix products (``fractions.Fraction``) rounded once; integers as Python integers
  wrapped to the dtype. The scan multiplies along a balanced tree, but a product's rounding errors
  do not shrink with the depth as a sum's do: every one of the i multiplications of prefix i
  scales the whole product by ``(1 + delta)``, ``|delta| <= eps / 2``, in any association. Hence
  the bound ``gamma_n ~ n * eps / 2`` relative in float64, as a sequential product's (typically
  ``sqrt(n)`` ulps: 14 at n = 1000). float32 is accumulated in float64 (as PyTorch's CPU kernel
  does) and rounded once: within one float32 ulp of the exact product.
- logcumsumexp: ``np.logaddexp.accumulate`` in extended precision (``np.longdouble``, whose sequential
  error is far below a float64 ulp at these lengths; float64 with an ``n``-sized tolerance where
  longdouble is only double). Each log-add-exp errs by about one ulp of its result plus one of
  ``log 2`` and passes earlier errors on with a factor at most 1: ``(log2(n) + 2) * 2 * eps *
  (|result| + 1)`` absolute.
- cummax / cummin: ``np.maximum.accumulate`` (which propagates NaN) and the index rule of PyTorch,
  written out: the later element is taken when it is a NaN, or when it is at least (at most) the
  running extremum and that is not a NaN. So ties report the LAST position, and a NaN, once seen,
  is the extremum both ways at the last NaN's position.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest

import onnxnn
from tests.gradcheck import check_gradients

try:
    import torch
except ImportError:  # the comparisons with PyTorch are skipped without it
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

EXECUTORS = ["onnxruntime", "kernels"]
LENGTHS = [1, 2, 3, 5, 8, 17, 33, 1000, 1025]  # powers of two, one past, and others
# (shape with n for the scanned dim, dim): axes 0 and -1 of 1-D, 2-D and 3-D inputs.
LAYOUTS = [
    (("n",), 0),
    ((3, "n"), -1),
    (("n", 2), 0),
    ((2, 2, "n"), -1),
    (("n", 2, 2), 0),
]
CASES = [(n, shape, dim) for n in LENGTHS for shape, dim in LAYOUTS if n <= 33 or shape in (("n",), (3, "n"))]
CASE_IDS = [f"n{n}-{'x'.join(map(str, shape))}-dim{dim}" for n, shape, dim in CASES]
EXTENDED = np.finfo(np.longdouble).eps < 1e-18  # x87 80-bit long double on x86 Linux


def _shape(shape, n):
    return tuple(n if size == "n" else size for size in shape)


def _lines(a: np.ndarray, dim: int):
    """The 1-D lines of ``a`` along ``dim`` (as a 2-D array, one line a row) and how to put them back."""
    moved = np.moveaxis(a, dim, -1)
    return moved.reshape(-1, moved.shape[-1]), lambda rows: np.moveaxis(rows.reshape(moved.shape), -1, dim)


def _exact_cumprod(a: np.ndarray, dim: int) -> np.ndarray:
    rows, back = _lines(a.astype(np.float64), dim)
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        product = Fraction(1)
        for i, value in enumerate(row):
            product *= Fraction(float(value))
            out[r, i] = float(product)  # correctly rounded
    return back(out)


def _wrapped_cumprod(a: np.ndarray, dim: int, dtype) -> np.ndarray:
    bits = np.iinfo(dtype).bits
    signed = np.iinfo(dtype).min < 0
    rows, back = _lines(a, dim)
    out = np.empty(rows.shape, dtype=dtype)
    for r, row in enumerate(rows):
        product = 1
        for i, value in enumerate(row):
            product *= int(value)
            wrapped = product % 2**bits
            if signed and wrapped >= 2 ** (bits - 1):
                wrapped -= 2**bits
            out[r, i] = wrapped
    return back(out)


def _logcumsumexp(a: np.ndarray, dim: int) -> np.ndarray:
    wide = np.longdouble if EXTENDED else np.float64
    with np.errstate(invalid="ignore"):
        return np.logaddexp.accumulate(a.astype(wide), axis=dim).astype(np.float64)


def _running_extremum(a: np.ndarray, dim: int, largest: bool):
    rows, back = _lines(a, dim)
    values, indices = np.empty_like(rows), np.empty(rows.shape, dtype=np.int64)
    for r, row in enumerate(rows):
        best, where = None, 0
        for i, value in enumerate(row):
            nan = isinstance(value, (float, np.floating)) and math.isnan(value)
            best_nan = best is not None and isinstance(best, (float, np.floating)) and math.isnan(best)
            at_least = best is None or (value >= best if largest else value <= best)
            if nan or (at_least and not best_nan):
                best, where = value, i
            values[r, i], indices[r, i] = best, where
    return back(values), back(indices)


def _run(executor, function, *arrays, **kwargs):
    with onnxnn.set_executor(executor):
        result = function(*(onnxnn.tensor(a) for a in arrays), **kwargs)
        if isinstance(result, tuple):
            return tuple(r.numpy() for r in result)
        return result.numpy()


def _ulps_tolerance(n: int) -> float:
    """``(log2(n) + 2) * eps``: a bound on an error that grows with the depth of the scan's tree."""
    return (math.log2(max(n, 1)) + 2) * np.finfo(np.float64).eps


def _product_tolerance(n: int) -> float:
    """``gamma_n = n u / (1 - n u)``, ``u = eps / 2``: a product of n + 1 factors, any association."""
    unit = np.finfo(np.float64).eps / 2
    return n * unit / (1 - n * unit)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n, shape, dim", CASES, ids=CASE_IDS)
def test_cumprod_float64_is_within_n_roundings_of_the_exact_product(executor, n, shape, dim):
    rng = np.random.default_rng(n)
    a = np.where(rng.random(_shape(shape, n)) < 0.5, -1.0, 1.0) * (1 + 0.05 * rng.standard_normal(_shape(shape, n)))
    result = _run(executor, onnxnn.cumprod, a, dim=dim)
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, _exact_cumprod(a, dim), rtol=_product_tolerance(n), atol=0)
    if torch is not None:  # both within gamma_n of the exact products
        reference = torch.cumprod(torch.from_numpy(a), dim).numpy()
        np.testing.assert_allclose(result, reference, rtol=2 * _product_tolerance(n), atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 17, 1000, 1025])
def test_cumprod_float32_is_accumulated_wide_and_rounded_once(executor, n):
    rng = np.random.default_rng(n)
    a = (1 + 0.05 * rng.standard_normal((2, n))).astype(np.float32)
    result = _run(executor, onnxnn.cumprod, a, dim=-1)
    assert result.dtype == np.float32
    exact = _exact_cumprod(a, -1)
    # The float64 scan's error (log2(n) ulps of float64) can only move a tie of the final rounding.
    np.testing.assert_allclose(result, exact, rtol=np.finfo(np.float32).eps, atol=0)
    if torch is not None:  # PyTorch's CPU kernel accumulates float32 in double too
        reference = torch.cumprod(torch.from_numpy(a), -1).numpy()
        np.testing.assert_allclose(result, reference, rtol=np.finfo(np.float32).eps, atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "values, dtype",
    [
        ([2**32, 2**32, 3], np.int64),  # wraps to 0 as PyTorch's, where a double product saturates
        ([2**53 + 1, 3, 1], np.int64),  # past 2**53: exact, where a double product rounds
        ([-(2**62), 2, 2, -1], np.int64),
        ([100, 100, 100, 7], np.int32),
        ([16, 16, 3, 5], np.uint8),
        ([-7, 9, 11, 13, 17], np.int8),
    ],
    ids=["int64-wraps", "int64-exact-past-2**53", "int64-min", "int32", "uint8", "int8"],
)
def test_integer_cumprod_is_exact_and_wraps(executor, values, dtype):
    a = np.array(values, dtype=dtype)
    onnx_dtype = {np.int64: onnxnn.int64, np.int32: onnxnn.int32, np.uint8: onnxnn.uint8, np.int8: onnxnn.int8}[dtype]
    result = _run(executor, onnxnn.cumprod, a, dim=0, dtype=onnx_dtype)
    np.testing.assert_array_equal(result, _wrapped_cumprod(a, 0, dtype))
    if torch is not None:
        reference = torch.cumprod(torch.from_numpy(a), 0, dtype=getattr(torch, np.dtype(dtype).name)).numpy()
        np.testing.assert_array_equal(result, reference)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n", [3, 8, 33, 1000])
def test_integer_cumprod_of_long_lines_wraps_as_python_integers(executor, n):
    a = np.random.default_rng(n).integers(-9, 10, (2, n)).astype(np.int64)
    a[a == 0] = 3
    result = _run(executor, onnxnn.cumprod, a, dim=1)
    np.testing.assert_array_equal(result, _wrapped_cumprod(a, 1, np.int64))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n, shape, dim", CASES, ids=CASE_IDS)
def test_logcumsumexp_is_within_log2_n_roundings_of_the_sequential_sum(executor, n, shape, dim):
    rng = np.random.default_rng(n)
    a = 20 * rng.standard_normal(_shape(shape, n))
    result = _run(executor, onnxnn.logcumsumexp, a, dim=dim)
    expected = _logcumsumexp(a, dim)
    tolerance = 2 * _ulps_tolerance(n) if EXTENDED else (n + 2) * np.finfo(np.float64).eps
    np.testing.assert_array_less(np.abs(result - expected), tolerance * (np.abs(expected) + 1))


INF, NAN = float("inf"), float("nan")
SPECIAL_LINES = [
    [-INF, -INF, 1.0, -INF, 2.0],
    [1.0, -INF, INF, INF, 3.0],
    [INF, -INF, INF, 1.0],
    [-INF, INF, -INF],
    [1.0, NAN, 2.0, -INF],
    [NAN, INF, -INF, NAN],
    [-INF, -INF, -INF],
    [-1000.0, 0.0, -1000.0, 800.0, -INF],  # far below the maximum: no underflow
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("line", SPECIAL_LINES)
def test_logcumsumexp_handles_infinities_and_nan(executor, line):
    a = np.array(line)
    result = _run(executor, onnxnn.logcumsumexp, a, dim=0)
    np.testing.assert_allclose(result, _logcumsumexp(a, 0), rtol=4 * np.finfo(np.float64).eps, atol=0)
    if torch is not None:
        np.testing.assert_allclose(result, torch.logcumsumexp(torch.tensor(a), 0).numpy(), rtol=1e-15, atol=0)


def _extremum_input(rng, shape, kind):
    if kind == "ties":
        return rng.integers(-3, 4, shape).astype(np.float64)
    if kind == "nan":
        a = rng.integers(-3, 4, shape).astype(np.float64)
        a[rng.random(shape) < 0.1] = np.nan
        a[rng.random(shape) < 0.1] = -np.inf
        a[rng.random(shape) < 0.05] = np.inf
        return a
    return rng.integers(-(2**62), 2**62, shape).astype(np.int64)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("largest", [True, False], ids=["cummax", "cummin"])
@pytest.mark.parametrize("kind", ["ties", "nan", "int64"])
@pytest.mark.parametrize("n, shape, dim", CASES, ids=CASE_IDS)
def test_running_extrema_and_their_last_positions(executor, largest, kind, n, shape, dim):
    a = _extremum_input(np.random.default_rng(n), _shape(shape, n), kind)
    values, indices = _run(executor, onnxnn.cummax if largest else onnxnn.cummin, a, dim=dim)
    expected_values, expected_indices = _running_extremum(a, dim, largest)
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(indices, expected_indices)
    if torch is not None:
        reference = (torch.cummax if largest else torch.cummin)(torch.from_numpy(a), dim)
        np.testing.assert_array_equal(values, reference.values.numpy())
        np.testing.assert_array_equal(indices, reference.indices.numpy())


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "values, dtype",
    [
        ([np.iinfo(np.int64).min, np.iinfo(np.int64).min, 5, np.iinfo(np.int64).max], np.int64),  # at the identity
        ([0.0, -0.0, NAN, 1.0, NAN, 5.0], np.float64),
        ([-INF, -INF, INF, INF], np.float32),
        ([3, 1, 3, 200, 0], np.uint8),
        ([True, False, False, True], np.bool_),
    ],
    ids=["int64-extremes", "zeros-and-nan", "infinities", "uint8", "bool"],
)
@pytest.mark.parametrize("largest", [True, False], ids=["cummax", "cummin"])
def test_running_extrema_at_the_identities(executor, values, dtype, largest):
    a = np.array(values, dtype=dtype)
    result_values, indices = _run(executor, onnxnn.cummax if largest else onnxnn.cummin, a, dim=0)
    expected_values, expected_indices = _running_extremum(a, 0, largest)
    assert result_values.dtype == a.dtype
    np.testing.assert_array_equal(result_values, expected_values)
    np.testing.assert_array_equal(indices, expected_indices)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "function",
    [onnxnn.cumprod, onnxnn.logcumsumexp, lambda t, dim: onnxnn.cummax(t, dim).values],
    ids=["cumprod", "logcumsumexp", "cummax"],
)
def test_empty_and_zero_dimensional_inputs(executor, function):
    with onnxnn.set_executor(executor):
        assert function(onnxnn.zeros(0, 3, dtype=onnxnn.float64), 0).numpy().shape == (0, 3)
        assert function(onnxnn.zeros(2, 0, dtype=onnxnn.float64), -1).numpy().shape == (2, 0)
        assert float(function(onnxnn.tensor(1.5, dtype=onnxnn.float64), -1).numpy()) == 1.5


def test_a_line_of_one_is_a_new_tensor():
    x = onnxnn.tensor([[2.0]], dtype=onnxnn.float64)
    for result in (onnxnn.cumprod(x, 1), onnxnn.logcumsumexp(x, 1), onnxnn.cummax(x, 1).values):
        assert result is not x
        result.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), [[2.0]])


# ---------------------------------------------------------------- gradients


def _gradient(executor, function, a, cotangent):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(a, dtype=onnxnn.float64, requires_grad=True)
        function(x).backward(onnxnn.tensor(cotangent, dtype=onnxnn.float64))
        return x.grad.numpy()


def _torch_gradient(function, a, cotangent):
    x = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    function(x).backward(torch.tensor(cotangent, dtype=torch.float64))
    return x.grad.numpy()


CUMPROD_LINES = {
    "no-zero": [1.5, -2.0, 0.5, 3.0, 1.25],
    "one-zero": [1.5, -2.0, 0.0, 3.0, 1.25],
    "two-zeros": [1.5, 0.0, -2.0, 0.0, 3.0],
    "leading-zero": [0.0, 2.0, 3.0, -1.5, 4.0],
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("line", CUMPROD_LINES.values(), ids=CUMPROD_LINES.keys())
def test_cumprod_gradient_at_zeros(executor, line):
    a = np.array([line, line[::-1]])
    cotangent = np.random.default_rng(0).standard_normal(a.shape)
    gradient = _gradient(executor, lambda x: onnxnn.cumprod(x, 1), a, cotangent)
    # d/da_j of sum_i c_i prod(a[:i+1]): the exact sum over i >= j of c_i times the prefix without j.
    expected = np.array(
        [
            [
                math.fsum(c[i] * math.prod(row[k] for k in range(i + 1) if k != j) for i in range(j, len(row)))
                for j in range(len(row))
            ]
            for row, c in zip(a, cotangent)
        ]
    )
    np.testing.assert_allclose(gradient, expected, rtol=16 * np.finfo(np.float64).eps, atol=1e-15)
    if torch is not None:
        reference = _torch_gradient(lambda x: torch.cumprod(x, 1), a, cotangent)
        np.testing.assert_allclose(gradient, reference, rtol=16 * np.finfo(np.float64).eps, atol=1e-15)


LOGCUMSUMEXP_LINES = {
    "finite": [0.5, -1.0, 2.0, 0.0, -3.0],
    "inner-minus-inf": [1.0, -INF, 2.0, -INF, -INF],
    "leading-minus-inf": [-INF, -INF, 1.0, -INF, 2.0],  # PyTorch's gradient is NaN where the prefix is all -inf
}


@needs_torch
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("line", LOGCUMSUMEXP_LINES.values(), ids=LOGCUMSUMEXP_LINES.keys())
def test_logcumsumexp_gradient_matches_pytorch(executor, line):
    a = np.array([line, line[::-1]])
    cotangent = np.random.default_rng(1).standard_normal(a.shape)
    gradient = _gradient(executor, lambda x: onnxnn.logcumsumexp(x, 1), a, cotangent)
    reference = _torch_gradient(lambda x: torch.logcumsumexp(x, 1), a, cotangent)
    np.testing.assert_allclose(gradient, reference, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize(
    "function",
    [
        lambda x: onnxnn.cumprod(x, 1),
        lambda x: onnxnn.cumprod(x, 0),
        lambda x: onnxnn.logcumsumexp(x, 1),
        lambda x: onnxnn.cummax(x, 1).values,
        lambda x: onnxnn.cummin(x, 0).values,
    ],
    ids=["cumprod-1", "cumprod-0", "logcumsumexp", "cummax", "cummin"],
)
def test_gradients_match_finite_differences(function):
    a = np.array([[1.5, -0.5, 2.0, 0.25, -1.0], [0.5, 3.0, -2.0, 1.0, 0.75], [2.0, 0.1, -0.3, 1.7, 0.9]])
    check_gradients(function, [a])


@needs_torch
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("largest", [True, False], ids=["cummax", "cummin"])
def test_running_extremum_gradient_goes_to_the_chosen_positions(executor, largest):
    a = np.array([[1.0, 3.0, 3.0, NAN, 2.0, NAN, 0.0], [2.0, 2.0, -1.0, 5.0, 5.0, -INF, 4.0]])
    cotangent = np.random.default_rng(2).standard_normal(a.shape)
    gradient = _gradient(executor, lambda x: (onnxnn.cummax if largest else onnxnn.cummin)(x, 1).values, a, cotangent)
    reference = _torch_gradient(lambda x: (torch.cummax if largest else torch.cummin)(x, 1).values, a, cotangent)
    np.testing.assert_allclose(gradient, reference, rtol=4 * np.finfo(np.float64).eps, atol=0)


# ---------------------------------------------------------------- scale


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_line_of_100000_is_scanned_quickly(executor):
    n = 100_000
    rng = np.random.default_rng(3)
    a = (1 + 1e-5 * rng.standard_normal(n)).astype(np.float32)
    start = time.perf_counter()
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(a)
        product = onnxnn.cumprod(x, 0).numpy()
        values, indices = (r.numpy() for r in onnxnn.cummax(x, 0))
    assert time.perf_counter() - start < 10  # a masked n x n prefix per position would be 1e10 elements
    np.testing.assert_allclose(product, np.cumprod(a.astype(np.float64)), rtol=1e-6)
    np.testing.assert_array_equal(values, np.maximum.accumulate(a))
    np.testing.assert_array_equal(a[indices], values)
    assert np.all(np.diff(indices) >= 0)


@pytest.mark.parametrize("dtype", ["bool", "int32", "int64"])
def test_logcumsumexp_refuses_integers_as_pytorch(dtype):
    # PyTorch's kernel takes floating types only ("logcumsumexp_out_cpu" not implemented for 'Long').
    with pytest.raises(NotImplementedError, match="logcumsumexp_out_cpu"):
        onnxnn.logcumsumexp(onnxnn.zeros(3, dtype=getattr(onnxnn, dtype)), 0)
