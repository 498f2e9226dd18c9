"""VonMises, LogisticNormal, Wishart, LKJCholesky and GeneralizedPareto, with StickBreakingTransform and
``constraints.corr_cholesky``: scores, cdfs and moments against numpy formulas in float64 (PyTorch's
only where installed), draws against their distribution (each statistic of ``N`` draws within 6
standard errors, seeds fixed), reparameterized gradients by central differences, shapes and errors.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D
from onnxnn.distributions import constraints

from . import reference as ref

BOUND = 6.0  # standard errors
EPS = 1e-6  # central differences: truncation ~1e-13, rounding ~1e-10 for values of order 1
lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def t(values, requires_grad: bool = False) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64, requires_grad=requires_grad)


def _np(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


def _within(statistic, expected, standard_error, what: str) -> None:
    statistic, expected, standard_error = np.broadcast_arrays(statistic, expected, standard_error)
    assert np.all(np.abs(statistic - expected) <= BOUND * standard_error), (
        f"{what}: {statistic} vs {expected} (standard error {standard_error})"
    )


def _check_gradient(function, arrays, seed: int = 0) -> None:
    """``function(*tensors)`` (seeding its own draws) against central differences along a random direction."""
    rng = np.random.default_rng(seed)
    tensors = [t(array, requires_grad=True) for array in arrays]
    output = function(*tensors)
    cotangent = rng.standard_normal(tuple(output.shape))
    output.backward(t(cotangent))
    directions = [rng.standard_normal(np.shape(array)) for array in arrays]
    analytic = sum(float(np.sum(_np(tensor.grad) * d)) for tensor, d in zip(tensors, directions))
    with onnxnn.no_grad():
        plus = _np(function(*[t(a + EPS * d) for a, d in zip(arrays, directions)]))
        minus = _np(function(*[t(a - EPS * d) for a, d in zip(arrays, directions)]))
    numeric = float(np.sum((plus - minus) / (2 * EPS) * cotangent))
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), (analytic, numeric)


def _seeded(sampler, seed: int = 3):
    def run(*tensors):
        onnxnn.manual_seed(seed)
        return sampler(*tensors)

    return run


# ---------------------------------------------------------------- VonMises

VM_LOC = np.array([0.5, -2.0, 3.0])
VM_KAPPA = np.array([0.3, 2.0, 50.0])


def _bessel_i(order: int, kappa) -> np.ndarray:
    """``I_n(k) = (1/pi) int_0^pi e^(k cos t) cos(n t) dt``: the trapezoid rule is exact to rounding
    for this periodic analytic integrand (scaled by ``e^-k`` against overflow)."""
    theta = np.linspace(0.0, np.pi, 4001)
    kappa = np.asarray(kappa, dtype=np.float64)[..., None]
    values = np.exp(kappa * (np.cos(theta) - 1)) * np.cos(order * theta)
    return np.trapezoid(values, theta, axis=-1) / np.pi * np.exp(kappa[..., 0])


def _von_mises_log_prob(x, loc, kappa):
    return kappa * np.cos(x - loc) - math.log(2 * math.pi) - np.log(np.i0(kappa))


def test_von_mises_scores_and_moments():
    d = D.VonMises(t(VM_LOC), t(VM_KAPPA))
    x = np.array([0.1, 2.5, 3.1 + 4 * math.pi])  # any real angle, read modulo 2 pi
    np.testing.assert_allclose(_np(d.log_prob(t(x))), _von_mises_log_prob(x, VM_LOC, VM_KAPPA), rtol=1e-13)
    ratio = _bessel_i(1, VM_KAPPA) / _bessel_i(0, VM_KAPPA)
    np.testing.assert_allclose(_np(d.variance), 1 - ratio, rtol=1e-12)
    np.testing.assert_array_equal(_np(d.mean), VM_LOC)
    np.testing.assert_array_equal(_np(d.mode), VM_LOC)
    assert d.has_rsample is False and d.support is constraints.real
    with pytest.raises(NotImplementedError):
        d.rsample()


def test_von_mises_log_prob_gradient():
    x = np.array([0.1, 2.5, -1.0])
    _check_gradient(lambda loc, kappa: D.VonMises(loc, kappa).log_prob(t(x)), [VM_LOC, VM_KAPPA])


@pytest.mark.parametrize("kappa", [1e-8, 0.3, 2.0, 50.0])
def test_von_mises_draws_follow_the_density(kappa):
    n, loc = 20000, 2.5
    onnxnn.manual_seed(11)
    d = D.VonMises(t(loc), t(kappa))
    draws = _np(d.sample((n,)))
    assert draws.shape == (n,) and np.all(draws >= -math.pi) and np.all(draws < math.pi)
    # Probabilities of arcs, against the density integrated by the trapezoid rule.
    edges = np.linspace(-math.pi, math.pi, 9)
    grid = np.linspace(-math.pi, math.pi, 80001)
    density = np.exp(_von_mises_log_prob(grid, loc, kappa))
    cumulative = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(grid))])
    expected = np.diff(np.interp(edges, grid, cumulative))
    observed = np.histogram(draws, edges)[0] / n
    _within(observed, expected, np.sqrt(np.maximum(expected * (1 - expected), 1e-12) / n), "arc frequencies")
    # The mean resultant length: E cos(X - loc) = I_1 / I_0, Var cos = (1 + I_2 / I_0) / 2 - (I_1 / I_0)^2.
    i0, i1, i2 = (_bessel_i(k, kappa) for k in (0, 1, 2))
    variance = (1 + i2 / i0) / 2 - (i1 / i0) ** 2
    _within(np.cos(draws - loc).mean(), i1 / i0, math.sqrt(max(variance, 1e-16) / n), "mean cosine")


def test_von_mises_shapes_dtype_and_expand():
    onnxnn.manual_seed(0)
    d = D.VonMises(onnxnn.tensor([0.0, 1.0]), onnxnn.tensor([1.0, 4.0]))
    assert d.sample().dtype == onnxnn.float32  # drawn in float64, as PyTorch's, returned in the parameters'
    assert tuple(d.sample((3, 4)).shape) == (3, 4, 2)
    wide = d.expand((5, 2))
    assert tuple(wide.batch_shape) == (5, 2) and tuple(wide.sample((3,)).shape) == (3, 5, 2)
    assert tuple(D.VonMises(0.0, 1.0).batch_shape) == ()


# ---------------------------------------------------------------- GeneralizedPareto

GP_LOC = np.array([0.5, -1.0, 0.0, 2.0, 1.0, 0.0])
GP_SCALE = np.array([1.5, 0.7, 2.0, 1.0, 0.5, 1.0])
GP_CONC = np.array([0.3, -0.5, 0.0, -1.0, 0.7, 1.2])  # Pareto-like, bounded, exponential, uniform, ...


def _gp_survival(x, loc, scale, conc):
    z = (x - loc) / scale
    with np.errstate(divide="ignore"):
        safe = np.where(conc == 0, 1.0, conc)
        return np.where(conc == 0, np.exp(-z), (1 + safe * z) ** (-1 / safe))


def _gp_log_prob(x, loc, scale, conc):
    z = (x - loc) / scale
    safe = np.where(conc == 0, 1.0, conc)
    return -np.log(scale) - np.where(conc == 0, z, (1 / safe + 1) * np.log1p(safe * z))


def _gp_icdf(u, loc, scale, conc):
    safe = np.where(conc == 0, 1.0, conc)
    return np.where(conc == 0, loc - scale * np.log1p(-u), loc + scale / safe * ((1 - u) ** (-safe) - 1))


def test_generalized_pareto_scores_cdf_icdf_and_moments():
    d = D.GeneralizedPareto(t(GP_LOC), t(GP_SCALE), t(GP_CONC))
    # Points inside each support (the bounded ones end at loc + scale / |c|: 0.4 and 3.0).
    x = np.array([1.7, -0.2, 3.0, 2.6, 1.3, 4.0])
    np.testing.assert_allclose(_np(d.log_prob(t(x))), _gp_log_prob(x, GP_LOC, GP_SCALE, GP_CONC), rtol=1e-13)
    survival = _gp_survival(x, GP_LOC, GP_SCALE, GP_CONC)
    np.testing.assert_allclose(_np(d.cdf(t(x))), 1 - survival, rtol=1e-13)
    np.testing.assert_allclose(_np(d.log_survival_function(t(x))), np.log(survival), rtol=1e-13)
    u = np.array([0.1, 0.5, 0.9, 0.3, 0.99, 0.7])
    np.testing.assert_allclose(_np(d.icdf(t(u))), _gp_icdf(u, GP_LOC, GP_SCALE, GP_CONC), rtol=1e-13)
    mean = np.where(GP_CONC < 1, GP_LOC + GP_SCALE / (1 - GP_CONC), np.nan)
    variance = np.where(GP_CONC < 0.5, GP_SCALE**2 / ((1 - GP_CONC) ** 2 * (1 - 2 * GP_CONC)), np.nan)
    np.testing.assert_allclose(_np(d.mean), mean, rtol=1e-14)
    np.testing.assert_allclose(_np(d.variance), variance, rtol=1e-14)
    np.testing.assert_allclose(_np(d.entropy()), np.log(GP_SCALE) + GP_CONC + 1, rtol=1e-14)
    np.testing.assert_array_equal(_np(d.mode), GP_LOC)


def test_generalized_pareto_support_and_validation():
    d = D.GeneralizedPareto(t(GP_LOC), t(GP_SCALE), t(GP_CONC))
    upper = np.where(GP_CONC < 0, GP_LOC - GP_SCALE / np.where(GP_CONC < 0, GP_CONC, -1), np.inf)
    np.testing.assert_allclose(_np(d.support.upper_bound), upper)
    with pytest.raises(ValueError, match="support"):
        d.log_prob(t(GP_LOC - 0.1))  # below loc
    with pytest.raises(ValueError, match="support"):
        D.GeneralizedPareto(0.0, 1.0, -0.5).log_prob(t(2.5))  # beyond loc + scale / |c| = 2
    with pytest.raises(ValueError, match="scale"):
        D.GeneralizedPareto(0.0, t([1.0, -1.0]), 0.1)
    assert tuple(D.GeneralizedPareto(0.0, 1.0, 0.1).batch_shape) == ()


def test_generalized_pareto_log_prob_gradient():
    x = np.array([1.7, -0.2, 3.0])
    _check_gradient(
        lambda loc, scale, conc: D.GeneralizedPareto(loc, scale, conc).log_prob(t(x)),
        [GP_LOC[:3], GP_SCALE[:3], np.array([0.3, -0.5, 0.2])],
    )


def test_generalized_pareto_rsample_gradient_and_draws():
    params = [np.array([0.5, -1.0]), np.array([1.5, 0.7]), np.array([0.3, -0.5])]
    _check_gradient(_seeded(lambda *p: D.GeneralizedPareto(*p).rsample((4,))), params)
    n = 8000
    onnxnn.manual_seed(5)
    d = D.GeneralizedPareto(t(GP_LOC), t(GP_SCALE), t(GP_CONC))
    draws = _np(d.rsample((n,)))
    assert draws.shape == (n, 6) and tuple(d.sample((2, 3)).shape) == (2, 3, 6)
    for q in (0.1, 0.5, 0.9):  # P(X <= icdf(q)) = q
        below = (draws <= _gp_icdf(q, GP_LOC, GP_SCALE, GP_CONC)).mean(0)
        _within(below, q, math.sqrt(q * (1 - q) / n), f"frequency below the {q} quantile")


def test_generalized_pareto_expand():
    d = D.GeneralizedPareto(t([0.0, 1.0]), 1.0, 0.2).expand((3, 2))
    assert tuple(d.batch_shape) == (3, 2) and tuple(d.rsample().shape) == (3, 2)


# ---------------------------------------------------------------- StickBreakingTransform, LogisticNormal


def _stick_break(x):
    k = x.shape[-1]
    z = 1 / (1 + np.exp(-(x - np.log(k - np.arange(k)))))
    left = np.concatenate([np.ones(x.shape[:-1] + (1,)), np.cumprod(1 - z, -1)], -1)
    return np.concatenate([z, np.ones(x.shape[:-1] + (1,))], -1) * left


def _stick_unbreak(y):
    k = y.shape[-1] - 1
    left = 1 - np.concatenate([np.zeros(y.shape[:-1] + (1,)), np.cumsum(y[..., :-1], -1)[..., :-1]], -1)
    z = y[..., :-1] / left
    return np.log(z / (1 - z)) + np.log(k - np.arange(k))


def test_stick_breaking_transform():
    x = np.random.default_rng(0).normal(size=(2, 3))
    transform = D.StickBreakingTransform()
    y = transform(t(x))
    np.testing.assert_allclose(_np(y), _stick_break(x), rtol=1e-14)
    np.testing.assert_allclose(_np(transform.inv(y)), x, rtol=1e-12, atol=1e-13)
    # log |det dy[:K]/dx| by central differences of the numpy map.
    for row in range(2):
        jacobian = np.stack(
            [
                (_stick_break(x[row] + EPS * e)[:-1] - _stick_break(x[row] - EPS * e)[:-1]) / (2 * EPS)
                for e in np.eye(3)
            ],
            -1,
        )
        expected = np.log(abs(np.linalg.det(jacobian)))
        np.testing.assert_allclose(_np(transform.log_abs_det_jacobian(t(x), y))[row], expected, rtol=1e-8)
    assert tuple(transform.forward_shape((2, 3))) == (2, 4) and tuple(transform.inverse_shape((2, 4))) == (2, 3)
    assert transform.domain.event_dim == 1 and transform.codomain is constraints.simplex
    assert transform == D.StickBreakingTransform() and transform.bijective


def _logistic_normal_log_prob(y, loc, scale):
    x = _stick_unbreak(y)
    k = x.shape[-1]
    z = 1 / (1 + np.exp(-(x - np.log(k - np.arange(k)))))
    left = 1 - np.concatenate([np.zeros(y.shape[:-1] + (1,)), np.cumsum(y[..., :-1], -1)[..., :-1]], -1)
    normal = -0.5 * ((x - loc) / scale) ** 2 - np.log(scale) - 0.5 * math.log(2 * math.pi)
    return (normal - np.log(z * (1 - z)) - np.log(left)).sum(-1)


LN_LOC = np.array([[0.3, -1.0, 0.5], [1.0, 0.0, -0.2]])
LN_SCALE = np.array([0.7, 1.2, 0.4])


def test_logistic_normal_log_prob_and_shapes():
    d = D.LogisticNormal(t(LN_LOC), t(LN_SCALE))
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (4,) and d.support is constraints.simplex
    y = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.4, 0.1]])
    np.testing.assert_allclose(_np(d.log_prob(t(y))), _logistic_normal_log_prob(y, LN_LOC, LN_SCALE), rtol=1e-12)
    np.testing.assert_array_equal(_np(d.loc), LN_LOC)
    scalar = D.LogisticNormal(0.0, 1.0)
    assert tuple(scalar.batch_shape) == () and tuple(scalar.event_shape) == (2,)
    assert tuple(d.expand((3, 2)).sample((5,)).shape) == (5, 3, 2, 4)
    with pytest.raises(ValueError, match="support"):
        d.log_prob(t([[0.5, 0.5, 0.5, 0.5]] * 2))
    with pytest.raises(ValueError, match="scale"):
        D.LogisticNormal(t([0.0, 0.0]), t([1.0, -1.0]))


def test_logistic_normal_draws_and_rsample_gradient():
    n = 4000
    onnxnn.manual_seed(2)
    draws = _np(D.LogisticNormal(t(LN_LOC), t(LN_SCALE)).rsample((n,)))
    np.testing.assert_allclose(draws.sum(-1), 1.0, rtol=1e-12)
    normal = _stick_unbreak(draws)  # the base draws, which must be Normal(loc, scale)
    _within(normal.mean(0), LN_LOC, LN_SCALE / math.sqrt(n), "base means")
    _within(normal.var(0), LN_SCALE**2, LN_SCALE**2 * math.sqrt(2 / n), "base variances")
    _check_gradient(_seeded(lambda loc, scale: D.LogisticNormal(loc, scale).rsample((3,))), [LN_LOC, LN_SCALE])


# ---------------------------------------------------------------- Wishart

W_DF = np.array([4.5, 7.0])
_A = np.random.default_rng(1).normal(size=(2, 3, 3))
W_COV = _A @ _A.transpose(0, 2, 1) + np.eye(3)


def _log_mvgamma(x, p):
    return p * (p - 1) / 4 * math.log(math.pi) + sum(lgamma(x - j / 2) for j in range(p))


def _wishart_log_prob(x, df, cov):
    p = cov.shape[-1]
    trace = np.trace(np.linalg.solve(cov, x), axis1=-2, axis2=-1)
    return (
        (df - p - 1) / 2 * np.linalg.slogdet(x)[1]
        - trace / 2
        - df * p / 2 * math.log(2)
        - df / 2 * np.linalg.slogdet(cov)[1]
        - _log_mvgamma(df / 2, p)
    )


def _wishart_entropy(df, cov):
    p = cov.shape[-1]
    mvdigamma = sum(ref.digamma(df / 2 - j / 2) for j in range(p))
    return (
        (p + 1) / 2 * np.linalg.slogdet(cov)[1]
        + p * (p + 1) / 2 * math.log(2)
        + _log_mvgamma(df / 2, p)
        - (df - p - 1) / 2 * mvdigamma
        + df * p / 2
    )


@pytest.mark.parametrize("parameterization", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_scores_and_moments(parameterization):
    matrix = {
        "covariance_matrix": W_COV,
        "precision_matrix": np.linalg.inv(W_COV),
        "scale_tril": np.linalg.cholesky(W_COV),
    }[parameterization]
    d = D.Wishart(t(W_DF), **{parameterization: t(matrix)})
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3, 3)
    b = np.random.default_rng(2).normal(size=(2, 3, 3))
    x = b @ b.transpose(0, 2, 1) + 0.5 * np.eye(3)
    np.testing.assert_allclose(_np(d.log_prob(t(x))), _wishart_log_prob(x, W_DF, W_COV), rtol=1e-12)
    np.testing.assert_allclose(_np(d.entropy()), _wishart_entropy(W_DF, W_COV), rtol=1e-12)
    df = W_DF[:, None, None]
    diagonal = np.diagonal(W_COV, axis1=-2, axis2=-1)
    np.testing.assert_allclose(_np(d.mean), df * W_COV, rtol=1e-12)
    np.testing.assert_allclose(
        _np(d.variance), df * (W_COV**2 + diagonal[..., :, None] * diagonal[..., None, :]), rtol=1e-12
    )
    np.testing.assert_allclose(_np(d.mode), np.where(df > 4, (df - 4) * W_COV, np.nan), rtol=1e-12)
    np.testing.assert_allclose(_np(d.precision_matrix), np.linalg.inv(W_COV), rtol=1e-10)
    np.testing.assert_allclose(_np(d.covariance_matrix), W_COV, rtol=1e-12)


def test_wishart_draws_follow_the_moments():
    n = 4000
    onnxnn.manual_seed(7)
    d = D.Wishart(t(W_DF), covariance_matrix=t(W_COV))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # regular samples: no "Singular sample detected." (PyTorch warns always)
        draws = _np(d.rsample((n,)))
    assert draws.shape == (n, 2, 3, 3)
    assert np.all(np.linalg.eigvalsh(draws) > 0)
    np.testing.assert_allclose(draws, draws.transpose(0, 1, 3, 2), rtol=1e-12, atol=1e-12)
    variance = _np(d.variance)
    _within(draws.mean(0), W_DF[:, None, None] * W_COV, np.sqrt(variance / n), "sample means")


def test_wishart_rsample_gradients():
    tril = np.linalg.cholesky(W_COV)
    # The factor's upper triangle is not read: tril() keeps the differences' directions in the lower one.
    _check_gradient(_seeded(lambda L: D.Wishart(t(W_DF), scale_tril=L.tril()).rsample((2,))), [tril])
    # In df the gradient is the implicit one of the chi-squared draws: unbiased for d E[X] / d df = Sigma.
    n = 2000
    onnxnn.manual_seed(9)
    df = t(np.full(n, 4.5), requires_grad=True)
    D.Wishart(df, covariance_matrix=t(W_COV[0])).rsample().sum().backward()
    grads = _np(df.grad)
    _within(grads.mean(), W_COV[0].sum(), grads.std() / math.sqrt(n), "mean d sum(X) / d df")


def test_wishart_log_prob_gradient():
    b = np.random.default_rng(4).normal(size=(2, 3, 3))
    x = b @ b.transpose(0, 2, 1) + 0.5 * np.eye(3)
    tril = np.linalg.cholesky(W_COV)
    _check_gradient(lambda df, L: D.Wishart(df, scale_tril=L.tril()).log_prob(t(x)), [W_DF, tril])


def test_wishart_redraws_singular_samples(monkeypatch):
    d = D.Wishart(t(4.0), covariance_matrix=t(np.eye(2)))
    singular = t(np.array([[[1.0, 1.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 3.0]]]))
    regular = t(np.array([[[5.0, 1.0], [1.0, 5.0]]] * 2))
    draws = iter([singular, regular])
    monkeypatch.setattr(d, "_bartlett_sampling", lambda shape: next(draws))
    with pytest.warns(UserWarning, match="Singular sample detected"):
        sample = _np(d.rsample((2,)))
    np.testing.assert_array_equal(sample, [[[5.0, 1.0], [1.0, 5.0]], [[2.0, 0.0], [0.0, 3.0]]])


def test_wishart_errors_shapes_and_expand():
    eye = t(np.eye(3))
    with pytest.raises(ValueError, match="greater than ndim - 1 = 2"):
        D.Wishart(t(2.0), covariance_matrix=eye, validate_args=False)  # checked whatever validate_args says
    with pytest.raises(AssertionError, match="Exactly one"):
        D.Wishart(t(4.0))
    with pytest.raises(AssertionError, match="Exactly one"):
        D.Wishart(t(4.0), covariance_matrix=eye, scale_tril=eye)
    with pytest.raises(ValueError, match="two-dimensional"):
        D.Wishart(t(4.0), covariance_matrix=t([1.0, 2.0]))
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.Wishart(t(4.0), covariance_matrix=t([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.warns(UserWarning, match="Low df"):
        D.Wishart(t(2.5), covariance_matrix=eye)
    with pytest.raises(ValueError, match="support"):
        D.Wishart(t(4.0), covariance_matrix=eye).log_prob(-eye)
    d = D.Wishart(5.0, covariance_matrix=t(W_COV))  # a number df spans the batch
    assert tuple(d.batch_shape) == (2,) and tuple(d.mean.shape) == (2, 3, 3)
    wide = D.Wishart(t(W_DF), scale_tril=t(np.linalg.cholesky(W_COV))).expand((4, 2))
    assert tuple(wide.batch_shape) == (4, 2) and tuple(wide.rsample((3,)).shape) == (3, 4, 2, 3, 3)
    np.testing.assert_allclose(_np(wide.covariance_matrix)[3], W_COV, rtol=1e-12)
    assert isinstance(D.Wishart.arg_constraints, property)
    assert d.arg_constraints["df"].lower_bound == 2 and d.support is constraints.positive_definite


# ---------------------------------------------------------------- LKJCholesky, corr_cholesky


def _log_beta(a, b):
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _lkj_cholesky_log_prob(L, eta):
    """The LKJ density of R = L L^T (Lewandowski et al. 2009, eq. 16's normalizer) times the Jacobian
    ``prod_i L_ii^(d - i)`` from the strictly lower entries of L to those of R."""
    d = L.shape[-1]
    log_c = sum(
        (2 * eta - 2 + d - k) * (d - k) * math.log(2)
        + (d - k) * _log_beta(eta + (d - k - 1) / 2, eta + (d - k - 1) / 2)
        for k in range(1, d)
    )
    diagonal = np.diagonal(L, axis1=-2, axis2=-1)
    exponents = 2 * (eta - 1) + d - np.arange(1, d + 1)
    return (exponents * np.log(diagonal)).sum(-1) - log_c


def _random_corr_cholesky(d, count, seed):
    a = np.random.default_rng(seed).normal(size=(count, d, d + 2))
    cov = a @ a.transpose(0, 2, 1)
    scale = np.sqrt(np.diagonal(cov, axis1=-2, axis2=-1))
    return np.linalg.cholesky(cov / scale[:, :, None] / scale[:, None, :])


@pytest.mark.parametrize("dim", [2, 3, 5])
@pytest.mark.parametrize("eta", [0.5, 1.0, 3.0])
def test_lkj_cholesky_log_prob(dim, eta):
    L = _random_corr_cholesky(dim, 4, seed=dim)
    d = D.LKJCholesky(dim, t(eta))
    np.testing.assert_allclose(_np(d.log_prob(t(L))), _lkj_cholesky_log_prob(L, eta), rtol=1e-11, atol=1e-12)


def test_lkj_cholesky_two_dimensional_is_a_scaled_beta():
    # dim = 2: L_21 is the correlation r, and (r + 1) / 2 ~ Beta(eta, eta).
    r = np.array([-0.9, 0.0, 0.4])
    L = np.stack([np.stack([np.ones(3), np.zeros(3)], -1), np.stack([r, np.sqrt(1 - r**2)], -1)], -2)
    for eta in (0.5, 2.0):
        expected = (eta - 1) * np.log1p(-(r**2)) - (2 * eta - 1) * math.log(2) - _log_beta(eta, eta)
        np.testing.assert_allclose(_np(D.LKJCholesky(2, t(eta)).log_prob(t(L))), expected, rtol=1e-12)


@pytest.mark.parametrize("dim, eta", [(2, 0.5), (3, 1.0), (4, 2.5)])
def test_lkj_cholesky_draws(dim, eta):
    n = 4000
    onnxnn.manual_seed(dim)
    d = D.LKJCholesky(dim, t(eta))
    draws = _np(d.sample((n,)))
    assert draws.shape == (n, dim, dim)
    assert bool(constraints.corr_cholesky.check(t(draws)).all())
    # Each correlation r: (r + 1) / 2 ~ Beta(a, a), a = eta - 1 + dim / 2: E r^2 = 1 / (2a + 1),
    # E r^4 = 3 / ((2a + 1) (2a + 3)).
    correlations = (draws @ draws.transpose(0, 2, 1))[:, np.tril_indices(dim, -1)[0], np.tril_indices(dim, -1)[1]]
    a = eta - 1 + dim / 2
    second, fourth = 1 / (2 * a + 1), 3 / ((2 * a + 1) * (2 * a + 3))
    _within((correlations**2).mean(0), second, math.sqrt((fourth - second**2) / n), "mean squared correlation")
    _within(correlations.mean(0), 0.0, math.sqrt(second / n), "mean correlation")


def test_lkj_cholesky_shapes_errors_and_gradient():
    d = D.LKJCholesky(3, t([0.5, 2.0]))
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3, 3)
    assert tuple(d.sample((4,)).shape) == (4, 2, 3, 3) and d.sample().dtype == onnxnn.float64
    assert tuple(d.expand((5, 2)).sample().shape) == (5, 2, 3, 3)
    assert D.LKJCholesky(3).sample().dtype == onnxnn.float32 and not d.has_rsample
    assert d.support is constraints.corr_cholesky
    with pytest.raises(NotImplementedError):
        d.rsample()
    with pytest.raises(ValueError, match="dim=1"):
        D.LKJCholesky(1)
    with pytest.raises(ValueError, match="concentration"):
        D.LKJCholesky(3, -1.0)
    with pytest.raises(ValueError, match="support"):
        d.log_prob(t(np.eye(3) * 2))
    L = _random_corr_cholesky(3, 2, seed=8)
    _check_gradient(lambda eta: D.LKJCholesky(3, eta).log_prob(t(L)), [np.array([0.5, 2.0])])


@pytest.mark.parametrize(
    "matrix, valid",
    [
        (np.eye(3), True),
        (_random_corr_cholesky(3, 1, seed=1)[0], True),
        (np.array([[1.0, 0.0], [0.6, 0.8]]), True),
        (np.array([[1.0, 0.0], [0.6, -0.8]]), False),  # negative diagonal
        (np.array([[1.0, 0.1], [0.6, 0.8]]), False),  # not lower triangular
        (np.array([[1.0, 0.0], [0.6, 0.81]]), False),  # a row off unit length
    ],
)
def test_corr_cholesky_constraint(matrix, valid):
    assert bool(constraints.corr_cholesky.check(t(matrix))) is valid
    assert constraints.corr_cholesky.event_dim == 2


# ---------------------------------------------------------------- PyTorch, where installed


def test_added_distributions_match_pytorch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions

    def tt(values):
        return torch.tensor(np.asarray(values, dtype=np.float64))

    L = _random_corr_cholesky(3, 2, seed=5)
    b = np.random.default_rng(6).normal(size=(2, 3, 3))
    x = b @ b.transpose(0, 2, 1) + 0.5 * np.eye(3)
    gp_x = np.array([1.7, -0.2, 3.0, 2.6, 1.3, 4.0])
    y = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.4, 0.1]])
    pairs = [
        (D.LKJCholesky(3, t([0.5, 2.0])).log_prob(t(L)), TD.LKJCholesky(3, tt([0.5, 2.0])).log_prob(tt(L))),
        (
            D.LogisticNormal(t(LN_LOC), t(LN_SCALE)).log_prob(t(y)),
            TD.LogisticNormal(tt(LN_LOC), tt(LN_SCALE)).log_prob(tt(y)),
        ),
    ]
    ours = D.Wishart(t(W_DF), covariance_matrix=t(W_COV))
    theirs = TD.Wishart(tt(W_DF), covariance_matrix=tt(W_COV))
    pairs += [(ours.log_prob(t(x)), theirs.log_prob(tt(x))), (ours.entropy(), theirs.entropy())]
    pairs += [(getattr(ours, name), getattr(theirs, name)) for name in ("mean", "variance", "mode")]
    ours = D.GeneralizedPareto(t(GP_LOC), t(GP_SCALE), t(GP_CONC))
    theirs = TD.GeneralizedPareto(tt(GP_LOC), tt(GP_SCALE), tt(GP_CONC))
    pairs += [(ours.icdf(t(gp_x / 5)), theirs.icdf(tt(gp_x / 5))), (ours.entropy(), theirs.entropy())]
    pairs += [(getattr(ours, name), getattr(theirs, name)) for name in ("mean", "variance")]
    for value, other in pairs:
        np.testing.assert_allclose(_np(value), other.detach().numpy(), rtol=1e-12, atol=1e-12)
    # PyTorch's GeneralizedPareto scores only float32 (its isclose against a float32 zero fails for float64).
    ours = D.GeneralizedPareto(*(onnxnn.tensor(p, dtype=onnxnn.float32) for p in (GP_LOC, GP_SCALE, GP_CONC)))
    theirs = TD.GeneralizedPareto(*(torch.tensor(p, dtype=torch.float32) for p in (GP_LOC, GP_SCALE, GP_CONC)))
    x32 = onnxnn.tensor(gp_x, dtype=onnxnn.float32)
    for method in ("log_prob", "cdf"):
        other = getattr(theirs, method)(torch.tensor(gp_x, dtype=torch.float32)).numpy()
        np.testing.assert_allclose(_np(getattr(ours, method)(x32)), other, rtol=1e-5, atol=1e-6)
    # PyTorch's VonMises takes log I_0 and log I_1 from polynomial approximations good to about 1e-7
    # (absolute; its variance at kappa = 50, 0.01005, is off by 6e-7).
    vm_x = np.array([0.1, 2.5, 3.1])
    ours, theirs = D.VonMises(t(VM_LOC), t(VM_KAPPA)), TD.VonMises(tt(VM_LOC), tt(VM_KAPPA))
    np.testing.assert_allclose(_np(ours.log_prob(t(vm_x))), theirs.log_prob(tt(vm_x)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(_np(ours.variance), theirs.variance.numpy(), rtol=0, atol=1e-6)
    for name in ("VonMises", "LogisticNormal", "Wishart", "LKJCholesky", "GeneralizedPareto"):
        assert getattr(D, name).has_rsample == getattr(TD, name).has_rsample, name
        assert set(getattr(D, name).arg_constraints if name != "Wishart" else ()) == set(
            getattr(TD, name).arg_constraints if name != "Wishart" else ()
        ), name
