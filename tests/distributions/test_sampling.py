"""Sampling: shapes, reproducibility under ``manual_seed``, and the draws' distribution, checked
against the formulas of ``reference.py`` with bounds from the central limit theorem.

Each statistic of ``N`` draws (a mean, a frequency, an empirical cdf) is within 6 standard errors
of its expectation; with the seed fixed the draws are fixed, so each check either always holds or
always fails, and a correct sampler fails one with probability about 2e-9.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D

from . import reference as ref
from .cases import CASES, UNSUPPORTED, t

N = 4000
BOUND = 6.0  # standard errors


def _values(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


def _within(statistic, expected, standard_error, what: str) -> None:
    statistic, expected, standard_error = np.broadcast_arrays(statistic, expected, standard_error)
    assert np.all(np.abs(statistic - expected) <= BOUND * standard_error), (
        f"{what}: {statistic} vs {expected} (standard error {standard_error})"
    )


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_sample_shapes_and_dtypes(case):
    distribution = case.make()
    shape = tuple(distribution.batch_shape) + tuple(distribution.event_shape)
    assert tuple(distribution.sample().shape) == shape
    draws = distribution.sample((3, 1))
    assert tuple(draws.shape) == (3, 1) + shape
    expected_dtype = onnxnn.int64 if isinstance(distribution, D.Categorical) else onnxnn.float64
    assert draws.dtype == expected_dtype
    # PyTorch's LogitRelaxedBernoulli draws by rsample though its has_rsample is False.
    if distribution.has_rsample or isinstance(distribution, D.LogitRelaxedBernoulli):
        assert tuple(distribution.rsample((2,)).shape) == (2,) + shape
    else:
        with pytest.raises(NotImplementedError):
            distribution.rsample()


# onnxnn's Poisson and binomial samplers evaluate a window of about a hundred log-pmf terms per draw:
# fewer draws keep their checks as fast as the others' (the bounds follow the count).
FEWER_DRAWS = {"Poisson": 1000, "Binomial": 1000, "NegativeBinomial": 1000, "NegativeBinomial(logits)": 1000}


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_draws_follow_the_distribution(case):
    onnxnn.manual_seed(2024)
    n = FEWER_DRAWS.get(case.name, N)
    draws = _values(case.make().sample((n,)))
    # Each draw lies in the support, as the distribution itself checks it.
    assert bool(case.make().support.check(t(draws)).all())
    if not isinstance(case.variance, str) and np.all(np.isfinite(case.variance)):
        _within(draws.mean(0), case.mean, np.sqrt(case.variance / n), "mean")
    if case.discrete and case.values.ndim == 1:
        # The frequency of each batch element's value: a Bernoulli mean with p = the reference pmf.
        p = np.exp(case.log_prob)
        _within((draws == case.values).mean(0), p, np.sqrt(p * (1 - p) / n), "frequency")
    if not isinstance(case.cdf, str):
        # The empirical cdf at the case's points, likewise.
        p = case.cdf(case.values)
        _within((draws <= case.values).mean(0), p, np.sqrt(p * (1 - p) / n), "empirical cdf")
    if case.draw_event is not None:
        event, p = case.draw_event
        _within(event(draws).mean(0), p, np.sqrt(p * (1 - p) / n), "event frequency")


@pytest.mark.parametrize(
    "make, expected",
    [
        # E[log X] = psi(a) - log(rate) for a gamma variable, psi(a) - psi(a + b) for a beta one.
        (
            lambda: D.Gamma(t([0.05, 0.7, 40.0]), t([1.0, 2.0, 0.5])),
            ref.digamma([0.05, 0.7, 40.0]) - np.log([1.0, 2.0, 0.5]),
        ),
        (lambda: D.Beta(t([0.3, 4.0]), t([2.0, 0.6])), ref.digamma([0.3, 4.0]) - ref.digamma([2.3, 4.6])),
        (lambda: D.Dirichlet(t([0.2, 1.0, 6.0])), ref.digamma([0.2, 1.0, 6.0]) - ref.digamma(7.2)),
    ],
    ids=["Gamma", "Beta", "Dirichlet"],
)
def test_gamma_based_draws_have_the_expected_log_moments(make, expected):
    # log X separates shapes the mean alone does not (a small concentration puts its mass near 0).
    onnxnn.manual_seed(7)
    logs = np.log(_values(make().sample((N,))))
    _within(logs.mean(0), expected, logs.std(0) / math.sqrt(N), "E[log X]")


def test_multivariate_normal_draws_have_the_covariance():
    onnxnn.manual_seed(5)
    covariance = np.array([[2.0, 0.3], [0.3, 1.0]])
    draws = _values(D.MultivariateNormal(t([0.5, -1.0]), t(covariance)).sample((N,)))
    _within(draws.mean(0), [0.5, -1.0], np.sqrt(np.diag(covariance) / N), "mean")
    # The sample covariance of a normal pair has variance (s_ii s_jj + s_ij^2) / N.
    sample = np.cov(draws.T)
    standard_error = np.sqrt((np.outer(np.diag(covariance), np.diag(covariance)) + covariance**2) / N)
    _within(sample, covariance, standard_error, "covariance")


def test_categorical_frequencies_over_every_category():
    onnxnn.manual_seed(6)
    probs = np.array([0.1, 0.0, 0.6, 0.3])
    draws = _values(D.Categorical(t(probs)).sample((N,)))
    frequencies = np.array([(draws == k).mean() for k in range(4)])
    _within(frequencies, probs, np.sqrt(probs * (1 - probs) / N), "frequency")
    assert frequencies[1] == 0  # a zero-probability category is never drawn


@pytest.mark.parametrize(
    "case",
    [
        case
        for case in CASES
        if case.name in ("Normal", "Gamma", "Beta", "Categorical", "Poisson", "Geometric", "Gumbel")
    ],
    ids=repr,
)
def test_a_seed_repeats_the_draws(case):
    onnxnn.manual_seed(11)
    first = _values(case.make().sample((5,)))
    onnxnn.manual_seed(11)
    second = _values(case.make().sample((5,)))
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, _values(case.make().sample((5,))))  # the generator moved on


def test_a_seed_gives_the_same_draws_on_both_executors():
    draws = []
    for executor in ("onnxruntime", "kernels"):
        with onnxnn.set_executor(executor):
            onnxnn.manual_seed(12)
            draws.append(_values(D.Gamma(t([0.3, 2.0]), t([1.0, 3.0])).rsample((50,))))
    # The same uniforms and normals go through the same arithmetic; libm and onnxruntime round
    # log and exp within a few ulps of each other.
    np.testing.assert_allclose(draws[0], draws[1], rtol=1e-13)


def test_expanded_distributions_sample_the_expanded_shape():
    normal = D.Normal(t([0.0, 10.0]), t([1.0, 1.0])).expand((3, 2))
    draws = _values(normal.sample((N // 2,)))
    assert draws.shape == (N // 2, 3, 2)
    _within(draws.mean(0), [0.0, 10.0], 1 / math.sqrt(N // 2), "mean")
    assert tuple(D.Dirichlet(t([1.0, 2.0])).expand((4,)).rsample().shape) == (4, 2)
    assert tuple(D.Categorical(t([0.5, 0.5])).expand((2, 3)).sample((5,)).shape) == (5, 2, 3)


def test_every_case_has_a_reference_for_its_draws():
    # A finite mean, a cdf, a pmf or an event's probability: test_draws_follow_the_distribution checks
    # something for each case.
    for case in CASES:
        has_mean = not isinstance(case.variance, str) and np.all(np.isfinite(case.variance))
        assert has_mean or case.cdf is not UNSUPPORTED or case.discrete or case.draw_event is not None, case.name


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
def test_beta_and_dirichlet_draws_stay_inside_the_simplex(dtype):
    # Small concentrations put nearly all mass on one coordinate, which rounded to 1: a Beta's
    # log_prob of its own draw was then +inf. Draws stay in [tiny, 1 - eps], as PyTorch's.
    onnxnn.manual_seed(0)
    beta = D.Beta(onnxnn.tensor(0.1, dtype=dtype), onnxnn.tensor(0.1, dtype=dtype))
    draws = beta.sample((20000,))
    assert 0.0 < float(draws.min()) and float(draws.max()) < 1.0
    assert np.isfinite(beta.log_prob(draws).numpy()).all()
    coordinates = D.Dirichlet(onnxnn.tensor([0.01, 0.02, 0.03], dtype=dtype)).sample((20000,)).numpy()
    assert 0.0 < coordinates.min() and coordinates.max() < 1.0


def test_geometric_draws_invert_a_uniform_as_pytorchs():
    # floor(log u / log(1 - p)) for u uniform on [tiny, 1): the same draws from the same seed.
    probs = np.array([0.3, 0.8, 1.0])
    onnxnn.manual_seed(13)
    draws = _values(D.Geometric(t(probs)).sample((50,)))
    onnxnn.manual_seed(13)
    u = np.maximum(_values(onnxnn.rand((50, 3), dtype=onnxnn.float64)), np.finfo(np.float64).tiny)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(draws, np.floor(np.log(u) / np.log1p(-probs)))
    assert np.all(draws[:, 2] == 0)  # a certain success: no failures


def test_multinomial_draws_count_the_trials_and_have_the_covariance():
    onnxnn.manual_seed(14)
    probs = np.array([0.2, 0.3, 0.5])
    draws = _values(D.Multinomial(10, t(probs)).sample((N,)))
    assert np.all(draws.sum(-1) == 10) and np.all(draws == np.round(draws))
    # Cov(x_i, x_j) = n (p_i delta_ij - p_i p_j): the sample covariance is a mean of the products of
    # centered counts, whose standard error is their deviation over sqrt N.
    covariance = 10 * (np.diag(probs) - np.outer(probs, probs))
    centered = draws - draws.mean(0)
    products = centered[:, :, None] * centered[:, None, :]
    standard_error = products.std(0) / math.sqrt(N)
    _within(np.cov(draws.T), covariance, standard_error, "covariance")


def test_negative_binomial_draws_have_the_frequencies_of_the_pmf():
    onnxnn.manual_seed(15)
    n = 2000
    draws = _values(D.NegativeBinomial(t(1.5), t(0.4)).sample((n,)))
    for k in range(6):
        p = np.exp(ref.negative_binomial_log_prob(float(k), 1.5, 0.4))
        _within((draws == k).mean(), p, np.sqrt(p * (1 - p) / n), f"frequency of {k}")


def test_mixture_draws_pick_each_component_with_its_weight():
    # Components far apart (100 standard deviations): the sign of a draw tells its component.
    onnxnn.manual_seed(16)
    weights = np.array([0.2, 0.8])
    mixture = D.MixtureSameFamily(
        D.Categorical(t(weights)), D.Independent(D.Normal(t([[-100.0, 0.0], [100.0, 0.0]]), t([1.0, 1.0])), 1)
    )
    draws = _values(mixture.sample((N,)))
    assert draws.shape == (N, 2)
    _within((draws[:, 0] > 0).mean(), weights[1], math.sqrt(weights[1] * weights[0] / N), "weight")
    _within(draws[:, 1].mean(), 0.0, 1 / math.sqrt(N), "second coordinate")


def test_low_rank_multivariate_normal_draws_have_the_covariance():
    onnxnn.manual_seed(17)
    factor, diagonal = np.array([[1.0, 0.2], [0.3, -0.5], [0.0, 0.7]]), np.array([0.5, 1.0, 2.0])
    covariance = factor @ factor.T + np.diag(diagonal)
    draws = _values(D.LowRankMultivariateNormal(t([0.5, -1.0, 0.0]), t(factor), t(diagonal)).sample((N,)))
    _within(draws.mean(0), [0.5, -1.0, 0.0], np.sqrt(np.diag(covariance) / N), "mean")
    standard_error = np.sqrt((np.outer(np.diag(covariance), np.diag(covariance)) + covariance**2) / N)
    _within(np.cov(draws.T), covariance, standard_error, "covariance")


def test_continuous_bernoulli_draws_invert_the_cdf():
    # rsample is icdf(u) for u uniform: the same uniforms from the same seed give the same draws.
    probs = np.array([0.3, 0.8])
    onnxnn.manual_seed(18)
    draws = _values(D.ContinuousBernoulli(t(probs)).rsample((50,)))
    onnxnn.manual_seed(18)
    u = _values(onnxnn.rand((50, 2), dtype=onnxnn.float64))
    expected = np.log1p(-probs + u * (2 * probs - 1)) - np.log1p(-probs)
    np.testing.assert_allclose(draws, expected / (np.log(probs) - np.log1p(-probs)), rtol=1e-13, atol=1e-15)
