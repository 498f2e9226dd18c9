"""The Distribution API: repr, shapes, expand, enumerate_support, lazily computed parameterizations,
the flags and the constraints. Validation is in ``test_validation.py``."""

from __future__ import annotations


import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D
from onnxnn.distributions import constraints


def _t(values) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64)


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
    # PyTorch's flag is False though its rsample works (and RelaxedBernoulli's, built on it, is True).
    logit_relaxed = D.LogitRelaxedBernoulli(_t(0.5), _t([0.3]))
    assert not D.LogitRelaxedBernoulli.has_rsample and not logit_relaxed.has_rsample
    assert tuple(logit_relaxed.rsample((2,)).shape) == (2, 1)
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
