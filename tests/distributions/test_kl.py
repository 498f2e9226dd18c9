"""kl_divergence: against exact sums over the support (discrete pairs) or Monte Carlo estimates with
numpy's draws and the reference log-densities (continuous pairs); the infinite pairs, the lookup
and its errors.

A Monte Carlo estimate ``mean(log p(x) - log q(x))`` of ``N`` draws of ``p`` is within 6 standard
errors (the sample deviation over sqrt N) of the divergence: with numpy's seed fixed the check is
deterministic, and fails for a correct formula with probability about 2e-9.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D
from onnxnn.distributions import kl as kl_module
from onnxnn.runtime.internal import realize_values

from . import reference as ref

N = 20000


def _t(values) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64)


def _a(*values) -> np.ndarray:
    return np.array(values, dtype=np.float64)


# (name, p, q, numpy draws of p, log p, log q): batches of two pairs each.
L1, S1, L2, S2 = _a(0.5, -1.0), _a(1.5, 0.3), _a(0.0, 0.4), _a(1.0, 0.5)
A1, B1, A2, B2 = _a(0.5, 3.0), _a(2.0, 0.7), _a(1.5, 2.0), _a(1.0, 1.2)
COV_P = np.array([[2.0, 0.3], [0.3, 1.0]])
COV_Q = np.array([[1.0, -0.2], [-0.2, 0.5]])
ALPHA_P, ALPHA_Q = _a(0.5, 3.0, 1.0), _a(2.0, 0.7, 4.0)

CONTINUOUS = [
    ("Normal", D.Normal(_t(L1), _t(S1)), D.Normal(_t(L2), _t(S2)),
     lambda rng: rng.normal(L1, S1, (N, 2)),
     lambda x: ref.normal_log_prob(x, L1, S1), lambda x: ref.normal_log_prob(x, L2, S2)),
    ("Uniform", D.Uniform(_t([0.0, 1.0]), _t([1.0, 2.0])), D.Uniform(_t([-1.0, 0.5]), _t([1.5, 4.0])),
     lambda rng: rng.uniform([0.0, 1.0], [1.0, 2.0], (N, 2)),
     lambda x: ref.uniform_log_prob(x, _a(0, 1), _a(1, 2)), lambda x: ref.uniform_log_prob(x, _a(-1, 0.5), _a(1.5, 4))),
    ("Exponential", D.Exponential(_t(A1)), D.Exponential(_t(B1)),
     lambda rng: rng.exponential(1 / A1, (N, 2)),
     lambda x: ref.exponential_log_prob(x, A1), lambda x: ref.exponential_log_prob(x, B1)),
    ("Gamma", D.Gamma(_t(A1), _t(B1)), D.Gamma(_t(A2), _t(B2)),
     lambda rng: rng.gamma(A1, 1 / B1, (N, 2)),
     lambda x: ref.gamma_log_prob(x, A1, B1), lambda x: ref.gamma_log_prob(x, A2, B2)),
    ("Chi2 / Gamma", D.Chi2(_t(2 * A1)), D.Gamma(_t(A2), _t(B2)),
     lambda rng: rng.chisquare(2 * A1, (N, 2)),
     lambda x: ref.gamma_log_prob(x, A1, 0.5), lambda x: ref.gamma_log_prob(x, A2, B2)),
    ("Beta", D.Beta(_t(A1), _t(B1)), D.Beta(_t(A2), _t(B2)),
     lambda rng: rng.beta(A1, B1, (N, 2)),
     lambda x: ref.beta_log_prob(x, A1, B1), lambda x: ref.beta_log_prob(x, A2, B2)),
    ("Dirichlet", D.Dirichlet(_t(ALPHA_P)), D.Dirichlet(_t(ALPHA_Q)),
     lambda rng: rng.dirichlet(ALPHA_P, N),
     lambda x: ref.dirichlet_log_prob(x, ALPHA_P), lambda x: ref.dirichlet_log_prob(x, ALPHA_Q)),
    ("Laplace", D.Laplace(_t(L1), _t(S1)), D.Laplace(_t(L2), _t(S2)),
     lambda rng: rng.laplace(L1, S1, (N, 2)),
     lambda x: ref.laplace_log_prob(x, L1, S1), lambda x: ref.laplace_log_prob(x, L2, S2)),
    ("Cauchy", D.Cauchy(_t(L1), _t(S1)), D.Cauchy(_t(L2), _t(S2)),
     lambda rng: L1 + S1 * rng.standard_cauchy((N, 2)),
     lambda x: ref.cauchy_log_prob(x, L1, S1), lambda x: ref.cauchy_log_prob(x, L2, S2)),
    ("MultivariateNormal", D.MultivariateNormal(_t(L1), _t(COV_P)),
     D.MultivariateNormal(_t(L2), precision_matrix=_t(np.linalg.inv(COV_Q))),
     lambda rng: rng.multivariate_normal(L1, COV_P, N),
     lambda x: ref.mvn_log_prob(x, L1, COV_P), lambda x: ref.mvn_log_prob(x, L2, COV_Q)),
    ("Independent(Normal)", D.Independent(D.Normal(_t(L1), _t(S1)), 1), D.Independent(D.Normal(_t(L2), _t(S2)), 1),
     lambda rng: rng.normal(L1, S1, (N, 2)),
     lambda x: ref.normal_log_prob(x, L1, S1).sum(-1), lambda x: ref.normal_log_prob(x, L2, S2).sum(-1)),
    ("LogNormal", D.LogNormal(_t(L1), _t(S1)), D.LogNormal(_t(L2), _t(S2)),
     lambda rng: rng.lognormal(L1, S1, (N, 2)),
     lambda x: ref.lognormal_log_prob(x, L1, S1), lambda x: ref.lognormal_log_prob(x, L2, S2)),
    # Across families.
    ("Beta / Normal", D.Beta(_t(A1), _t(B1)), D.Normal(_t(L2), _t(S2)),
     lambda rng: rng.beta(A1, B1, (N, 2)),
     lambda x: ref.beta_log_prob(x, A1, B1), lambda x: ref.normal_log_prob(x, L2, S2)),
    ("Beta / Gamma", D.Beta(_t(A1), _t(B1)), D.Gamma(_t(A2), _t(B2)),
     lambda rng: rng.beta(A1, B1, (N, 2)),
     lambda x: ref.beta_log_prob(x, A1, B1), lambda x: ref.gamma_log_prob(x, A2, B2)),
    ("Beta / Exponential", D.Beta(_t(A1), _t(B1)), D.Exponential(_t(B2)),
     lambda rng: rng.beta(A1, B1, (N, 2)),
     lambda x: ref.beta_log_prob(x, A1, B1), lambda x: ref.exponential_log_prob(x, B2)),
    ("Beta / Uniform", D.Beta(_t(A1), _t(B1)), D.Uniform(_t([-1.0, 0.0]), _t([1.0, 3.0])),
     lambda rng: rng.beta(A1, B1, (N, 2)),
     lambda x: ref.beta_log_prob(x, A1, B1), lambda x: ref.uniform_log_prob(x, _a(-1, 0), _a(1, 3))),
    ("Exponential / Gamma", D.Exponential(_t(A1)), D.Gamma(_t(A2), _t(B2)),
     lambda rng: rng.exponential(1 / A1, (N, 2)),
     lambda x: ref.exponential_log_prob(x, A1), lambda x: ref.gamma_log_prob(x, A2, B2)),
    ("Exponential / Normal", D.Exponential(_t(A1)), D.Normal(_t(L2), _t(S2)),
     lambda rng: rng.exponential(1 / A1, (N, 2)),
     lambda x: ref.exponential_log_prob(x, A1), lambda x: ref.normal_log_prob(x, L2, S2)),
    ("Gamma / Normal", D.Gamma(_t(A1), _t(B1)), D.Normal(_t(L2), _t(S2)),
     lambda rng: rng.gamma(A1, 1 / B1, (N, 2)),
     lambda x: ref.gamma_log_prob(x, A1, B1), lambda x: ref.normal_log_prob(x, L2, S2)),
    ("Gamma / Exponential", D.Gamma(_t(A1), _t(B1)), D.Exponential(_t(B2)),
     lambda rng: rng.gamma(A1, 1 / B1, (N, 2)),
     lambda x: ref.gamma_log_prob(x, A1, B1), lambda x: ref.exponential_log_prob(x, B2)),
    ("Laplace / Normal", D.Laplace(_t(L1), _t(S1)), D.Normal(_t(L2), _t(S2)),
     lambda rng: rng.laplace(L1, S1, (N, 2)),
     lambda x: ref.laplace_log_prob(x, L1, S1), lambda x: ref.normal_log_prob(x, L2, S2)),
    ("Normal / Laplace", D.Normal(_t(L1), _t(S1)), D.Laplace(_t(L2), _t(S2)),
     lambda rng: rng.normal(L1, S1, (N, 2)),
     lambda x: ref.normal_log_prob(x, L1, S1), lambda x: ref.laplace_log_prob(x, L2, S2)),
    ("Uniform / Normal", D.Uniform(_t([0.0, 1.0]), _t([1.0, 2.0])), D.Normal(_t(L2), _t(S2)),
     lambda rng: rng.uniform([0.0, 1.0], [1.0, 2.0], (N, 2)),
     lambda x: ref.uniform_log_prob(x, _a(0, 1), _a(1, 2)), lambda x: ref.normal_log_prob(x, L2, S2)),
    ("Uniform / Gamma", D.Uniform(_t([0.0, 1.0]), _t([1.0, 2.0])), D.Gamma(_t(A2), _t(B2)),
     lambda rng: rng.uniform([0.0, 1.0], [1.0, 2.0], (N, 2)),
     lambda x: ref.uniform_log_prob(x, _a(0, 1), _a(1, 2)), lambda x: ref.gamma_log_prob(x, A2, B2)),
    ("Uniform / Exponential", D.Uniform(_t([0.0, 1.0]), _t([1.0, 2.0])), D.Exponential(_t(B2)),
     lambda rng: rng.uniform([0.0, 1.0], [1.0, 2.0], (N, 2)),
     lambda x: ref.uniform_log_prob(x, _a(0, 1), _a(1, 2)), lambda x: ref.exponential_log_prob(x, B2)),
    ("Uniform / Beta", D.Uniform(_t([0.1, 0.5]), _t([0.6, 0.9])), D.Beta(_t(A2), _t(B2)),
     lambda rng: rng.uniform([0.1, 0.5], [0.6, 0.9], (N, 2)),
     lambda x: ref.uniform_log_prob(x, _a(0.1, 0.5), _a(0.6, 0.9)), lambda x: ref.beta_log_prob(x, A2, B2)),
    # Transformed distributions with closed forms of their own.
    ("Gumbel", D.Gumbel(_t(L1), _t(S1)), D.Gumbel(_t(L2), _t(S2)),
     lambda rng: rng.gumbel(L1, S1, (N, 2)),
     lambda x: ref.gumbel_log_prob(x, L1, S1), lambda x: ref.gumbel_log_prob(x, L2, S2)),
    ("HalfNormal", D.HalfNormal(_t(S1)), D.HalfNormal(_t(S2)),
     lambda rng: np.abs(rng.normal(0.0, S1, (N, 2))),
     lambda x: ref.half_normal_log_prob(x, S1), lambda x: ref.half_normal_log_prob(x, S2)),
    ("Pareto", D.Pareto(_t([1.5, 0.6]), _t(A2)), D.Pareto(_t([1.0, 0.5]), _t(B2)),
     lambda rng: _a(1.5, 0.6) * (1 + rng.pareto(A2, (N, 2))),  # numpy's pareto is Lomax: x / scale - 1
     lambda x: ref.pareto_log_prob(x, _a(1.5, 0.6), A2), lambda x: ref.pareto_log_prob(x, _a(1.0, 0.5), B2)),
]  # fmt: skip


def test_continuous_divergences_match_monte_carlo_estimates():
    divergences = [D.kl_divergence(p, q) for _, p, q, *_ in CONTINUOUS]
    realize_values(divergences)
    rng = np.random.default_rng(0)
    for (name, _, _, draw, log_p, log_q), divergence in zip(CONTINUOUS, divergences):
        x = draw(rng)
        log_ratio = log_p(x) - log_q(x)
        estimate, standard_error = log_ratio.mean(0), log_ratio.std(0) / math.sqrt(N)
        actual = divergence.numpy()
        assert np.all(np.abs(actual - estimate) <= 6 * standard_error + 1e-12), (
            f"{name}: {actual} vs {estimate} +- {standard_error}"
        )


def _discrete_kl(log_p: np.ndarray, log_q: np.ndarray) -> np.ndarray:
    """``sum_k p_k (log p_k - log q_k)`` over the first axis (the support)."""
    p = np.exp(log_p)
    with np.errstate(invalid="ignore"):
        terms = np.where(p == 0, 0.0, p * (log_p - log_q))
    return terms.sum(0)


COUNTS = np.arange(80.0)[:, None]  # Poisson mass beyond 80 at rates <= 7 is below 1e-50
CAT_P = np.array([[0.2, 0.3, 0.5], [0.0, 0.4, 0.6]])
CAT_Q = np.array([[0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])
DISCRETE = [
    ("Bernoulli", D.Bernoulli(_t([0.3, 0.9])), D.Bernoulli(_t([0.6, 0.5])),
     _discrete_kl(np.log([[0.7, 0.1], [0.3, 0.9]]), np.log([[0.4, 0.5], [0.6, 0.5]]))),
    ("Categorical", D.Categorical(_t(CAT_P)), D.Categorical(_t(CAT_Q)),
     _discrete_kl(np.log(np.maximum(CAT_P, 1e-300)).T, np.log(CAT_Q).T)),
    ("OneHotCategorical", D.OneHotCategorical(_t([0.2, 0.3, 0.5])), D.OneHotCategorical(_t([0.1, 0.1, 0.8])),
     _discrete_kl(np.log([0.2, 0.3, 0.5]), np.log([0.1, 0.1, 0.8]))),
    ("Poisson", D.Poisson(_t([0.5, 7.0])), D.Poisson(_t([2.0, 6.0])),
     _discrete_kl(ref.poisson_log_prob(COUNTS, _a(0.5, 7.0)), ref.poisson_log_prob(COUNTS, _a(2.0, 6.0)))),
    ("Binomial", D.Binomial(10, _t([0.2, 0.7])), D.Binomial(10, _t([0.5, 0.6])),
     _discrete_kl(ref.binomial_log_prob(COUNTS[:11], 10, _a(0.2, 0.7)),
                  ref.binomial_log_prob(COUNTS[:11], 10, _a(0.5, 0.6)))),
    ("Geometric", D.Geometric(_t([0.3, 0.8])), D.Geometric(_t([0.5, 0.6])),
     _discrete_kl(ref.geometric_log_prob(np.arange(400.0)[:, None], _a(0.3, 0.8)),
                  ref.geometric_log_prob(np.arange(400.0)[:, None], _a(0.5, 0.6)))),  # 0.7**400: 1e-62
    ("Bernoulli / Poisson", D.Bernoulli(_t([0.3, 0.9])), D.Poisson(_t([0.5, 2.0])),
     _discrete_kl(np.log([[0.7, 0.1], [0.3, 0.9]]), ref.poisson_log_prob(COUNTS[:2], _a(0.5, 2.0)))),
]  # fmt: skip


def test_discrete_divergences_match_sums_over_the_support():
    divergences = [D.kl_divergence(p, q) for _, p, q, _ in DISCRETE]
    realize_values(divergences)
    for (name, _, _, expected), divergence in zip(DISCRETE, divergences):
        # A few lgamma terms of documented relative error 1e-15 each (special_functions.py), summed.
        np.testing.assert_allclose(divergence.numpy(), expected, rtol=1e-12, atol=1e-13, err_msg=name)


INFINITE = [
    ("Normal / Gamma", D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0)),
    ("Normal / Uniform", D.Normal(0.0, 1.0), D.Uniform(0.0, 1.0)),
    ("Laplace / Exponential", D.Laplace(0.0, 1.0), D.Exponential(1.0)),
    ("Gamma / Beta", D.Gamma(1.0, 1.0), D.Beta(1.0, 1.0)),
    ("Exponential / Uniform", D.Exponential(1.0), D.Uniform(0.0, 1.0)),
    ("Poisson / Bernoulli", D.Poisson(1.0), D.Bernoulli(0.5)),
    (
        "Uniform outside the other",
        D.Uniform(_t([0.0, 0.0]), _t([1.0, 1.0])),
        D.Uniform(_t([0.5, -1.0]), _t([2.0, 0.5])),
    ),
    ("Uniform / Exponential below 0", D.Uniform(-1.0, 1.0), D.Exponential(1.0)),
    ("Beta / narrower Uniform", D.Beta(2.0, 2.0), D.Uniform(0.1, 1.0)),
    ("Categorical onto a zero", D.Categorical(_t([0.5, 0.5])), D.Categorical(_t([1.0, 0.0]))),
    ("Bernoulli onto a certainty", D.Bernoulli(0.5), D.Bernoulli(1.0)),
    ("Pareto starting below the other", D.Pareto(1.0, 2.0), D.Pareto(1.5, 2.0)),
    ("Normal / ContinuousBernoulli", D.Normal(0.0, 1.0), D.ContinuousBernoulli(0.3)),
    ("Exponential / ContinuousBernoulli", D.Exponential(1.0), D.ContinuousBernoulli(0.3)),
    ("Gamma / ContinuousBernoulli", D.Gamma(1.0, 1.0), D.ContinuousBernoulli(0.3)),
    ("Gumbel / ContinuousBernoulli", D.Gumbel(0.0, 1.0), D.ContinuousBernoulli(0.3)),
    ("Laplace / ContinuousBernoulli", D.Laplace(0.0, 1.0), D.ContinuousBernoulli(0.3)),
    ("Pareto / ContinuousBernoulli", D.Pareto(1.0, 2.0), D.ContinuousBernoulli(0.3)),
    ("ContinuousBernoulli / Pareto", D.ContinuousBernoulli(0.3), D.Pareto(1.0, 2.0)),
    (
        "ContinuousBernoulli / narrower Uniform",
        D.ContinuousBernoulli(_t([0.3, 0.3])),
        D.Uniform(_t([0.1, -1.0]), _t([2.0, 0.9])),
    ),
    (
        "Uniform / ContinuousBernoulli beyond [0, 1]",
        D.Uniform(_t([-0.1, 0.5]), _t([0.5, 1.5])),
        D.ContinuousBernoulli(_t([0.3, 0.3])),
    ),
]


@pytest.mark.parametrize("name, p, q", INFINITE, ids=[case[0] for case in INFINITE])
def test_divergences_across_disjoint_supports_are_infinite(name, p, q):
    assert np.all(np.isposinf(D.kl_divergence(p, q).numpy()))


# ---------------------------------------------------------------- continuous Bernoulli and low-rank normal

# 64-point Gauss-Legendre quadrature: exact for polynomials of degree 127, and the integrands below
# are analytic on their intervals (their error is far below 1e-15).
NODES, WEIGHTS = np.polynomial.legendre.leggauss(64)


def _integral(function, low, high):
    """``int_low^high function(x) dx`` for each batch element (``low``, ``high`` of the batch's shape)."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    x = (high - low) / 2 * NODES[:, None] + (high + low) / 2
    return (high - low) / 2 * (WEIGHTS[:, None] * function(x)).sum(0)


LAM_P, LAM_Q = _a(0.3, 0.8), _a(0.6, 0.2)


def _cb_log_p(x):
    return ref.continuous_bernoulli_log_prob(x, LAM_P)


def _cb_kl(log_q, low=0.0, high=1.0):
    """``int p (log p - log q)`` over ``[low, high]`` for ``p`` the continuous Bernoulli of LAM_P."""
    return _integral(lambda x: np.exp(_cb_log_p(x)) * (_cb_log_p(x) - log_q(x)), np.full(2, low), np.full(2, high))


QUADRATURE = [
    ("ContinuousBernoulli", D.ContinuousBernoulli(_t(LAM_P)), D.ContinuousBernoulli(_t(LAM_Q)),
     _cb_kl(lambda x: ref.continuous_bernoulli_log_prob(x, LAM_Q))),
    ("ContinuousBernoulli(logits)", D.ContinuousBernoulli(logits=_t(np.log(LAM_P / (1 - LAM_P)))),
     D.ContinuousBernoulli(_t(LAM_Q)), _cb_kl(lambda x: ref.continuous_bernoulli_log_prob(x, LAM_Q))),
    ("ContinuousBernoulli / Exponential", D.ContinuousBernoulli(_t(LAM_P)), D.Exponential(_t(B2)),
     _cb_kl(lambda x: ref.exponential_log_prob(x, B2))),
    ("ContinuousBernoulli / Normal", D.ContinuousBernoulli(_t(LAM_P)), D.Normal(_t(L2), _t(S2)),
     _cb_kl(lambda x: ref.normal_log_prob(x, L2, S2))),
    ("ContinuousBernoulli / Uniform", D.ContinuousBernoulli(_t(LAM_P)), D.Uniform(_t([-1.0, 0.0]), _t([2.0, 1.0])),
     _cb_kl(lambda x: ref.uniform_log_prob(x, _a(-1.0, 0.0), _a(2.0, 1.0)))),
    ("Uniform / ContinuousBernoulli", D.Uniform(_t([0.1, 0.0]), _t([0.6, 1.0])), D.ContinuousBernoulli(_t(LAM_Q)),
     -np.log(_a(0.5, 1.0))
     - _integral(lambda x: ref.continuous_bernoulli_log_prob(x, LAM_Q), _a(0.1, 0.0), _a(0.6, 1.0)) / _a(0.5, 1.0)),
]  # fmt: skip


def test_continuous_bernoulli_divergences_match_quadratures():
    divergences = [D.kl_divergence(p, q) for _, p, q, _ in QUADRATURE]
    realize_values(divergences)
    for (name, _, _, expected), divergence in zip(QUADRATURE, divergences):
        # Sums of a few terms of order 1: the closed forms' rounding, and the reference's.
        np.testing.assert_allclose(divergence.numpy(), expected, rtol=1e-12, atol=1e-13, err_msg=name)


def test_beta_continuous_bernoulli_divergence_matches_monte_carlo():
    divergence = D.kl_divergence(D.Beta(_t(A1), _t(B1)), D.ContinuousBernoulli(_t(LAM_Q))).numpy()
    x = np.random.default_rng(1).beta(A1, B1, (N, 2))
    log_ratio = ref.beta_log_prob(x, A1, B1) - ref.continuous_bernoulli_log_prob(x, LAM_Q)
    estimate, standard_error = log_ratio.mean(0), log_ratio.std(0) / math.sqrt(N)
    assert np.all(np.abs(divergence - estimate) <= 6 * standard_error), (divergence, estimate, standard_error)


def _gaussian_kl(loc_p, cov_p, loc_q, cov_q):
    """The closed form with dense matrices: (tr(Sq^-1 Sp) + m^T Sq^-1 m - n + log |Sq| / |Sp|) / 2."""
    n = loc_p.shape[-1]
    difference = loc_q - loc_p
    trace = np.trace(np.linalg.solve(cov_q, cov_p), axis1=-2, axis2=-1)
    mahalanobis = (difference * np.linalg.solve(cov_q, difference[..., None])[..., 0]).sum(-1)
    log_det_ratio = np.linalg.slogdet(cov_q)[1] - np.linalg.slogdet(cov_p)[1]
    return 0.5 * (trace + mahalanobis - n + log_det_ratio)


LOW_RANK_LOC = np.array([[0.5, -1.0, 0.0], [0.0, 2.0, 1.0]])
FACTOR_P, DIAG_P = np.array([[1.0, 0.3], [0.2, -0.5], [0.0, 0.7]]), _a(0.5, 1.0, 2.0)
FACTOR_Q, DIAG_Q = (
    np.array([[[0.4], [0.1], [-0.3]], [[1.0], [0.0], [0.5]]]),
    np.array([[1.0, 0.7, 1.5], [0.3, 0.3, 2.0]]),
)
DENSE = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 1.5]])


def _low_rank_cov(factor, diagonal):
    return factor @ np.swapaxes(factor, -1, -2) + diagonal[..., None] * np.eye(diagonal.shape[-1])


LOW_RANK = [
    ("LowRank / LowRank", D.LowRankMultivariateNormal(_t(LOW_RANK_LOC), _t(FACTOR_P), _t(DIAG_P)),
     D.LowRankMultivariateNormal(_t([0.1, 0.2, 0.3]), _t(FACTOR_Q), _t(DIAG_Q)),
     _gaussian_kl(LOW_RANK_LOC, _low_rank_cov(FACTOR_P, DIAG_P), _a(0.1, 0.2, 0.3), _low_rank_cov(FACTOR_Q, DIAG_Q))),
    ("MultivariateNormal / LowRank", D.MultivariateNormal(_t(LOW_RANK_LOC), _t(DENSE)),
     D.LowRankMultivariateNormal(_t([0.1, 0.2, 0.3]), _t(FACTOR_Q), _t(DIAG_Q)),
     _gaussian_kl(LOW_RANK_LOC, DENSE, _a(0.1, 0.2, 0.3), _low_rank_cov(FACTOR_Q, DIAG_Q))),
    ("LowRank / MultivariateNormal", D.LowRankMultivariateNormal(_t(LOW_RANK_LOC), _t(FACTOR_P), _t(DIAG_P)),
     D.MultivariateNormal(_t([0.1, 0.2, 0.3]), scale_tril=_t(np.linalg.cholesky(DENSE))),
     _gaussian_kl(LOW_RANK_LOC, _low_rank_cov(FACTOR_P, DIAG_P), _a(0.1, 0.2, 0.3), DENSE)),
    ("LowRank / LowRank (batched q)", D.LowRankMultivariateNormal(_t([0.5, -1.0, 0.0]), _t(FACTOR_P), _t(DIAG_P)),
     D.LowRankMultivariateNormal(_t(LOW_RANK_LOC), _t(FACTOR_Q), _t(DIAG_Q)),
     _gaussian_kl(_a(0.5, -1.0, 0.0), _low_rank_cov(FACTOR_P, DIAG_P), LOW_RANK_LOC, _low_rank_cov(FACTOR_Q, DIAG_Q))),
]  # fmt: skip


def test_low_rank_normal_divergences_match_the_dense_closed_form():
    divergences = [D.kl_divergence(p, q) for _, p, q, _ in LOW_RANK]
    realize_values(divergences)
    for (name, _, _, expected), divergence in zip(LOW_RANK, divergences):
        # 3 x 3 solves and log-determinants of well-conditioned matrices (condition numbers below 20).
        np.testing.assert_allclose(divergence.numpy(), expected, rtol=1e-12, atol=1e-13, err_msg=name)


def test_low_rank_normal_divergences_need_equal_event_shapes():
    low_rank = D.LowRankMultivariateNormal(_t([0.0, 0.0]), _t([[1.0], [0.0]]), _t([1.0, 1.0]))
    for p, q in [
        (low_rank, D.LowRankMultivariateNormal(_t([0.0]), _t([[1.0]]), _t([1.0]))),
        (low_rank, D.MultivariateNormal(_t([0.0]), _t([[1.0]]))),
        (D.MultivariateNormal(_t([0.0]), _t([[1.0]])), low_rank),
    ]:
        with pytest.raises(ValueError, match="different event shapes cannot be computed"):
            D.kl_divergence(p, q)


def test_relaxed_and_kumaraswamy_pairs_go_to_the_transformed_rule():
    # As in PyTorch: equal transforms (RelaxedBernoulli's sigmoid) give the base distributions'
    # divergence, for which no closed form is registered.
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.RelaxedBernoulli(_t(0.5), _t([0.3])), D.RelaxedBernoulli(_t(0.5), _t([0.6])))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Kumaraswamy(1.0, 2.0), D.Kumaraswamy(2.0, 2.0))


def test_unregistered_pairs_raise_not_implemented_error():
    with pytest.raises(
        NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Cauchy and q type Normal"
    ):
        D.kl_divergence(D.Cauchy(0.0, 1.0), D.Normal(0.0, 1.0))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Independent(D.Normal(_t([0.0]), 1.0), 1), D.Independent(D.Normal(_t([[0.0]]), 1.0), 2))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(D.Binomial(5, _t([0.5])), D.Binomial(10, _t([0.5])))
    with pytest.raises(ValueError, match="different event shapes"):
        D.kl_divergence(
            D.MultivariateNormal(_t([0.0]), _t([[1.0]])), D.MultivariateNormal(_t([0.0, 0.0]), _t(np.eye(2)))
        )
    with pytest.raises(NotImplementedError):  # transformed with different transforms
        D.kl_divergence(D.LogNormal(0.0, 1.0), D.TransformedDistribution(D.Normal(0.0, 1.0), [D.SigmoidTransform()]))


def test_a_binomial_with_more_trials_is_infinitely_far():
    divergence = D.kl_divergence(
        D.Binomial(_t([10.0, 5.0]), _t([0.5, 0.5])), D.Binomial(_t([5.0, 5.0]), _t([0.5, 0.5]))
    )
    assert divergence.numpy()[0] == np.inf and divergence.numpy()[1] == 0


def test_the_bregman_divergence_of_an_exponential_family_is_the_closed_form():
    p, q = D.Normal(_t(L1), _t(S1)), D.Normal(_t(L2), _t(S2))
    bregman = kl_module._kl_expfamily_expfamily(p, q).detach().numpy()
    closed = np.log(S2 / S1) + (S1**2 + (L1 - L2) ** 2) / (2 * S2**2) - 0.5
    np.testing.assert_allclose(bregman, closed, rtol=1e-13)
    with pytest.raises(NotImplementedError, match="different exponential families"):
        kl_module._kl_expfamily_expfamily(D.Normal(0.0, 1.0), D.Exponential(1.0))


def test_register_kl_dispatches_to_the_most_specific_pair():
    class MyNormal(D.Normal):
        pass

    class OtherNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return onnxnn.tensor(1.0)

    try:
        assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 1.0
        assert D.kl_divergence(D.Normal(0.0, 1.0), MyNormal(0.0, 1.0)).item() == 0.0  # Normal/Normal

        @D.register_kl(D.Normal, OtherNormal)
        def _other(p, q):
            return onnxnn.tensor(2.0)

        # (MyNormal, Normal) and (Normal, OtherNormal) match equally well: a warning names the tie.
        with pytest.warns(RuntimeWarning, match="Ambiguous kl_divergence\\(MyNormal, OtherNormal\\)"):
            D.kl_divergence(MyNormal(0.0, 1.0), OtherNormal(0.0, 1.0))
    finally:
        kl_module._KL_REGISTRY.pop((MyNormal, D.Normal), None)
        kl_module._KL_REGISTRY.pop((D.Normal, OtherNormal), None)
        kl_module._KL_MEMOIZE.clear()


def test_independent_sums_the_base_divergences():
    p = D.Independent(D.Normal(_t([[0.0, 1.0]]), _t([[1.0, 2.0]])), 1)
    q = D.Independent(D.Normal(_t([[0.5, 0.0]]), _t([[1.0, 1.0]])), 1)
    expected = D.kl_divergence(p.base_dist, q.base_dist).numpy().sum(-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), expected, rtol=1e-15)


def test_transformed_distributions_without_a_closed_form_go_to_the_transformed_rule():
    # HalfCauchy and Weibull pairs, as in PyTorch: equal transforms give the base distributions'
    # divergence (exact for these), other transforms raise.
    half_cauchy = D.kl_divergence(D.HalfCauchy(_t(S1)), D.HalfCauchy(_t(S2))).numpy()
    np.testing.assert_allclose(half_cauchy, np.log((S1 + S2) ** 2 / (4 * S1 * S2)), rtol=1e-13)
    with pytest.raises(NotImplementedError):  # the scales live in the transforms
        D.kl_divergence(D.Weibull(_t(S1), _t(A1)), D.Weibull(_t(S2), _t(A1)))
