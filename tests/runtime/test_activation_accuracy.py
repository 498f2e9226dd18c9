"""Activations and exponentials keep their relative accuracy where their results are small, on every executor.

The expected values are numpy float64 formulas or Python's ``math`` (both within an ulp of float64);
each bound counts the roundings of the formula onnxnn evaluates (an ulp or two per transcendental op)
plus the reference's own, in units of the dtype's epsilon. Before: onnxruntime's Elu/Selu/Celu
(``exp(x) - 1``) and the float64 decompositions gave 0 for small negative x; hardsigmoid and
hardswish (``x / 6 + 0.5``) were 25% off next to -3; exp2 (``exp(x ln 2)``) lost 66 float32 and
689 float64 ulps; erfc and gelu (``1 - erf``) cancelled.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ["kernels", "onnxruntime"]
FLOATS = [np.float32, np.float64]
DTYPES = {np.float32: onnxnn.float32, np.float64: onnxnn.float64}
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def run(function, executor: str, *arrays: np.ndarray) -> np.ndarray:
    with onnxnn.set_executor(executor):
        return function(*(onnxnn.tensor(array, dtype=DTYPES[array.dtype.type]) for array in arrays)).numpy()


def relative_error(result: np.ndarray, expected: np.ndarray) -> np.ndarray:
    result = result.astype(np.float64)
    return np.where(result == expected, 0.0, np.abs(result - expected) / np.abs(expected))


def small_negatives(dtype) -> np.ndarray:
    """From the smallest normal magnitudes (whose results are normal too) to -20, where expm1 is -1."""
    smallest = -36 if dtype is np.float32 else -306
    return np.concatenate([-np.logspace(smallest, 1.3, 3000), np.linspace(-20.0, -0.0, 2001)[:-1]]).astype(dtype)


# name, onnxnn's function, float64 formula of the negative side; roundings: expm1 (Kahan's: 3), the
# scales (1/alpha for celu, alpha, selu's gamma: 1/2 each), the reference's expm1 and product (1).
ELU_FAMILY = [
    ("elu", lambda t: F.elu(t), lambda x: np.expm1(x), 4),
    ("elu(alpha=1.5)", lambda t: F.elu(t, 1.5), lambda x: 1.5 * np.expm1(x), 4.5),
    ("selu", F.selu, lambda x: SELU_SCALE * SELU_ALPHA * np.expm1(x), 5),
    ("celu(alpha=2)", lambda t: F.celu(t, 2.0), lambda x: 2.0 * np.expm1(x * 0.5), 5),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda dtype: dtype.__name__)
@pytest.mark.parametrize("name, function, formula, roundings", ELU_FAMILY, ids=[case[0] for case in ELU_FAMILY])
def test_elu_family_keeps_small_negative_results(name, function, formula, roundings, dtype, executor):
    # exp(x) - 1 was 0 for |x| < 2.7e-8 in float32 (onnxruntime) and 4e-17 in float64 (both executors).
    x = small_negatives(dtype)
    error = relative_error(run(function, executor, x), formula(x.astype(np.float64)))
    assert error.max() <= roundings * np.finfo(dtype).eps, (float(error.max()), x[error.argmax()])


def near_minus_three(dtype) -> np.ndarray:
    above = -3.0 + np.arange(1, 201) * float(np.spacing(dtype(3.0)))
    return np.concatenate([above, np.linspace(-3.0, 3.0, 2001)[1:-1]]).astype(dtype)


def hardsigmoid_formula(x: np.ndarray) -> np.ndarray:
    return np.clip(x + 3.0, 0.0, 6.0) / 6.0  # x + 3 is exact in float64 for float32 x


# roundings: x + 3 (exact near -3, half an ulp of it elsewhere), the division, hardswish's product,
# and the reference's own (float64 x + 3 and division: nothing for float32, an ulp for float64).
HARD_CASES = [
    ("hardsigmoid", F.hardsigmoid, hardsigmoid_formula, 2),
    ("hardswish", F.hardswish, lambda x: x * hardsigmoid_formula(x), 3),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda dtype: dtype.__name__)
@pytest.mark.parametrize("name, function, formula, roundings", HARD_CASES, ids=[case[0] for case in HARD_CASES])
def test_hard_activations_are_accurate_next_to_minus_three(name, function, formula, roundings, dtype, executor):
    # x / 6 + 0.5 rounds to a multiple of ulp(0.5) there: hardswish(-2.9999998) was 25% off.
    x = near_minus_three(dtype)
    expected = formula(x.astype(np.float64))
    result = run(function, executor, x)
    nonzero = expected != 0
    assert np.all(result[~nonzero] == 0)
    error = relative_error(result[nonzero], expected[nonzero])
    assert error.max() <= roundings * np.finfo(dtype).eps, (float(error.max()), x[nonzero][error.argmax()])


INFINITE_CORNERS = [(y, x) for y in (math.inf, -math.inf) for x in (math.inf, -math.inf)]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hardsigmoid_slope_holds_up_to_its_corners(dtype, executor):
    # PyTorch's derivative: 1/6 strictly between -3 and 3, 0 elsewhere. x / 6 + 1/2 rounds to 1 at the
    # float just below 3, so a rule testing that sum took the slope for 0 there.
    below_three = np.nextafter(dtype(3), dtype(0))
    above_minus_three = np.nextafter(dtype(-3), dtype(0))
    x = np.array([-3.5, -3.0, above_minus_three, 0.0, below_three, 3.0, 3.5], dtype)
    expected = np.where((x > -3) & (x < 3), 1.0 / 6, 0.0).astype(dtype)
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(x, requires_grad=True)
        F.hardsigmoid(input).sum().backward()
        np.testing.assert_array_equal(input.grad.numpy(), expected)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda dtype: dtype.__name__)
def test_atan2_of_two_infinities_is_a_diagonal(dtype, executor):
    # inf / inf made them NaN; C99 (and PyTorch) give +-pi/4 and +-3pi/4.
    y, x = (np.array(values, dtype) for values in zip(*INFINITE_CORNERS))
    expected = np.array([math.atan2(*corner) for corner in INFINITE_CORNERS], dtype)
    np.testing.assert_allclose(run(onnxnn.atan2, executor, y, x), expected, rtol=np.finfo(dtype).eps)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float64_gelu_of_huge_inputs_is_finite(executor):
    # x * (1 + erf) overflowed from 8.99e307 before the halving.
    x = np.array([1e308, 1.7e308, -1e308])
    np.testing.assert_array_equal(run(F.gelu, executor, x), [1e308, 1.7e308, -0.0])


# dtype, inputs whose 2^x is normal, roundings: f ln 2 (1/2), exp (1, 2 for numpy's float32 exp), the
# reference's exp2 (float64: 1).
EXP2_CASES = [(np.float32, (-126.0, 127.99), 3), (np.float64, (-1022.0, 1023.99), 3)]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype, interval, roundings", EXP2_CASES, ids=["float32", "float64"])
def test_exp2_is_accurate_for_large_exponents(dtype, interval, roundings, executor):
    # exp(x ln 2) had |x ln 2| roundings of x ln 2: 66 float32 ulps at 99, 689 float64 ulps at -939.
    x = np.linspace(*interval, 20001).astype(dtype)
    error = relative_error(run(onnxnn.exp2, executor, x), np.exp2(x.astype(np.float64)))
    assert error.max() <= roundings * np.finfo(dtype).eps, (float(error.max()), x[error.argmax()])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda dtype: dtype.__name__)
def test_exp2_keeps_subnormal_results_and_the_limits(dtype, executor):
    info = np.finfo(dtype)
    lowest = math.log2(float(info.smallest_subnormal))
    x = np.array([lowest, lowest + 0.5, lowest - 0.5, lowest - 1.0, info.maxexp - 1, -math.inf, math.inf], dtype)
    smallest = float(info.smallest_subnormal)
    # 2^(lowest - 0.5) = 0.71 of the smallest subnormal rounds up to it; 2^(lowest - 1) is a tie, to even (0).
    expected = np.array([smallest, smallest, smallest, 0.0, 2.0 ** (info.maxexp - 1), 0.0, math.inf], dtype)
    np.testing.assert_array_equal(run(onnxnn.exp2, executor, x), expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_logaddexp2_of_far_apart_operands(executor):
    # high + log1p(2^(low - high)) / ln 2, with exp2's accuracy: 200 ulps at (0, -100) before. The
    # float64 reference rounds 2^d, log1p and the division: float32 roundings 1/2 (ours: exp2 3, log1p 2,
    # the division and the sum 1/2 each).
    low = np.concatenate([np.linspace(-125.0, -1.0, 2001), [-100.0]]).astype(np.float32)
    high = np.concatenate([np.zeros(2001), [-1e-30]]).astype(np.float32)
    wide_low, wide_high = low.astype(np.float64), high.astype(np.float64)
    expected = wide_high + np.log1p(np.exp2(wide_low - wide_high)) / math.log(2.0)
    error = relative_error(run(onnxnn.logaddexp2, executor, low, high), expected)
    nonzero = expected != 0
    assert error[nonzero].max() <= 6 * np.finfo(np.float32).eps, float(error.max())


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float64_erfc_does_not_cancel_below_two(executor):
    # 1 - erf(x) up to x = 2 lost 17-327 ulps on [1.1, 2]. Roundings: exp(-x^2) split in two exps and a
    # product (3), Cody's rational and its division (2), the product (1/2), math.erfc's (1).
    x = np.concatenate([np.linspace(-6.0, 6.0, 4001), np.linspace(0.4, 2.1, 4001)])
    expected = np.array([math.erfc(value) for value in x])
    error = relative_error(run(onnxnn.erfc, executor, x), expected)
    assert error.max() <= 7 * np.finfo(np.float64).eps, (float(error.max()), x[error.argmax()])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float64_gelu_does_not_cancel_for_negative_inputs(executor):
    # x * (1 + erf(x / sqrt(2))) / 2 lost 35-1840 ulps on [-3.6, -2] and was 0 below -8.3. Both sides
    # round z = -x / sqrt(2) (an ulp of z), which erfc's relative slope 2z turns into 2 z^2 ulps each;
    # then erfc (7, as above) and the products (1).
    x = np.linspace(-8.0, 3.0, 4001)
    z = -x / math.sqrt(2.0)
    expected = np.array([value * 0.5 * math.erfc(scaled) for value, scaled in zip(x, z)])
    result = run(F.gelu, executor, x)
    nonzero = expected != 0
    error = relative_error(result[nonzero], expected[nonzero])
    allowed = (4 * z[nonzero] ** 2 + 8) * np.finfo(np.float64).eps
    assert np.all(error <= allowed), (float((error / allowed).max()), x[nonzero][np.argmax(error / allowed)])


def test_kernels_float32_gelu_is_rounded_once():
    # The float32 erf's absolute error, then 1 + erf cancelling: 249 ulps on [-2.6, -2.4] (and 0 from
    # -5.5). Computed in float64 and rounded once: half an ulp and the reference's float64 roundings.
    x = np.concatenate([np.linspace(-2.6, -2.4, 2001), np.linspace(-13.0, 4.0, 4001)]).astype(np.float32)
    wide = x.astype(np.float64)
    expected = np.array([value * 0.5 * math.erfc(-value / math.sqrt(2.0)) for value in wide])
    error = relative_error(run(F.gelu, "kernels", x), expected)
    assert error.max() <= np.finfo(np.float32).eps, (float(error.max()), x[error.argmax()])
