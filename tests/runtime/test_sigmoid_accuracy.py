"""sigmoid keeps its relative accuracy where its output is small, on every executor.

onnxruntime's own Sigmoid is an approximation with a small absolute error: its float32 result is 0
from -20 on (PyTorch: 2.06e-9), so logs of it and probabilities from logits broke. The expected
values are ``1 / (1 + exp(-x))`` in float64 numpy; the result's relative error is at most a few
roundings of its dtype (one exp, one addition, one reciprocal, and a final rounding for float16).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

EXECUTORS = ["kernels", "onnxruntime"]
# dtype, the most negative input whose float64 sigmoid is a normal number of the dtype, roundings allowed
CASES = [
    (np.float32, -87.0, 4),
    (np.float64, -700.0, 4),
    (np.float16, -9.0, 1),  # float16's normal range ends at 6.1e-5 (sigmoid(-9.7))
]


def reference(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype, lowest, roundings", CASES, ids=lambda case: getattr(case, "__name__", None))
def test_small_outputs_keep_their_digits(dtype, lowest, roundings, executor):
    x = np.linspace(lowest, 20.0, 4001).astype(dtype)
    with onnxnn.set_executor(executor):
        result = onnxnn.sigmoid(onnxnn.tensor(x)).numpy()
    expected = reference(x)
    relative = np.abs(result.astype(np.float64) - expected) / expected
    assert relative.max() <= roundings * np.finfo(dtype).eps, float(relative.max())


@pytest.mark.parametrize("executor", EXECUTORS)
def test_its_log_is_finite_where_the_output_is(executor):
    x = np.array([-30.0, -60.0, -80.0], np.float32)
    with onnxnn.set_executor(executor):
        logs = onnxnn.log(onnxnn.sigmoid(onnxnn.tensor(x))).numpy()
    np.testing.assert_allclose(logs, np.log(reference(x)), rtol=4 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_probabilities_from_logits_stay_positive(executor):
    # Geometric's mean is 1 / p - 1: with p = sigmoid(-20) rounded to 0 it was inf.
    logits = onnxnn.full((8,), -20.0)
    with onnxnn.set_executor(executor):
        mean = onnxnn.distributions.Geometric(logits=logits).mean.numpy()
    np.testing.assert_allclose(mean, 1.0 / reference(np.float32(-20.0)) - 1.0, rtol=8 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_gradient_follows_the_accurate_output(executor):
    x = np.array([-25.0, -10.0, 0.5, 3.0], np.float64)
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(x, requires_grad=True)
        onnxnn.sigmoid(input).sum().backward()
        gradient = input.grad.numpy()
    expected = reference(x) * (1.0 - reference(x))
    np.testing.assert_allclose(gradient, expected, rtol=8 * np.finfo(np.float64).eps)
