"""log_prob, cdf, icdf, entropy and the moments of every distribution in the table, against the numpy
formulas of ``reference.py`` (float64), on both executors."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D
from onnxnn.runtime.internal import realize_values

from . import reference as ref
from .cases import CASES, t

EXECUTORS = ("onnxruntime", "kernels")

# The formulas combine a few elementwise operations with lgamma, digamma, erf and igamma, which onnxnn
# writes out with documented relative errors of at most 1e-13 (igamma; lgamma 1e-15, digamma 1e-16:
# onnxnn/runtime/ops/special_functions.py); the reference's math functions are within a few ulps.
# Terms of magnitude up to about 10 meet in a sum, hence the absolute part.
RTOL = 1e-13
ATOL = 1e-12


# onnxruntime has no float64 kernels for Atan and Tan, which Cauchy's cdf and icdf record (as
# PyTorch's formulas do); the kernels executor runs them.
def _values(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


def _computed(case, executor: str) -> dict:
    """Every supported method of the case's distribution, computed in one run: name -> (tensor, expected)."""
    distribution = case.make()
    results = {"log_prob": (distribution.log_prob(t(case.values)), case.log_prob)}
    for name in ("mean", "variance"):
        expected = getattr(case, name)
        if not isinstance(expected, str):
            results[name] = (getattr(distribution, name), expected)
    if not isinstance(case.variance, str):
        results["stddev"] = (distribution.stddev, np.sqrt(case.variance))
    if case.mode is not None:
        results["mode"] = (distribution.mode, case.mode)
    if not isinstance(case.entropy, str):
        results["entropy"] = (distribution.entropy(), case.entropy)
        results["perplexity"] = (distribution.perplexity(), np.exp(case.entropy))
    if not isinstance(case.cdf, str):
        results["cdf"] = (distribution.cdf(t(case.values)), case.cdf(case.values))
    if case.has_icdf:
        results["icdf"] = (distribution.icdf(t([0.1, 0.9])), None)  # checked through the reference cdf
    realize_values([tensor for tensor, _ in results.values()])
    return results


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_methods_match_the_formulas(case, executor):
    with onnxnn.set_executor(executor):
        results = _computed(case, executor)
        for name, (tensor, expected) in results.items():
            actual = _values(tensor)
            if name == "icdf":  # the reference cdf of the quantiles gives the probabilities back
                actual, expected = case.cdf(actual), np.array([0.1, 0.9])
            rtol = 4 * RTOL if name == "perplexity" else RTOL  # exp turns an absolute error into a relative one
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_methods_pytorch_lacks_raise_not_implemented(case):
    distribution = case.make()
    unsupported = [name for name in ("mean", "variance", "entropy") if isinstance(getattr(case, name), str)]
    for name in unsupported:
        with pytest.raises(NotImplementedError):
            value = getattr(distribution, name)
            value() if callable(value) else value
    if isinstance(case.cdf, str):
        with pytest.raises(NotImplementedError):
            distribution.cdf(t(case.values))
    if not case.has_icdf:
        with pytest.raises(NotImplementedError):
            distribution.icdf(t([0.1, 0.9]))


# The families that give their expected carrier measure (Beta, Dirichlet and Poisson do not, as in PyTorch).
EXPONENTIAL_FAMILIES = [
    case
    for case in CASES
    if case.name in ("Normal", "Bernoulli", "Exponential", "Gamma", "Chi2", "ContinuousBernoulli")
]


@pytest.mark.parametrize("case", EXPONENTIAL_FAMILIES, ids=repr)
def test_the_exponential_family_entropy_from_the_log_normalizer_is_the_closed_form(case):
    # F(theta) - <theta, grad F(theta)> - E[k(x)], with grad F from a generated backward graph.
    np.testing.assert_allclose(_values(D.ExponentialFamily.entropy(case.make())), case.entropy, rtol=RTOL, atol=ATOL)


def test_log_prob_outside_the_support_without_validation():
    uniform = D.Uniform(t([0.0]), t([1.0]), validate_args=False)
    assert _values(uniform.log_prob(t([2.0]))).tolist() == [-np.inf]
    bernoulli = D.Bernoulli(t([0.25]), validate_args=False)
    # 0.5 is no outcome, but the formula still reads: 0.5 log 0.25 + 0.5 log 0.75.
    expected = 0.5 * np.log(0.25) + 0.5 * np.log(0.75)
    np.testing.assert_allclose(_values(bernoulli.log_prob(t([0.5]))), [expected], rtol=RTOL)


def test_float32_parameters_give_float32_results():
    normal = D.Normal(onnxnn.tensor([0.0, 1.0]), onnxnn.tensor([1.0, 2.0]))
    assert normal.log_prob(onnxnn.tensor([0.5, 0.5])).dtype == onnxnn.float32
    assert normal.sample().dtype == onnxnn.float32
    gamma = D.Gamma(onnxnn.tensor([0.5]), onnxnn.tensor([1.0]))
    assert gamma.rsample().dtype == onnxnn.float32
    assert D.Dirichlet(onnxnn.tensor([0.5, 2.0])).rsample().dtype == onnxnn.float32


# onnxruntime has no float64 kernels for Atan and Tan, which Cauchy's cdf and icdf record; onnxnn writes
# them as standard arithmetic for it (runtime/ops/float64_decompositions.py).
CAUCHY_FORMULAS = {
    "cdf": lambda value, loc, scale: np.arctan((value - loc) / scale) / np.pi + 0.5,
    "icdf": lambda value, loc, scale: np.tan(np.pi * (value - 0.5)) * scale + loc,
}


@pytest.mark.parametrize("method", ["cdf", "icdf"])
def test_cauchy_cdf_and_icdf_in_float64_on_onnxruntime(method):
    loc, scale, values = np.array([0.0, -1.5, 2.0]), np.array([1.0, 0.5, 3.0]), np.array([0.25, 0.9, 0.01])
    with onnxnn.set_executor("onnxruntime"):
        actual = _values(getattr(D.Cauchy(t(loc), t(scale)), method)(t(values)))
    np.testing.assert_allclose(actual, CAUCHY_FORMULAS[method](values, loc, scale), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("make", [lambda: D.HalfNormal(t([1.5, 0.3])), lambda: D.HalfCauchy(t([1.5, 0.3]))])
def test_half_distributions_score_negative_values_minus_infinity_without_validation(make):
    distribution = make()
    distribution._validate_args = False
    scores = _values(distribution.log_prob(t([-0.5, 0.0])))
    assert scores[0] == -np.inf and np.isfinite(scores[1])


def test_half_cauchy_scores_a_number_without_validation():
    # PyTorch turns the value into a tensor of the scale's dtype there.
    score = D.HalfCauchy(t(2.0), validate_args=False).log_prob(0.5)
    assert score.dtype == onnxnn.float64
    np.testing.assert_allclose(_values(score), np.log(2 / (np.pi * 2.0 * (1 + 0.25**2))), rtol=RTOL)


def test_a_certain_geometric_success_scores_zero_failures_as_log_one():
    # With p = 1 the formula reads 0 * log(0) at k = 0: PyTorch counts that term as 0, keeping the
    # gradient 1 / p of log p (at k = 1 it is 1 / p - 1 / (1 - p)).
    probs = onnxnn.tensor([1.0, 1.0], dtype=onnxnn.float64, requires_grad=True)
    scores = D.Geometric(probs).log_prob(t([0.0, 1.0]))
    assert _values(scores).tolist() == [0.0, -np.inf]
    scores.sum().backward()
    assert probs.grad.numpy().tolist() == [1.0, -np.inf]


@pytest.mark.parametrize(
    "alpha, finite_mean, finite_variance", [(1.0, False, False), (2.0, True, False), (2.5, True, True)]
)
def test_pareto_moments_are_infinite_up_to_their_alpha(alpha, finite_mean, finite_variance):
    pareto = D.Pareto(t(1.5), t(alpha))
    mean, variance = float(_values(pareto.mean)), float(_values(pareto.variance))
    assert np.isfinite(mean) == finite_mean and np.isfinite(variance) == finite_variance
    assert mean == np.inf or mean == pytest.approx(alpha * 1.5 / (alpha - 1), rel=RTOL)


@pytest.mark.parametrize("probs", [0.4990001, 0.4995, 0.5, 0.5005, 0.501], ids=str)
def test_continuous_bernoulli_near_one_half_follows_its_taylor_series(probs):
    # Inside lims = (0.499, 0.501] the closed forms divide cancelled differences of size |p - 1/2|:
    # in float64 they keep about 1e-16 / |p - 1/2|^2 <= 1e-10 of the value, hence the tolerance
    # against them. At p = 1/2 they are 0 / 0, and the limits are exact: log C = log 2, mean 1/2,
    # variance 1/12. The cdf and icdf there are the uniform's, as PyTorch's.
    distribution = D.ContinuousBernoulli(t([probs]))
    x = np.array([0.3])
    np.testing.assert_array_equal(_values(distribution.cdf(t(x))), x)
    np.testing.assert_array_equal(_values(distribution.icdf(t(x))), x)
    lam = np.array([probs])
    if probs == 0.5:
        mean = np.array([0.5])
        expected = {"log_prob": [0.0], "mean": mean, "variance": [1 / 12], "entropy": [0.0]}
        rtol = atol = 1e-15
    else:
        mean = ref.continuous_bernoulli_mean(lam)
        expected = {
            "log_prob": ref.continuous_bernoulli_log_prob(x, lam),
            "mean": mean,
            "variance": ref.continuous_bernoulli_variance(lam),
            "entropy": -ref.continuous_bernoulli_log_prob(mean, lam),
        }
        rtol = atol = 1e-9
    got = {
        "log_prob": distribution.log_prob(t(x)),
        "mean": distribution.mean,
        "variance": distribution.variance,
        "entropy": distribution.entropy(),
    }
    for name, value in got.items():
        np.testing.assert_allclose(_values(value), expected[name], rtol=rtol, atol=atol, err_msg=name)
