"""Special functions (``torch.special`` and the Tensor API's gamma functions and zeta), written as
standard ONNX arithmetic; the Bessel functions are bessel.py's, the error functions
error_functions.py's, the incomplete gamma functions incomplete_gamma.py's.

ONNX has no Lgamma, Digamma or Bessel op, so each function is a fixed formula of elementwise ops
(Add, Mul, Div, Log, Exp, Sin, Cos, Where, ...): it records, exports and runs on every executor like
any other arithmetic, and its gradient comes from the gradient rules of those ops (the derivative of
the approximation, which matches the derivative of the function to the same relative accuracy).
Branches are chosen with Where over *safe* operands (the unused branch sees a harmless value), so
an unused branch cannot put NaN or inf into the gradient.

Accuracy (float64, checked against float64 series in tests/runtime/test_special_functions.py):

- ``lgamma``: on [0.5, 13) the recurrence down to [1.5, 2.5) and the Taylor series of ``lgamma(2 + p)``
  (28 terms, ``c_k = (-1)^k (zeta(k) - 1) / k``), relatively accurate next to the zeros at 1 and 2
  (within 2 ulps there, 6 at lgamma's minimum near 1.46); Lanczos' approximation (g = 7, 9 terms;
  within 3 ulps) from 13; the reflection ``lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)`` below
  0.5 (whose two terms cancel next to lgamma's negative zeros: 2e3 ulps at -2.7476).
- ``digamma``/``polygamma(n, .)``: the recurrence shifts ``x`` up to ``10 + n`` and the asymptotic
  (Euler-Maclaurin) series with 10 Bernoulli terms finishes; its next term is below ``2 (s / 2 pi y)^20``
  ``< 1e-16`` relative there. Negative ``x`` uses the reflection formula, whose ``n``-th derivative of
  ``cot`` is a polynomial in ``cot`` built here once per ``n`` (up to n = 17), or the sum over the
  integers it stands for (from n = 18, see ``_reflection_sum``). Measured on (-1e6, 0) against mpmath
  (500 digits) and exact rational sums, the half-integers and their neighbours included: relative error
  at most about ``(n + 1) eps`` for 1 <= n <= 17 (15 eps at n = 14), 2 eps for 18 <= n <= 160;
  digamma's grows near its zeros with its condition number ``|x psi'(x) / psi(x)|`` (82 eps at
  x = -7.6886, where that is 9e3: the reflection's two terms cancel). Orders above 160
  (whose n! overflows float64 from 171) sum the series ``n! sum_k (x + k)^-(n+1)`` in log space instead:
  64 terms and an Euler-Maclaurin tail, whatever n; the logarithm keeps its absolute error (about n log
  n ulps). float32 inputs are computed in float64 (n! overflows float32 from n = 35).
- ``zeta(s, q)``: the direct sum up to ``q + N >= max(10, s + 10)`` (N read from the data), then the
  same Euler-Maclaurin series.

Float16 and bfloat16 inputs are computed in float32 and rounded once at the end, as PyTorch's CPU
kernels do (lgamma, digamma, polygamma, igamma and zeta compute in float64 for every
dtype); integer inputs become the default float dtype. Functions whose number of terms depends on the
data (igamma, zeta) read it when they are called, as ``histc`` does.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from ...ir import dtypes
from ._common import Tensor, scalar_constant
from . import comparison as _c
from . import elementwise as _e
from .derivative_formulas import derivative_formula, with_derivative_formula
from .opmath import widened

__all__ = [
    "lgamma",
    "digamma",
    "polygamma",
    "mvlgamma",
    "spherical_bessel_j0",
]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# Lanczos' coefficients for g = 7, n = 9 (Numerical Recipes / Godfrey): Gamma(z + 1) =
# sqrt(2 pi) t^(z + 1/2) e^(-t) A(z), t = z + g + 1/2, A(z) = c0 + sum c_i / (z + i).
_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)
_ASYMPTOTIC_TERMS = 10  # Bernoulli numbers B2 .. B20 in the digamma / Hurwitz zeta series
_SHIFT = 10  # the recurrence moves x to at least 10 + n before the asymptotic series


def _bernoulli_numbers(count: int) -> list[Fraction]:
    """B_2, B_4, ..., B_(2 count), from the recurrence sum_k C(m + 1, k) B_k = 0."""
    numbers = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        # A Fraction: typeshed types sum() from its int start and Fraction / int as possibly float.
        numbers.append(-sum(math.comb(m + 1, k) * numbers[k] for k in range(m)) / (m + 1))  # type: ignore[arg-type]
    return [numbers[2 * j] for j in range(1, count + 1)]


_BERNOULLI = _bernoulli_numbers(_ASYMPTOTIC_TERMS)


def _compute_dtype(input: Tensor) -> tuple[Tensor, dtypes.dtype]:
    """``input`` as the dtype the formula runs in, and the dtype of the result."""
    x = _e._floating(input)
    return widened(x), x.dtype


def float64_operands(name: str, input, other) -> tuple[Tensor, Tensor, dtypes.dtype]:
    """Both operands of a two-argument special function in float64, and its result dtype.

    The result dtype is PyTorch's promotion of the operands as they are (an int8 tensor beside a
    float64 0-d tensor gives float64, a float16 tensor beside an int8 one float16), the default
    float dtype where that is an integer or bool; converting each operand to a float first would
    promote int8 beside float16 to float32. Every value is then computed in float64.
    """
    tensors = [
        (operand._value.dtype, len(operand._value.shape)) for operand in (input, other) if isinstance(operand, Tensor)
    ]
    scalars = [operand for operand in (input, other) if not isinstance(operand, Tensor)]
    for scalar in scalars:
        if not isinstance(scalar, (bool, int, float, np.number, np.bool_)):
            raise TypeError(f"{name}(): unsupported operand type {type(scalar).__name__!r}")
    out = dtypes.result_type(tensors, scalars)
    if not out.is_floating_point:
        out = dtypes.get_default_dtype()
    device = next(operand._value.device for operand in (input, other) if isinstance(operand, Tensor))
    converted = [
        operand.to(dtypes.float64)
        if isinstance(operand, Tensor)
        else Tensor._from_value(scalar_constant(operand, dtypes.float64, device))
        for operand in (input, other)
    ]
    return converted[0], converted[1], out


def _horner(z: Tensor, coefficients) -> Tensor:
    """``sum c_k z^k`` for ``coefficients`` in increasing powers."""
    result = z * 0.0 + float(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        result = result * z + float(c)
    return result


def _pi_fraction(x: Tensor) -> Tensor:
    """``x - round(x)`` in [-1/2, 1/2] (exact): ``|sin(pi x)|`` and ``cot(pi x)`` read from it stay exact
    near the integers."""
    return x - x.detach().round()  # round's derivative is zero: no backward node for it


# ---------------------------------------------------------------- gamma family


def _lanczos_lgamma(x: Tensor) -> Tensor:
    """lgamma for ``x >= 0.5`` (used from 13 on, where its relative error is a few ulps)."""
    z = x - 1.0
    series = z * 0.0 + _LANCZOS[0]
    for i, c in enumerate(_LANCZOS[1:], start=1):
        series = series + c / (z + float(i))
    t = z + (_LANCZOS_G + 0.5)
    return (z + 0.5) * t.log() - t + series.log() + _HALF_LOG_2PI


# Euler's constant to 30 digits.
_EULER_GAMMA = Decimal("0.577215664901532860606512090082")
_LGAMMA_SERIES_TERMS = 28  # the next term is below 4^-29 / 29 = 1e-19 on |p| <= 1/2
_LGAMMA_SERIES_END = 13.0  # from here on, Lanczos' sum (within 3 ulps there)
_LGAMMA_MAX_SHIFT = 11  # 1.5 <= x - k < 2.5 for x < 13


def _zeta_minus_one(s: int) -> Decimal:
    """``zeta(s) - 1`` for an integer ``s >= 2``, to about 30 digits: the terms up to 19 and the
    Euler-Maclaurin tail ``zeta(s, 20)`` (its next term is below 1e-25 for every s here)."""
    with localcontext() as context:
        context.prec = 40
        start = 20
        total = sum((Decimal(n) ** -s for n in range(2, start)), Decimal(0))
        big = Decimal(start)
        tail = big ** (1 - s) / (s - 1) + big**-s / 2
        rising = Decimal(s)  # s (s + 1) ... (s + 2j - 2)
        for j, b in enumerate(_BERNOULLI, start=1):
            tail += (
                Decimal(b.numerator) / Decimal(b.denominator) / math.factorial(2 * j) * rising * big ** (-s - 2 * j + 1)
            )
            rising *= (s + 2 * j - 1) * (s + 2 * j)
        return total + tail


def _lgamma_series_coefficients() -> list[float]:
    """``c_k`` with ``lgamma(2 + p) = sum_k c_k p^k``: ``c_1 = 1 - gamma``, ``c_k = (-1)^k (zeta(k) - 1) / k``
    (the Taylor series of ``lgamma(1 + p) + log(1 + p)``, whose radius is 2)."""
    coefficients = [float(1 - _EULER_GAMMA)]
    for k in range(2, _LGAMMA_SERIES_TERMS + 1):
        coefficients.append(float((-1) ** k * _zeta_minus_one(k) / k))
    return coefficients


_LGAMMA_SERIES = _lgamma_series_coefficients()


def _moderate_lgamma(x: Tensor) -> Tensor:
    """lgamma for ``0.5 <= x < 13``, relatively accurate also next to its zeros at 1 and 2.

    The recurrence moves ``x`` to ``u = x - k`` in [1.5, 2.5), ``k = floor(x - 1.5)`` from -1 to 11:
    ``lgamma(x) = lgamma(2 + p) + log((x - 1) (x - 2) ... (x - k))`` with ``p = u - 2``, and
    ``- log(x)`` for ``k = -1``; every ``x - j`` and ``p`` is exact. ``lgamma(2 + p) = p sum c_k p^(k-1)``,
    the Taylor series about 2 (terms below ``4^-k / k``), is 0 at 2 exactly and relatively accurate
    near it; near 1 the log of x is ``x - 1`` and the sum about ``-gamma (x - 1)``, cancelling a factor
    2.4 at most. The product's roundings (k / 2 ulps) move its log by an ulp of lgamma at most.
    """
    shift = (x.detach() - 1.5).floor()  # the recurrence's integer steps; no gradient
    p = x - (shift + 2.0)
    series = _horner(p, _LGAMMA_SERIES) * p
    product = x * 0.0 + 1.0
    for j in range(1, _LGAMMA_MAX_SHIFT + 1):
        factor = x - float(j)
        product = product * _e.where(factor >= 1.5, factor, 1.0)
    below = x < 1.5
    logarithm = _e.where(below, x, product).log()
    return series + _e.where(below, logarithm.neg(), logarithm)


def _positive_lgamma(x: Tensor) -> Tensor:
    """lgamma for ``x >= 0.5`` (or inf, NaN): the series up to 13, Lanczos' sum beyond, each read at a
    safe operand where the other is used."""
    moderate = x < _LGAMMA_SERIES_END
    near = _moderate_lgamma(_e.where(moderate, x, 2.0))
    far = _lanczos_lgamma(_e.where(moderate, _LGAMMA_SERIES_END, x))
    return _e.where(moderate, near, far)


def lgamma(input: Tensor) -> Tensor:
    """The natural logarithm of the absolute value of the gamma function, elementwise.

    ``+inf`` at the poles (0, -1, -2, ...), as PyTorch's. Example::

        >>> onnxnn.lgamma(onnxnn.tensor([0.5, 3.0]))
        tensor([0.5724, 0.6931])
    """
    return with_derivative_formula("Lgamma", _lgamma(input.detach()), (input,))


def _lgamma(input: Tensor) -> Tensor:
    x, out = _compute_dtype(input)
    if x.dtype is dtypes.float32:
        # float32 is computed in float64 and rounded once: in float32 the sums would cancel to an
        # absolute error of a few 1e-7, a large relative one next to the zeros at 1 and 2.
        x = x.to(dtypes.float64)
    reflect = x < 0.5
    positive = _positive_lgamma(_e.where(reflect, 1.0 - x, x))
    # log(pi / |sin(pi x)|): |sin(pi x)| = sin(pi frac(x)); 0 at the poles gives +inf.
    sine = (_pi_fraction(x) * math.pi).sin().abs()
    safe_sine = _e.where(reflect, sine, 1.0)
    reflected = (math.pi / safe_sine).log() - positive
    result = _e.where(reflect, reflected, positive)
    # Where the formula breaks down: +inf at every pole and at +-inf (a pole far out would be
    # inf - inf), and -log|x| near zero, where pi / sin(pi x) overflows (lgamma(1e-45) is 103.3;
    # the next term, -0.577 x, is below rounding there).
    magnitude = x.abs()
    near_zero = _c.lt(magnitude, float(np.finfo(x.dtype.numpy_dtype).tiny) * 1e8)
    result = _e.where(near_zero, -magnitude.log(), result)
    infinite = _c.logical_or(_c.isinf(x), _c.logical_and(reflect, _c.eq(sine, 0)))
    return _e.where(infinite, float("inf"), result).to(out)


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma of dimension ``p``: ``sum_j lgamma(x - j / 2) + p (p - 1) / 4 log(pi)``."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x, out = _compute_dtype(input)
    total = lgamma(x)
    for j in range(1, p):
        total = total + lgamma(x - j / 2)
    return (total + p * (p - 1) / 4 * math.log(math.pi)).to(out)


def _digamma_asymptotic(y: Tensor) -> Tensor:
    """psi(y) for ``y >= 10``: log y - 1/(2y) - sum B_2k / (2k y^2k)."""
    inverse_square = 1.0 / (y * y)
    coefficients = [0.0] + [-float(b / (2 * k)) for k, b in enumerate(_BERNOULLI, start=1)]
    return y.log() - 0.5 / y + _horner(inverse_square, coefficients)


def _zeta_asymptotic(s: int, y: Tensor) -> Tensor:
    """The Hurwitz zeta ``zeta(s, y)`` for integer ``s >= 2`` and ``y >= 10 + s``: Euler-Maclaurin.

    Factored by ``y^(1 - s)``, the leading term's power: ``y^-s`` alone is subnormal from about
    ``y = 1e155`` for ``s = 2`` and loses the leading term's digits (trigamma(1e200) was 0, not 1e-200).
    """
    leading = y ** float(1 - s)
    inverse_square = 1.0 / (y * y)
    coefficients = [0.0]
    rising = Fraction(s)  # s (s + 1) ... (s + 2j - 2)
    for j, b in enumerate(_BERNOULLI, start=1):
        coefficients.append(float(b / math.factorial(2 * j) * rising))
        rising *= (s + 2 * j - 1) * (s + 2 * j)
    return leading * (1.0 / (s - 1) + 0.5 / y + _horner(inverse_square, coefficients))


def _cot_derivative_polynomial(n: int) -> list[int]:
    """Coefficients (increasing powers of c) of P_n with ``d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x))``."""
    poly = [0, 1]  # P_0(c) = c
    for _ in range(n):
        derivative = [k * poly[k] for k in range(1, len(poly))] + [0]
        # P_(k+1) = -(1 + c^2) P_k'
        next_poly = [0] * (len(derivative) + 2)
        for k, coefficient in enumerate(derivative):
            next_poly[k] -= coefficient
            next_poly[k + 2] -= coefficient
        poly = next_poly
    return poly


# pi to 50 digits: pi^(n+1) from the float pi would carry (n + 1) times its relative error of 4e-17.
_PI = Fraction("3.14159265358979323846264338327950288419716939937511")


def _pi_power(k: int) -> float:
    """``pi^k`` correctly rounded."""
    return float(_PI**k)


def _polygamma_nonnegative(n: int, x: Tensor) -> Tensor:
    """psi^(n)(x) for ``x >= 0`` by the recurrence up to ``10 + n`` and the asymptotic series."""
    bound = float(_SHIFT + n)
    shift = x < bound
    shifted = _e.where(shift, x + bound, x)
    if n == 0:
        # 1 / x for k = 0 (not 1 / (x + 0), which is +0 for x = -0.0): psi(-0.0) = +inf as PyTorch's.
        sum_terms = sum((1.0 / (x + float(k)) for k in range(1, _SHIFT)), start=1.0 / x)
        return _digamma_asymptotic(shifted) - _e.where(shift, sum_terms, 0.0)
    s = n + 1
    # The smallest terms first: added to the largest first, each would round to half an ulp of the sum
    # (psi^(30)(21.5), which is psi^(30)(-20.5), lost 6 ulps).
    sum_terms = sum(((x + float(k)) ** float(-s) for k in reversed(range(_SHIFT + n))), start=x * 0.0)
    zeta = _zeta_asymptotic(s, shifted) + _e.where(shift, sum_terms, 0.0)
    return zeta * float((-1) ** (n + 1) * math.factorial(n))


# Past this order the reflection's polynomial (from n = 164) and n! (from 171) overflow float64, and
# the work of the recurrence grows with n: higher orders are computed in log space (below).
_LARGEST_DIRECT_ORDER = 160
_LARGE_ORDER_TERMS = 64


def _log_zeta_large_order(s: int, a: Tensor) -> Tensor:
    """``log zeta(s, a)`` for ``a > 0`` and ``s > 161``: ``-s log a + log S``, ``S = sum_k (1 + k / a)^-s``.

    The first 64 terms of S directly; the rest, ``a^s zeta(s, a + 64)``, by the Euler-Maclaurin
    series where ``y = a + 64 >= s`` (its terms fall as ``(s / 2 pi y)^2j``), and 0 where y < s: there
    it is below ``(1 + 64 / a)^-s < e^-64`` of the first term. A fixed amount of work for every s.
    """
    terms = [((float(k) / a).log1p() * float(-s)).exp() for k in range(1, _LARGE_ORDER_TERMS)]
    partial = sum(terms, start=a * 0.0 + 1.0)
    y = a + float(_LARGE_ORDER_TERMS)
    converges = y >= float(s)
    inverse = 1.0 / _e.where(converges, y, float(s))  # a safe operand where the tail is dropped
    # zeta(s, y) = y^(1-s) / (s - 1) [1 + (s - 1) / 2y + sum_j B_2j / (2j)! (s - 1) s ... (s + 2j - 2) / y^2j]
    rising = inverse * float(s - 1)
    bracket = rising * 0.5 + 1.0
    for j, b in enumerate(_BERNOULLI, start=1):
        for factor in (s,) if j == 1 else (s + 2 * j - 3, s + 2 * j - 2):
            rising = rising * (inverse * float(factor))
        bracket = bracket + rising * float(b / math.factorial(2 * j))
    log_tail = (float(_LARGE_ORDER_TERMS) / a).log1p() * float(-s) - inverse.log() - math.log(s - 1) + bracket.log()
    tail = _e.where(converges, log_tail.exp(), 0.0)
    return a.log() * float(-s) + (partial + tail).log()


def _polygamma_large_order(n: int, x: Tensor) -> Tensor:
    """psi^(n) for ``n > 160`` from ``psi^(n)(x) = (-1)^(n+1) n! sum_k (x + k)^-(n+1)``, in log space
    (``lgamma(n + 1) + log |sum|``), so that an order of 2^40 costs what 161 does. PyTorch's kernel
    gives inf or NaN for most x at such orders; these are the function's values, inf where they
    overflow and 0 where they underflow. (The logarithm of the magnitude, about ``n log n``, keeps
    its absolute error: 2e-13 relative at n = 200, 1e-11 at 5000, some 3e-3 at 2^40.)

    For ``x < 0`` the sum splits at its sign change: with ``y = x - floor(x)`` in (0, 1) it is
    ``zeta(s, y) + (-1)^s zeta(s, 1 - y)`` less ``(-1)^s zeta(s, 1 - x)``, which is below 2^-s of the
    larger term, except where the two cancel (``y = 1/2``, ``s`` odd): the sum is ``zeta(s, 1 - x)`` there.
    """
    s = n + 1
    x64 = x.to(dtypes.float64)
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
    finite = _c.isfinite(x64)
    reflect = (x64 < 0) & finite
    y = x64 - x64.floor()
    pole = (x64 <= 0) & (y == 0)
    cancel = reflect & (y == 0.5) & (s % 2 == 1)
    positive_argument = _e.where(reflect & ~pole, y, _e.where(pole | (x64 == math.inf), 1.0, x64))  # NaN stays
    first = _log_zeta_large_order(s, positive_argument)
    second = _log_zeta_large_order(s, _e.where(cancel, 1.0 - x64, _e.where(reflect & ~pole, 1.0 - y, 1.0)))
    larger, gap = _e.maximum(first, second), (first - second).abs()
    if s % 2 == 0:
        reflected, reflected_sign = larger + (-gap).exp().log1p(), 1.0
    else:  # y < 1/2 leaves the first term the larger
        reflected = larger + (-(-gap).expm1()).log()
        reflected_sign = _e.where(y < 0.5, 1.0, -1.0)
    log_magnitude = _e.where(reflect, _e.where(cancel, second, reflected), first)
    log_magnitude = _e.where(x64 == math.inf, -math.inf, log_magnitude)  # psi^(n)(x) -> 0 as x -> inf
    value = (log_magnitude + math.lgamma(n + 1)).exp() * _e.where(reflect & ~cancel, reflected_sign, 1.0) * sign
    # NaN at -inf and NaN; at the poles (-1)^(n+1) inf, as PyTorch's for n >= 1.
    return _e.where(pole, sign * math.inf, value).to(x.dtype)


def _cot_derivative(n: int, fraction: Tensor) -> Tensor:
    """``(-1)^n pi^(n+1) P_n(cot pi f)``, ``n! sum_k (f + k)^-(n+1)`` over all integers k, for ``f`` in
    [-1/2, 1/2] and not 0."""
    # cot(pi f) to a few ulps relative everywhere: as cos / sin for |f| <= 1/4 and as +-tan(pi (1/2 - |f|))
    # beyond, where 1/2 - |f| is exact. cos(pi f) / sin(pi f) alone has an absolute error of an ulp near
    # the zero of cot at f = 1/2, which P_n, of order n! 2^n there, made psi^(30)(-0.5) = -9e26 +4.5e26.
    near_half = fraction.abs() > 0.25
    angle = _e.where(near_half, 0.5 - fraction.abs(), fraction) * math.pi
    sine, cosine = angle.sin(), angle.cos()
    ratio = _e.where(near_half, sine, cosine) / _e.where(near_half, cosine, sine)
    cot = _e.where(near_half & (fraction < 0), -ratio, ratio)
    return _horner(cot, _cot_derivative_polynomial(n)) * ((-1) ** n * _pi_power(n + 1))


# From this order the reflection's sum over the integers is summed directly (below).
_DIRECT_REFLECTION_ORDER = 18
_REFLECTION_TERMS = 4


def _reflection_sum(n: int, fraction: Tensor) -> Tensor:
    """``n! sum_k (f + k)^-(n+1)`` over all integers k, for ``f`` in [-1/2, 1/2] and not 0.

    P_n(cot) passes the relative error of cot, a few ulps, on multiplied by up to n + 1 (P_n ~ n! c^(n+1)
    for large c): 85 eps at n = 100. From n = 18 the terms ``|f + k| <= 4.5`` are summed instead (each
    an ulp; the rest is below ``4 * 9^-(n+1) < 1e-17`` of the sum), except where they cancel, at
    ``|f|`` within ``0.25 / (n + 1)`` of 1/2 for odd ``n + 1``: P_n is within 2 ulps there (cot is small
    and few of its terms count), the sum would lose ``1 / (1 - e^(-4 (n + 1) (1/2 - |f|)))`` times its
    rounding. Measured (against mpmath), either way within 2 ulps for every n from 18.
    """
    if n < _DIRECT_REFLECTION_ORDER:
        return _cot_derivative(n, fraction)
    s = n + 1
    terms = []
    for k in range(-_REFLECTION_TERMS, _REFLECTION_TERMS + 1):
        if k == 0:
            terms.append(fraction ** float(-s))
            continue
        # f + k rounds (at f = -0.4, f + 1 loses a bit of f), which the power multiplies by s: with its
        # rounding error (Fast2Sum: exact, |k| > |f|), (hi + lo)^-s = hi^-s (1 - s lo / hi) to (s eps)^2.
        high = fraction + float(k)
        low = fraction - (high - float(k))
        terms.append(high ** float(-s) * (1.0 - float(s) * low / high))
    direct = sum(terms[1:], start=terms[0]) * float(math.factorial(n))
    if s % 2 == 0:
        return direct  # every term positive
    summed = 0.5 - fraction.abs() >= 0.25 / s
    # 1/2 where the sum is used: P_n at a large cot would overflow there, and NaN its gradient.
    return _e.where(summed, direct, _cot_derivative(n, _e.where(summed, 0.5, fraction)))


def _float64_if_float32(x: Tensor) -> Tensor:
    """float32 ``x`` as float64: psi^(n) rounded to float32 once. In float32 the reflection's trig term and
    psi^(n)(1 - x) cancel to an error of 1e-5 relative (digamma(-0.5)), and n! overflows from n = 35,
    which made NaN of finite values (psi^(34)(-0.5) = -2.0e32) and inf of psi^(40)(-5.5) = -3.8e14."""
    return x.to(dtypes.float64) if x.dtype is dtypes.float32 else x


def _polygamma(n: int, x: Tensor) -> Tensor:
    """psi^(n) on the whole line: the reflection formula for ``x < 0``

    ``psi^(n)(x) = (-1)^(n+1) [(-1)^n pi^(n+1) P_n(cot pi x) - psi^(n)(1 - x)]``,
    with a pole at each non-positive integer: -inf at 0 for digamma (+inf at -0.0), NaN at the
    negative integers; ``(-1)^(n+1) inf`` for ``n >= 1``, PyTorch's values.
    """
    if n > _LARGEST_DIRECT_ORDER:
        return _polygamma_large_order(n, x)
    reflect = x < 0
    positive = _polygamma_nonnegative(n, _e.where(reflect, 1.0 - x, x))
    fraction = _pi_fraction(x)
    pole = reflect & (fraction == 0)
    trig = _reflection_sum(n, _e.where(pole | ~reflect, 0.5, fraction))  # a safe operand off the reflection
    reflected = (trig - positive) * float((-1) ** (n + 1))
    pole_value = math.nan if n == 0 else (-1) ** (n + 1) * math.inf
    result = _e.where(pole, pole_value, _e.where(reflect, reflected, positive))
    tiny = x.abs() < float(np.finfo(x.dtype.numpy_dtype).tiny)
    if n == 0:
        # Below the smallest normal, psi(x) is -1/x (-gamma is far below its rounding): the
        # reflection's pi cot(pi x) overflows there against psi(1 - x), inf - inf, where PyTorch
        # gives the limit, +inf for negative subnormals; -inf at 0 and +inf at -0.0 too.
        return _e.where(tiny, -1.0 / x, result)  # finite where unused: |1 / x| <= 4.5e307
    # There psi^(n) is n! / |x|^(n+1) > 1 / tiny^2 on the negative side, +inf, where the reflection
    # gives inf - inf (the positive side and the zeros have their values already).
    result = _e.where(tiny & (x < 0), math.inf, result)
    if n == 1:
        result = _e.where(x == math.inf, 0.0, result)  # PyTorch's trigamma; its higher orders give NaN
    return result


def digamma(input: Tensor) -> Tensor:
    """The logarithmic derivative of the gamma function, ``psi(x) = Gamma'(x) / Gamma(x)``.

    ``-inf`` at 0 and NaN at the negative integers, as PyTorch's. Example::

        >>> onnxnn.digamma(onnxnn.tensor([1.0]))
        tensor([-0.5772])
    """
    x, out = _compute_dtype(input.detach())
    return with_derivative_formula("Digamma", _polygamma(0, _float64_if_float32(x)).to(out), (input,))


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of the digamma function (``polygamma(0, x)`` is ``digamma(x)``).

    ``n`` is an integer, or a 0-d integer tensor (PyTorch's argument parser takes those as ints): a
    float (even 1.0), a bool, or any other tensor raises TypeError, as PyTorch's.
    """
    if isinstance(n, Tensor):
        if n.dtype.is_floating_point or n.dtype == dtypes.bool or n.dim() != 0:
            raise TypeError("polygamma(): argument 'n' (position 1) must be int, not Tensor")
        n = int(n.item())
    elif isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n >= 2**63:
        raise ValueError("Overflow when unpacking long long")  # PyTorch's argument parser: n is an int64
    x, out = _compute_dtype(input.detach())
    value = _polygamma(int(n), _float64_if_float32(x)).to(out)
    return with_derivative_formula("Polygamma", value, (input,), {"n": int(n)})


# PyTorch's derivative formulas: each function's derivative is the next polygamma of the input.
@derivative_formula("Lgamma", "LgammaBackward0")
def _lgamma_gradient(ctx, g):
    return None, g * digamma(ctx.input(1))


@derivative_formula("Digamma", "DigammaBackward0")
def _digamma_gradient(ctx, g):
    return None, g * polygamma(1, ctx.input(1))


@derivative_formula("Polygamma", "PolygammaBackward0")
def _polygamma_gradient(ctx, g):
    return None, g * polygamma(ctx.attrs["n"] + 1, ctx.input(1))


def spherical_bessel_j0(input: Tensor) -> Tensor:
    """The spherical Bessel function of the first kind of order 0, ``sin(x) / x`` (1 at 0)."""
    x = _e._floating(input)
    zero = x == 0
    safe = _e.where(zero, 1.0, x)
    # sin(x) / x tends to 0 at +-inf, where sin(inf) is NaN.
    return _e.where(zero, 1.0, _e.where(_c.isinf(x), 0.0, safe.sin() / safe))


def _finite_data(values: Tensor) -> np.ndarray:
    data = np.asarray(values._realized_data(), dtype=np.float64).reshape(-1)
    return data[np.isfinite(data)]


def zeta(input, other) -> Tensor:
    """The Hurwitz zeta function ``zeta(s, q) = sum_k (q + k)^(-s)`` (``input`` is s, ``other`` is q).

    The first ``N`` terms are summed directly (along a new axis) and the Euler-Maclaurin series
    finishes from ``q + N``; ``N`` makes ``q + N >= max(10, s + 10)`` for every element, read from
    the data. As PyTorch's: inf at ``s = 1`` and at non-positive integer ``q``, NaN for ``s < 1`` and for
    negative non-integer ``q`` with non-integer ``s``. Differentiable in ``q``.
    """
    s, q, out = float64_operands("zeta", input, other)
    if out in (dtypes.float16, dtypes.bfloat16):
        raise NotImplementedError(f"\"zeta_cpu\" not implemented for '{dtypes.scalar_type_name(out)}'")
    s = s.detach()
    shape = tuple(np.broadcast_shapes(tuple(s.shape), tuple(q.shape)))
    s, q = s.expand(*shape), q.expand(*shape)
    exponents, offsets = _finite_data(s), _finite_data(q)
    largest_s = float(exponents.max()) if exponents.size else 2.0
    smallest_q = float(offsets.min()) if offsets.size else 1.0
    count = int(math.ceil(max(10.0, largest_s + 10.0))) + max(0, int(math.ceil(-smallest_q)))
    convergent = s > 1.0
    safe_s = _e.where(convergent, s, 2.0)
    ks = Tensor._from_array(np.arange(count, dtype=np.float64), dtypes.float64, q.device)
    direct = _e.pow(q.unsqueeze(-1) + ks, safe_s.neg().unsqueeze(-1)).sum(-1)
    y = q + float(count)
    inverse_square = 1.0 / (y * y)
    correction = y * 0.0
    rising = safe_s  # s (s + 1) ... (s + 2j - 2)
    power = inverse_square
    for j, b in enumerate(_BERNOULLI, start=1):
        correction = correction + rising * power * float(b / math.factorial(2 * j))
        rising = rising * (safe_s + float(2 * j - 1)) * (safe_s + float(2 * j))
        power = power * inverse_square
    tail = _e.pow(y, safe_s.neg()) * (y / (safe_s - 1.0) + 0.5 + y * correction)
    value = direct + tail
    value = _e.where(s == 1.0, math.inf, _e.where(convergent, value, math.nan))
    return value.to(out)


__all__ += ["zeta"]
