"""Values and gradients that stay finite and accurate where a naive formula overflows, underflows or
cancels, as PyTorch's kernels keep them: the divisor's gradient as ``(a / b) / b`` (``b * b`` overflows
float16 past 256), ELU's gradient as ``alpha * exp(x)`` (``output + alpha`` cancels below -5), and float32
variances accumulated in double. References are float64 formulas."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ["onnxruntime", "kernels"]


def gradient(function, values: np.ndarray, executor: str, *others) -> np.ndarray:
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values).requires_grad_()
        function(x, *others).sum().backward()
        return x.grad.numpy()


def assert_close_in_ulps(actual: np.ndarray, expected: np.ndarray, dtype, ulps: float) -> None:
    """Within ``ulps`` units in the last place of ``dtype`` at each expected value."""
    expected = np.asarray(expected, dtype=np.float64)
    spacing = np.spacing(np.abs(expected).astype(dtype)).astype(np.float64)
    assert np.all(np.isfinite(actual)), actual
    assert np.all(np.abs(actual.astype(np.float64) - expected) <= ulps * spacing), (actual, expected)


# (name, dtype, dividend, divisor): the divisor's gradient of sum(a / b) is -a / b**2.
DIVISIONS = [
    ("float16 divisor past 256", np.float16, [100.0, -3000.0], [300.0, 1000.0]),
    ("float32 divisor past 1.8e19", np.float32, [1e20, 3e25], [1e20, 2e22]),
    ("float32 divisor below 1e-19", np.float32, [1e-20, -2e-25], [1e-20, 4e-22]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, dtype, dividend, divisor", DIVISIONS, ids=[case[0] for case in DIVISIONS])
def test_the_divisors_gradient_does_not_square_it(name, dtype, dividend, divisor, executor):
    a = onnxnn.tensor(np.asarray(dividend, dtype))
    actual = gradient(lambda b, a: a / b, np.asarray(divisor, dtype), executor, a)
    exact = -np.asarray(dividend, np.float64) / np.asarray(divisor, np.float64) ** 2
    assert_close_in_ulps(actual, exact, dtype, 3)  # three roundings: a / b, / b, the negation exact


@pytest.mark.parametrize("executor", EXECUTORS)
def test_normalize_and_softsign_gradients_past_float16s_square_range(executor):
    values = np.asarray([300.0, 400.0, -1200.0], np.float16)
    wide = values.astype(np.float64)
    norm = np.sqrt(np.sum(wide**2))
    # d/dx sum(x / |x|) = (1 - y * sum(y)) / |x| with y = x / |x|
    exact = (1 - wide / norm * np.sum(wide / norm)) / norm
    actual = gradient(lambda x: F.normalize(x, dim=0) * 1000, values, executor) / 1000
    np.testing.assert_allclose(actual.astype(np.float64), exact, rtol=2e-2, atol=0)  # a few half roundings
    softsign = gradient(lambda x: F.softsign(x) * 1000, values, executor)
    assert_close_in_ulps(softsign, 1000 / (1 + np.abs(wide)) ** 2, np.float16, 3)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_elu_gradient_keeps_its_digits_far_below_zero(alpha, executor):
    values = np.asarray([-6.0, -10.0, -17.0, -20.0], np.float32)
    actual = gradient(lambda x: F.elu(x, alpha), values, executor)
    assert_close_in_ulps(actual, alpha * np.exp(values.astype(np.float64)), np.float32, 4)


VARIANCES = [
    ("large mean", lambda rng: 1e6 + rng.standard_normal((4, 1000))),
    ("squares past float32", lambda rng: np.tile([-9e18, 9e18], (3, 4)) * rng.uniform(0.5, 1.5, (3, 8))),
    ("squares below float32", lambda rng: 1e-30 * rng.standard_normal((3, 8))),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dim", [None, 1])
@pytest.mark.parametrize("name, make", VARIANCES, ids=[case[0] for case in VARIANCES])
def test_float32_variance_is_accumulated_in_double(name, make, dim, executor):
    values = make(np.random.default_rng(3)).astype(np.float32)
    wide = values.astype(np.float64)
    exact_var = np.var(wide, axis=dim, ddof=1)
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values)
        variance, deviation = x.var(dim), x.std(dim)
        pair = onnxnn.var_mean(x, dim)[0]
        assert_close_in_ulps(variance.numpy(), exact_var, np.float32, 1)
        assert_close_in_ulps(pair.numpy(), exact_var, np.float32, 1)
        assert_close_in_ulps(deviation.numpy(), np.sqrt(exact_var), np.float32, 1)
