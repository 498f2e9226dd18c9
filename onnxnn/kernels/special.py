"""Special functions written with array operations only, so they run on numpy and CuPy alike.

``erf`` on float64 follows W. J. Cody, "Rational Chebyshev approximations for the error
function" (Math. Comp. 1969), as in his SPECFUN routine CALERF: three rational approximations on
|x| <= 0.46875, 0.46875 < |x| <= 4 and |x| > 4, accurate to float64 rounding. On float32 (and
the half types, which arrive widened) it uses the single rational approximation on [-4, 4] of
Eigen and XLA, accurate to a few float32 ulps and branch-free, so it costs about a dozen array
passes. numpy has no erf and onnxnn takes no scipy dependency; a Python-level ``math.erf`` per
element would be orders of magnitude slower.
"""

from __future__ import annotations

import numpy as np

from ..ir.error_function_coefficients import (
    LARGE_DENOMINATOR,
    LARGE_NUMERATOR,
    MIDDLE_DENOMINATOR,
    MIDDLE_NUMERATOR,
    SMALL_DENOMINATOR,
    SMALL_NUMERATOR,
)

__all__ = ["erf", "erfc"]

_A, _B = SMALL_NUMERATOR, SMALL_DENOMINATOR
_C, _D = MIDDLE_NUMERATOR, MIDDLE_DENOMINATOR
_P, _Q = LARGE_NUMERATOR, LARGE_DENOMINATOR
_RSQRTPI = 0.56418958354775628695
_THRESHOLD = 0.46875
# Beyond this |x|, erfc(x) underflows float64 and erf(x) is exactly +-1.
_ERFC_UNDERFLOW = 26.543


def _rational(p, q, z, degree: int):
    """Cody's nested evaluation of one range's numerator and denominator polynomials in ``z``.

    Returns them before the division, which each range finishes in its own way, in the order of
    operations of Cody's code (so results are bitwise the same as writing each range out).
    """
    numerator = p[degree + 1] * z
    denominator = z + q[0]
    for i in range(degree):
        numerator += p[i]
        numerator *= z
        if i:
            denominator += q[i]
        denominator *= z
    numerator += p[degree]
    denominator += q[degree]
    return numerator, denominator


def _small(xp, x):
    """erf on |x| <= 0.46875."""
    numerator, denominator = _rational(_A, _B, x * x, 3)
    numerator *= x
    numerator /= denominator
    return numerator


def _scaled_erfc(xp, y):
    """erfc(y) * exp(y*y) for y > 0.46875 (Cody's second and third intervals)."""
    result = xp.empty_like(y)
    middle = y <= 4.0
    numerator, denominator = _rational(_C, _D, y[middle], 7)
    numerator /= denominator
    result[middle] = numerator
    large = ~middle
    yl = y[large]
    inverse_square = 1.0 / (yl * yl)
    numerator, denominator = _rational(_P, _Q, inverse_square, 4)
    numerator *= inverse_square
    numerator /= denominator
    result[large] = (_RSQRTPI - numerator) / yl
    return result


# Eigen's float32 erf: x * alpha(x^2) / beta(x^2) on [-4, 4], where erf is +-1 in float32 beyond.
_ALPHA = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_BETA = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


def _erf_float32(xp, x):
    kind = np.float32
    shape = x.shape  # computed flat: numpy's arithmetic on a 0-d array gives scalars, which ``out=`` refuses
    clamped = xp.clip(x.astype(kind, copy=False).reshape(-1), kind(-4.0), kind(4.0))
    square = clamped * clamped
    numerator = square * kind(_ALPHA[0])
    for coefficient in _ALPHA[1:-1]:
        numerator += kind(coefficient)
        numerator *= square
    numerator += kind(_ALPHA[-1])
    numerator *= clamped
    denominator = square * kind(_BETA[0])
    for coefficient in _BETA[1:-1]:
        denominator += kind(coefficient)
        denominator *= square
    denominator += kind(_BETA[-1])
    numerator /= denominator
    return xp.clip(numerator, kind(-1.0), kind(1.0), out=numerator).reshape(shape)


def erf(xp, x):
    """The error function of a floating-point array (float64-accurate on float64 input).

    Example::

        >>> erf(numpy, numpy.array([0.0, 0.5, 3.0]))
        array([0.        , 0.52049988, 0.99997791])
    """
    out_dtype = x.dtype
    if out_dtype != np.float64:
        return _erf_float32(xp, x).astype(out_dtype, copy=False)
    values = x.reshape(-1)
    result = xp.empty_like(values)
    magnitude = xp.abs(values)
    small = magnitude <= _THRESHOLD
    result[small] = _small(xp, values[small])
    rest = ~small & ~xp.isnan(values)
    erfc = _erfc_of_magnitude(xp, magnitude[rest])
    result[rest] = xp.where(values[rest] < 0, erfc - 1.0, 1.0 - erfc)
    result[xp.isnan(values)] = np.nan
    return result.reshape(x.shape).astype(out_dtype, copy=False)


def _erfc_of_magnitude(xp, magnitude):
    """erfc(y) for float64 y > 0.46875, relatively accurate (Cody's second and third intervals)."""
    y = xp.minimum(magnitude, _ERFC_UNDERFLOW)
    # exp(-y*y) is split as exp(-t*t) * exp(-(y-t)(y+t)) with t = y rounded down to 1/16, which keeps
    # the product accurate where y*y itself would lose the low bits (Cody's trick).
    rounded = xp.floor(y * 16.0) / 16.0
    delta = (y - rounded) * (y + rounded)
    rounded *= rounded
    erfc = xp.exp(-rounded)
    erfc *= xp.exp(-delta)
    erfc *= _scaled_erfc(xp, y)
    erfc[magnitude >= _ERFC_UNDERFLOW] = 0.0
    return erfc


def erfc(xp, x):
    """The complementary error function of a float64 array, relatively accurate (Cody's CALERF).

    ``1 - erf(x)`` for |x| <= 0.46875 (erfc there is above 1/2: no cancellation), Cody's rational
    approximations of erfc itself beyond, ``2 - erfc(-x)`` for x < -0.46875.

    Example::

        >>> erfc(numpy, numpy.array([0.0, 2.0, 10.0]))
        array([1.00000000e+00, 4.67773498e-03, 2.08848758e-45])
    """
    values = x.astype(np.float64, copy=False).reshape(-1)
    result = xp.empty_like(values)
    magnitude = xp.abs(values)
    small = magnitude <= _THRESHOLD
    result[small] = 1.0 - _small(xp, values[small])
    rest = ~small & ~xp.isnan(values)
    tail = _erfc_of_magnitude(xp, magnitude[rest])
    result[rest] = xp.where(values[rest] < 0, 2.0 - tail, tail)
    result[xp.isnan(values)] = np.nan
    return result.reshape(x.shape)
