"""kl_divergence across families with Gumbel or Pareto: the closed forms against Gauss-Legendre
quadratures of ``int p (log p - log q)`` over ``p``'s support, their gradients against central
differences, the infinite pairs, and (with PyTorch installed) that every pair PyTorch registers
between classes onnxnn has is registered here too.

Quadrature: composite 20-point Gauss-Legendre over panels of the (truncated) support. A ``p`` on the
positive half-line is integrated in ``y = log x``, where its density ``p(e^y) e^y`` is smooth (a gamma
of shape below 1 is singular at 0 in ``x``) and the Pareto's power tail decays exponentially. The
truncation points leave out mass below ``exp(-35)`` times the integrand's size (given per case).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D
from onnxnn.distributions import kl as kl_module

from . import reference as ref

NODES, WEIGHTS = np.polynomial.legendre.leggauss(20)


def _t(values, requires_grad=False) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64, requires_grad=requires_grad)


def _a(*values) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def _composite(function, low, high, panels):
    """``int_low^high function`` per batch element by ``panels`` 20-point Gauss-Legendre panels."""
    edges = low + (high - low) * np.linspace(0.0, 1.0, panels + 1)[:, None]  # (panels + 1, batch)
    half = (edges[1:] - edges[:-1]) / 2
    x = (edges[1:] + edges[:-1])[:, None] / 2 + half[:, None] * NODES[None, :, None]  # (panels, nodes, batch)
    values = function(x)
    return (half[:, None] * WEIGHTS[None, :, None] * values).sum((0, 1))


def _kl_quadrature(log_p, log_q, low, high, log_space, panels=400):
    """``KL(p || q)`` and its tolerance: rounding of terms of the size of ``int |integrand|``, plus the
    quadrature error, estimated as the change from ``panels / 2`` panels to ``panels``."""

    def integrand(t, absolute=False):
        x = np.exp(t) if log_space else t
        log_density = log_p(x) + (t if log_space else 0.0)
        terms = np.exp(log_density) * (log_p(x) - log_q(x))
        return np.abs(terms) if absolute else terms

    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    fine = _composite(integrand, low, high, panels)
    coarse = _composite(integrand, low, high, panels // 2)
    magnitude = _composite(lambda t: integrand(t, absolute=True), low, high, panels)
    return fine, 1e-12 * (1 + magnitude) + np.abs(fine - coarse)


# Batches of two parameter sets per case.
GUMBEL_P = {"loc": _a(0.3, -1.0), "scale": _a(1.7, 0.5)}
GUMBEL_Q = {"loc": _a(0.0, 0.4), "scale": _a(1.0, 0.5)}
NORMAL_P = {"loc": _a(0.5, -1.0), "scale": _a(1.5, 0.3)}
NORMAL_Q = {"loc": _a(0.0, 2.0), "scale": _a(1.0, 3.0)}
UNIFORM_P = {"low": _a(-1.0, 1.0), "high": _a(1.5, 2.5)}


def _gumbel_q_log_prob(x):
    return ref.gumbel_log_prob(x, GUMBEL_Q["loc"], GUMBEL_Q["scale"])


def _normal_q_log_prob(x):
    return ref.normal_log_prob(x, NORMAL_Q["loc"], NORMAL_Q["scale"])


# (name, p class, p parameters, q class, q parameters, log p, log q, low, high, in log x): the bounds
# are of x, or of log x where the last entry is True.
FINITE = [
    # Gumbel density below z = -4.5: exp(4.5 - e^4.5) = e^-85; above z = 50: e^-50 against log q ~ z^2.
    ("Gumbel / Normal", D.Gumbel, GUMBEL_P, D.Normal, NORMAL_Q,
     lambda x: ref.gumbel_log_prob(x, GUMBEL_P["loc"], GUMBEL_P["scale"]), _normal_q_log_prob,
     GUMBEL_P["loc"] - 4.5 * GUMBEL_P["scale"], GUMBEL_P["loc"] + 50 * GUMBEL_P["scale"], False),
    # 20 standard deviations: exp(-200) against q's exp(-(x - m) / b) <= exp(30).
    ("Normal / Gumbel", D.Normal, NORMAL_P, D.Gumbel, GUMBEL_Q,
     lambda x: ref.normal_log_prob(x, NORMAL_P["loc"], NORMAL_P["scale"]), _gumbel_q_log_prob,
     NORMAL_P["loc"] - 20 * NORMAL_P["scale"], NORMAL_P["loc"] + 20 * NORMAL_P["scale"], False),
    # x from e^-60 (mass rate e^-60) to 100 / rate (mass e^-100).
    ("Exponential / Gumbel", D.Exponential, {"rate": _a(0.5, 3.0)}, D.Gumbel, GUMBEL_Q,
     lambda x: ref.exponential_log_prob(x, _a(0.5, 3.0)), _gumbel_q_log_prob,
     _a(-60.0, -60.0), np.log(100 / _a(0.5, 3.0)), True),
    # Shape 0.5: mass below e^-120 is about e^-60; rate x = 120 leaves e^-120 above.
    ("Gamma / Gumbel", D.Gamma, {"concentration": _a(0.5, 3.0), "rate": _a(2.0, 0.7)}, D.Gumbel, GUMBEL_Q,
     lambda x: ref.gamma_log_prob(x, _a(0.5, 3.0), _a(2.0, 0.7)), _gumbel_q_log_prob,
     _a(-120.0, -120.0), np.log(120 / _a(2.0, 0.7)), True),
    ("Chi2 / Gumbel", D.Chi2, {"df": _a(1.0, 5.0)}, D.Gumbel, GUMBEL_Q,
     lambda x: ref.gamma_log_prob(x, _a(0.5, 2.5), 0.5), _gumbel_q_log_prob,
     _a(-120.0, -120.0), np.log(_a(240.0, 240.0)), True),
    ("Uniform / Gumbel", D.Uniform, UNIFORM_P, D.Gumbel, GUMBEL_Q,
     lambda x: ref.uniform_log_prob(x, UNIFORM_P["low"], UNIFORM_P["high"]), _gumbel_q_log_prob,
     UNIFORM_P["low"], UNIFORM_P["high"], False),
    # Pareto: log x - log s is Exponential(alpha); the integrand decays as exp(-(alpha - 1) u) against an
    # exponential or gamma, exp(-(alpha - 2) u) against a normal: u up to 80 leaves below e^-40.
    ("Pareto / Exponential", D.Pareto, {"scale": _a(1.2, 0.5), "alpha": _a(3.5, 2.0)},
     D.Exponential, {"rate": _a(0.8, 2.0)},
     lambda x: ref.pareto_log_prob(x, _a(1.2, 0.5), _a(3.5, 2.0)), lambda x: ref.exponential_log_prob(x, _a(0.8, 2.0)),
     np.log(_a(1.2, 0.5)), np.log(_a(1.2, 0.5)) + 80, True),
    ("Pareto / Gamma", D.Pareto, {"scale": _a(1.2, 0.5), "alpha": _a(3.5, 2.0)},
     D.Gamma, {"concentration": _a(0.5, 4.0), "rate": _a(1.5, 0.5)},
     lambda x: ref.pareto_log_prob(x, _a(1.2, 0.5), _a(3.5, 2.0)),
     lambda x: ref.gamma_log_prob(x, _a(0.5, 4.0), _a(1.5, 0.5)),
     np.log(_a(1.2, 0.5)), np.log(_a(1.2, 0.5)) + 80, True),
    ("Pareto / Chi2", D.Pareto, {"scale": _a(1.2, 0.5), "alpha": _a(3.5, 2.0)}, D.Chi2, {"df": _a(3.0, 0.5)},
     lambda x: ref.pareto_log_prob(x, _a(1.2, 0.5), _a(3.5, 2.0)), lambda x: ref.gamma_log_prob(x, _a(1.5, 0.25), 0.5),
     np.log(_a(1.2, 0.5)), np.log(_a(1.2, 0.5)) + 80, True),
    ("Pareto / Normal", D.Pareto, {"scale": _a(1.2, 0.5), "alpha": _a(3.5, 3.0)}, D.Normal, NORMAL_Q,
     lambda x: ref.pareto_log_prob(x, _a(1.2, 0.5), _a(3.5, 3.0)), _normal_q_log_prob,
     np.log(_a(1.2, 0.5)), np.log(_a(1.2, 0.5)) + 80, True),
    ("Uniform / Pareto", D.Uniform, {"low": _a(1.5, 0.6), "high": _a(3.0, 0.7)},
     D.Pareto, {"scale": _a(1.0, 0.5), "alpha": _a(2.0, 0.7)},
     lambda x: ref.uniform_log_prob(x, _a(1.5, 0.6), _a(3.0, 0.7)),
     lambda x: ref.pareto_log_prob(x, _a(1.0, 0.5), _a(2.0, 0.7)),
     _a(1.5, 0.6), _a(3.0, 0.7), False),
]  # fmt: skip


def _distribution(cls, parameters, requires_grad=False):
    tensors = {name: _t(value, requires_grad) for name, value in parameters.items()}
    return cls(**tensors), tensors


@pytest.mark.parametrize("case", FINITE, ids=[case[0] for case in FINITE])
def test_divergence_matches_quadrature(case):
    name, p_cls, p_params, q_cls, q_params, log_p, log_q, low, high, log_space = case
    expected, tolerance = _kl_quadrature(log_p, log_q, low, high, log_space)
    p, _ = _distribution(p_cls, p_params)
    q, _ = _distribution(q_cls, q_params)
    actual = D.kl_divergence(p, q).numpy()
    assert np.all(np.abs(actual - expected) <= tolerance), f"{name}: {actual} vs {expected} +- {tolerance}"


@pytest.mark.parametrize("case", FINITE, ids=[case[0] for case in FINITE])
def test_divergence_gradients_match_central_differences(case):
    name, p_cls, p_params, q_cls, q_params = case[:5]
    p, p_tensors = _distribution(p_cls, p_params, requires_grad=True)
    q, q_tensors = _distribution(q_cls, q_params, requires_grad=True)
    D.kl_divergence(p, q).sum().backward()
    step = 1e-6
    for side, params, tensors in (("p", p_params, p_tensors), ("q", q_params, q_tensors)):
        for key, value in params.items():
            gradient = tensors[key].grad
            assert gradient is not None, f"{name}: no gradient for {side}.{key}"
            for index in range(value.size):
                shifted = []
                for sign in (1, -1):
                    moved = dict(params)
                    moved[key] = value.copy()
                    moved[key][index] += sign * step
                    left = _distribution(p_cls, moved if side == "p" else p_params)[0]
                    right = _distribution(q_cls, moved if side == "q" else q_params)[0]
                    shifted.append(D.kl_divergence(left, right).numpy().sum())
                # Truncation O(step^2) and rounding eps |KL| / step: both about 1e-10 here.
                numeric = (shifted[0] - shifted[1]) / (2 * step)
                np.testing.assert_allclose(
                    gradient.numpy()[index], numeric, rtol=1e-6, atol=1e-7, err_msg=f"{name} {side}.{key}"
                )


PARTLY_INFINITE = [
    # Pareto moments: the mean is infinite for alpha <= 1, the variance for alpha <= 2.
    ("Pareto / Exponential, alpha <= 1", D.Pareto(_t([1.0, 1.0]), _t([1.0, 1.5])), D.Exponential(_t(1.0)),
     [True, False]),
    ("Pareto / Gamma, alpha <= 1", D.Pareto(_t([1.0, 1.0]), _t([0.5, 1.5])), D.Gamma(_t(2.0), _t(1.0)), [True, False]),
    ("Pareto / Normal, alpha <= 2", D.Pareto(_t([1.0, 1.0, 1.0]), _t([1.5, 2.0, 2.5])), D.Normal(_t(0.0), _t(1.0)),
     [True, True, False]),
    ("Uniform / Pareto starting above it", D.Uniform(_t([0.5, 2.0]), _t([3.0, 3.0])), D.Pareto(_t(1.0), _t(2.0)),
     [True, False]),
]  # fmt: skip


@pytest.mark.parametrize("name, p, q, infinite", PARTLY_INFINITE, ids=[case[0] for case in PARTLY_INFINITE])
def test_divergences_of_missing_moments_or_support_are_infinite(name, p, q, infinite):
    divergence = D.kl_divergence(p, q).numpy()
    assert list(np.isposinf(divergence)) == infinite
    assert np.all(np.isfinite(divergence[~np.array(infinite)]))


BATCH = _t([0.5, 1.0, 2.0])
INFINITE = [
    ("Gumbel / Beta", D.Gumbel(BATCH, 1.0), D.Beta(2.0, 2.0)),
    ("Gumbel / Exponential", D.Gumbel(BATCH, 1.0), D.Exponential(1.0)),
    ("Gumbel / Gamma", D.Gumbel(BATCH, 1.0), D.Gamma(1.0, 1.0)),
    ("Gumbel / Chi2", D.Gumbel(BATCH, 1.0), D.Chi2(2.0)),
    ("Gumbel / Pareto", D.Gumbel(BATCH, 1.0), D.Pareto(1.0, 2.0)),
    ("Gumbel / Uniform", D.Gumbel(BATCH, 1.0), D.Uniform(-1.0, 1.0)),
    ("Pareto / Beta", D.Pareto(BATCH, 2.0), D.Beta(2.0, 2.0)),
    ("Pareto / Uniform", D.Pareto(BATCH, 2.0), D.Uniform(0.0, 10.0)),
    ("Beta / Pareto", D.Beta(BATCH, 2.0), D.Pareto(0.1, 2.0)),
    ("Exponential / Pareto", D.Exponential(BATCH), D.Pareto(0.1, 2.0)),
    ("Gamma / Pareto", D.Gamma(BATCH, 1.0), D.Pareto(0.1, 2.0)),
    ("Chi2 / Pareto", D.Chi2(BATCH), D.Pareto(0.1, 2.0)),
    ("Laplace / Pareto", D.Laplace(BATCH, 1.0), D.Pareto(0.1, 2.0)),
    ("Normal / Pareto", D.Normal(BATCH, 1.0), D.Pareto(0.1, 2.0)),
]


@pytest.mark.parametrize("name, p, q", INFINITE, ids=[case[0] for case in INFINITE])
def test_divergences_across_disjoint_supports_are_infinite(name, p, q):
    # As PyTorch's: inf shaped like p's parameters.
    divergence = D.kl_divergence(p, q).numpy()
    assert divergence.shape == (3,) and np.all(np.isposinf(divergence))


def test_every_pair_pytorch_registers_is_registered():
    torch_kl = pytest.importorskip("torch.distributions.kl")
    ours = {(p.__name__, q.__name__) for p, q in kl_module._KL_REGISTRY}
    shared = [
        (p.__name__, q.__name__) for p, q in torch_kl._KL_REGISTRY if hasattr(D, p.__name__) and hasattr(D, q.__name__)
    ]
    assert len(shared) > 80
    assert sorted(set(shared) - ours) == []


def test_the_divergences_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    for name, p_cls, p_params, q_cls, q_params, *_ in FINITE:

        def build(module, cls, params):
            return getattr(module.distributions, cls.__name__)(
                **{k: module.tensor(v, dtype=module.float64) for k, v in params.items()}
            )

        ours = D.kl_divergence(build(onnxnn, p_cls, p_params), build(onnxnn, q_cls, q_params)).numpy()
        theirs = torch.distributions.kl_divergence(build(torch, p_cls, p_params), build(torch, q_cls, q_params))
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12, err_msg=name)
    assert math.isfinite(float(ours.sum()))
