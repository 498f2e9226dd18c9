"""The regularized incomplete gamma functions ``igamma`` (``P(a, x)``) and ``igammac`` (``Q(a, x)``),
written as standard ONNX arithmetic (special_functions.py says why and how such formulas record).

The series ``P = x^a e^-x / Gamma(a+1) sum x^n / ((a+1)...(a+n))`` below ``x = a + 1`` (its terms
summed at once along a new axis from a CumSum of log-ratios), Legendre's continued fraction for ``Q``
above; ``80 + 10 sqrt(max a)`` terms each, read from the data when they are called (relative error
about 1e-13 for a <= 100; the ``exp`` of ``a log x - x - lgamma(a)`` loses ``|a log x|`` ulps for
larger a). Inputs are computed in float64 whatever their dtype, as PyTorch's CPU kernels do.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ._common import Tensor, check_tensor_operands
from . import comparison as _c
from . import elementwise as _e
from .sorting import cumsum
from .special_functions import float64_operands, lgamma

__all__ = ["igamma", "igammac"]

_GAMMA_TERMS_BASE = 80  # terms of the series / continued fraction: 80 + 10 sqrt(largest a), see below


def _incomplete_gamma_terms(a: Tensor) -> int:
    """The number of terms both expansions need for the largest finite ``a`` in the data.

    The series' terms ``x^n / ((a+1)...(a+n))`` fall like ``exp(-n^2 / 2a)`` at its worst (``x`` near
    ``a + 1``), and the continued fraction converges at a like rate, so ``80 + 10 sqrt(a)`` terms reach
    float64's rounding (checked against mpmath for a from 0.01 to 1e4).
    """
    data = np.asarray(a._realized_data(), dtype=np.float64)
    finite = data[np.isfinite(data) & (data > 0)]
    largest = float(finite.max()) if finite.size else 1.0
    return int(math.ceil(_GAMMA_TERMS_BASE + 10 * math.sqrt(largest)))


def _incomplete_gamma(input: Tensor, other: Tensor) -> tuple[Tensor, Tensor, dtypes.dtype]:
    """``(P(a, x), Q(a, x), result dtype)`` in float64: the series for ``x < a + 1``, Legendre's
    continued fraction (evaluated from its ``K``-th term up) above, each giving the other as ``1 - .``."""
    a, x, out = float64_operands("igamma", input, other)
    a = a.detach()
    shape = tuple(np.broadcast_shapes(tuple(a.shape), tuple(x.shape)))
    a, x = a.expand(*shape), x.expand(*shape)
    terms = _incomplete_gamma_terms(a)
    valid = (a > 0) & (x > 0) & _c.isfinite(a) & _c.isfinite(x)
    safe_a, safe_x = _e.where(valid, a, 1.0), _e.where(valid, x, 1.0)
    series_side = safe_x < safe_a + 1.0
    xs = _e.where(series_side, safe_x, safe_a)  # where each expansion is unused, a point where it converges
    xc = _e.where(series_side, safe_a + 1.0, safe_x)
    steps = Tensor._from_array(np.arange(1, terms, dtype=np.float64), dtypes.float64, a.device)
    log_terms = cumsum(xs.log().unsqueeze(-1) - (safe_a.unsqueeze(-1) + steps).log(), -1)
    series = (log_terms.exp().sum(-1) + 1.0) * (safe_a * xs.log() - xs - lgamma(safe_a + 1.0)).exp()
    fraction = xc + float(2 * terms + 1) - safe_a
    for k in range(terms, 0, -1):
        fraction = xc + float(2 * k - 1) - safe_a - (safe_a.neg() + float(k)) * float(k) / fraction
    continued = (safe_a * xc.log() - xc - lgamma(safe_a)).exp() / fraction
    lower = _e.where(series_side, series, 1.0 - continued)
    upper = _e.where(series_side, 1.0 - series, continued)
    # Edges, as PyTorch's: P(a, 0) = 0, P(0, x > 0) = 1, P(a, inf) = 1, P(inf, x) = 0; NaN otherwise.
    finite_a, finite_x = _c.isfinite(a), _c.isfinite(x)
    zero_x = (x == 0) & (a > 0)
    zero_a = (a == 0) & (x > 0)
    infinite_x = (x == math.inf) & finite_a & (a >= 0)
    infinite_a = (a == math.inf) & finite_x & (x >= 0)
    reaches = zero_a | infinite_x
    lower = _e.where(valid, lower, _e.where(reaches, 1.0, _e.where(zero_x | infinite_a, 0.0, math.nan)))
    upper = _e.where(valid, upper, _e.where(reaches, 0.0, _e.where(zero_x | infinite_a, 1.0, math.nan)))
    return lower, upper, out


def _check_incomplete_gamma_operands(name: str, input, other) -> None:
    """PyTorch's refusals: both operands are Tensors, and at least one is floating point."""
    check_tensor_operands(name, input=input, other=other)
    if not input.dtype.is_floating_point and not other.dtype.is_floating_point:
        raise NotImplementedError(
            f'"{name}" not implemented for {input.dtype} and {other.dtype}: it needs a floating point input'
        )


def igamma(input: Tensor, other: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``.

    ``input`` is ``a``, ``other`` is ``x``. Reads the largest ``a`` (the number of terms depends on
    it). Differentiable in ``x`` only, as PyTorch's. Example::

        >>> onnxnn.igamma(onnxnn.tensor([1.0]), onnxnn.tensor([2.0]))  # 1 - exp(-2)
        tensor([0.8647])
    """
    _check_incomplete_gamma_operands("igamma", input, other)
    lower, _, out = _incomplete_gamma(input, other)
    return lower.to(out)


def igammac(input: Tensor, other: Tensor) -> Tensor:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, accurate in its tail."""
    _check_incomplete_gamma_operands("igammac", input, other)
    _, upper, out = _incomplete_gamma(input, other)
    return upper.to(out)
