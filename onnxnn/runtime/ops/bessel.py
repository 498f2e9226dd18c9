"""Bessel functions of ``torch.special``, as standard ONNX arithmetic: the modified first kind ``I_0``,
``I_1`` with their scaled forms ``e^-|x| I_nu(x)``, the first kind ``J_0``, ``J_1`` (see ``_bessel_j``) and the
modified second kind ``K_0``, ``K_1`` with their scaled forms ``e^x K_nu(x)``.

For ``I``: the power series (36 terms, every term positive) for ``|x| <= 20``, the asymptotic expansion
(34 terms, next term < 1e-18 relative) beyond.

For ``K``, three regions, each accurate to float64's rounding (checked against an independent fine
trapezoid and the Wronskian in tests/runtime/test_special_namespace.py):

- ``x <= 2``: the series ``K_0 = -(log(x/2) + gamma) I_0(x) + sum_k (x^2/4)^k H_k / (k!)^2`` and
  ``K_1 = 1/x + log(x/2) I_1(x) - x/4 sum_k (psi(k+1) + psi(k+2)) (x^2/4)^k / (k! (k+1)!)``
  (30 terms; the cancellation at x = 2 costs one digit);
- ``2 < x <= 20``: the integral ``e^x K_nu(x) = int_0^inf exp(-2x sinh^2(t/2)) cosh(nu t) dt`` by the
  trapezoidal rule with step 0.1 up to t = 4 (the integrand is analytic in a strip, so the rule's
  error falls like ``exp(-2 pi^2 / (x h^2))``, and ``e^(-2x sinh^2 2) < e^-52`` at the cut);
- ``x > 20``: the asymptotic expansion ``sqrt(pi / 2x) e^-x sum_k a_k(nu) / x^k`` (34 terms).

``K(0) = inf`` and negative x give NaN, as PyTorch's.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ._common import Tensor
from . import elementwise as _e
from .special_functions import _compute_dtype, _horner

__all__ = [
    "i0",
    "i0e",
    "i1",
    "i1e",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
]

_BESSEL_SPLIT = 20.0
_BESSEL_SERIES_TERMS = 37
_BESSEL_ASYMPTOTIC_TERMS = 35
_BESSEL_SERIES_SCALE = _BESSEL_SPLIT**2 / 4  # the largest x^2 / 4 the series sees


def _bessel_series_coefficients(order: int) -> list[float]:
    """``I_order(x) = (x/2)^order sum_k c_k w^k`` with ``w = x^2 / 400``, ``c_k = 100^k / (k! (k + order)!)``.

    The series variable is scaled by its largest value on the series' range (``x = 20``), so that
    ``w <= 1``: with ``x^2 / 4`` itself (up to 100), the backward of Horner's scheme multiplies the
    incoming gradient by it 36 times (``100^36`` is inf in float32) and meets partial sums that
    underflow to 0, giving inf * 0 = NaN. The scaled coefficients stay between 1e-12 and 1e7.
    """
    scale = _BESSEL_SERIES_SCALE
    return [scale**k / (math.factorial(k) * math.factorial(k + order)) for k in range(_BESSEL_SERIES_TERMS)]


def _bessel_asymptotic_coefficients(order: int) -> list[float]:
    """``I_order(x) e^(-x) sqrt(2 pi x) ~ sum_k c_k x^(-k)``, with
    ``c_k = (-1)^k prod_j (4 order^2 - (2j-1)^2) / (k! 8^k)``."""
    mu, coefficient, coefficients = 4 * order * order, 1.0, [1.0]
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        coefficient *= -(mu - (2 * k - 1) ** 2) / (8 * k)
        coefficients.append(coefficient)
    return coefficients


_BESSEL_SERIES = {order: _bessel_series_coefficients(order) for order in (0, 1)}
_BESSEL_ASYMPTOTIC = {order: _bessel_asymptotic_coefficients(order) for order in (0, 1)}


def _bessel_i_series(order: int, x: Tensor) -> Tensor:
    """``I_order(x)`` by its power series, for ``|x| <= 20``: even in x, odd for order 1 (written in x
    itself, not in ``|x|`` times ``sign(x)``, whose derivatives at 0 would make ``i1'(0)`` and
    ``i0''(0)`` 0, not 1/2)."""
    series = _horner(x * x * (0.25 / _BESSEL_SERIES_SCALE), _BESSEL_SERIES[order])
    return series * x * 0.5 if order else series


def _bessel_i(order: int, input: Tensor, scaled: bool) -> Tensor:
    """``I_order(x)``, or ``e^(-|x|) I_order(x)`` when ``scaled``; odd in x for order 1."""
    x, out = _compute_dtype(input)
    a = x.abs()
    small = a <= _BESSEL_SPLIT
    series = _bessel_i_series(order, _e.where(small, x, 0.0))
    far = _e.where(small, _BESSEL_SPLIT, a)
    # 1 / sqrt(2 pi) / sqrt(far), not 1 / sqrt(2 pi far): that product overflows for a huge far (1e38
    # in float32), and 0 * e^far would then be NaN where I_order is inf.
    asymptotic = _horner(1.0 / far, _BESSEL_ASYMPTOTIC[order]) / far.sqrt() * (2 * math.pi) ** -0.5
    if order:
        asymptotic = asymptotic * x.sign()
    if scaled:
        value = _e.where(small, series * _e.where(small, a, 0.0).neg().exp(), asymptotic)
    else:
        # e^far / sqrt(2 pi far) overflows (to inf, as I_order does) past about 710 in float64.
        value = _e.where(small, series, asymptotic * far.exp())
    return value.to(out)


def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 0, elementwise.

    Example::

        >>> onnxnn.i0(onnxnn.tensor([0.0, 1.0]))
        tensor([1.0000, 1.2661])
    """
    return _bessel_i(0, input, scaled=False)


def i0e(input: Tensor) -> Tensor:
    """The exponentially scaled ``i0``: ``exp(-|x|) i0(x)``."""
    return _bessel_i(0, input, scaled=True)


def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 1, elementwise."""
    return _bessel_i(1, input, scaled=False)


def i1e(input: Tensor) -> Tensor:
    """The exponentially scaled ``i1``: ``exp(-|x|) i1(x)``."""
    return _bessel_i(1, input, scaled=True)


_EULER_GAMMA = 0.5772156649015329
_SERIES_TERMS = 30
_STEP, _NODES = 0.1, 41  # trapezoidal nodes t = 0, 0.1, ..., 4.0


def _series_k(order: int, x: Tensor) -> Tensor:
    z = x * x * 0.25
    log_half = (x * 0.5).log()
    if order == 0:
        harmonic, coefficients = 0.0, [0.0]
        for k in range(1, _SERIES_TERMS):
            harmonic += 1.0 / k
            coefficients.append(harmonic / math.factorial(k) ** 2)
        i0 = _bessel_i_series(0, x)
        return _horner(z, coefficients) - (log_half + _EULER_GAMMA) * i0
    coefficients = []
    for k in range(_SERIES_TERMS):
        psi_sum = -2 * _EULER_GAMMA + 2 * sum(1.0 / j for j in range(1, k + 1)) + 1.0 / (k + 1)
        coefficients.append(psi_sum / (math.factorial(k) * math.factorial(k + 1)))
    i1 = _bessel_i_series(1, x)
    return 1.0 / x + log_half * i1 - x * 0.25 * _horner(z, coefficients)


def _scaled_trapezoid_k(order: int, x: Tensor) -> Tensor:
    nodes = np.arange(_NODES) * _STEP
    weights = np.full(_NODES, _STEP)
    weights[0] = _STEP / 2
    shape = Tensor._from_array(2 * np.sinh(nodes / 2) ** 2, dtypes.float64, x.device)
    weighted = Tensor._from_array(weights * np.cosh(order * nodes), dtypes.float64, x.device)
    return ((x.unsqueeze(-1) * shape).neg().exp() * weighted).sum(-1)


def _scaled_asymptotic_k(order: int, x: Tensor) -> Tensor:
    # K's expansion has I's coefficients without their alternating sign: a_k = (-1)^k c_k.
    coefficients = [(-1) ** k * c for k, c in enumerate(_BESSEL_ASYMPTOTIC[order])]
    return _horner(1.0 / x, coefficients) * (x.reciprocal() * (math.pi / 2)).sqrt()


def _bessel_k(order: int, input: Tensor, scaled: bool) -> Tensor:
    """``K_order(x)``, or ``e^x K_order(x)`` when ``scaled``, in float64 (then rounded once)."""
    x = _e._floating(input)
    out = x.dtype
    x = x.to(dtypes.float64)
    small, middle = x <= 2.0, x <= 20.0
    near = _e.where(small, x, 1.0)  # each region's formula sees a point it handles where unused
    mid = _e.where(small | ~middle, 10.0, x)
    far = _e.where(middle, 30.0, x)
    series = _series_k(order, near)
    middle_value = _scaled_trapezoid_k(order, mid)
    far_value = _scaled_asymptotic_k(order, far)
    if scaled:
        series = series * near.exp()
    else:
        middle_value = middle_value * mid.neg().exp()
        far_value = far_value * far.neg().exp()
    value = _e.where(small, series, _e.where(middle, middle_value, far_value))
    edge = _e.where(x == 0, math.inf, math.nan)
    return _e.where(x > 0, value, edge).to(out)


def modified_bessel_k0(input: Tensor) -> Tensor:
    """The modified Bessel function of the second kind of order 0."""
    return _bessel_k(0, input, scaled=False)


def modified_bessel_k1(input: Tensor) -> Tensor:
    """The modified Bessel function of the second kind of order 1."""
    return _bessel_k(1, input, scaled=False)


def scaled_modified_bessel_k0(input: Tensor) -> Tensor:
    """``e^x K_0(x)``, without underflow for large x."""
    return _bessel_k(0, input, scaled=True)


def scaled_modified_bessel_k1(input: Tensor) -> Tensor:
    """``e^x K_1(x)``, without underflow for large x."""
    return _bessel_k(1, input, scaled=True)


# ---------------------------------------------------------------- J_0, J_1 (first kind)

_J_NODES = 64  # trapezoidal intervals on [0, pi] of Bessel's integral
_J_SPLIT = 25.0
_HANKEL_TERMS = 40


def _hankel_coefficients(order: int) -> list[float]:
    """``a_k = prod_j (4 order^2 - (2j - 1)^2) / (k! 8^k)`` of Hankel's expansion."""
    mu, coefficient, coefficients = 4 * order * order, 1.0, [1.0]
    for k in range(1, _HANKEL_TERMS):
        coefficient *= (mu - (2 * k - 1) ** 2) / (8 * k)
        coefficients.append(coefficient)
    return coefficients


_HANKEL = {order: _hankel_coefficients(order) for order in (0, 1)}


def _bessel_j(order: int, input: Tensor) -> Tensor:
    """``J_order(x)``: Bessel's integral ``(1/pi) int_0^pi cos(order t - x sin t) dt`` by the trapezoidal
    rule for ``|x| <= 25`` (a periodic analytic integrand: the error is about ``J_128(x)``, below 1e-70),
    Hankel's expansion ``sqrt(2 / (pi x)) (P cos chi - Q sin chi)`` beyond, with ``cos chi`` and
    ``sin chi`` formed from ``cos x`` and ``sin x`` so the phase keeps its digits for large x."""
    x = _e._floating(input)
    out = x.dtype
    x = x.to(dtypes.float64)
    a = x.abs()
    small = a <= _J_SPLIT
    near = _e.where(small, a, 0.0)
    angles = np.arange(_J_NODES + 1) * (math.pi / _J_NODES)
    weights = np.full(_J_NODES + 1, 1.0 / _J_NODES)
    weights[[0, -1]] /= 2
    sines = Tensor._from_array(np.sin(angles), dtypes.float64, x.device)
    phases = Tensor._from_array(order * angles, dtypes.float64, x.device)
    weighted = Tensor._from_array(weights, dtypes.float64, x.device)
    integral = ((phases - near.unsqueeze(-1) * sines).cos() * weighted).sum(-1)
    far = _e.where(small, 2 * _J_SPLIT, a)
    inverse = 1.0 / far
    even = [c * (-1) ** (k // 2) if k % 2 == 0 else 0.0 for k, c in enumerate(_HANKEL[order])]
    odd = [c * (-1) ** (k // 2) if k % 2 == 1 else 0.0 for k, c in enumerate(_HANKEL[order])]
    p, q = _horner(inverse, even), _horner(inverse, odd)
    cos_x, sin_x = far.cos(), far.sin()
    # chi = x - (order / 2 + 1/4) pi: cos/sin of x - pi/4 (order 0) or x - 3 pi/4 (order 1).
    if order == 0:
        cos_chi, sin_chi = (cos_x + sin_x) * math.sqrt(0.5), (sin_x - cos_x) * math.sqrt(0.5)
    else:
        cos_chi, sin_chi = (sin_x - cos_x) * math.sqrt(0.5), (sin_x + cos_x) * -math.sqrt(0.5)
    hankel = (inverse * (2 / math.pi)).sqrt() * (p * cos_chi - q * sin_chi)
    value = _e.where(small, integral, hankel)
    if order:
        value = value * x.sign()
    return value.to(out)


def bessel_j0(input: Tensor) -> Tensor:
    """The Bessel function of the first kind of order 0."""
    return _bessel_j(0, input)


def bessel_j1(input: Tensor) -> Tensor:
    """The Bessel function of the first kind of order 1."""
    return _bessel_j(1, input)


__all__ += ["bessel_j0", "bessel_j1"]
