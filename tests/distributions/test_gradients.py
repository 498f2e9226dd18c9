"""Gradients: of ``rsample`` and ``log_prob`` by central differences in float64, and of the gamma-based
samplers' implicit reparameterization against the reference incomplete gamma function.

The central differences follow one random direction per check (JAX's ``check_vjp``): ``<J v, u>``
from differences at ``eps = 1e-6`` against ``<v, J^T u>`` from the backward graph. Their error is
truncation ``eps^2 |f'''| / 6`` (about 1e-13) plus rounding ``1e-16 |f| / eps`` (about 1e-10 for
sums of order 1), so ``rtol = 1e-6`` separates a wrong gradient (off by O(1)) from a right one.
Samples are differentiated with the seed fixed: the same draws at every evaluation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D

from . import reference as ref

EPS = 1e-6
RTOL = 1e-6
ATOL = 1e-9


def _t(array, requires_grad: bool = False) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(array, dtype=np.float64), dtype=onnxnn.float64, requires_grad=requires_grad)


def _directional_check(function, arrays, seed: int = 0) -> None:
    """``function(*tensors)`` (it seeds its own draws) against central differences along a random direction."""
    rng = np.random.default_rng(seed)
    tensors = [_t(array, requires_grad=True) for array in arrays]
    output = function(*tensors)
    cotangent = rng.standard_normal(tuple(output.shape))
    output.backward(_t(cotangent))
    directions = [rng.standard_normal(np.shape(array)) for array in arrays]
    analytic = sum(float(np.sum(tensor.grad.numpy() * d)) for tensor, d in zip(tensors, directions))

    def evaluate(sign: float) -> float:
        with onnxnn.no_grad():
            moved = [_t(np.asarray(a) + sign * EPS * d) for a, d in zip(arrays, directions)]
            return float(np.sum(function(*moved).numpy() * cotangent))

    numeric = (evaluate(1.0) - evaluate(-1.0)) / (2 * EPS)
    np.testing.assert_allclose(analytic, numeric, rtol=RTOL, atol=ATOL)


def _seeded(draw):
    def function(*tensors):
        onnxnn.manual_seed(31)
        return draw(*tensors)

    return function


LOC, SCALE = [0.5, -1.0], [1.5, 0.3]
COV_TRIL = [[1.4, 0.0], [0.2, 0.9]]

RSAMPLE_CASES = {
    "Normal": (lambda loc, scale: D.Normal(loc, scale).rsample((3,)), [LOC, SCALE]),
    "Uniform": (lambda low, high: D.Uniform(low, high).rsample((3,)), [[0.0, -1.0], [2.0, 1.5]]),
    "Laplace": (lambda loc, scale: D.Laplace(loc, scale).rsample((3,)), [LOC, SCALE]),
    "Exponential": (lambda rate: D.Exponential(rate).rsample((3,)), [[0.5, 3.0]]),
    "Cauchy": (lambda loc, scale: D.Cauchy(loc, scale).rsample((3,)), [LOC, SCALE]),
    "LogNormal": (lambda loc, scale: D.LogNormal(loc, scale).rsample((3,)), [LOC, SCALE]),
    "Independent(Normal)": (lambda loc, scale: D.Independent(D.Normal(loc, scale), 1).rsample((3,)), [LOC, SCALE]),
    "MultivariateNormal(scale_tril)": (
        lambda loc, tril: D.MultivariateNormal(loc, scale_tril=tril.tril()).rsample((3,)),
        [LOC, COV_TRIL],
    ),
    "MultivariateNormal(covariance_matrix)": (
        lambda loc, tril: D.MultivariateNormal(loc, tril.tril() @ tril.tril().mT, validate_args=False).rsample((3,)),
        [LOC, COV_TRIL],
    ),
    "MultivariateNormal(precision_matrix)": (
        lambda loc, tril: D.MultivariateNormal(
            loc, precision_matrix=tril.tril() @ tril.tril().mT, validate_args=False
        ).rsample((3,)),
        [LOC, COV_TRIL],
    ),
    "squashed Normal (tanh, affine)": (
        lambda loc, scale: D.TransformedDistribution(
            D.Normal(loc, scale), [D.TanhTransform(), D.AffineTransform(1.0, 2.0)]
        ).rsample((3,)),
        [LOC, SCALE],
    ),
    # The concentration's gradient is the implicit one (tested below); in the rate a draw is X / rate.
    "Gamma (rate)": (lambda rate: D.Gamma(_t([0.4, 3.0]), rate).rsample((3,)), [[2.0, 0.7]]),
    # The Chi2 part depends on df only.
    "StudentT (loc, scale)": (lambda loc, scale: D.StudentT(_t([2.5, 6.0]), loc, scale).rsample((3,)), [LOC, SCALE]),
    "HalfNormal": (lambda scale: D.HalfNormal(scale).rsample((3,)), [SCALE]),
    "HalfCauchy": (lambda scale: D.HalfCauchy(scale).rsample((3,)), [SCALE]),
    "Gumbel": (lambda loc, scale: D.Gumbel(loc, scale).rsample((3,)), [LOC, SCALE]),
    "Pareto": (lambda scale, alpha: D.Pareto(scale, alpha).rsample((3,)), [SCALE, [0.8, 3.0]]),
    "Weibull": (lambda scale, concentration: D.Weibull(scale, concentration).rsample((3,)), [SCALE, [0.7, 3.0]]),
    "ContinuousBernoulli": (lambda probs: D.ContinuousBernoulli(probs).rsample((3,)), [[0.3, 0.8]]),
    "ContinuousBernoulli(logits)": (lambda logits: D.ContinuousBernoulli(logits=logits).rsample((3,)), [[-0.5, 2.0]]),
    "LogitRelaxedBernoulli": (
        lambda temperature, logits: D.LogitRelaxedBernoulli(temperature, logits=logits).rsample((3,)),
        [0.7, [-0.5, 2.0]],
    ),
    "RelaxedBernoulli": (
        lambda temperature, probs: D.RelaxedBernoulli(temperature, probs).rsample((3,)),
        [0.7, [0.3, 0.8]],
    ),
    "ExpRelaxedCategorical": (
        lambda temperature, logits: D.ExpRelaxedCategorical(temperature, logits=logits).rsample((3,)),
        [0.7, [[0.2, -0.3, 0.5], [1.0, 0.1, -0.8]]],
    ),
    "RelaxedOneHotCategorical": (
        lambda temperature, probs: D.RelaxedOneHotCategorical(temperature, probs).rsample((3,)),
        [0.7, [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]],
    ),
    "Kumaraswamy": (lambda a, b: D.Kumaraswamy(a, b).rsample((3,)), [[0.5, 3.0], [2.0, 1.5]]),
    "LowRankMultivariateNormal": (
        lambda loc, factor, diagonal: D.LowRankMultivariateNormal(loc, factor, diagonal).rsample((3,)),
        [LOC, [[1.0, 0.2], [0.3, -0.5]], [0.5, 1.0]],
    ),
}


@pytest.mark.parametrize("name", list(RSAMPLE_CASES))
def test_rsample_gradients_match_central_differences(name):
    draw, arrays = RSAMPLE_CASES[name]
    _directional_check(_seeded(draw), arrays)


UNIT = [0.2, 0.9]
LOG_PROB_CASES = {
    "Normal": (lambda loc, scale, x: D.Normal(loc, scale).log_prob(x), [LOC, SCALE, [0.2, -1.1]]),
    "Uniform": (lambda low, high: D.Uniform(low, high).log_prob(_t([0.5, 1.2])), [[0.0, -1.0], [2.0, 1.5]]),
    "Bernoulli": (lambda probs: D.Bernoulli(probs).log_prob(_t([1.0, 0.0])), [[0.3, 0.8]]),
    "Bernoulli(logits)": (lambda logits: D.Bernoulli(logits=logits).log_prob(_t([1.0, 0.0])), [[-0.5, 2.0]]),
    "Categorical": (lambda probs: D.Categorical(probs).log_prob(_t([2.0, 0.0])), [[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]]),
    "Categorical(logits)": (
        lambda logits: D.Categorical(logits=logits).log_prob(_t([2.0, 0.0])),
        [[[0.2, -0.3, 0.5], [1.0, 0.1, -0.8]]],
    ),
    "MultivariateNormal": (
        lambda loc, tril, x: D.MultivariateNormal(loc, scale_tril=tril.tril()).log_prob(x),
        [LOC, COV_TRIL, [0.2, -1.1]],
    ),
    "Laplace": (lambda loc, scale, x: D.Laplace(loc, scale).log_prob(x), [LOC, SCALE, [0.2, -1.3]]),
    "Exponential": (lambda rate, x: D.Exponential(rate).log_prob(x), [[0.5, 3.0], [0.2, 1.1]]),
    "Gamma": (lambda a, rate, x: D.Gamma(a, rate).log_prob(x), [[0.5, 3.0], [2.0, 0.7], [0.2, 1.1]]),
    "Beta": (lambda a, b, x: D.Beta(a, b).log_prob(x), [[0.5, 3.0], [2.0, 1.5], UNIT]),
    "Dirichlet": (lambda alpha: D.Dirichlet(alpha).log_prob(_t([0.2, 0.3, 0.5])), [[0.5, 3.0, 1.0]]),
    "Poisson": (lambda rate: D.Poisson(rate).log_prob(_t([0.0, 4.0])), [[0.5, 7.0]]),
    "Binomial": (lambda probs: D.Binomial(10, probs).log_prob(_t([3.0, 10.0])), [[0.2, 0.7]]),
    "Cauchy": (lambda loc, scale, x: D.Cauchy(loc, scale).log_prob(x), [LOC, SCALE, [0.2, -1.1]]),
    "StudentT": (
        lambda df, loc, scale, x: D.StudentT(df, loc, scale).log_prob(x),
        [[2.5, 6.0], LOC, SCALE, [0.2, -1.1]],
    ),
    "LogNormal": (lambda loc, scale, x: D.LogNormal(loc, scale).log_prob(x), [LOC, SCALE, [0.2, 1.1]]),
    "squashed Normal (tanh, affine)": (
        lambda loc, scale, y: D.TransformedDistribution(
            D.Normal(loc, scale), [D.TanhTransform(), D.AffineTransform(1.0, 2.0)]
        ).log_prob(y),
        [LOC, SCALE, [0.2, 2.5]],
    ),
    "Geometric": (lambda probs: D.Geometric(probs).log_prob(_t([2.0, 0.0])), [[0.3, 0.8]]),
    "Geometric(logits)": (lambda logits: D.Geometric(logits=logits).log_prob(_t([2.0, 5.0])), [[-0.5, 2.0]]),
    "HalfNormal": (lambda scale, x: D.HalfNormal(scale).log_prob(x), [SCALE, [0.2, 1.1]]),
    "HalfCauchy": (lambda scale, x: D.HalfCauchy(scale).log_prob(x), [SCALE, [0.2, 1.1]]),
    "Gumbel": (lambda loc, scale, x: D.Gumbel(loc, scale).log_prob(x), [LOC, SCALE, [0.2, -1.1]]),
    # The values stay above the scale (the support) along the perturbation.
    "Pareto": (lambda scale, alpha, x: D.Pareto(scale, alpha).log_prob(x), [SCALE, [0.8, 3.0], [2.0, 0.5]]),
    "Weibull": (
        lambda scale, concentration, x: D.Weibull(scale, concentration).log_prob(x),
        [SCALE, [0.7, 3.0], [0.2, 1.1]],
    ),
    "NegativeBinomial": (
        lambda count, probs: D.NegativeBinomial(count, probs).log_prob(_t([2.0, 5.0])),
        [[2.5, 5.0], [0.3, 0.6]],
    ),
    "NegativeBinomial(logits)": (
        lambda logits: D.NegativeBinomial(_t([2.5, 5.0]), logits=logits).log_prob(_t([0.0, 9.0])),
        [[-0.5, 2.0]],
    ),
    "Multinomial": (
        lambda probs: D.Multinomial(10, probs).log_prob(_t([[3.0, 3.0, 4.0], [1.0, 0.0, 9.0]])),
        [[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]],
    ),
    "ContinuousBernoulli": (lambda probs, x: D.ContinuousBernoulli(probs).log_prob(x), [[0.3, 0.8], UNIT]),
    # The Taylor series region: probs within 1e-6 of 1/2 stay inside (0.499, 0.501] along the perturbation.
    "ContinuousBernoulli near 1/2": (
        lambda probs, x: D.ContinuousBernoulli(probs).log_prob(x),
        [[0.4995, 0.5002], UNIT],
    ),
    "LogitRelaxedBernoulli": (
        lambda temperature, logits, y: D.LogitRelaxedBernoulli(temperature, logits=logits).log_prob(y),
        [0.7, [-0.5, 2.0], [0.2, -1.1]],
    ),
    "RelaxedBernoulli": (
        lambda temperature, probs, x: D.RelaxedBernoulli(temperature, probs).log_prob(x),
        [0.7, [0.3, 0.8], UNIT],
    ),
    "ExpRelaxedCategorical": (
        lambda temperature, logits: D.ExpRelaxedCategorical(temperature, logits=logits).log_prob(
            _t(np.log([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]))
        ),
        [0.7, [[0.2, -0.3, 0.5], [1.0, 0.1, -0.8]]],
    ),
    "RelaxedOneHotCategorical": (
        lambda temperature, probs: D.RelaxedOneHotCategorical(temperature, probs).log_prob(
            _t([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
        ),
        [0.7, [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]],
    ),
    "MixtureSameFamily": (
        lambda logits, loc, scale, x: D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(loc, scale)).log_prob(
            x
        ),
        [[0.3, -0.2], [[-1.0, 1.0], [0.0, 2.0]], [1.0, 0.5], [0.2, -1.1]],
    ),
    "MixtureSameFamily cdf": (
        lambda logits, loc, scale, x: D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(loc, scale)).cdf(x),
        [[0.3, -0.2], [[-1.0, 1.0], [0.0, 2.0]], [1.0, 0.5], [0.2, -1.1]],
    ),
    "Kumaraswamy": (lambda a, b, x: D.Kumaraswamy(a, b).log_prob(x), [[0.5, 3.0], [2.0, 1.5], UNIT]),
    "LowRankMultivariateNormal": (
        lambda loc, factor, diagonal, x: D.LowRankMultivariateNormal(loc, factor, diagonal).log_prob(x),
        [LOC, [[1.0, 0.2], [0.3, -0.5]], [0.5, 1.0], [0.2, -1.1]],
    ),
    "FisherSnedecor": (
        lambda df1, df2, x: D.FisherSnedecor(df1, df2).log_prob(x),
        [[5.0, 3.0], [10.0, 8.0], [0.2, 1.1]],
    ),
    "KL(ContinuousBernoulli, ContinuousBernoulli)": (
        lambda p, q: D.kl_divergence(D.ContinuousBernoulli(p), D.ContinuousBernoulli(q)),
        [[0.3, 0.8], [0.6, 0.2]],
    ),
    "KL(LowRankMultivariateNormal, MultivariateNormal)": (
        lambda loc, factor, diagonal: D.kl_divergence(
            D.LowRankMultivariateNormal(loc, factor, diagonal), D.MultivariateNormal(_t([0.0, 1.0]), _t(np.eye(2)))
        ),
        [LOC, [[1.0, 0.2], [0.3, -0.5]], [0.5, 1.0]],
    ),
    "KL(Normal, Normal)": (
        lambda loc, scale: D.kl_divergence(D.Normal(loc, scale), D.Normal(_t([0.0, 1.0]), _t([1.0, 2.0]))),
        [LOC, SCALE],
    ),
}


@pytest.mark.parametrize("name", list(LOG_PROB_CASES))
def test_log_prob_gradients_match_central_differences(name):
    function, arrays = LOG_PROB_CASES[name]
    _directional_check(function, arrays)


# The cdfs' gradients in the shape parameter too, where PyTorch raises (igamma is differentiable in x only).
CDF_CASES = {
    "Gamma": (lambda a, rate, x: D.Gamma(a, rate).cdf(x), [[0.5, 3.0, 30.0], [2.0, 0.7, 1.0], [0.2, 1.1, 33.0]]),
    "Chi2": (lambda df, x: D.Chi2(df).cdf(x), [[1.5, 4.0], [0.3, 5.0]]),
}


@pytest.mark.parametrize("name", list(CDF_CASES))
def test_cdf_gradients_match_central_differences(name):
    function, arrays = CDF_CASES[name]
    _directional_check(function, arrays)


# ---------------------------------------------------------------- gamma-based samples (the implicit
# gradient itself: test_standard_gamma.py)


def test_gamma_gradient_in_the_rate_and_concentration_together():
    onnxnn.manual_seed(18)
    concentration, rate = _t([0.7, 5.0], requires_grad=True), _t([2.0, 0.5], requires_grad=True)
    value = D.Gamma(concentration, rate).rsample()
    value.sum().backward()
    x = value.detach().numpy()
    standard = x * rate.detach().numpy()
    expected = standard * ref.log_gamma_sample_derivative(np.array([0.7, 5.0]), standard) / rate.detach().numpy()
    # The implicit gradient and its reference agree to 1e-8 (test_standard_gamma.py).
    np.testing.assert_allclose(concentration.grad.numpy(), expected, rtol=1e-8)
    np.testing.assert_allclose(rate.grad.numpy(), -x / rate.detach().numpy(), rtol=1e-14)


N = 1000  # draws: the standard errors below come to 2-10% of the gradients checked


def _mean_gradient_within_bounds(per_draw: np.ndarray, expected, what: str) -> None:
    """The mean of per-draw gradients (an unbiased estimate of the gradient of the expectation) is
    within 6 standard errors of the analytic gradient."""
    mean = per_draw.mean(0)
    standard_error = per_draw.std(0) / math.sqrt(per_draw.shape[0])
    assert np.all(np.abs(mean - expected) <= 6 * standard_error), f"{what}: {mean} vs {expected} +- {standard_error}"


def test_beta_reparameterized_gradients_are_unbiased():
    a, b = 0.6, 2.5
    onnxnn.manual_seed(19)
    c1, c0 = _t(np.full(N, a), requires_grad=True), _t(np.full(N, b), requires_grad=True)
    D.Beta(c1, c0).rsample().sum().backward()  # one draw per element: per-draw gradients
    # d/da E[X] = b / (a + b)^2, d/db E[X] = -a / (a + b)^2.
    _mean_gradient_within_bounds(c1.grad.numpy(), b / (a + b) ** 2, "d/da")
    _mean_gradient_within_bounds(c0.grad.numpy(), -a / (a + b) ** 2, "d/db")


def test_dirichlet_reparameterized_gradients_are_unbiased():
    alpha = np.array([0.4, 1.5, 3.0])
    total = alpha.sum()
    onnxnn.manual_seed(20)
    concentration = _t(np.tile(alpha, (N, 1)), requires_grad=True)
    D.Dirichlet(concentration).rsample()[:, 0].sum().backward()
    # E[X_0] = alpha_0 / total: its gradient is (total - alpha_0) / total^2, then -alpha_0 / total^2.
    expected = np.array([total - alpha[0], -alpha[0], -alpha[0]]) / total**2
    _mean_gradient_within_bounds(concentration.grad.numpy(), expected, "d E[X_0] / d alpha")


def test_student_t_gradient_in_df_is_unbiased():
    df = 10.0
    onnxnn.manual_seed(21)
    degrees = _t(np.full(N, df), requires_grad=True)
    D.StudentT(degrees).rsample().pow(2).sum().backward()
    # E[X^2] = df / (df - 2): d/d df = -2 / (df - 2)^2.
    _mean_gradient_within_bounds(degrees.grad.numpy(), -2 / (df - 2) ** 2, "d E[X^2] / d df")


def test_fisher_snedecor_gradient_in_df2_is_unbiased():
    # E[X] = df2 / (df2 - 2) whatever df1: d/d df2 = -2 / (df2 - 2)^2, and 0 in df1.
    df1, df2 = 6.0, 12.0
    onnxnn.manual_seed(22)
    first, second = _t(np.full(N, df1), requires_grad=True), _t(np.full(N, df2), requires_grad=True)
    D.FisherSnedecor(first, second).rsample().sum().backward()
    _mean_gradient_within_bounds(second.grad.numpy(), -2 / (df2 - 2) ** 2, "d E[X] / d df2")
    _mean_gradient_within_bounds(first.grad.numpy(), 0.0, "d E[X] / d df1")
