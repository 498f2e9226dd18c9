"""float64 sin, cos, lgamma, digamma and erfinv against references computed here in 60-digit decimal
arithmetic (never from onnxnn, and not from float64 functions, which are off by an ulp themselves
and by far more at lgamma's zeros), on both executors.

- sin/cos: onnxruntime's double kernels reduced their argument with an absolute error of about
  4e-16 (sin(pi) was 0, cos near its zeros 1e5 ulps off); the session lowering reduces by pi/2 in
  four parts, so the reduced argument keeps its relative accuracy. Its polynomial and quadrant sign
  add a rounding or two: 2 ulps.
- lgamma: Lanczos' sum had an absolute error of 1e-15, so next to the zeros at 1 and 2 the sign was
  wrong and the relative error up to 6e16 ulps. The series about 2 is 0 at 2 exactly; near 1 it is
  ``lgamma(x + 1) - log(x)``, two terms of about 0.42 (x - 1) and (x - 1) whose difference
  ``-0.577 (x - 1)`` is at most 2.4 times smaller: 4 ulps. Elsewhere on [0.5, 13) 8 ulps: near
  lgamma's minimum at 1.46 (-0.12) the same difference is of terms 0.28 and 0.41, 6 ulps measured.
- digamma of a negative subnormal was NaN (inf - inf in the reflection); it is -1/x, +inf.
- erfinv's Newton step near +-1 reads onnxnn's erfc: given an accurate erfc it is within 2 ulps
  (each step squares the relative error, and erfc's error e moves x by e / (2 x^2) of itself).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

import onnxnn

EXECUTORS = ["kernels", "onnxruntime"]
PRECISION = 60
PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863")


# ---------------------------------------------------------------- decimal references


def _sin_cos(x: float) -> tuple[float, float]:
    """``(sin(x), cos(x))`` correctly rounded (to 60 digits, then to float64)."""
    with localcontext() as context:
        context.prec = PRECISION
        value = Decimal(x)  # exact
        turns = (value / (PI / 2)).to_integral_value()
        r = value - turns * (PI / 2)  # |r| <= pi/4; x < 2^20 pi/2 loses no more than 7 of 60 digits
        term, sine, cosine_term, cosine, k = r, r, Decimal(1), Decimal(1), 1
        while abs(term) > Decimal(10) ** -(PRECISION + 5) or abs(cosine_term) > Decimal(10) ** -(PRECISION + 5):
            term = -term * r * r / ((2 * k) * (2 * k + 1))
            cosine_term = -cosine_term * r * r / ((2 * k - 1) * (2 * k))
            sine, cosine, k = sine + term, cosine + cosine_term, k + 1
        quadrant = int(turns) % 4
        s, c = [(sine, cosine), (cosine, -sine), (-sine, -cosine), (-cosine, sine)][quadrant]
        return float(s), float(c)


def _bernoulli(count: int) -> list[Fraction]:
    """B_2, B_4, ..., B_(2 count) from ``sum_k C(m + 1, k) B_k = 0``."""
    numbers = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        numbers.append(-sum((math.comb(m + 1, k) * numbers[k] for k in range(m)), Fraction(0)) / (m + 1))
    return [numbers[2 * j] for j in range(1, count + 1)]


_STIRLING = [b / (2 * k * (2 * k - 1)) for k, b in enumerate(_bernoulli(20), start=1)]


def _lgamma(x: float) -> float:
    """``log Gamma(x)`` for ``x > 0``: Stirling's series at ``y = x + n >= 40`` (20 terms, the next below
    1e-50) less ``log(x (x + 1) ... (x + n - 1))``, in 60 digits: the difference cancels at most 20 of them
    (lgamma(41) is 110, the smallest result here 1e-17); Gamma(1) = Gamma(2) = 1 exactly."""
    if x in (1.0, 2.0):
        return 0.0
    with localcontext() as context:
        context.prec = PRECISION
        value = Decimal(x)
        shift = max(0, 40 - int(x))
        y = value + shift
        series = (y - Decimal("0.5")) * y.ln() - y + (2 * PI).ln() / 2
        for k, coefficient in enumerate(_STIRLING, start=1):
            series += Decimal(coefficient.numerator) / Decimal(coefficient.denominator) / y ** (2 * k - 1)
        product = Decimal(1)
        for j in range(shift):
            product *= value + j
        return float(series - product.ln())


def _erf(x: Decimal) -> Decimal:
    """erf by its Taylor series (alternating; for x <= 6 the largest term is below 1e15: 45 digits left)."""
    term, total, n = x, x, 0
    while abs(term) > Decimal(10) ** -(PRECISION + 5):
        n += 1
        term = -term * x * x / n
        total += term / (2 * n + 1)
    return total * 2 / PI.sqrt()


def _erfinv(y: float) -> float:
    """The x with ``erf(x) = y``, by Newton's method in 60 digits from float64's guess."""
    with localcontext() as context:
        context.prec = PRECISION
        target, x = Decimal(y), Decimal(_start(y))
        for _ in range(60):
            step = (_erf(x) - target) / (2 / PI.sqrt() * (-x * x).exp())
            x -= step
            if abs(step) < abs(x) * Decimal(10) ** -(PRECISION - 10):
                break
        return float(x)


def _start(y: float) -> float:
    """A rough erfinv (bisection on math.erf), for the reference's Newton iteration to start from."""
    low, high = -6.0, 6.0
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if math.erf(middle) < y else (low, middle)
    return (low + high) / 2


# ---------------------------------------------------------------- helpers


def _ulps(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return np.abs(actual - expected) / np.spacing(np.abs(expected))


def _run(function, x: np.ndarray, executor: str) -> np.ndarray:
    with onnxnn.set_executor(executor):
        return np.asarray(function(onnxnn.tensor(x, dtype=onnxnn.float64)).numpy(), np.float64)


def _assert_within(function, x: np.ndarray, expected: np.ndarray, ulps: float, executor: str) -> None:
    actual = _run(function, x, executor)
    errors = _ulps(actual, expected)
    worst = int(np.argmax(errors))
    assert errors[worst] <= ulps, (
        f"x = {x[worst]!r}: {actual[worst]!r}, expected {expected[worst]!r} ({errors[worst]:.3g} ulps)"
    )


# ---------------------------------------------------------------- sin and cos

REDUCIBLE = 2.0**20 * math.pi / 2
TRIG_ULPS = 2


def _trig_points() -> np.ndarray:
    """The doubles nearest k pi/2 and their neighbours (the zeros of sin or cos), a dense stretch of
    [1, 20] where onnxruntime's kernel was worst, and scattered points up to 2^20 pi/2."""
    k = np.unique(np.concatenate([np.arange(1, 65), np.round(np.geomspace(65, 2**20 - 1, 120))]))
    nearest = k * (math.pi / 2)
    # 29 pi/2 (6e-19 off) and its doublings: the doubles closest to a multiple of pi/2 in the range
    closest = 45.553093477052 * 2.0 ** np.arange(15)
    rng = np.random.default_rng(0)
    points = np.concatenate(
        [
            nearest,
            np.nextafter(nearest, 0.0),
            np.nextafter(nearest, np.inf),
            closest,
            np.linspace(1.0, 20.0, 381),
            rng.uniform(0.0, REDUCIBLE, 200),
        ]
    )
    return np.concatenate([points, -points])


TRIG_POINTS = _trig_points()
TRIG_EXPECTED = np.array([_sin_cos(float(x)) for x in TRIG_POINTS])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, column", [("sin", 0), ("cos", 1)])
def test_float64_sin_and_cos_keep_their_relative_accuracy(name, column, executor):
    _assert_within(getattr(onnxnn, name), TRIG_POINTS, TRIG_EXPECTED[:, column], TRIG_ULPS, executor)


# x, sin(x), cos(x): signed zeros, the non-finite values, and a point beyond the exact reduction
# (onnxruntime's own kernel serves there: within 4 ulps, its relative error measured).
TRIG_EDGES = [
    (0.0, 0.0, 1.0),
    (-0.0, -0.0, 1.0),
    (5e-324, 5e-324, 1.0),
    (-5e-324, -5e-324, 1.0),
    (math.inf, math.nan, math.nan),
    (-math.inf, math.nan, math.nan),
    (math.nan, math.nan, math.nan),
    (1e22, *_sin_cos(1e22)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float64_sin_and_cos_at_the_edges(executor):
    x = np.array([row[0] for row in TRIG_EDGES])
    for function, column in ((onnxnn.sin, 1), (onnxnn.cos, 2)):
        expected = np.array([row[column] for row in TRIG_EDGES])
        actual = _run(function, x, executor)
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        np.testing.assert_array_equal(np.signbit(actual[:4]), np.signbit(expected[:4]))
        finite = ~np.isnan(expected)
        assert np.all(_ulps(actual[finite], expected[finite]) <= 4)


# ---------------------------------------------------------------- lgamma

_STEPS = 2.0 ** -np.arange(1, 53)
LGAMMA_NEAR_ZEROS = np.concatenate(
    [1.0 + _STEPS[1:], 1.0 - _STEPS[1:], 2.0 + _STEPS[1:], 2.0 - _STEPS[2:], 1 + np.linspace(-0.01, 0.01, 41)]
)
LGAMMA_NEAR_ZEROS = LGAMMA_NEAR_ZEROS[(LGAMMA_NEAR_ZEROS != 1.0) & (LGAMMA_NEAR_ZEROS != 2.0)]
LGAMMA_MODERATE = np.concatenate([np.linspace(0.5, 13.0, 401), np.linspace(1.4, 1.5, 41), [0.5, 2.5, 3.5, 12.99]])
LGAMMA_ZEROS_ULPS = 4
LGAMMA_ULPS = 8


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "x, ulps",
    [(LGAMMA_NEAR_ZEROS, LGAMMA_ZEROS_ULPS), (LGAMMA_MODERATE, LGAMMA_ULPS)],
    ids=["next-to-1-and-2", "0.5-to-13"],
)
def test_float64_lgamma_is_relatively_accurate(x, ulps, executor):
    expected = np.array([_lgamma(float(v)) for v in x])
    _assert_within(onnxnn.lgamma, x, expected, ulps, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float64_lgamma_is_exactly_zero_at_1_and_2(executor):
    actual = _run(onnxnn.lgamma, np.array([1.0, 2.0]), executor)
    assert actual.tolist() == [0.0, 0.0] and not np.signbit(actual).any()


# ---------------------------------------------------------------- digamma


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float64_digamma_of_tiny_inputs_is_minus_their_reciprocal(executor):
    # psi(x) = -1/x - gamma + O(x): -1/x to rounding below 1e-17; +-inf where it overflows.
    x = np.array([-5e-324, -1e-310, -2.2e-308, 5e-324, 1e-310, 0.0, -0.0])
    with np.errstate(divide="ignore", over="ignore"):
        expected = -1.0 / x
    np.testing.assert_array_equal(_run(onnxnn.digamma, x, executor), expected)


# ---------------------------------------------------------------- erfinv

ERFINV_POINTS = np.concatenate([np.linspace(0.9, 0.999, 34), 0.99 + np.linspace(-0.005, 0.005, 11)])
ERFINV_POINTS = np.concatenate([ERFINV_POINTS, -ERFINV_POINTS])
ERFINV_EXPECTED = np.array([_erfinv(float(y)) for y in ERFINV_POINTS])
ERFINV_ULPS = 2


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float64_erfinv_near_one_is_within_two_ulps(executor):
    """erfinv's tail step reads onnxnn's erfc (Cody's rational approximation below 2, a few ulps), so
    erfinv is within 2 ulps near +-0.99, where ``erf(x) - y`` lost 60-90 ulps."""
    _assert_within(onnxnn.erfinv, ERFINV_POINTS, ERFINV_EXPECTED, ERFINV_ULPS, executor)
