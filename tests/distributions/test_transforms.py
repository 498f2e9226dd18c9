"""Transforms and TransformedDistribution: forward and inverse maps and log-Jacobians against numpy,
composition, caching, shapes and the squashed Gaussian of RL."""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D
from onnxnn.distributions import constraints

from . import reference as ref


def _t(values) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64)


def _values(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


X = np.array([-2.5, -0.3, 0.0, 0.7, 3.0])
POSITIVE = np.array([0.1, 0.5, 1.0, 2.0, 7.0])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# (transform, inputs, forward, log |dy/dx|) with numpy formulas.
TRANSFORMS = [
    ("exp", D.ExpTransform(), X, np.exp(X), X),
    ("sigmoid", D.SigmoidTransform(), X, _sigmoid(X), np.log(_sigmoid(X) * (1 - _sigmoid(X)))),
    ("softplus", D.SoftplusTransform(), X, np.log1p(np.exp(X)), np.log(_sigmoid(X))),
    ("tanh", D.TanhTransform(), X, np.tanh(X), np.log1p(-(np.tanh(X) ** 2))),
    ("affine", D.AffineTransform(1.0, -2.0), X, 1 - 2 * X, np.full(5, math.log(2))),
    ("affine tensors", D.AffineTransform(_t(X), _t(POSITIVE)), X, X + POSITIVE * X, np.log(POSITIVE)),
    ("power", D.PowerTransform(_t(3.0)), POSITIVE, POSITIVE**3, np.log(3 * POSITIVE**2)),
    (
        "compose",
        D.ComposeTransform([D.AffineTransform(0.0, 2.0), D.ExpTransform()]),
        X,
        np.exp(2 * X),
        math.log(2) + 2 * X,
    ),
]

# Each map is a few elementwise ops of a few ulps; log-Jacobians near |x| = 3 lose up to e^3 ulps to cancellation.
RTOL, ATOL = 1e-14, 1e-13


@pytest.mark.parametrize("name, transform, x, y, log_det", TRANSFORMS, ids=[case[0] for case in TRANSFORMS])
def test_forward_inverse_and_log_abs_det_jacobian(name, transform, x, y, log_det):
    forward = transform(_t(x))
    np.testing.assert_allclose(_values(forward), y, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(_values(transform.inv(_t(y))), x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_values(transform.log_abs_det_jacobian(_t(x), forward)), log_det, rtol=RTOL, atol=ATOL)
    inverse = transform.inv
    assert inverse.inv is transform
    np.testing.assert_allclose(_values(inverse.log_abs_det_jacobian(_t(y), _t(x))), -log_det, rtol=RTOL, atol=ATOL)


def test_tanh_log_det_stays_finite_where_tanh_rounds_to_one():
    # At x = 40, 1 - tanh(x)^2 is 0 in float64; the softplus form gives -2 (x - log 2) + O(e^-2x).
    log_det = _values(D.TanhTransform().log_abs_det_jacobian(_t([40.0]), _t([1.0])))
    np.testing.assert_allclose(log_det, [2 * (math.log(2) - 40.0)], rtol=1e-15)


def test_cache_returns_the_pre_image_itself():
    transform = D.TanhTransform(cache_size=1)
    x = _t([30.0])  # tanh rounds to 1: only the cache gives x back
    y = transform(x)
    assert transform.inv(y) is x
    assert transform(x) is y
    uncached = D.TanhTransform()
    assert uncached.inv(uncached(x)) is not x
    assert transform.with_cache(1) is transform and uncached.with_cache(1)._cache_size == 1
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        D.ExpTransform(cache_size=2)


def test_equality_domains_and_signs():
    assert D.ExpTransform() == D.ExpTransform() and D.ExpTransform() != D.SigmoidTransform()
    assert D.AffineTransform(0.0, 2.0) == D.AffineTransform(0.0, 2.0) != D.AffineTransform(0.0, 3.0)
    assert D.ExpTransform().inv == D.ExpTransform().inv
    assert D.ComposeTransform([D.ExpTransform()]) == D.ComposeTransform([D.ExpTransform()])
    assert D.ExpTransform().domain is constraints.real and D.ExpTransform().codomain is constraints.positive
    assert D.ExpTransform().inv.domain is constraints.positive
    assert D.AffineTransform(0.0, -2.0).sign == -1 and D.ExpTransform().sign == 1
    assert D.ComposeTransform([D.AffineTransform(0.0, -1.0), D.AffineTransform(0.0, -1.0)]).sign == 1
    assert D.identity_transform(_t([1.0])).item() == 1.0
    with pytest.raises(TypeError):
        hash(D.ExpTransform())  # unhashable, as PyTorch's (they define __eq__)


def test_event_dims_of_compositions_and_independent_transforms():
    affine_vector = D.AffineTransform(0.0, _t([1.0, 2.0]), event_dim=1)
    assert affine_vector.domain.event_dim == 1
    x = _t([[1.0, 1.0], [2.0, 2.0]])
    np.testing.assert_allclose(_values(affine_vector.log_abs_det_jacobian(x, affine_vector(x))), [math.log(2)] * 2)
    independent = D.IndependentTransform(D.ExpTransform(), 1)
    assert independent.domain.event_dim == 1 and repr(independent) == "IndependentTransform(ExpTransform(), 1)"
    np.testing.assert_allclose(_values(independent.log_abs_det_jacobian(x, independent(x))), [2.0, 4.0])
    composed = D.ComposeTransform([D.ExpTransform(), D.IndependentTransform(D.AffineTransform(0.0, 2.0), 1)])
    assert composed.domain.event_dim == 1 and composed.codomain.event_dim == 1
    np.testing.assert_allclose(
        _values(composed.log_abs_det_jacobian(x, composed(x))), [2 + 2 * math.log(2), 4 + 2 * math.log(2)]
    )
    reshape = D.ReshapeTransform((4,), (2, 2))
    assert tuple(reshape.forward_shape((3, 4))) == (3, 2, 2) and tuple(reshape.inverse_shape((2, 2))) == (4,)
    with pytest.raises(ValueError, match="in_shape, out_shape have different numbers of elements"):
        D.ReshapeTransform((3,), (2, 2))


def test_squashed_gaussian_log_prob_of_its_own_samples():
    # The SAC policy: a = tanh(u), u ~ Normal(mu, sigma); log pi(a) = log N(u) - log(1 - tanh(u)^2).
    loc, scale = np.array([0.3, -1.0]), np.array([0.8, 1.5])
    policy = D.TransformedDistribution(D.Normal(_t(loc), _t(scale)), [D.TanhTransform(cache_size=1)])
    onnxnn.manual_seed(9)
    action = policy.rsample((4,))
    u = np.arctanh(_values(action))
    expected = ref.normal_log_prob(u, loc, scale) - np.log1p(-(np.tanh(u) ** 2))
    # arctanh amplifies the action's rounding by 1 / (1 - a^2); the cached pre-image avoids it in log_prob.
    np.testing.assert_allclose(_values(policy.log_prob(action)), expected, rtol=1e-9)


def test_decreasing_transforms_flip_the_cdf():
    flipped = D.TransformedDistribution(D.Exponential(_t([2.0])), D.AffineTransform(0.0, -1.0))
    # Y = -X: P(Y <= y) = P(X >= -y) = exp(-2 (-y)).
    np.testing.assert_allclose(_values(flipped.cdf(_t([-0.5]))), [math.exp(-1.0)], rtol=1e-14)
    np.testing.assert_allclose(_values(flipped.icdf(_t([math.exp(-1.0)]))), [-0.5], rtol=1e-14)


def test_transformed_distributions_expand_their_base():
    transformed = D.TransformedDistribution(D.Normal(_t([0.0]), _t([1.0])), D.AffineTransform(_t([[1.0], [2.0]]), 1.0))
    assert tuple(transformed.batch_shape) == (2, 1) and tuple(transformed.base_dist.batch_shape) == (2, 1)
    expanded = transformed.expand((3, 2, 1))
    assert tuple(expanded.sample().shape) == (3, 2, 1)
    with pytest.raises(ValueError, match="base_distribution needs to have shape with size at least 1"):
        D.TransformedDistribution(D.Normal(0.0, 1.0), D.IndependentTransform(D.ExpTransform(), 1))
