"""The Distribution API: argument and sample validation (PyTorch's ValueError messages), repr, expand,
shapes, enumerate_support, lazily computed parameterizations and the flags."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D
from onnxnn.distributions import constraints


def _t(values) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64)


# ---------------------------------------------------------------- validation


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


# ---------------------------------------------------------------- repr, shapes, expand


def test_repr_is_pytorchs():
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Normal(_t([0.0, 1.0, 2.0]), 1.0)) == "Normal(loc: onnxnn.Size([3]), scale: onnxnn.Size([3]))"
    assert repr(D.Categorical(logits=_t([0.0, 1.0]))) == "Categorical(logits: onnxnn.Size([2]))"
    assert repr(D.Independent(D.Normal(_t([0.0, 1.0]), 1.0), 1)) == (
        "Independent(Normal(loc: onnxnn.Size([2]), scale: onnxnn.Size([2])), 1)"
    )
    assert repr(D.LogNormal(0.0, 1.0)) == "LogNormal()"
    assert repr(D.HalfNormal(1.0)) == "HalfNormal()"  # scale is the base distribution's
    assert repr(D.Pareto(1.0, 2.0)) == "Pareto(alpha: 2.0, scale: 1.0)"  # in arg_constraints' order
    assert repr(D.Geometric(logits=_t([0.0, 1.0]))) == "Geometric(logits: onnxnn.Size([2]))"


@pytest.mark.parametrize(
    "make, batch_shape, event_shape",
    [
        (lambda: D.Normal(0.0, 1.0), (), ()),
        (lambda: D.Normal(_t([[0.0], [1.0]]), _t([1.0, 2.0, 3.0])), (2, 3), ()),
        (lambda: D.Categorical(_t(np.full((4, 3), 1 / 3))), (4,), ()),
        (lambda: D.OneHotCategorical(_t(np.full((4, 3), 1 / 3))), (4,), (3,)),
        (lambda: D.MultivariateNormal(_t(np.zeros((5, 2))), _t(np.eye(2))), (5,), (2,)),
        (lambda: D.MultivariateNormal(_t([0.0, 0.0]), _t(np.tile(np.eye(2), (3, 1, 1)))), (3,), (2,)),
        (lambda: D.Dirichlet(_t(np.ones((2, 4)))), (2,), (4,)),
        (lambda: D.Independent(D.Normal(_t(np.zeros((2, 3, 4))), 1.0), 2), (2,), (3, 4)),
        (
            lambda: D.TransformedDistribution(
                D.Normal(_t(np.zeros(3)), 1.0), D.AffineTransform(0.0, _t(np.ones((2, 3))))
            ),
            (2, 3),
            (),
        ),
        (
            lambda: D.TransformedDistribution(D.Normal(_t(np.zeros(6)), 1.0), D.ReshapeTransform((6,), (2, 3))),
            (),
            (2, 3),
        ),
        (lambda: D.NegativeBinomial(3.0, 0.5), (), ()),
        (lambda: D.Multinomial(4, _t(np.full((5, 3), 1 / 3))), (5,), (3,)),
        (lambda: D.ContinuousBernoulli(0.3), (), ()),
        (lambda: D.RelaxedBernoulli(_t(0.5), _t(np.full((2, 3), 0.5))), (2, 3), ()),
        (lambda: D.RelaxedOneHotCategorical(_t(0.5), _t(np.full((4, 3), 1 / 3))), (4,), (3,)),
        (lambda: D.ExpRelaxedCategorical(_t(0.5), _t(np.full((4, 3), 1 / 3))), (4,), (3,)),
        (lambda: D.MixtureSameFamily(D.Categorical(_t(np.ones(3))), D.Normal(_t(np.zeros((2, 3))), 1.0)), (2,), ()),
        (
            lambda: D.MixtureSameFamily(
                D.Categorical(_t(np.ones((2, 3)))), D.Independent(D.Normal(_t(np.zeros((2, 3, 4))), 1.0), 1)
            ),
            (2,),
            (4,),
        ),
        (lambda: D.Kumaraswamy(_t([1.0, 2.0]), 3.0), (2,), ()),
        (
            lambda: D.LowRankMultivariateNormal(_t(np.zeros((5, 3))), _t(np.ones((3, 2))), _t(np.ones(3))),
            (5,),
            (3,),
        ),
        (lambda: D.LowRankMultivariateNormal(_t(np.zeros(3)), _t(np.ones((4, 3, 2))), _t(np.ones(3))), (4,), (3,)),
        (lambda: D.FisherSnedecor(_t([1.0, 2.0]), 3.0), (2,), ()),
    ],
)
def test_batch_and_event_shapes(make, batch_shape, event_shape):
    distribution = make()
    assert tuple(distribution.batch_shape) == batch_shape and tuple(distribution.event_shape) == event_shape
    assert tuple(distribution.sample((2,)).shape) == (2,) + batch_shape + event_shape


EXPANDABLE = [
    lambda: D.Normal(_t([0.0, 1.0]), 1.0),
    lambda: D.Uniform(_t([0.0, 1.0]), 2.0),
    lambda: D.Bernoulli(_t([0.2, 0.6])),
    lambda: D.Categorical(logits=_t([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]])),
    lambda: D.OneHotCategorical(_t([[0.2, 0.8], [0.5, 0.5]])),
    lambda: D.MultivariateNormal(_t([[0.0, 0.0], [1.0, 1.0]]), _t(np.eye(2))),
    lambda: D.LogNormal(_t([0.0, 1.0]), 1.0),
    lambda: D.Laplace(_t([0.0, 1.0]), 1.0),
    lambda: D.Exponential(_t([1.0, 2.0])),
    lambda: D.Gamma(_t([1.0, 2.0]), 1.0),
    lambda: D.Chi2(_t([1.0, 2.0])),
    lambda: D.Beta(_t([1.0, 2.0]), 1.0),
    lambda: D.Dirichlet(_t([[1.0, 2.0], [3.0, 4.0]])),
    lambda: D.Poisson(_t([1.0, 2.0])),
    lambda: D.Binomial(10, _t([0.2, 0.6])),
    lambda: D.Cauchy(_t([0.0, 1.0]), 1.0),
    lambda: D.StudentT(_t([3.0, 4.0])),
    lambda: D.Geometric(_t([0.2, 0.6])),
    lambda: D.Geometric(logits=_t([0.2, -0.6])),
    lambda: D.HalfNormal(_t([1.0, 2.0])),
    lambda: D.HalfCauchy(_t([1.0, 2.0])),
    lambda: D.Gumbel(_t([0.0, 1.0]), 2.0),
    lambda: D.Pareto(_t([1.0, 2.0]), 3.0),
    lambda: D.Weibull(_t([1.0, 2.0]), _t([0.5, 3.0])),
    lambda: D.Independent(D.Normal(_t([[0.0, 1.0], [2.0, 3.0]]), 1.0), 1),
    lambda: D.TransformedDistribution(D.Normal(_t([0.0, 1.0]), 1.0), D.TanhTransform()),
    lambda: D.NegativeBinomial(_t([2.0, 3.5]), _t([0.2, 0.6])),
    lambda: D.NegativeBinomial(2.0, logits=_t([0.2, -0.6])),
    lambda: D.Multinomial(5, _t([[0.2, 0.8], [0.5, 0.5]])),
    lambda: D.ContinuousBernoulli(_t([0.2, 0.6])),
    lambda: D.ContinuousBernoulli(logits=_t([0.2, -0.6])),
    lambda: D.LogitRelaxedBernoulli(_t(0.5), _t([0.2, 0.6])),
    lambda: D.RelaxedBernoulli(_t(0.5), logits=_t([0.2, -0.6])),
    lambda: D.ExpRelaxedCategorical(_t(0.5), _t([[0.2, 0.8], [0.5, 0.5]])),
    lambda: D.RelaxedOneHotCategorical(_t(0.5), _t([[0.2, 0.8], [0.5, 0.5]])),
    lambda: D.MixtureSameFamily(D.Categorical(_t([0.3, 0.7])), D.Normal(_t([[0.0, 1.0], [2.0, 3.0]]), 1.0)),
    lambda: D.MixtureSameFamily(
        D.Categorical(_t([[0.3, 0.7], [0.5, 0.5]])), D.Independent(D.Normal(_t(np.zeros((2, 2, 3))), 1.0), 1)
    ),
    lambda: D.Kumaraswamy(_t([1.0, 2.0]), _t([0.5, 3.0])),
    lambda: D.LowRankMultivariateNormal(_t([[0.0, 0.0], [1.0, 1.0]]), _t([[1.0], [0.5]]), _t([1.0, 2.0])),
    lambda: D.FisherSnedecor(_t([3.0, 5.0]), 4.0),
]


@pytest.mark.parametrize("make", EXPANDABLE, ids=lambda make: type(make()).__name__)
def test_expand_adds_batch_dimensions_and_keeps_the_values(make):
    distribution = make()
    batch = tuple(distribution.batch_shape)
    expanded = distribution.expand((3,) + batch)
    assert type(expanded) is type(distribution)
    assert tuple(expanded.batch_shape) == (3,) + batch and expanded.event_shape == distribution.event_shape
    assert expanded._validate_args == distribution._validate_args
    value = distribution.sample()
    expected = distribution.log_prob(value).numpy()
    # The same arithmetic on other shapes: executors may fuse and vectorize it differently, which moves
    # the last bits of the summed terms (of order 1 to 10; NegativeBinomial(logits)'s lgamma sums came
    # out 1e-15 apart), hence a few ulps of those terms.
    np.testing.assert_allclose(
        expanded.log_prob(value).numpy(), np.broadcast_to(expected, (3,) + expected.shape), rtol=0, atol=1e-14
    )


def test_expand_of_a_subclass_with_its_own_init_must_be_overridden():
    class Shifted(D.Normal):
        def __init__(self, loc):
            super().__init__(loc + 1, 1.0)

    with pytest.raises(NotImplementedError, match="must also define a custom .expand\\(\\) method"):
        Shifted(_t([0.0])).expand((2, 1))


def test_sample_shape_must_be_a_sequence():
    with pytest.raises(TypeError):
        D.Normal(0.0, 1.0).sample(5)


# ---------------------------------------------------------------- enumerate_support, parameterizations, flags


def test_enumerate_support():
    bernoulli = D.Bernoulli(_t([0.2, 0.6, 0.9]))
    assert bernoulli.enumerate_support().numpy().tolist() == [[0.0] * 3, [1.0] * 3]
    assert tuple(bernoulli.enumerate_support(expand=False).shape) == (2, 1)
    categorical = D.Categorical(_t(np.full((2, 3), 1 / 3)))
    assert categorical.enumerate_support().dtype == onnxnn.int64
    assert categorical.enumerate_support().numpy().tolist() == [[0, 0], [1, 1], [2, 2]]
    one_hot = D.OneHotCategorical(_t([[0.5, 0.5]]))
    assert one_hot.enumerate_support().numpy().tolist() == [[[1.0, 0.0]], [[0.0, 1.0]]]
    binomial = D.Binomial(3, _t([0.5, 0.1]))
    assert binomial.enumerate_support(expand=False).numpy().ravel().tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count not supported by `enumerate_support`."):
        D.Binomial(_t([2.0, 3.0]), _t([0.5, 0.5])).enumerate_support()
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count not supported by `entropy`."):
        D.Binomial(_t([2.0, 3.0]), _t([0.5, 0.5])).entropy()
    independent = D.Independent(D.Bernoulli(_t([[0.5, 0.5]])), 1)
    assert not independent.has_enumerate_support
    with pytest.raises(NotImplementedError, match="Enumeration over cartesian product is not implemented"):
        independent.enumerate_support()


def test_probs_and_logits_are_computed_once_on_demand():
    bernoulli = D.Bernoulli(_t([0.2, 0.75]))
    assert "logits" not in bernoulli.__dict__
    np.testing.assert_allclose(bernoulli.logits.numpy(), np.log([0.25, 3.0]), rtol=1e-15)
    assert "logits" in bernoulli.__dict__ and bernoulli.logits is bernoulli.logits
    categorical = D.Categorical(logits=_t([0.0, np.log(3.0)]))
    np.testing.assert_allclose(categorical.probs.numpy(), [0.25, 0.75], rtol=1e-15)
    np.testing.assert_allclose(categorical.logits.numpy(), np.log([0.25, 0.75]), rtol=1e-15)  # normalized
    # The lazy parameterization has gradients even when first read under no_grad, as PyTorch's.
    logits = onnxnn.tensor([0.5], dtype=onnxnn.float64, requires_grad=True)
    lazy = D.Bernoulli(logits=logits)
    with onnxnn.no_grad():
        probs = lazy.probs
    assert probs.requires_grad


def test_rsample_flags():
    assert D.Normal.has_rsample and not D.Bernoulli.has_rsample and not D.Poisson.has_rsample
    assert D.Independent(D.Normal(_t([0.0]), 1.0), 1).has_rsample
    assert not D.Independent(D.Bernoulli(_t([0.5])), 1).has_rsample
    assert D.TransformedDistribution(D.Gamma(1.0, 1.0), D.ExpTransform()).has_rsample
    assert not D.Geometric.has_rsample
    for reparameterized in (
        D.HalfNormal(1.0),
        D.HalfCauchy(1.0),
        D.Gumbel(0.0, 1.0),
        D.Pareto(1.0, 2.0),
        D.Weibull(1.0, 2.0),
    ):
        assert reparameterized.has_rsample
    for reparameterized in (
        D.ContinuousBernoulli(0.3),
        D.LogitRelaxedBernoulli(_t(0.5), 0.3),
        D.RelaxedBernoulli(_t(0.5), 0.3),
        D.ExpRelaxedCategorical(_t(0.5), _t([0.5, 0.5])),
        D.RelaxedOneHotCategorical(_t(0.5), _t([0.5, 0.5])),
        D.Kumaraswamy(1.0, 2.0),
        D.LowRankMultivariateNormal(_t([0.0]), _t([[1.0]]), _t([1.0])),
        D.FisherSnedecor(1.0, 2.0),
    ):
        assert reparameterized.has_rsample
    for not_reparameterized in (
        D.NegativeBinomial(2.0, 0.5),
        D.Multinomial(2, _t([0.5, 0.5])),
        D.MixtureSameFamily(D.Categorical(_t([0.5, 0.5])), D.Normal(_t([0.0, 1.0]), 1.0)),
    ):
        assert not not_reparameterized.has_rsample
        with pytest.raises(NotImplementedError):
            not_reparameterized.rsample()
    with pytest.raises(NotImplementedError):
        D.Geometric(0.5).rsample()
    with pytest.raises(NotImplementedError):
        D.Categorical(_t([0.5, 0.5])).rsample()


def test_straight_through_one_hot_passes_gradients_to_the_probabilities():
    probs = onnxnn.tensor([0.2, 0.8], dtype=onnxnn.float64, requires_grad=True)
    draw = D.OneHotCategoricalStraightThrough(probs).rsample()
    assert sorted(draw.detach().numpy().tolist()) == [0.0, 1.0]
    (draw * _t([1.0, 2.0])).sum().backward()
    # d probs/d raw probs of the normalization p / sum(p) (sum 1 here): I - p 1^T, applied to (1, 2).
    np.testing.assert_allclose(probs.grad.numpy(), [1.0 - 1.8, 2.0 - 1.8], rtol=1e-14)


def test_support_and_arg_constraints():
    assert D.Normal.support is constraints.real and D.Normal.arg_constraints["scale"] is constraints.positive
    assert constraints.is_dependent(D.Uniform.support)
    uniform = D.Uniform(0.0, 2.0)
    assert repr(uniform.support) == "Interval(lower_bound=0.0, upper_bound=2.0)"
    assert repr(D.Binomial(4, _t([0.5])).support).startswith("IntegerInterval(lower_bound=0, upper_bound=")
    assert repr(D.Independent(D.Normal(_t([0.0]), 1.0), 1).support) == "IndependentConstraint(Real(), 1)"
    assert repr(D.TransformedDistribution(D.Normal(0.0, 1.0), D.TanhTransform()).support) == (
        "Interval(lower_bound=-1.0, upper_bound=1.0)"
    )
    assert D.Geometric.support is constraints.nonnegative_integer
    assert D.HalfNormal.support is constraints.nonnegative and D.HalfCauchy.support is constraints.nonnegative
    assert D.Gumbel.support is constraints.real and D.Weibull.support is constraints.positive
    assert constraints.is_dependent(D.Pareto.support)
    assert repr(D.Pareto(_t([1.0, 2.0]), 3.0).support) == (
        "GreaterThanEq(lower_bound=tensor([1., 2.], dtype=onnxnn.float64))"
    )
    assert list(D.Pareto.arg_constraints) == ["alpha", "scale"]
    assert list(D.Weibull.arg_constraints) == ["scale", "concentration"]
    assert D.Geometric.arg_constraints == {"probs": constraints.unit_interval, "logits": constraints.real}
    assert D.NegativeBinomial.support is constraints.nonnegative_integer
    assert list(D.NegativeBinomial.arg_constraints) == ["total_count", "probs", "logits"]
    assert repr(D.Multinomial(4, _t([0.5, 0.5])).support) == "Multinomial()"
    assert D.Multinomial(4, _t([0.5, 0.5])).support.upper_bound == 4
    assert D.ContinuousBernoulli.support is constraints.unit_interval
    assert (
        D.RelaxedBernoulli.support is constraints.unit_interval and D.LogitRelaxedBernoulli.support is constraints.real
    )
    assert D.RelaxedOneHotCategorical.support is constraints.simplex
    assert D.ExpRelaxedCategorical.support is constraints.real_vector
    assert D.Kumaraswamy.support is constraints.unit_interval and D.FisherSnedecor.support is constraints.positive
    assert D.LowRankMultivariateNormal.support is constraints.real_vector
    assert list(D.LowRankMultivariateNormal.arg_constraints) == ["loc", "cov_factor", "cov_diag"]
    assert D.MixtureSameFamily.arg_constraints == {}
    mixture = D.MixtureSameFamily(D.Categorical(_t([0.5, 0.5])), D.Independent(D.Normal(_t(np.zeros((2, 3))), 1.0), 1))
    assert repr(mixture.support) == "MixtureSameFamilyConstraint(IndependentConstraint(Real(), 1))"
    assert mixture.support.event_dim == 1 and not mixture.support.is_discrete


def test_new_distributions_repr():
    assert repr(D.NegativeBinomial(2.0, 0.5)) == "NegativeBinomial(total_count: 2.0, probs: 0.5)"
    assert repr(D.ContinuousBernoulli(logits=_t([0.0, 1.0]))) == "ContinuousBernoulli(logits: onnxnn.Size([2]))"
    assert repr(D.Kumaraswamy(1.0, 2.0)) == "Kumaraswamy(concentration1: 1.0, concentration0: 2.0)"
    assert repr(D.MixtureSameFamily(D.Categorical(_t([0.5, 0.5])), D.Normal(_t([0.0, 1.0]), 1.0))) == (
        "MixtureSameFamily(\n  Categorical(probs: onnxnn.Size([2]), logits: onnxnn.Size([2])),\n"
        "  Normal(loc: onnxnn.Size([2]), scale: onnxnn.Size([2])))"
    )


def test_relaxed_distributions_expose_their_parameters():
    relaxed = D.RelaxedBernoulli(_t(0.5), _t([0.25]))
    assert relaxed.temperature.item() == 0.5
    np.testing.assert_allclose(relaxed.logits.numpy(), np.log([1 / 3]), rtol=1e-15)
    categorical = D.RelaxedOneHotCategorical(_t(0.5), logits=_t([0.0, np.log(3.0)]))
    np.testing.assert_allclose(categorical.probs.numpy(), [0.25, 0.75], rtol=1e-15)
    # A number is taken as a tensor of the parameters' dtype.
    assert D.LogitRelaxedBernoulli(2.0, _t([0.5])).temperature.dtype == onnxnn.float64
