"""The closed-form KL divergences between the Gumbel or Pareto distribution and the other continuous
families, registered with :func:`~onnxnn.distributions.kl.register_kl` on import (the cross pairs
PyTorch registers).

Every finite pair is ``KL(p || q) = -H(p) - E_p[log q(x)]``, where ``log q`` reads a few moments of
``p``. Those used below, with ``gamma`` Euler's constant:

- Gumbel ``(m, b)``: ``log q(x) = -log b - z - exp(-z)`` with ``z = (x - m) / b``; its mean is
  ``m + b gamma``, its variance ``(pi b)^2 / 6``.
- Pareto ``(s, a)`` on ``[s, inf)``: ``log x`` is ``log s`` plus an Exponential(``a``) variable, so
  ``E[log x] = log s + 1 / a``; the mean ``a s / (a - 1)`` is finite for ``a > 1``, the variance
  ``a s^2 / ((a - 1)^2 (a - 2))`` for ``a > 2``.
- ``E[exp(-x / b)]``, the Laplace transform at ``1 / b``: ``(1 + 1 / (rate b))^-concentration`` for a
  gamma, ``exp(-mu / b + sigma^2 / (2 b^2))`` for a normal.

Pairs where ``p`` puts mass outside ``q``'s support (anything against a Pareto, whose support starts at
its scale; a Gumbel, on the whole line, against a bounded or positive family; a Pareto, unbounded,
against a bounded one) are ``inf``, shaped like ``p``'s parameters as in PyTorch.
"""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import full_like
from ..runtime.tensor import Tensor
from .beta import Beta
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .kl import (
    _kl_exponential_infinity,
    _kl_gamma_infinity,
    _kl_laplace_infinity,
    _kl_normal_infinity,
    register_kl,
)
from .laplace import Laplace
from .normal import Normal
from .pareto import Pareto
from .uniform import Uniform
from .utils import euler_constant

__all__: list[str] = []


def _infinite_like(tensor: Tensor) -> Tensor:
    return full_like(tensor, math.inf)


def _x_log_x(tensor: Tensor) -> Tensor:
    return tensor.xlogy(tensor)  # 0 at 0


# ---------------------------------------------------------------- against a Gumbel


def _cross_entropy_to_gumbel(mean: Tensor, log_laplace: Tensor, q: Gumbel) -> Tensor:
    """``-E_p[log q(x)] = log b + (E[x] - m) / b + exp(m / b) E[exp(-x / b)]`` for the Gumbel ``q``.

    ``log_laplace`` is ``log E_p[exp(-x / b)]`` (``b = q.scale``): summed with ``m / b`` before the
    exponential, it neither overflows nor underflows where the product is representable.
    """
    return q.scale.log() + (mean - q.loc) / q.scale + (q.loc / q.scale + log_laplace).exp()


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    # E[exp(-x / b)] = rate / (rate + 1 / b) for the exponential.
    log_laplace = -(1 / (p.rate * q.scale)).log1p()
    return -p.entropy() + _cross_entropy_to_gumbel(p.rate.reciprocal(), log_laplace, q)


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    log_laplace = -p.concentration * (1 / (p.rate * q.scale)).log1p()
    return -p.entropy() + _cross_entropy_to_gumbel(p.concentration / p.rate, log_laplace, q)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    log_laplace = -p.loc / q.scale + 0.5 * (p.scale / q.scale).pow(2)
    return -p.entropy() + _cross_entropy_to_gumbel(p.loc, log_laplace, q)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    # For U(l, h) of width w, E[exp(-(x - m) / b)] = (b / w) (exp((m - l) / b) - exp((m - h) / b)).
    width = p.high - p.low
    mean = (p.low + p.high) / 2
    tail = ((q.loc - p.low) / q.scale).exp() - ((q.loc - p.high) / q.scale).exp()
    return -width.log() + q.scale.log() + (mean - q.loc) / q.scale + q.scale / width * tail


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    # -E[log q] = log(sqrt(2 pi) sigma) + (Var[x] + (E[x] - mu)^2) / (2 sigma^2); -H(p) = -(log b + gamma + 1).
    mean_gap = p.loc + p.scale * euler_constant - q.loc
    second_moment = (math.pi * p.scale).pow(2) / 6 + mean_gap.pow(2)
    cross_entropy = (q.scale * math.sqrt(2 * math.pi)).log() + second_moment / (2 * q.scale.pow(2))
    return cross_entropy - p.scale.log() - (1 + euler_constant)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    return _infinite_like(p.loc)


# ---------------------------------------------------------------- Pareto


def _pareto_mean(p: Pareto) -> Tensor:
    return p.alpha * p.scale / (p.alpha - 1)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    # -E[log q] = -log rate + rate E[x]; E[x] is infinite for alpha <= 1.
    result = -p.entropy() - q.rate.log() + q.rate * _pareto_mean(p)
    return _ops.where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    # -E[log q] = lgamma(k) - k log rate - (k - 1) E[log x] + rate E[x].
    mean_log = p.scale.log() + p.alpha.reciprocal()
    cross_entropy = q.concentration.lgamma() - q.concentration * q.rate.log() - (q.concentration - 1) * mean_log
    result = -p.entropy() + cross_entropy + q.rate * _pareto_mean(p)
    return _ops.where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    # -E[log q] = log(sqrt(2 pi) sigma) + (Var[x] + (E[x] - mu)^2) / (2 sigma^2); Var[x] infinite for alpha <= 2.
    alpha = p.alpha
    variance = alpha * (p.scale / (alpha - 1)).pow(2) / (alpha - 2)
    second_moment = variance + (_pareto_mean(p) - q.loc).pow(2)
    cross_entropy = (q.scale * math.sqrt(2 * math.pi)).log() + second_moment / (2 * q.scale.pow(2))
    return _ops.where(alpha <= 2, math.inf, -p.entropy() + cross_entropy)


@register_kl(Pareto, Beta)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    # -E[log q] = -log(a s^a) + (a + 1) E[log x], E[log x] = (h log h - l log l) / w - 1 over U(l, h);
    # infinite where the uniform starts below the Pareto's scale.
    width = p.high - p.low
    mean_log = (_x_log_x(p.high) - _x_log_x(p.low)) / width - 1
    cross_entropy = -q.alpha.log() - q.alpha * q.scale.log() + (q.alpha + 1) * mean_log
    return _ops.where(p.low < q.scale, math.inf, cross_entropy - width.log())


# p's support reaches below any Pareto's, which starts at its positive scale.
register_kl(Exponential, Pareto)(_kl_exponential_infinity)
register_kl(Gamma, Pareto)(_kl_gamma_infinity)
register_kl(Laplace, Pareto)(_kl_laplace_infinity)
register_kl(Normal, Pareto)(_kl_normal_infinity)


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p, q):
    return _infinite_like(p.concentration1)
