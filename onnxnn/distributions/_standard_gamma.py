"""Standard gamma variates with implicit reparameterization gradients (PyTorch's ``_standard_gamma``).

Gamma, Beta, Dirichlet, Chi2 and StudentT sample through :func:`standard_gamma_log`: the logarithm
of ``Gamma(alpha, 1)`` draws, differentiable in ``alpha``. Logarithms, because a small ``alpha``
gives draws far below float64's smallest number (``alpha = 0.001`` puts half of them under
``1e-300``), and a Dirichlet normalizes its gammas with a softmax of their logarithms.

Sampling (Marsaglia and Tsang, 2000), recorded as ONNX arithmetic on draws from onnxnn's
generator: for ``alpha >= 1``, with ``d = alpha - 1/3`` and ``c = 1 / sqrt(9 d)``, a proposal
``v = (1 + c z)^3`` from a standard normal ``z`` is accepted when ``1 + c z > 0`` and
``log u < z^2 / 2 + d - d v + d log v`` for a uniform ``u``; then ``d v`` is a draw. Each draw
makes ``_PROPOSALS`` proposals at once and keeps the first accepted one, so the graph's shape does
not depend on the data. A proposal is accepted with probability at least 0.9516 (at
``alpha = 1``), so all ten are rejected with probability below ``0.0484^10 < 7e-14``; that draw
then takes ``d``, the proposals' center (a bias far below any Monte Carlo resolution). Below 1,
``Gamma(alpha) = Gamma(alpha + 1) U^(1/alpha)``.

Gradient (Figurnov, Mohamed and Mnih, *Implicit reparameterization gradients*, 2018): a draw
``x`` keeps its quantile ``P(alpha, x)`` (the regularized incomplete gamma function) as ``alpha``
moves, so ``dx/dalpha = -(dP/dalpha) / p(x; alpha)``, ``p`` the density. Written for ``log x``,
with ``psi`` the digamma function, by one of three fixed formulas chosen per element:

- ``x <= max(5, alpha / 4)``: the series ``P = sum_n x^(alpha+n) e^-x / Gamma(alpha+n+1)``
  differentiated term by term, ``d log x / d alpha = -sum_n q_n (log x - psi(alpha+n+1))`` with
  ``q_n = Gamma(alpha) x^n / Gamma(alpha+n+1)``; 32 terms (their ratio ``x / (alpha+n)`` is at
  most 5/n or 1/4).
- ``alpha < 1`` beyond: the upper tail ``int_x^inf t^(alpha-1) e^-t (log t - psi(alpha)) dt``
  over ``p(x)``, by 32-point Gauss-Laguerre quadrature in ``s = t - x``.
- ``alpha >= 1`` beyond: the tail on the short side of ``x`` (the lower one when ``x`` is below
  the center, else the upper one), by 32-point Gauss-Legendre quadrature in Marsaglia and Tsang's
  variable ``z``, where the gamma density is close to a standard normal, over at most
  ``min(10, 40 / |z_x|)`` of ``z`` (the neglected tail is below ``e^-40`` of the kept one).

Checked against 40-digit differences of mpmath's incomplete gamma function: relative error below
1e-10 for ``alpha`` from 1e-3 to 3e4 and ``z_x`` from -12 to 20 (the loss grows as ``sqrt(alpha)``
through ``log x - psi(alpha)``). The gradient is computed in backward only; it is not itself
differentiable (as PyTorch's).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..autograd import Function, once_differentiable
from ..ir import dtypes
from ..runtime import ops as _ops
from ..runtime.creation import tensor, zeros_like
from ..runtime.random_creation import rand, randn
from ..runtime.tensor import Tensor

__all__ = ["standard_gamma_log"]

_PROPOSALS = 10
_SERIES_TERMS = 32
_SERIES_LIMIT = 5.0
_QUADRATURE_POINTS = 32
_Z_SPAN = 10.0  # the most of z a quadrature covers
_Z_DECAY = 40.0  # ... and at most this over |z_x|: the density has fallen by e^-40 there


@functools.cache
def _rule(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Laguerre or Gauss-Legendre nodes and weights (computed on first use, not on import)."""
    if kind == "laguerre":
        return np.polynomial.laguerre.laggauss(_QUADRATURE_POINTS)
    return np.polynomial.legendre.leggauss(_QUADRATURE_POINTS)


def _constant(array: np.ndarray, like: Tensor) -> Tensor:
    return tensor(np.asarray(array, dtype=np.float64), dtype=dtypes.float64, device=like.device)


def _marsaglia_tsang_log(alpha: Tensor) -> Tensor:
    """``log`` of ``Gamma(alpha, 1)`` draws for a float64 ``alpha > 0`` (no autograd)."""
    shape = tuple(alpha.shape)
    boost = alpha < 1
    shifted = _ops.where(boost, alpha + 1, alpha)
    d = shifted - 1.0 / 3.0
    c = (9 * d).rsqrt()
    z = randn((_PROPOSALS,) + shape, dtype=dtypes.float64, device=alpha.device)
    u = rand((_PROPOSALS,) + shape, dtype=dtypes.float64, device=alpha.device)
    base = 1 + c * z
    inside = base > 0
    log_v = 3 * _ops.where(inside, base, 1.0).log()
    accept = inside & (u.log() < 0.5 * z * z + d - d * log_v.exp() + d * log_v)
    first = accept & (accept.to(dtypes.int64).cumsum(0) == 1)
    log_v_first = _ops.where(first, log_v, 0.0).sum(0)  # 0 (v = 1, the center) when none accepted
    log_x = d.log() + log_v_first
    # Gamma(alpha) = Gamma(alpha + 1) U^(1/alpha), U on (0, 1]: log U = log1p(-u) for u on [0, 1).
    u_boost = rand(shape, dtype=dtypes.float64, device=alpha.device)
    return _ops.where(boost, log_x + (-u_boost).log1p() / alpha, log_x)


def _series(alpha: Tensor, log_x: Tensor) -> Tensor:
    """``d log x / d alpha`` from the lower series (accurate for ``x <= max(5, alpha / 4)``)."""
    k = _constant(np.arange(1, _SERIES_TERMS, dtype=np.float64), alpha)
    shifted = alpha.unsqueeze(-1) + k  # alpha + n for n = 1 .. N - 1
    log_ratio = (log_x.unsqueeze(-1) - shifted.log()).cumsum(-1)  # log(x^n Gamma(alpha+1) / Gamma(alpha+n+1))
    log_q = _ops.cat([zeros_like(alpha).unsqueeze(-1), log_ratio], -1) - alpha.log().unsqueeze(-1)
    harmonic = _ops.cat([zeros_like(alpha).unsqueeze(-1), shifted.reciprocal().cumsum(-1)], -1)
    psi = (alpha + 1).digamma().unsqueeze(-1) + harmonic  # psi(alpha + n + 1)
    return -(log_q.exp() * (log_x.unsqueeze(-1) - psi)).sum(-1)


def _upper_laguerre(alpha: Tensor, log_x: Tensor) -> Tensor:
    """``d log x / d alpha`` from the upper tail by Gauss-Laguerre quadrature (for ``alpha < 1``, ``x > 5``)."""
    nodes, weights = (_constant(part, alpha) for part in _rule("laguerre"))
    x = log_x.exp().unsqueeze(-1)
    a = alpha.unsqueeze(-1)
    # t = x + s: t^(alpha-1) e^-t / p(x) = (1 + s / x)^(alpha-1) e^-s, e^-s being Laguerre's weight.
    terms = weights * ((a - 1) * (nodes / x).log1p()).exp() * ((x + nodes).log() - a.digamma())
    return terms.sum(-1) / x.squeeze(-1)


def _tail_legendre(alpha: Tensor, log_x: Tensor) -> Tensor:
    """``d log x / d alpha`` from the short tail by Gauss-Legendre quadrature in Marsaglia and Tsang's
    ``z`` (for ``alpha >= 1``)."""
    nodes, weights = (_constant(part, alpha) for part in _rule("legendre"))
    d = alpha - 1.0 / 3.0
    c = (9 * d).rsqrt()
    z_x = (((log_x - d.log()) / 3).exp() - 1) / c
    span = (_Z_DECAY / z_x.abs().clamp(min=_Z_DECAY / _Z_SPAN)).clamp(max=_Z_SPAN)
    lower = z_x <= 0
    start = _ops.where(lower, _ops.maximum(-1 / c, z_x - span), z_x)
    end = _ops.where(lower, z_x, z_x + span)
    half = ((end - start) / 2).unsqueeze(-1)
    z = half * nodes + ((end + start) / 2).unsqueeze(-1)
    a, d, c, lx = alpha.unsqueeze(-1), d.unsqueeze(-1), c.unsqueeze(-1), log_x.unsqueeze(-1)
    base = 1 + c * z
    log_t = d.log() + 3 * base.log()
    # The density of z over p(x): t^(alpha-1) e^-t dt/dz / (x^(alpha-1) e^-x), without Gamma(alpha).
    density = ((a - 1) * (log_t - lx) - (log_t.exp() - lx.exp())).exp() * 3 * d * c * base * base
    integral = (half * weights * density * (log_t - a.digamma())).sum(-1)
    # dP/dalpha is the lower integral, minus the upper one; d log x = -dP / (p x).
    return _ops.where(lower, -integral, integral) / log_x.exp()


def _log_sample_derivative(alpha: Tensor, log_x: Tensor) -> Tensor:
    """``d log x / d alpha`` of a gamma draw kept at its quantile (float64 inputs)."""
    series_region = log_x <= (alpha / 4).clamp(min=_SERIES_LIMIT).log()
    small = alpha < 1
    # Each formula sees harmless operands where another one is chosen.
    safe_log_x = _ops.where(series_region, log_x, math.log(_SERIES_LIMIT))
    series = _series(alpha, safe_log_x)
    tail_log_x = _ops.where(series_region, math.log(2 * _SERIES_LIMIT) + alpha.log1p(), log_x)
    laguerre = _upper_laguerre(_ops.where(small, alpha, 0.5), tail_log_x)
    legendre = _tail_legendre(_ops.where(small, 2.0, alpha), tail_log_x)
    return _ops.where(series_region, series, _ops.where(small, laguerre, legendre))


class _StandardGammaLog(Function):
    """``log`` of ``Gamma(alpha, 1)`` draws, with the implicit reparameterization gradient."""

    @staticmethod
    def forward(ctx, concentration: Tensor) -> Tensor:
        alpha = concentration.to(dtypes.float64)
        log_x = _marsaglia_tsang_log(alpha)
        ctx.save_for_backward(alpha, log_x)
        ctx.dtype = concentration.dtype
        return log_x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> Tensor:
        alpha, log_x = ctx.saved_tensors
        return (grad_output * _log_sample_derivative(alpha, log_x)).to(ctx.dtype)


def standard_gamma_log(concentration: Tensor) -> Tensor:
    """The logarithms of ``Gamma(concentration, 1)`` draws, as float64, differentiable in ``concentration``.

    Args:
        concentration: positive shape parameters (any float dtype); one draw per element.

    Returns:
        A float64 tensor of ``concentration``'s shape.

    Example::

        >>> alpha = onnxnn.tensor([0.5, 2.0], requires_grad=True)
        >>> standard_gamma_log(alpha).exp().sum().backward()
        >>> alpha.grad.shape
        onnxnn.Size([2])
    """
    return _StandardGammaLog.apply(concentration)
