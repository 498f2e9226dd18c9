"""The gamma sampler of ``_standard_gamma.py``: its draws (Marsaglia and Tsang in log space) and their
implicit reparameterization gradient, formula by formula, against the reference incomplete gamma
function of ``reference.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn.distributions import _standard_gamma
from onnxnn.distributions._standard_gamma import _log_sample_derivative, standard_gamma_log

from . import reference as ref

N = 4000

# The implementation is within 1e-10 of 40-digit values (its module docstring), and so is the
# reference (differences of step 1e-5: truncation about 1e-10, rounding about 1e-11); a wrong
# formula or quadrature is off by far more than this.
RTOL = 1e-8


def _t(values, requires_grad: bool = False) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64, requires_grad=requires_grad)


# (alpha, x) pairs for each formula of _log_sample_derivative: the series (x <= max(5, alpha / 4)), the
# Gauss-Laguerre upper tail (alpha < 1 beyond), the Gauss-Legendre short tails (alpha >= 1 beyond: the
# lower one below the center, the upper one above), far into each tail.
POINTS = {
    "series": [
        (1e-3, 1e-300),
        (0.02, 1e-30),
        (0.3, 0.01),
        (0.5, 4.9),
        (1.0, 1e-6),
        (3.0, 2.0),
        (60.0, 14.0),
        (1000.0, 200.0),
    ],
    "laguerre": [(0.02, 5.5), (0.3, 12.0), (0.9, 40.0)],
    "legendre, lower tail": [(30.0, 12.0), (400.0, 330.0), (400.0, 399.0), (5e4, 4.9e4)],
    "legendre, upper tail": [(1.0, 6.0), (2.5, 30.0), (30.0, 80.0), (400.0, 520.0), (5e4, 5.1e4)],
}


@pytest.mark.parametrize("region", list(POINTS))
def test_each_formula_of_the_gradient_matches_the_reference(region):
    alpha, x = (np.array(values) for values in zip(*POINTS[region]))
    actual = _log_sample_derivative(_t(alpha), _t(np.log(x))).numpy()
    np.testing.assert_allclose(actual, ref.log_gamma_sample_derivative(alpha, x), rtol=RTOL)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_draws_keep_their_quantile_as_the_concentration_moves(executor):
    # 8 draws each of alpha from 0.02 (draws near e^-50) to 400 (draws near 400 +- 60).
    alpha = np.repeat([0.02, 0.3, 1.0, 2.5, 30.0, 400.0], 8)
    with onnxnn.set_executor(executor):
        onnxnn.manual_seed(17)
        concentration = _t(alpha, requires_grad=True)
        log_x = standard_gamma_log(concentration)
        log_x.sum().backward()
        draws = np.exp(log_x.detach().numpy())
        gradient = concentration.grad.numpy()
    np.testing.assert_allclose(gradient, ref.log_gamma_sample_derivative(alpha, draws), rtol=RTOL)


def test_tiny_concentrations_draw_in_log_space():
    # alpha = 1e-3 puts most draws below float64's smallest number; their logarithms are still exact draws.
    onnxnn.manual_seed(3)
    logs = standard_gamma_log(_t(np.full(N, 1e-3))).numpy()
    assert np.all(np.isfinite(logs)) and logs.min() < -745  # below log(5e-324)
    # E[log X] = psi(alpha), within 6 standard errors.
    assert abs(logs.mean() - ref.digamma(1e-3)) <= 6 * logs.std() / math.sqrt(N)


def test_a_large_concentration_has_the_gamma_moments():
    onnxnn.manual_seed(4)
    draws = np.exp(standard_gamma_log(_t(np.full(N, 1e4))).numpy())
    assert abs(draws.mean() - 1e4) <= 6 * math.sqrt(1e4 / N)
    # The sample variance's standard error: sqrt((mu4 - sigma^4) / N), mu4 = 3 a^2 + 6 a for Gamma(a).
    assert abs(draws.var() - 1e4) <= 6 * math.sqrt((3e8 + 6e4 - 1e8) / N)


def test_a_draw_whose_proposals_all_fail_takes_the_center(monkeypatch):
    # With one proposal, about 5% of the draws at alpha = 1 find none accepted: they take d = 2/3.
    monkeypatch.setattr(_standard_gamma, "_PROPOSALS", 1)
    onnxnn.manual_seed(5)
    draws = np.exp(standard_gamma_log(_t(np.ones(N))).numpy())
    centered = np.isclose(draws, 2 / 3, rtol=1e-15, atol=0)
    # Rejection happens with probability 1 - 0.9517 (Marsaglia and Tsang's acceptance at alpha = 1).
    p = 1 - 0.9517
    assert abs(centered.mean() - p) <= 6 * math.sqrt(p * (1 - p) / N)
    assert np.all(draws > 0)


def test_the_implicit_gradient_is_not_differentiable_again():
    concentration = _t([1.5], requires_grad=True)
    value = standard_gamma_log(concentration)
    (first,) = onnxnn.autograd.grad(value.sum(), [concentration], create_graph=True)
    with pytest.raises(RuntimeError):
        first.sum().backward()


def test_float32_concentrations_get_float32_gradients():
    concentration = onnxnn.tensor([0.5, 3.0], requires_grad=True)
    log_x = standard_gamma_log(concentration)
    assert log_x.dtype == onnxnn.float64
    log_x.sum().backward()
    assert concentration.grad.dtype == onnxnn.float32
