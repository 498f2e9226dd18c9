"""The error functions: ``erfc``, ``erfcx`` and ``erfinv`` (``erf`` is ONNX's Erf, float64's lowered in
float64_decompositions.py), written as standard ONNX arithmetic in float64 and rounded once.

- ``erfc``: as the kernels' (W. J. Cody's CALERF, coefficients in ir/error_function_coefficients.py):
  ``1 - erf(a)`` by the series below a = 0.46875, where erfc is above 1/2 (no cancellation);
  ``e^(-a^2)`` times Cody's rational approximation of ``e^(a^2) erfc(a)`` below 2; the continued
  fraction above; ``2 - erfc(-x)`` for negative x. A few float64 ulps.
- ``erfcx``: ``e^(x^2) erfc(x)`` from the same pieces, without the exponential's overflow.
- ``erfinv``: Giles' single-precision approximation (an asymptotic inversion of erfc beyond its
  range), then two Newton steps in float64 (each squares the relative error: 5e-5 -> 1e-10 ->
  rounding); from ``|y| = 1/2`` the steps read ``erfc``, so erfinv near +-1 is as accurate as that.
"""

from __future__ import annotations

import math

from ...ir import dtypes
from ...ir.error_function_coefficients import MIDDLE_DENOMINATOR, MIDDLE_NUMERATOR
from ._common import Tensor
from . import comparison as _c
from . import division as _division
from . import elementwise as _e
from .special_functions import _horner

__all__ = ["erfc", "erfcx", "erfinv"]


def erfc(input: Tensor) -> Tensor:
    """The complementary error function ``1 - erf(x)``, relatively accurate in the tail (not ``1 - erf``,
    which is 0 from x = 3.8 in float32).

    Computed in float64 without the Erf op (onnxruntime has none for float64), then rounded once, as
    the kernels' erfc (W. J. Cody's CALERF): ``1 - erf(a)`` by the series below a = 0.46875 (erfc is
    above 1/2 there: no cancellation), ``e^(-a^2)`` times Cody's rational approximation of
    ``e^(a^2) erfc(a)`` below 2 (``1 - erf`` cancelled there: 327 ulps at 1.93), the continued
    fraction above; ``2 - erfc(-x)`` for negative x. A few float64 ulps; float32 and the half dtypes
    round it once.
    """
    x = _e._floating(input)
    result_dtype = x.dtype
    x = x.to(dtypes.float64)
    below = _c.lt(x, 0)
    # |x| through where, not abs: abs' is 0 at 0, which would make erfc'(0) 0.
    a = _e.where(below, _e.neg(x), x)
    small = _c.lt(a, _CODY_THRESHOLD)
    middle = _c.lt(a, 2.0)
    from_series = _e.sub(1.0, _erf_series(_e.where(small, a, 0.0)))
    near = _e.where(small, _CODY_THRESHOLD, _e.where(middle, a, _CODY_THRESHOLD))
    from_rational = _e.mul(_exp_of_minus_square(near), _cody_scaled_erfc(near))
    # erfc underflows long before 30; the bound keeps inf out (its exp(-a^2) split would be NaN).
    far = _e.where(middle, 2.0, _e.where(_c.gt(a, 30.0), 30.0, a))
    tail = _e.mul(_exp_of_minus_square(far), _erfc_scaled_tail(far))
    positive = _e.where(small, from_series, _e.where(middle, from_rational, tail))
    return _e.where(below, _e.sub(2.0, positive), positive).to(result_dtype)


_CODY_THRESHOLD = 0.46875


def _cody_scaled_erfc(a: Tensor) -> Tensor:
    """``e^(a^2) erfc(a)`` for float64 ``0.46875 <= a <= 4``: Cody's rational approximation P(a) / Q(a) of
    degree 8, relative error below 1e-18 (Math. Comp. 23, 1969), in the kernels' order of operations."""
    numerator_coefficients, denominator_coefficients = MIDDLE_NUMERATOR, MIDDLE_DENOMINATOR
    numerator = _e.mul(a, numerator_coefficients[8])
    denominator = _e.add(a, denominator_coefficients[0])
    for i in range(7):
        numerator = _e.mul(_e.add(numerator, numerator_coefficients[i]), a)
        if i:
            denominator = _e.add(denominator, denominator_coefficients[i])
        denominator = _e.mul(denominator, a)
    numerator = _e.add(numerator, numerator_coefficients[7])
    denominator = _e.add(denominator, denominator_coefficients[7])
    return _division.div(numerator, denominator)


def _exp_of_minus_square(a: Tensor) -> Tensor:
    """``exp(-a^2)`` for float64 ``0 <= a < 32`` to a few ulps (cephes' expx2): a^2 rounded would cost
    a^2 ulps (7e-14 at a = 26). ``a = head + rest`` with head on 26 bits, so head^2 is exact, and
    ``a^2 = head^2 + rest (a + head)``."""
    head = _division.div(_e.round(_e.mul(a.detach(), 2.0**21)), 2.0**21)
    return _e.mul(_e.exp(_e.neg(_e.mul(head, head))), _e.exp(_e.neg(_e.mul(_e.sub(a, head), _e.add(a, head)))))


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision.
_GILES_CENTRAL = (
    1.50140941,
    0.246640727,
    -0.00417768164,
    -0.00125372503,
    0.00021858087,
    -4.39150654e-06,
    -3.5233877e-06,
    3.43273939e-07,
    2.81022636e-08,
)
_GILES_TAIL = (
    2.83297682,
    1.00167406,
    0.00943887047,
    -0.0076224613,
    0.00573950773,
    -0.00367342844,
    0.00134934322,
    0.000100950558,
    -0.000200214257,
)
_ERF_SERIES_TERMS = 51  # sum (2a^2)^n / (2n+1)!! below a = 2: far past the terms that matter
_ERFC_FRACTION_TERMS = 60  # the continued fraction of erfc above a = 2 (relative error 2e-16 there)
_ERFINV_FAR = 16.0  # w = -log(1 - y^2) past which Giles' approximation is replaced by an asymptotic one


def _erf_series_coefficients() -> list[float]:
    coefficients, double_factorial = [], 1.0
    for n in range(_ERF_SERIES_TERMS):
        coefficients.append(1.0 / double_factorial)
        double_factorial *= 2 * n + 3
    return coefficients


_ERF_SERIES = _erf_series_coefficients()


def _erf_series(near: Tensor) -> Tensor:
    """``erf(a) = 2a / sqrt(pi) e^(-a^2) sum (2a^2)^n / (2n+1)!!`` for ``|a| < 2`` (positive terms, no
    cancellation; odd in a, so its derivative at 0 is right)."""
    return _horner(near * near * 2.0, _ERF_SERIES) * near * (near * near).neg().exp() * (2 / math.sqrt(math.pi))


def _erfc_scaled_tail(far: Tensor) -> Tensor:
    """``e^(a^2) erfc(a)`` for ``a >= 2`` by the continued fraction
    ``1 / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / ...)))`` (relative error 2e-16 there)."""
    fraction = far
    for k in range(_ERFC_FRACTION_TERMS, 0, -1):
        fraction = far + (k / 2) / fraction
    return 1.0 / (fraction * math.sqrt(math.pi))


def _erf_and_erfc_of_magnitude(a: Tensor) -> tuple[Tensor, Tensor]:
    """``(erf(a), erfc(|a|))`` in float64 without the Erf op (onnxruntime has no float64 kernel for it):
    the series below ``|a| = 2``, the continued fraction above, relatively accurate in the tail."""
    magnitude = a.abs()
    small = magnitude < 2.0
    series = _erf_series(_e.where(small, a, 0.0))
    far = _e.where(small, 2.0, magnitude)
    tail = (far * far).neg().exp() * _erfc_scaled_tail(far)
    sign = a.sign()
    return _e.where(small, series, (1.0 - tail) * sign), _e.where(small, 1.0 - series * sign, tail)


def erfcx(input: Tensor) -> Tensor:
    """The scaled complementary error function ``exp(x^2) erfc(x)``, without overflow for large x.

    Computed in float64 (then rounded once); ``erfcx(-a) = 2 exp(a^2) - erfcx(a)`` for negative x.
    """
    x = _e._floating(input)
    out = x.dtype
    x = x.to(dtypes.float64)
    below = x < 0
    # |x| through where, not abs: abs' is 0 at 0, which would make erfcx'(0) 0, not -2 / sqrt(pi).
    a = _e.where(below, x.neg(), x)
    small = a < 2.0
    near = _e.where(small, a, 0.0)
    scaled_near = (near * near).exp() * (1.0 - _erf_series(near))
    positive = _e.where(small, scaled_near, _erfc_scaled_tail(_e.where(small, 2.0, a)))
    # exp(a^2) overflows past a = 26.6; where the negative branch is unused it sees 0, so that its
    # inf cannot reach the gradient as inf * 0 = NaN.
    negative_a = _e.where(below, a, 0.0)
    negative = (negative_a * negative_a).exp() * 2.0 - positive
    return _e.where(below, negative, positive).to(out)


def _erfinv_start(y: Tensor) -> Tensor:
    """A first guess of ``erfinv(y)`` for ``-1 < y < 1``, relative error below 5e-5."""
    b = y.abs()
    t = 1.0 - b
    w = (t * (1.0 + b)).log().neg()
    central, tail = w < 5.0, w < _ERFINV_FAR
    central_p = _horner(_e.where(central, w, 5.0) - 2.5, _GILES_CENTRAL) * y  # odd in y, also at 0
    tail_p = _horner(_e.where(central, 5.0, _e.where(tail, w, 5.0)).sqrt() - 3.0, _GILES_TAIL) * b
    # Past Giles' single-precision range, invert erfc(a) ~ e^(-a^2) / (a sqrt(pi)) (1 - 1/(2a^2) + 3/(4a^4))
    # by fixed-point steps from a = sqrt(-log t).
    minus_log_t = _e.where(tail, 1.0, t).log().neg()
    far = minus_log_t.sqrt()
    for _ in range(3):
        inverse_square = 1.0 / (far * far)
        correction = (1.0 - 0.5 * inverse_square + 0.75 * inverse_square * inverse_square).log()
        far = (minus_log_t - (far * math.sqrt(math.pi)).log() + correction).sqrt()
    return _e.where(central, central_p, _e.where(tail, tail_p, far) * y.sign())


def erfinv(input: Tensor) -> Tensor:
    """The inverse error function: ``erf(erfinv(y)) = y`` on (-1, 1); +-inf at +-1, NaN outside.

    Computed in float64 whatever the dtype (then rounded once). Two Newton steps refine
    ``_erfinv_start``: on ``erf(x) = y`` below ``|y| = 1/2``; above, on ``log erfc(|x|) = log(1 - |y|)``
    (``1 - |y|`` is exact there and erfc keeps its relative accuracy in the tail, so the steps keep
    the digits near +-1 that ``erf(x) - y`` would lose; the logarithm makes the step converge from
    far out in the tail). Example::

        >>> onnxnn.erfinv(onnxnn.tensor([0.0, 0.5]))
        tensor([0.0000, 0.4769])
    """
    y = _e._floating(input)
    out = y.dtype
    y = y.to(dtypes.float64)
    inside = y.abs() < 1.0
    safe = _e.where(inside, y, 0.0)
    low = safe.abs() < 0.5
    safe_t = _e.where(low, 1.0, 1.0 - safe.abs())
    x = _erfinv_start(safe)
    for _ in range(2):
        erf, _ = _erf_and_erfc_of_magnitude(x)
        slope = (x * x).neg().exp() * (2 / math.sqrt(math.pi))
        near_step = (erf - safe) / slope
        # The tail step reads erfc at the iterate (|x| > 0.47 there) from onnxnn's erfc: its
        # relative error e moves x by about e / (2 x^2) of x, where erf(x) - y would lose
        # erf's absolute error over the small 1 - |y|.
        erfc_at_x = erfc(_e.where(low, 1.0, x.abs()))
        tail_step = (safe_t.log() - erfc_at_x.log()) * erfc_at_x / slope * x.sign()
        x = x - _e.where(low, near_step, tail_step)
    # +-inf at +-1; NaN beyond and for NaN (from the detached y: no inf * 0 in the gradient).
    edge = _e.where(y.abs() == 1.0, y.detach() * math.inf, math.nan)
    return _e.where(inside, x, edge).to(out)
