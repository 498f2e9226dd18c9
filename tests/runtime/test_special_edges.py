"""Special functions at their edges: gradients at 0 and in the tails (Bessel I, erfcx, log_ndtr,
xlog1py), ndtr's lower tail, exact zeros of gammaln, and PyTorch's argument refusals.

References never call the code under test: the Bessel functions from their power series summed with
``math.fsum``, erfcx from ``math.erfc`` (and its asymptotic series where ``exp(x^2)`` overflows), the
derivatives from their closed forms (I0' = I1, erfcx' = 2x erfcx - 2/sqrt(pi), ...). Tolerances come
from the arithmetic: the dtype's epsilon times the number of operations the formula chains.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)
TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _gradient(function, values, dtype=onnxnn.float64):
    x = onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=dtype, requires_grad=True)
    function(x).sum().backward()
    return np.asarray(x.grad.numpy(), dtype=np.float64)


def _second_derivative(function, values):
    x = onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64, requires_grad=True)
    (first,) = onnxnn.autograd.grad(function(x).sum(), x, create_graph=True)
    (second,) = onnxnn.autograd.grad(first.sum(), x)
    return second.numpy()


# ---------------------------------------------------------------- references


def _bessel_i(order: int, x: float) -> float:
    """I_order(x) from its power series (every term positive for x >= 0; odd for order 1)."""
    term = (abs(x) / 2) ** order / math.factorial(order)
    terms = [term]
    for k in range(1, 200):
        term *= (x / 2) ** 2 / (k * (k + order))
        terms.append(term)
    return math.fsum(terms) * (math.copysign(1.0, x) if order else 1.0)


def _bessel_derivatives(x: float) -> dict[str, tuple[float, float]]:
    """The derivative of each function and the size of its largest term (cancellation sets the error)."""
    i0, i1, scale = _bessel_i(0, x), _bessel_i(1, x), math.exp(-abs(x))
    sign = math.copysign(1.0, x)
    i1_prime_terms = (i0, i1 / x)  # I1' = I0 - I1 / x
    return {
        "i0": (i1, abs(i1)),
        "i1": (i0 - i1 / x, max(map(abs, i1_prime_terms))),
        # (e^-|x| I0)' = e^-|x| (I1 - sign(x) I0); (e^-|x| I1)' = e^-|x| (I0 - I1 / x - sign(x) I1)
        "i0e": (scale * (i1 - sign * i0), scale * abs(i0)),
        "i1e": (scale * (i0 - i1 / x - sign * i1), scale * abs(i0)),
    }


def _erfcx(x: float) -> float:
    """exp(x^2) erfc(x): from math.erfc below 10, its asymptotic series above (exp(x^2) overflows
    past 26; the series' terms fall by (2n - 1) / (2 x^2) < 0.4 there, so 40 terms reach 1e-16)."""
    if x < 10:
        return math.exp(x * x) * math.erfc(x)
    return math.fsum((-1) ** n * _double_factorial(2 * n - 1) / (2 * x * x) ** n for n in range(40)) / (
        x * math.sqrt(math.pi)
    )


def _erfcx_derivative(x: float) -> float:
    """erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi) below 10; above, the asymptotic series differentiated term
    by term (the closed form cancels there: erfcx'(100) is 2e4 times smaller than its terms)."""
    if x < 10:
        return 2 * x * _erfcx(x) - TWO_OVER_SQRT_PI
    return math.fsum(
        (-1) ** n * _double_factorial(2 * n - 1) / 2**n * -(2 * n + 1) * x ** -(2 * n + 2) for n in range(40)
    ) / math.sqrt(math.pi)


def _double_factorial(n: int) -> int:
    return math.prod(range(n, 0, -2)) if n > 0 else 1


def _ndtr(x: float) -> float:
    return math.erfc(-x / math.sqrt(2)) / 2


def _log_ndtr_derivative(x: float) -> float:
    """pdf(x) / cdf(x); below -5, sqrt(2/pi) / erfcx(-x / sqrt 2) (the same ratio without underflow)."""
    if x < -5:
        return math.sqrt(2 / math.pi) / _erfcx(-x / math.sqrt(2))
    return math.exp(-x * x / 2) / math.sqrt(2 * math.pi) / _ndtr(x)


# ---------------------------------------------------------------- modified Bessel functions I

BESSEL_GRADIENT_POINTS = [-19.5, -15.0, -10.0, -7.0, -1.5, 0.5, 6.0, 7.0, 8.0, 10.0, 15.0, 19.0, 20.0]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_bessel_i_gradients_are_finite_and_right_up_to_the_series_limit(executor, dtype, name):
    # In float32 the 37-term series' backward used to meet inf * 0 (x^2/4 up to 100, raised to the
    # 36th power) and give NaN for 7 < |x| <= 20.
    with onnxnn.set_executor(executor):
        actual = _gradient(getattr(onnxnn.special, name), BESSEL_GRADIENT_POINTS, dtype)
    reference = [_bessel_derivatives(x)[name] for x in BESSEL_GRADIENT_POINTS]
    expected = np.array([value for value, _ in reference])
    scale = np.array([size for _, size in reference])
    eps = EPS32 if dtype is onnxnn.float32 else EPS64
    # Horner's 37 steps forward and back, and the input's own rounding (x I1(x) ~ x^2 relative error).
    bound = 200 * eps * scale
    assert np.all(np.isfinite(actual))
    assert np.all(np.abs(actual - expected) <= bound), np.abs(actual - expected) / scale


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
def test_bessel_i_derivatives_at_zero(executor, dtype):
    # I1(x) = x/2 + x^3/16 + ...: i1'(0) = i1e'(0) = 1/2 (it was 0: |x| * sign(x) has derivative 0 at 0).
    with onnxnn.set_executor(executor):
        for name in ("i1", "i1e"):
            np.testing.assert_array_equal(_gradient(getattr(onnxnn.special, name), [0.0], dtype), [0.5])
        np.testing.assert_array_equal(_gradient(onnxnn.special.i0, [0.0], dtype), [0.0])


def test_bessel_i_second_derivatives_at_zero():
    # I0 = 1 + x^2/4 + ...: I0''(0) = 1/2; I1 is odd: I1''(0) = 0. i0e'' at 0 is PyTorch's
    # (i0e' = i1e - sign(x) i0e, and sign' = 0): 1/2.
    np.testing.assert_array_equal(_second_derivative(onnxnn.special.i0, [0.0]), [0.5])
    np.testing.assert_array_equal(_second_derivative(onnxnn.special.i0e, [0.0]), [0.5])
    np.testing.assert_array_equal(_second_derivative(onnxnn.special.i1, [0.0]), [0.0])


# ---------------------------------------------------------------- erfcx, log_ndtr, ndtr

ERFCX_POINTS = [-3.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 1.9, 2.1, 5.0, 26.0, 26.7, 30.0, 100.0, 1e4]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_erfcx_gradient_at_zero_and_in_the_tail(executor):
    # erfcx'(0) = -2/sqrt(pi) (was 0: built from |x|); finite past x = 26.6 (was NaN: the unused
    # negative branch's exp(x^2) overflowed and leaked inf * 0 into the gradient).
    with onnxnn.set_executor(executor):
        actual = _gradient(onnxnn.special.erfcx, ERFCX_POINTS)
        single = _gradient(onnxnn.special.erfcx, [0.0, 30.0], onnxnn.float32)
    expected = np.array([_erfcx_derivative(x) for x in ERFCX_POINTS])
    # Below x = 2, erfcx is exp(x^2) (1 - erf(x)): 1 - erf loses up to 1 / erfc(2) ~ 200 times erf's
    # rounding, and the derivative's two terms cancel by up to 10 more (at x = 1.9).
    np.testing.assert_allclose(actual, expected, rtol=200 * 10 * 2 * EPS64, atol=0)
    np.testing.assert_allclose(single, [-TWO_OVER_SQRT_PI, _erfcx_derivative(30.0)], rtol=2 * EPS32)


LOG_NDTR_POINTS = [-1000.0, -50.0, -40.0, -5.0, -1.0, 0.0, 1.0, 5.0, 30.0, 40.0, 1000.0]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_log_ndtr_gradient_at_zero_and_in_both_tails(executor):
    with onnxnn.set_executor(executor):
        actual = _gradient(onnxnn.special.log_ndtr, LOG_NDTR_POINTS)
        single = _gradient(onnxnn.special.log_ndtr, [-40.0, 0.0, 40.0], onnxnn.float32)
    expected = np.array([_log_ndtr_derivative(x) for x in LOG_NDTR_POINTS])
    # t = x / sqrt 2 rounds (1 ulp); the erfcx formulas add a few hundred more.
    np.testing.assert_allclose(actual, expected, rtol=500 * EPS64, atol=0)
    np.testing.assert_allclose(single, [_log_ndtr_derivative(x) for x in (-40.0, 0.0, 40.0)], rtol=4 * EPS32)


NDTR_POINTS = [-37.0, -20.0, -9.0, -5.0, -4.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 3.0, 9.0, 40.0]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_ndtr_keeps_its_relative_accuracy_in_the_lower_tail(executor):
    # (1 + erf(x / sqrt 2)) / 2 rounded the tail away: ndtr(-9) was 0 in float64, ndtr(-5) 14 % off
    # in float32 (kernels); and onnxruntime has no float64 Erf.
    with onnxnn.set_executor(executor):
        double = onnxnn.special.ndtr(onnxnn.tensor(NDTR_POINTS, dtype=onnxnn.float64)).numpy()
        single = onnxnn.special.ndtr(onnxnn.tensor(NDTR_POINTS, dtype=onnxnn.float32)).numpy()
    x = np.array(NDTR_POINTS)
    expected = np.array([_ndtr(value) for value in NDTR_POINTS])
    # exp(-x^2 / 2) turns the rounding of x / sqrt 2 (and of the reference's own) into x^2 ulps.
    bound = 50 * EPS64 * (1 + x * x) * expected
    assert np.all(np.abs(double - expected) <= bound), np.abs(double - expected) / expected
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, expected.astype(np.float32), rtol=EPS32, atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_ndtr_gradient_is_the_normal_density(executor):
    points = [-30.0, -5.0, 0.0, 2.0]
    with onnxnn.set_executor(executor):
        actual = _gradient(onnxnn.special.ndtr, points)
    expected = [math.exp(-x * x / 2) / math.sqrt(2 * math.pi) for x in points]
    np.testing.assert_allclose(actual, expected, rtol=500 * EPS64 * (1 + 30.0**2), atol=0)


# ---------------------------------------------------------------- xlog1py


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("y", [2.5, 1.0, 0.0, -0.5])
def test_xlog1py_gradient_at_x_zero_is_log1p_y(executor, y):
    # d/dx x log1p(y) = log1p(y) for every x, 0 included (a where on the result cut it to 0).
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor([0.0, 1.5], dtype=onnxnn.float64, requires_grad=True)
        other = onnxnn.tensor([y, y], dtype=onnxnn.float64, requires_grad=True)
        onnxnn.special.xlog1py(x, other).sum().backward()
        # Read inside the block: backward only records, the gradients run when read.
        np.testing.assert_allclose(x.grad.numpy(), [math.log1p(y)] * 2, rtol=EPS64, atol=0)
        np.testing.assert_allclose(other.grad.numpy(), [0.0, 1.5 / (1 + y)], rtol=EPS64, atol=0)


def test_xlog1py_values_at_x_zero_and_with_python_numbers():
    x = onnxnn.tensor([0.0, 0.0, 0.0, 0.0, 2.0], dtype=onnxnn.float64, requires_grad=True)
    y = onnxnn.tensor([-1.0, -2.0, math.inf, math.nan, 1.0], dtype=onnxnn.float64)
    result = onnxnn.special.xlog1py(x, y)
    np.testing.assert_array_equal(result.detach().numpy(), [0.0, 0.0, 0.0, math.nan, 2 * math.log(2)])
    result.sum().backward()
    assert x.grad.numpy()[:2].tolist() == [0.0, 0.0]  # PyTorch masks d/dx where x == 0 and y <= -1
    # A Python number on either side, as PyTorch accepts (it raised AttributeError).
    np.testing.assert_allclose(
        onnxnn.special.xlog1py(onnxnn.tensor([0.0, 1.0]), 2.0).numpy(), [0.0, math.log(3)], rtol=EPS32
    )
    np.testing.assert_array_equal(onnxnn.special.xlog1py(0.0, onnxnn.tensor([0.0, 1.0])).numpy(), [0.0, 0.0])
    integers = onnxnn.special.xlog1py(onnxnn.tensor([0, 2]), onnxnn.tensor([1, 1]))
    assert integers.dtype is onnxnn.float32
    np.testing.assert_allclose(integers.numpy(), [0.0, 2 * math.log(2)], rtol=EPS32)


# (x, y, result dtype) beside xlogy: the operands promote as PyTorch's (an integer or bool pair computes
# in the default float dtype), and each converts from its own dtype, so a 0-d int64 300 beside an
# 8-bit tensor stays 300 rather than wrapping to 44 in the integer common dtype.
XLOG_OPERANDS = [
    ("int64_tensors", lambda: onnxnn.tensor([0, 1, 3]), lambda: onnxnn.tensor([1, 2, 3]), onnxnn.float32),
    (
        "bool_int32",
        lambda: onnxnn.tensor([False, True, True]),
        lambda: onnxnn.tensor([1, 2, 3], dtype=onnxnn.int32),
        onnxnn.float32,
    ),
    (
        "uint8_beside_0d_int64",
        lambda: onnxnn.tensor([0, 1, 200], dtype=onnxnn.uint8),
        lambda: onnxnn.tensor(300),
        onnxnn.float32,
    ),
    (
        "0d_int64_beside_int8",
        lambda: onnxnn.tensor(300),
        lambda: onnxnn.tensor([0, 1, 100], dtype=onnxnn.int8),
        onnxnn.float32,
    ),
    ("int_python_number", lambda: onnxnn.tensor([0, 1, 3]), lambda: 2, onnxnn.float32),
    (
        "float16_int64",
        lambda: onnxnn.tensor([0.0, 1.5, 3.0], dtype=onnxnn.float16),
        lambda: onnxnn.tensor([1, 2, 3]),
        onnxnn.float16,
    ),
    (
        "int64_float16",
        lambda: onnxnn.tensor([0, 1, 3]),
        lambda: onnxnn.tensor([1.0, 2.0, 3.0], dtype=onnxnn.float16),
        onnxnn.float16,
    ),
    (
        "float16_0d_float64",
        lambda: onnxnn.tensor([0.0, 1.5, 3.0], dtype=onnxnn.float16),
        lambda: onnxnn.tensor(0.5, dtype=onnxnn.float64),
        onnxnn.float16,
    ),
    (
        "int64_0d_float64",
        lambda: onnxnn.tensor([0, 1, 3]),
        lambda: onnxnn.tensor(0.5, dtype=onnxnn.float64),
        onnxnn.float64,
    ),
    ("bool_python_float", lambda: onnxnn.tensor([False, True, True]), lambda: 0.5, onnxnn.float32),
]


def _operand_values(operand) -> np.ndarray:
    return np.asarray(operand.numpy() if isinstance(operand, onnxnn.Tensor) else operand, dtype=np.float64)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, log_of", [("xlogy", np.log), ("xlog1py", np.log1p)])
@pytest.mark.parametrize("case_id, make_x, make_y, dtype", XLOG_OPERANDS, ids=[case[0] for case in XLOG_OPERANDS])
def test_xlogy_and_xlog1py_promote_integer_and_bool_operands_alike(
    case_id, make_x, make_y, dtype, name, log_of, executor
):
    x, y = make_x(), make_y()
    with onnxnn.set_executor(executor):
        result = getattr(onnxnn.special, name)(x, y)
        xs, ys = _operand_values(x), _operand_values(y)
        expected = np.where(xs == 0, 0.0, xs * log_of(ys))
        # float16 rounds its operands' log and the product: a few of its units in the last place
        eps = float(np.finfo(dtype.numpy_dtype).eps)
        np.testing.assert_allclose(result.double().numpy(), expected, rtol=4 * eps, atol=0)
    assert result.dtype is dtype


# PyTorch's kernels return a literal +0 where x == 0 (either zero; NaN where y is NaN), else the
# product x * log(y), whose zeros keep the IEEE sign: -2 * log(1) = -0, 2 * log1p(-0) = -0.
SIGNED_ZERO_X = [0.0, -0.0, 2.0, -2.0]
SIGNED_ZERO_Y = {
    "xlogy": [0.0, -0.0, 0.5, 1.0, 2.0, -1.0, math.inf, -math.inf],
    "xlog1py": [0.0, -0.0, -0.5, 0.5, -1.0, -2.0, math.inf],
}
LOG_OF = {"xlogy": np.log, "xlog1py": np.log1p}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64, onnxnn.float16], ids=str)
@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_and_xlog1py_zeros_have_pytorchs_signs(executor, dtype, name):
    x, y = (
        np.array(v, dtype=dtype.numpy_dtype) for v in zip(*[(a, b) for a in SIGNED_ZERO_X for b in SIGNED_ZERO_Y[name]])
    )
    with np.errstate(all="ignore"):
        expected = np.where(x == 0, 0.0, x * LOG_OF[name](y)).astype(dtype.numpy_dtype)
    with onnxnn.set_executor(executor):
        result = getattr(onnxnn.special, name)(onnxnn.tensor(x), onnxnn.tensor(y)).numpy()
    zero = expected == 0
    np.testing.assert_array_equal(result[zero], expected[zero])
    np.testing.assert_array_equal(np.signbit(result[zero]), np.signbit(expected[zero]), err_msg=f"{x[zero]}, {y[zero]}")


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_and_xlog1py_refuse_two_python_numbers(name):
    with pytest.raises(TypeError, match="expected at least one Tensor operand"):
        getattr(onnxnn.special, name)(2, 3)


# ---------------------------------------------------------------- gammaln, polygamma, gammainc


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64, onnxnn.float16], ids=str)
def test_gammaln_is_exactly_zero_at_one_and_two_and_keeps_its_gradient(executor, dtype):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor([1.0, 2.0], dtype=dtype, requires_grad=dtype is not onnxnn.float16)
        value = onnxnn.special.gammaln(x)
        assert value.detach().numpy().tolist() == [0.0, 0.0]
        if dtype is onnxnn.float16:
            return
        value.sum().backward()
    euler_gamma = 0.5772156649015329  # digamma(1) = -gamma, digamma(2) = 1 - gamma
    eps = EPS32 if dtype is onnxnn.float32 else EPS64
    np.testing.assert_allclose(x.grad.numpy(), [-euler_gamma, 1 - euler_gamma], rtol=100 * eps)


@pytest.mark.parametrize(
    "n",
    [
        1.5,
        1.0,
        True,
        # PyTorch takes a tensor for an int only when it is 0-d and of an integer dtype.
        onnxnn.tensor(1.0),
        onnxnn.tensor(True),
        onnxnn.tensor([1, 2]),
        onnxnn.tensor([1]),
    ],
    ids=["float", "whole_float", "bool", "float_tensor", "bool_tensor", "vector", "one_element_vector"],
)
def test_polygamma_refuses_a_non_integer_order(n):
    x = onnxnn.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="argument 'n' .* must be int"):
        onnxnn.special.polygamma(n, x)
    with pytest.raises(TypeError, match="argument 'n' .* must be int"):
        x.polygamma(n)


@pytest.mark.parametrize(
    "n", [np.int64(1), onnxnn.tensor(1), onnxnn.tensor(1, dtype=onnxnn.uint8)], ids=["numpy", "int64_0d", "uint8_0d"]
)
def test_polygamma_takes_numpy_integers_and_0d_integer_tensors(n):
    x = onnxnn.tensor([1.0], dtype=onnxnn.float64)
    np.testing.assert_allclose(onnxnn.special.polygamma(n, x).numpy(), [math.pi**2 / 6], rtol=1e-13)


def _polygamma_by_its_series(n: int, x: float) -> float:
    """``(-1)^(n+1) n! sum_k (x + k)^-(n+1)`` in log space, the sum by brute force (10^5 terms, and
    the integral of the rest), valid for every x off the poles; a float64 inf or 0 where it overflows
    or underflows."""
    s = n + 1
    if x > 0:
        k = np.arange(10**5, dtype=np.float64)
        log_terms = -s * np.log1p(k / x)  # (1 + k / x)^-s, at most 1
        rest = math.log(x / (s - 1)) + (1 - s) * math.log1p((10**5 - 0.5) / x)
        log_sum = -s * math.log(x) + np.logaddexp.reduce(np.append(log_terms, rest))
        sign = 1.0
    else:  # few terms matter: the nearest to 0 are at least 2^s the ones 10^4 away
        bases = x + np.arange(10**4, dtype=np.float64)
        nearest = np.abs(bases).min()
        total = math.fsum((bases / nearest) ** -float(s))  # each at most 1 in magnitude
        log_sum, sign = -s * math.log(nearest) + math.log(abs(total)), math.copysign(1.0, total)
    with np.errstate(over="ignore"):
        return float((-1) ** (n + 1) * sign * np.exp(math.lgamma(n + 1) + log_sum))


# Orders whose n! overflows float64, where PyTorch's kernel returns inf or NaN for most x: the values
# of the function (finite ones near x = n / e, inf below, 0 above), the poles' (-1)^(n+1) inf, NaN at NaN.
LARGE_ORDER_POINTS = {
    171: [0.5, 1.0, 50.0, 62.0, 64.0, 100.0, 1000.0, 1e6, -0.25, -1.5, -2.75],
    200: [0.5, 62.0, 73.5, 100.0, 400.0, 1e4, -0.5, -1.5, -2.5, -10.25],
    1000: [1.0, 368.0, 380.0, 500.0, 5000.0, -0.25, -3.75],
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n", LARGE_ORDER_POINTS)
def test_polygamma_of_a_large_order_is_the_functions_value(executor, n):
    points = LARGE_ORDER_POINTS[n]
    with onnxnn.set_executor(executor):
        actual = onnxnn.special.polygamma(n, onnxnn.tensor(points, dtype=onnxnn.float64)).numpy()
    expected = np.array([_polygamma_by_its_series(n, x) for x in points])
    assert np.isfinite(expected).sum() >= 3 and (expected == 0).any() and np.isinf(expected).any()
    exact = ~np.isfinite(expected) | (expected == 0)
    np.testing.assert_array_equal(actual[exact], expected[exact])
    np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))
    # lgamma(n + 1) and n log x, about n log n, keep their absolute rounding error in the logarithm
    np.testing.assert_allclose(actual[~exact], expected[~exact], rtol=n * math.log(n) * 4 * EPS64, atol=0)


@pytest.mark.parametrize("n", [171, 2**40, 2**63 - 1])
def test_polygamma_of_a_huge_order_takes_no_longer_and_keeps_its_edges(n):
    x = onnxnn.tensor([1.0, 1e30, 0.0, -3.0, math.inf, math.nan], dtype=onnxnn.float64)
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
    # n! / x^(n+1) overflows at 1 and underflows at 1e30 (n log n - n < (n + 1) log 1e30 up to n = 1e30)
    expected = [sign * math.inf, sign * 0.0, sign * math.inf, sign * math.inf, sign * 0.0, math.nan]
    actual = onnxnn.special.polygamma(n, x).numpy()
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(np.signbit(actual[:5]), np.signbit(expected[:5]))


def test_polygamma_refuses_an_order_past_int64_as_pytorch():
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        onnxnn.special.polygamma(2**63, onnxnn.tensor([1.0]))


def _polygamma_by_exact_terms(n: int, x: float) -> float:
    """``(-1)^(n+1) n! sum_k (x + k)^-(n+1)`` for ``n >= 1``: the terms with ``x + k < 40 - x``, where
    those of both signs cancel, summed exactly as fractions of the float x; the rest, all positive, with
    ``math.fsum`` up to ``k = 10^5`` and the integral of the remainder from ``x + 10^5 - 1/2`` (midpoint
    rule: off by ``(n + 1) / 24 * 10^(-5 (n + 2))``, below 1e-17 of every value tested)."""
    s = n + 1
    exact_terms = max(0, math.ceil(40 - 2 * x))
    exact = sum((1 / (Fraction(x) + k) ** s for k in range(exact_terms)), Fraction(0))
    bases = x + np.arange(exact_terms, 10**5, dtype=np.float64)
    tail = math.fsum(bases ** -float(s)) + (x + 10**5 - 0.5) ** (1 - s) / (s - 1)
    return float((-1) ** (n + 1) * math.factorial(n) * (exact + Fraction(tail)))


# (n, x) at negative x: the half-integers, where psi^(n)(x) is psi^(n)(1 - x) for even n (cot vanishes
# there, and the terms of the reflection with it: float cot(pi / 2) = 6e-17 made psi^(30)(-0.5) +4.5e26
# instead of -9.2e26), other points, and orders on both sides of n = 18, where the reflection's
# polynomial in cot gives way to its sum over the integers.
NEGATIVE_POLYGAMMA_POINTS = [
    (1, -0.5),
    (1, -3.25),
    (2, -0.5),
    (2, -20.5),
    (10, -0.5),
    (10, -5.5),
    (10, -20.5),
    (17, -0.375),
    (17, -2.5),
    (18, -0.5),
    (18, -7.25),
    (30, -0.5),
    (30, -5.5),
    (30, -20.5),
    (30, -0.25),
    (30, -3.999),
    (60, -0.4375),
    (60, -10.5),
    (100, -0.5),
    (100, -20.5),
    (100, -0.25),
    (160, -0.5),
    (160, -20.5),
]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_polygamma_at_negative_x_matches_its_series(executor):
    with onnxnn.set_executor(executor):
        actual = [
            float(onnxnn.polygamma(n, onnxnn.tensor([x], dtype=onnxnn.float64)).numpy()[0])
            for n, x in NEGATIVE_POLYGAMMA_POINTS
        ]
    wrong = []
    for (n, x), value in zip(NEGATIVE_POLYGAMMA_POINTS, actual):
        expected = _polygamma_by_exact_terms(n, x)
        # Up to n = 17 the polynomial in cot multiplies cot's few ulps by up to n + 1 (P_n ~ n! cot^(n+1));
        # from n = 18 nine powers (an ulp each) are summed; psi^(n)(1 - x) adds an ulp or two.
        rtol = (2 * (n + 1) if n < 18 else 4) * EPS64
        if not abs(value - expected) <= rtol * abs(expected):
            wrong.append(f"polygamma({n}, {x}) = {value!r}, expected {expected!r}")
    assert not wrong, "\n".join(wrong)


def test_float32_polygamma_is_the_float64_value_rounded():
    # float32 computes in float64: in float32 digamma(-0.5) was 1e-5 off, n! overflowed from n = 35 (NaN
    # of psi^(34)(-0.5), inf of psi^(40)(-5.5)) and the reflection's cancellation lost psi^(2)(-5.5).
    points = [(0, -0.5), (2, -5.5), (34, -0.5), (40, -5.5)]
    digamma_of_minus_half = -0.5772156649015329 - 2 * math.log(2) + 2  # psi(1/2) + 2, psi(1/2) = -gamma - 2 log 2
    for n, x in points:
        expected = digamma_of_minus_half if n == 0 else _polygamma_by_exact_terms(n, x)
        actual = float(onnxnn.polygamma(n, onnxnn.tensor([x], dtype=onnxnn.float32)).numpy()[0])
        # the float64 value's few ulps, then one rounding: within an ulp of float32
        assert abs(actual - expected) <= np.spacing(np.float32(abs(expected))), (n, x, actual, expected)


@pytest.mark.parametrize("function", [onnxnn.special.gammainc, onnxnn.special.gammaincc], ids=["gammainc", "gammaincc"])
def test_gammainc_refuses_python_numbers_and_integer_tensors(function):
    x = onnxnn.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor, not float"):
        function(2.0, x)
    with pytest.raises(TypeError, match=r"argument 'other' \(position 2\) must be Tensor, not int"):
        function(x, 3)
    with pytest.raises(NotImplementedError, match="not implemented"):
        function(onnxnn.tensor([1, 2]), onnxnn.tensor([1, 2]))
    # One floating operand is enough, as in PyTorch (the integer one is promoted).
    mixed = function(x, onnxnn.tensor([1, 2]))
    assert mixed.dtype is onnxnn.float32


# ---------------------------------------------------------------- the gamma family at poles and infinities

INF, TINY = math.inf, 1e-310  # a float64 subnormal: psi(x) ~ -1/x and psi^(n)(x) ~ (-1)^(n+1) n! / x^(n+1) overflow

# (function, points, derivatives): each derivative is the next function of the family at the point
# (lgamma' = digamma, digamma' = trigamma, psi^(n)' = psi^(n+1)), from its limit there.
GAMMA_FAMILY_POLE_GRADIENTS = {
    "lgamma": (onnxnn.lgamma, [0.0, -0.0, TINY, -TINY, INF], [-INF, INF, -INF, INF, INF]),
    "digamma": (onnxnn.digamma, [0.0, -0.0, -1.0, -2.0, TINY, -TINY, INF], [INF, INF, INF, INF, INF, INF, 0.0]),
    "trigamma": (lambda x: onnxnn.polygamma(1, x), [0.0, -1.0, TINY, -TINY], [-INF, -INF, -INF, INF]),
    "polygamma2": (lambda x: onnxnn.polygamma(2, x), [0.0, -3.0, TINY, -TINY], [INF, INF, INF, INF]),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", sorted(GAMMA_FAMILY_POLE_GRADIENTS))
def test_gamma_family_gradients_at_poles_and_infinity_are_the_next_functions_limits(executor, name):
    # The composites' own derivatives were NaN or 0 there (a reflection's inf - inf, a Where's branch).
    function, points, expected = GAMMA_FAMILY_POLE_GRADIENTS[name]
    with onnxnn.set_executor(executor):
        actual = _gradient(function, points)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_polygamma_limits_at_infinity_and_below_the_smallest_normal(executor):
    with onnxnn.set_executor(executor):
        trigamma = onnxnn.polygamma(1, onnxnn.tensor([INF, -TINY], dtype=onnxnn.float64)).numpy()
        tetragamma = onnxnn.polygamma(2, onnxnn.tensor([-TINY, TINY], dtype=onnxnn.float64)).numpy()
    # psi'(x) -> 0 as x -> inf (PyTorch's 0); n! / |x|^(n+1) overflows beside 0 from either side.
    np.testing.assert_array_equal(trigamma, [0.0, INF])
    np.testing.assert_array_equal(tetragamma, [INF, -INF])


@pytest.mark.parametrize("n, x", [(1, 1e155), (1, 1e200), (1, 1e300), (2, 1e100), (3, 1e100), (1, 1.7e308)])
def test_polygamma_keeps_its_leading_term_where_x_to_the_minus_n_minus_1_underflows(n, x):
    # psi^(n)(x) = (-1)^(n+1) [(n-1)! / x^n + n! / (2 x^(n+1)) + ...]: the second term is below rounding.
    expected = (-1) ** (n + 1) * math.factorial(n - 1) / x**n
    actual = float(onnxnn.polygamma(n, onnxnn.tensor([x], dtype=onnxnn.float64)).numpy()[0])
    assert actual == pytest.approx(expected, rel=4 * EPS64)


def test_gamma_family_second_derivatives_and_backward_names():
    # lgamma'' = trigamma: pi^2 / 6 at 1; digamma'' = psi^(2): -2 zeta(3) at 1.
    np.testing.assert_allclose(_second_derivative(onnxnn.lgamma, [1.0]), [math.pi**2 / 6], rtol=8 * EPS64)
    np.testing.assert_allclose(_second_derivative(onnxnn.digamma, [1.0]), [-2 * 1.2020569031595942], rtol=8 * EPS64)
    x = onnxnn.tensor([1.5], requires_grad=True)
    names = [type(f(x).grad_fn).__name__ for f in (onnxnn.lgamma, onnxnn.digamma, lambda t: onnxnn.polygamma(2, t))]
    assert names == ["LgammaBackward0", "DigammaBackward0", "PolygammaBackward0"]
