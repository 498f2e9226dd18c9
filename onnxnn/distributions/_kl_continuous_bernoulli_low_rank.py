"""The closed-form KL divergences of the continuous Bernoulli and the low-rank multivariate normal,
registered with :func:`~onnxnn.distributions.kl.register_kl` on import (the pairs PyTorch registers).

With ``H`` the entropy, a divergence ``KL(p || q) = -H(p) - E_p[log q(x)]`` needs only the moments of
``p`` that ``log q`` reads; pairs where ``p`` puts mass outside ``q``'s support are infinite.
"""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import full_like
from ..runtime.ops.linalg_lu import solve_triangular
from ..runtime.tensor import Tensor
from .beta import Beta
from .continuous_bernoulli import ContinuousBernoulli
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .kl import register_kl
from .laplace import Laplace
from .lowrank_multivariate_normal import (
    LowRankMultivariateNormal,
    _batch_lowrank_logdet,
    _batch_lowrank_mahalanobis,
)
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .pareto import Pareto
from .uniform import Uniform

__all__: list[str] = []


def _batch_trace_XXT(bmat: Tensor) -> Tensor:
    """The trace of ``X X^T`` (the sum of squares) of each matrix in a batch."""
    return bmat.pow(2).sum((-2, -1))


def _cross_entropy_to_continuous_bernoulli(mean: Tensor, q: ContinuousBernoulli) -> Tensor:
    """``-E_p[log q(x)]`` for a ``p`` on ``[0, 1]`` of mean ``mean``: ``log q(x) = x logit(q) + log(1 - q) + log C``."""
    return -mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


# ---------------------------------------------------------------- continuous Bernoulli


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() + _cross_entropy_to_continuous_bernoulli(p.mean, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() + _cross_entropy_to_continuous_bernoulli(p.mean, q)
    outside = (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound)
    return _ops.where(outside, math.inf, result)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    # E_p[(x - loc)^2] = variance + (mean - loc)^2.
    t1 = -p.entropy()
    t2 = 0.5 * math.log(2.0 * math.pi) + q.scale.log()
    t3 = (p.variance + (p.mean - q.loc).pow(2)) / (2.0 * q.scale.pow(2))
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound)
    return _ops.where(outside, math.inf, result)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_infinity(p, q):
    return full_like(p.probs, math.inf)


@register_kl(Exponential, ContinuousBernoulli)
def _kl_exponential_continuous_bernoulli(p, q):
    return full_like(p.rate, math.inf)


@register_kl(Gamma, ContinuousBernoulli)
def _kl_gamma_continuous_bernoulli(p, q):
    return full_like(p.concentration, math.inf)


@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Normal, ContinuousBernoulli)
def _kl_real_line_continuous_bernoulli(p, q):
    return full_like(p.loc, math.inf)


@register_kl(Pareto, ContinuousBernoulli)
def _kl_pareto_continuous_bernoulli(p, q):
    return full_like(p.scale, math.inf)


# ---------------------------------------------------------------- low-rank multivariate normal
#
# KL = (log |S_q| - log |S_p| + tr(S_q^-1 S_p) + m^T S_q^-1 m - n) / 2 with m = loc_q - loc_p. For a
# low-rank q, S_q^-1 = D_q^-1 - A^T A (Woodbury) with A = L^-1 W_q^T D_q^-1 (L the capacitance
# factor), so tr(S_q^-1 X X^T) = |D_q^(-1/2) X|^2 - |A X|^2 for any factor X of S_p.


def _check_event_shapes(p, q) -> None:
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two (Low Rank) Multivariate Normals with different event shapes cannot be computed"
        )


def _woodbury_factor(q: LowRankMultivariateNormal) -> Tensor:
    """``A = L^-1 W^T D^-1`` of a low-rank ``q``: its inverse covariance is ``D^-1 - A^T A``."""
    Wt_Dinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return solve_triangular(q._capacitance_tril, Wt_Dinv, upper=False)


def _lowrank_log_det(d: LowRankMultivariateNormal) -> Tensor:
    return _batch_lowrank_logdet(d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag, d._capacitance_tril)


def _lowrank_mahalanobis(q: LowRankMultivariateNormal, difference: Tensor) -> Tensor:
    return _batch_lowrank_mahalanobis(
        q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, difference, q._capacitance_tril
    )


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_multivariate_normal_lowrank_multivariate_normal(p, q):
    _check_event_shapes(p, q)
    log_det_ratio = _lowrank_log_det(q) - _lowrank_log_det(p)
    mahalanobis = _lowrank_mahalanobis(q, q.loc - p.loc)
    A = _woodbury_factor(q)
    # S_p = D_p + W_p W_p^T: the trace of each part, by the identity above.
    p_diag, q_diag = p._unbroadcasted_cov_diag, q._unbroadcasted_cov_diag
    trace_diag = (p_diag / q_diag).sum(-1) - _batch_trace_XXT(A * p_diag.sqrt().unsqueeze(-2))
    p_factor = p._unbroadcasted_cov_factor
    trace_factor = _batch_trace_XXT(p_factor * q_diag.rsqrt().unsqueeze(-1)) - _batch_trace_XXT(
        _ops.matmul(A, p_factor)
    )
    return 0.5 * (log_det_ratio + trace_diag + trace_factor + mahalanobis - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariate_normal_lowrank_multivariate_normal(p, q):
    _check_event_shapes(p, q)
    p_tril = p._unbroadcasted_scale_tril
    log_det_ratio = _lowrank_log_det(q) - 2 * p_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    mahalanobis = _lowrank_mahalanobis(q, q.loc - p.loc)
    A = _woodbury_factor(q)
    trace = _batch_trace_XXT(p_tril * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1)) - _batch_trace_XXT(
        _ops.matmul(A, p_tril)
    )
    return 0.5 * (log_det_ratio + trace + mahalanobis - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_multivariate_normal_multivariate_normal(p, q):
    _check_event_shapes(p, q)
    q_tril = q._unbroadcasted_scale_tril
    log_det_ratio = 2 * q_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) - _lowrank_log_det(p)
    mahalanobis = _batch_mahalanobis(q_tril, q.loc - p.loc)
    # tr(S_q^-1 S_p) = |L_q^-1 W_p|^2 + |L_q^-1 D_p^(1/2)|^2, solved over the common batch.
    n = p.event_shape[0]
    p_factor = p._unbroadcasted_cov_factor
    batch = tuple(_ops.broadcast_shapes(tuple(q_tril.shape[:-2]), tuple(p_factor.shape[:-2])))
    q_tril = q_tril.expand(batch + (n, n))
    p_factor = p_factor.expand(batch + (n, p_factor.shape[-1]))
    p_diag_sqrt = _ops.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    trace = _batch_trace_XXT(solve_triangular(q_tril, p_factor, upper=False)) + _batch_trace_XXT(
        solve_triangular(q_tril, p_diag_sqrt, upper=False)
    )
    return 0.5 * (log_det_ratio + trace + mahalanobis - n)
