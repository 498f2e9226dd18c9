"""Validation: bad parameters and values outside the support raise PyTorch's ValueError messages,
constructions PyTorch refuses are refused alike, and validation can be turned off."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D


def _t(values) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64)


BAD_PARAMETERS = [
    (lambda: D.Normal(0.0, -1.0), "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Normal(_t([0.0, float("nan")]), 1.0), "loc", "Real()"),
    (lambda: D.Uniform(1.0, 0.0), "low", "LessThan(upper_bound=0.0)"),
    (lambda: D.Bernoulli(_t([1.5])), "probs", "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.Categorical(_t([0.5, -0.5, 1.0])), "probs", "Simplex()"),
    (lambda: D.Exponential(0.0), "rate", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Gamma(-1.0, 1.0), "concentration", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Beta(1.0, 0.0), "concentration", "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"),
    (lambda: D.Dirichlet(_t([1.0, -2.0])), "concentration", "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"),
    (lambda: D.Poisson(_t([-1.0])), "rate", "GreaterThanEq(lower_bound=0.0)"),
    (lambda: D.Binomial(_t([2.5]), _t([0.5])), "total_count", "IntegerGreaterThan(lower_bound=0)"),
    (
        lambda: D.MultivariateNormal(_t([0.0, 0.0]), _t([[1.0, 2.0], [2.0, 1.0]])),
        "covariance_matrix",
        "PositiveDefinite()",
    ),
    (
        lambda: D.MultivariateNormal(_t([0.0, 0.0]), scale_tril=_t([[1.0, 1.0], [0.0, 1.0]])),
        "scale_tril",
        "LowerCholesky()",
    ),
    (lambda: D.StudentT(_t([0.0])), "df", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Chi2(_t([-2.0])), "df", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Geometric(_t([1.5])), "probs", "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.HalfNormal(_t([-1.0])), "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.HalfCauchy(0.0), "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Gumbel(_t([0.0]), _t([-1.0])), "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Pareto(_t([-1.0]), _t([1.0])), "scale", "GreaterThan(lower_bound=0.0)"),
    # Pareto's alpha is its base Exponential's rate, which validates it first, as in PyTorch.
    (lambda: D.Pareto(_t([1.0]), _t([-1.0])), "rate", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Weibull(_t([-1.0]), _t([1.0])), "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Weibull(_t([1.0]), _t([0.0])), "concentration", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.NegativeBinomial(_t([-1.0]), _t([0.5])), "total_count", "GreaterThanEq(lower_bound=0)"),
    (lambda: D.NegativeBinomial(2.0, _t([1.0])), "probs", "HalfOpenInterval(lower_bound=0.0, upper_bound=1.0)"),
    # The categorical within validates the probabilities first, as in PyTorch.
    (lambda: D.Multinomial(10, _t([0.5, -0.5, 1.0])), "probs", "Simplex()"),
    (lambda: D.ContinuousBernoulli(_t([1.5])), "probs", "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.LogitRelaxedBernoulli(_t(0.5), _t([-0.5])), "probs", "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.RelaxedBernoulli(_t(0.5), _t([1.5])), "probs", "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.ExpRelaxedCategorical(_t(0.5), _t([0.5, -0.5, 1.0])), "probs", "Simplex()"),
    (lambda: D.RelaxedOneHotCategorical(_t(0.5), _t([0.5, -0.5, 1.0])), "probs", "Simplex()"),
    (lambda: D.Kumaraswamy(_t([-1.0]), 1.0), "concentration1", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.Kumaraswamy(_t([1.0]), 0.0), "concentration0", "GreaterThan(lower_bound=0.0)"),
    (
        lambda: D.LowRankMultivariateNormal(_t([0.0, 0.0]), _t([[1.0], [0.0]]), _t([1.0, -1.0])),
        "cov_diag",
        "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)",
    ),
    (
        lambda: D.LowRankMultivariateNormal(_t([0.0, np.nan]), _t([[1.0], [0.0]]), _t([1.0, 1.0])),
        "loc",
        "IndependentConstraint(Real(), 1)",
    ),
    (lambda: D.FisherSnedecor(_t([0.0]), 1.0), "df1", "GreaterThan(lower_bound=0.0)"),
    (lambda: D.FisherSnedecor(1.0, _t([-2.0])), "df2", "GreaterThan(lower_bound=0.0)"),
]


@pytest.mark.parametrize("make, parameter, constraint", BAD_PARAMETERS)
def test_bad_parameters_raise_value_error_naming_the_parameter_and_constraint(make, parameter, constraint):
    with pytest.raises(ValueError) as error:
        make()
    message = str(error.value)
    assert message.startswith(f"Expected parameter {parameter} (Tensor of shape ")
    assert f"to satisfy the constraint {constraint}, but found invalid values:\n" in message


def test_the_parameter_message_is_pytorchs():
    with pytest.raises(ValueError) as error:
        D.Normal(0.0, -1.0)
    assert str(error.value) == (
        "Expected parameter scale (Tensor of shape ()) of distribution Normal(loc: 0.0, scale: -1.0) "
        "to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:\n-1.0"
    )
    # The half distributions' scale is their base's: the message names the half distribution.
    with pytest.raises(ValueError) as error:
        D.HalfNormal(-1.0)
    assert str(error.value) == (
        "Expected parameter scale (Tensor of shape ()) of distribution HalfNormal() "
        "to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:\n-1.0"
    )


def test_a_geometric_probability_of_zero_is_refused_as_pytorch_does():
    # The unit interval admits 0, but then no trial succeeds: PyTorch checks p > 0 besides.
    with pytest.raises(ValueError) as error:
        D.Geometric(onnxnn.tensor([0.0, 0.5]))
    assert str(error.value) == (
        "Expected parameter probs (Tensor of shape (2,)) of distribution Geometric(probs: onnxnn.Size([2])) "
        "to be positive but found invalid values:\ntensor([0.])"
    )
    assert D.Geometric(onnxnn.tensor([0.0]), validate_args=False).probs.item() == 0.0
    assert D.Geometric(logits=onnxnn.tensor([-1000.0])).logits.item() == -1000.0  # logits are not checked so


OUT_OF_SUPPORT = [
    (lambda: D.Normal(0.0, 1.0), [float("nan")], "Real()"),
    (lambda: D.Exponential(1.0), [-0.5], "GreaterThanEq(lower_bound=0.0)"),
    (lambda: D.Bernoulli(0.3), [0.5], "Boolean()"),
    (lambda: D.Categorical(_t([0.5, 0.5])), [2.0], "IntegerInterval(lower_bound=0, upper_bound=1)"),
    (lambda: D.Beta(2.0, 2.0), [1.5], "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.Dirichlet(_t([1.0, 1.0])), [[0.5, 0.6]], "Simplex()"),
    (lambda: D.Poisson(2.0), [1.5], "IntegerGreaterThan(lower_bound=0)"),
    (lambda: D.Gamma(2.0, 1.0), [-1.0], "GreaterThanEq(lower_bound=0.0)"),
    (lambda: D.LogNormal(0.0, 1.0), [-1.0], "GreaterThan(lower_bound=0.0)"),
    (lambda: D.OneHotCategorical(_t([0.5, 0.5])), [[1.0, 1.0]], "OneHot()"),
    (lambda: D.Geometric(0.5), [1.5], "IntegerGreaterThan(lower_bound=0)"),
    (lambda: D.Geometric(0.5), [-1.0], "IntegerGreaterThan(lower_bound=0)"),
    (lambda: D.HalfNormal(1.0), [-1.0], "GreaterThanEq(lower_bound=0.0)"),
    (lambda: D.HalfCauchy(1.0), [-1.0], "GreaterThanEq(lower_bound=0.0)"),
    (lambda: D.Gumbel(0.0, 1.0), [float("nan")], "Real()"),
    (lambda: D.Pareto(2.0, 1.0), [1.0], "GreaterThanEq(lower_bound=2.0)"),
    (lambda: D.Weibull(2.0, 1.0), [0.0], "GreaterThan(lower_bound=0.0)"),
    (lambda: D.NegativeBinomial(2.0, 0.5), [1.5], "IntegerGreaterThan(lower_bound=0)"),
    (lambda: D.Multinomial(3, _t([0.5, 0.5])), [[2.0, 2.0]], "Multinomial()"),
    (lambda: D.Multinomial(3, _t([0.5, 0.5])), [[-1.0, 2.0]], "Multinomial()"),
    (lambda: D.ContinuousBernoulli(0.3), [1.5], "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.LogitRelaxedBernoulli(_t(0.5), 0.3), [float("nan")], "Real()"),
    (lambda: D.RelaxedBernoulli(_t(0.5), 0.3), [1.5], "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (
        lambda: D.ExpRelaxedCategorical(_t(0.5), _t([0.5, 0.5])),
        [[0.0, float("nan")]],
        "IndependentConstraint(Real(), 1)",
    ),
    (lambda: D.RelaxedOneHotCategorical(_t(0.5), _t([0.5, 0.5])), [[0.5, 0.6]], "Simplex()"),
    (
        lambda: D.MixtureSameFamily(D.Categorical(_t([0.5, 0.5])), D.Exponential(_t([1.0, 2.0]))),
        [-1.0],
        "MixtureSameFamilyConstraint(GreaterThanEq(lower_bound=0.0))",
    ),
    (lambda: D.Kumaraswamy(2.0, 2.0), [1.5], "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (
        lambda: D.LowRankMultivariateNormal(_t([0.0, 0.0]), _t([[1.0], [0.0]]), _t([1.0, 1.0])),
        [[0.0, float("nan")]],
        "IndependentConstraint(Real(), 1)",
    ),
    (lambda: D.FisherSnedecor(2.0, 3.0), [0.0], "GreaterThan(lower_bound=0.0)"),
]


@pytest.mark.parametrize("make, value, support", OUT_OF_SUPPORT)
def test_values_outside_the_support_raise_value_error(make, value, support):
    distribution = make()
    with pytest.raises(ValueError) as error:
        distribution.log_prob(_t(value))
    message = str(error.value)
    assert message.startswith(
        f"Expected value argument (Tensor of shape {tuple(np.shape(value))}) to be within the support ({support}) "
        "of the distribution "
    )


def test_shape_errors_of_scored_values():
    normal = D.Normal(_t([0.0, 1.0, 2.0]), 1.0)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Value is not broadcastable with batch_shape+event_shape: onnxnn.Size([2]) vs onnxnn.Size([3])."
        ),
    ):
        normal.log_prob(_t([0.0, 1.0]))
    mvn = D.MultivariateNormal(_t([0.0, 0.0]), _t(np.eye(2)))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        mvn.log_prob(_t([0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        normal.log_prob(0.5)


def test_validation_can_be_turned_off_per_instance_and_by_default():
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    try:
        D.Distribution.set_default_validate_args(False)
        assert D.Normal(0.0, -1.0).scale.item() == -1.0
        assert D.Exponential(1.0).log_prob(_t(-1.0)).item() == 1.0  # log 1 - 1 * (-1)
        with pytest.raises(ValueError):
            D.Normal(0.0, -1.0, validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_a_distribution_without_arg_constraints_warns():
    class Plain(D.Distribution):
        pass

    with pytest.warns(UserWarning, match="does not define `arg_constraints`"):
        Plain()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Plain(validate_args=False)


CONSTRUCTION_ERRORS = [
    (lambda: D.Bernoulli(), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Bernoulli(0.5, 0.0), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Categorical(_t(0.5)), "`probs` parameter must be at least one-dimensional."),
    (lambda: D.Categorical(logits=_t(0.5)), "`logits` parameter must be at least one-dimensional."),
    (lambda: D.Binomial(10), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Geometric(), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Geometric(0.5, 0.0), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Dirichlet(_t(1.0)), "`concentration` parameter must be at least one-dimensional."),
    (lambda: D.MultivariateNormal(_t(0.0), _t([[1.0]])), "loc must be at least one-dimensional."),
    (
        lambda: D.MultivariateNormal(_t([0.0])),
        "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.",
    ),
    (lambda: D.MultivariateNormal(_t([0.0]), _t([1.0])), "covariance_matrix must be at least two-dimensional"),
    (
        lambda: D.Independent(D.Normal(_t([0.0]), 1.0), 2),
        "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual 2 vs 1",
    ),
    (
        lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), "exp"),
        "transforms must be a Transform or list, but was exp",
    ),
    (
        lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), ["exp"]),
        "transforms must be a Transform or a list of Transforms",
    ),
    (lambda: D.NegativeBinomial(10), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Multinomial(10), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Multinomial(10, _t(0.5)), "`probs` parameter must be at least one-dimensional."),
    (lambda: D.ContinuousBernoulli(), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.ContinuousBernoulli(0.5, 0.0), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.RelaxedBernoulli(_t(1.0)), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.LogitRelaxedBernoulli(_t(1.0), 0.5, 0.0), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.RelaxedOneHotCategorical(_t(1.0)), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.ExpRelaxedCategorical(_t(1.0), _t(0.5)), "`probs` parameter must be at least one-dimensional."),
    (
        lambda: D.MixtureSameFamily(D.Bernoulli(0.5), D.Normal(_t([0.0, 1.0]), 1.0)),
        "The Mixture distribution needs to be an  instance of torch.distributions.Categorical",
    ),
    (
        lambda: D.MixtureSameFamily(D.Categorical(_t([0.5, 0.5])), "normal"),
        "The Component distribution needs to be an instance of torch.distributions.Distribution",
    ),
    (
        lambda: D.MixtureSameFamily(D.Categorical(_t(np.full((3, 2), 0.5))), D.Normal(_t(np.zeros((4, 2))), 1.0)),
        "`mixture_distribution.batch_shape` (onnxnn.Size([3])) is not compatible with "
        "`component_distribution.batch_shape`(onnxnn.Size([4]))",
    ),
    (
        lambda: D.MixtureSameFamily(D.Categorical(_t([0.5, 0.5])), D.Normal(_t([0.0, 1.0, 2.0]), 1.0)),
        "`mixture_distribution component` (2) does not equal `component_distribution.batch_shape[-1]` (3)",
    ),
    (
        lambda: D.LowRankMultivariateNormal(_t(0.0), _t([[1.0]]), _t([1.0])),
        "loc must be at least one-dimensional.",
    ),
    (
        lambda: D.LowRankMultivariateNormal(_t([0.0, 0.0]), _t([1.0, 0.0]), _t([1.0, 1.0])),
        "cov_factor must be at least two-dimensional, with optional leading batch dimensions",
    ),
    (
        lambda: D.LowRankMultivariateNormal(_t([0.0, 0.0]), _t([[1.0, 0.0, 0.0]]), _t([1.0, 1.0])),
        "cov_factor must be a batch of matrices with shape 2 x m",
    ),
    (
        lambda: D.LowRankMultivariateNormal(_t([0.0, 0.0]), _t([[1.0], [0.0]]), _t([1.0, 1.0, 1.0])),
        "cov_diag must be a batch of vectors with shape onnxnn.Size([2])",
    ),
    (
        lambda: D.LowRankMultivariateNormal(_t(np.zeros((3, 2))), _t(np.zeros((4, 2, 1))), _t([1.0, 1.0])),
        "Incompatible batch shapes: loc onnxnn.Size([3, 2]), cov_factor onnxnn.Size([4, 2, 1]), "
        "cov_diag onnxnn.Size([2])",
    ),
]


def test_a_multinomial_total_count_must_be_an_int():
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count is not supported"):
        D.Multinomial(_t([10.0, 5.0]), _t([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count is not supported"):
        D.Multinomial(2.5, _t([0.5, 0.5]))


def test_continuous_bernoulli_validates_probs_before_clamping_them():
    # The clamp to [eps, 1 - eps] would move 1.5 into the interval: the given value is checked.
    with pytest.raises(ValueError) as error:
        D.ContinuousBernoulli(_t([0.5, 1.5]))
    assert str(error.value).startswith("Expected parameter probs (Tensor of shape (2,)) of distribution ")
    assert str(error.value).endswith("but found invalid values:\ntensor([0.5000, 1.5000], dtype=onnxnn.float64)")
    clamped = D.ContinuousBernoulli(_t([0.0, 1.0])).probs.numpy()
    eps = np.finfo(np.float64).eps
    assert clamped.tolist() == [eps, 1 - eps]
    assert D.ContinuousBernoulli(_t([1.5]), validate_args=False).probs.item() == 1 - eps


@pytest.mark.parametrize("make, message", CONSTRUCTION_ERRORS)
def test_construction_errors(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()
