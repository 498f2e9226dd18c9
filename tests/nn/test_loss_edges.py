"""Loss functions at the edges of their domains, as PyTorch defines them.

- ``ctc_loss``: a sample with no frames and no labels has one alignment, the empty one, of
  log-likelihood 0: its loss is 0 and its gradient 0, whatever ``zero_infinity`` says. A sample with
  no frames and some labels has none: its loss is inf (0 with ``zero_infinity``).
- ``gaussian_nll_loss``: an infinite variance gives an infinite loss and zero gradients, not NaN;
  variances below ``eps`` are clamped in the forward pass while the gradient passes the clamp unchanged.
- ``huber_loss`` and ``smooth_l1_loss``: where ``input - target`` is NaN the loss and its gradient are
  NaN (the quadratic branch's gradient ``d / beta``); an infinite difference has gradient ``+-delta``
  (``+-1`` for smooth L1).
- ``binary_cross_entropy``: a weight of a wider dtype than the input leaves the loss in the input's
  dtype (PyTorch multiplies in place); targets outside [0, 1] (or NaN) raise "all elements of target
  should be between 0 and 1", after the same check on the input.

Expected values are hand-derived from the formulas, in numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ("onnxruntime", "kernels")
REDUCTIONS = ("none", "sum", "mean")
EPS64 = np.finfo(np.float64).eps


def _reduced(values: np.ndarray, reduction: str) -> np.ndarray:
    return {"none": values, "sum": values.sum(), "mean": values.mean()}[reduction]


def _value_and_gradients(loss, leaves):
    gradients = onnxnn.autograd.grad(loss.sum(), leaves)
    return loss.detach().numpy(), [gradient.numpy() for gradient in gradients]


# ---------------------------------------------------------------- ctc_loss: empty inputs

# (T=2, N=2, C=3) log-probabilities; sample 0 has no frames, sample 1 one frame and no labels, so its
# only alignment is the blank at frame 0: loss -log_probs[0, 1, 0], gradient -1 there.
CTC_LOG_PROBS = np.log(
    np.array(
        [[[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]], [[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]],
    )
)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", (False, True))
def test_ctc_loss_of_no_frames_and_no_labels_is_zero(executor, reduction, zero_infinity):
    with onnxnn.set_executor(executor):
        log_probs = onnxnn.tensor(CTC_LOG_PROBS, requires_grad=True)
        targets = onnxnn.tensor([[1, 2], [1, 2]])
        loss = F.ctc_loss(log_probs, targets, [0, 1], [0, 0], reduction=reduction, zero_infinity=zero_infinity)
        value, (gradient,) = _value_and_gradients(loss, [log_probs])
    per_sample = np.array([0.0, -CTC_LOG_PROBS[0, 1, 0]])  # 'mean' divides by max(target length, 1) = 1
    np.testing.assert_allclose(value, _reduced(per_sample, reduction), rtol=4 * EPS64, atol=0)
    expected = np.zeros_like(CTC_LOG_PROBS)
    expected[0, 1, 0] = -1.0 / (2 if reduction == "mean" else 1)
    np.testing.assert_allclose(gradient, expected, rtol=4 * EPS64, atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("zero_infinity, expected", ((False, math.inf), (True, 0.0)))
def test_ctc_loss_of_no_frames_and_some_labels_is_impossible(executor, zero_infinity, expected):
    with onnxnn.set_executor(executor):
        log_probs = onnxnn.tensor(CTC_LOG_PROBS, requires_grad=True)
        targets = onnxnn.tensor([[1, 2], [1, 2]])
        loss = F.ctc_loss(log_probs, targets, [0, 1], [1, 0], reduction="none", zero_infinity=zero_infinity)
        value, (gradient,) = _value_and_gradients(loss, [log_probs])
    assert value[0] == expected
    np.testing.assert_array_equal(gradient[:, 0], 0.0)


# ---------------------------------------------------------------- gaussian_nll_loss: infinite and tiny variances

HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)
EPS = 1e-6

# input, target, var; expected loss without the constant, d loss/d input, d loss/d var. With
# d = input - target and v = max(var, eps): loss 0.5 * (log v + d^2 / v), gradients d / v and
# 0.5 * (1 / v - d^2 / v^2); an infinite v gives loss inf and both gradients 0.
GAUSSIAN_CASES = [
    pytest.param([1.0, 2.0], [0.0, 0.0], [math.inf, 1.0], [math.inf, 2.0], [0.0, 2.0], [0.0, -1.5], id="one-infinite"),
    pytest.param(
        [1.0, 2.0], [0.0, 0.0], [math.inf, math.inf], [math.inf] * 2, [0.0, 0.0], [0.0, 0.0], id="all-infinite"
    ),
    pytest.param(
        [1.0, 2.0],
        [0.0, 0.0],
        [0.0, 2.0],
        [0.5 * (math.log(EPS) + 1 / EPS), 0.5 * (math.log(2.0) + 2.0)],
        [1 / EPS, 1.0],
        [0.5 * (1 / EPS - 1 / EPS**2), -0.25],
        id="clamped",
    ),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", (False, True))
@pytest.mark.parametrize("input, target, var, loss, input_gradient, var_gradient", GAUSSIAN_CASES)
def test_gaussian_nll_loss_variances(executor, reduction, full, input, target, var, loss, input_gradient, var_gradient):
    with onnxnn.set_executor(executor):
        input_tensor = onnxnn.tensor(input, dtype=onnxnn.float64, requires_grad=True)
        var_tensor = onnxnn.tensor(var, dtype=onnxnn.float64, requires_grad=True)
        result = F.gaussian_nll_loss(
            input_tensor, onnxnn.tensor(target, dtype=onnxnn.float64), var_tensor, full, EPS, reduction
        )
        value, gradients = _value_and_gradients(result, [input_tensor, var_tensor])
    expected = np.array(loss) + (HALF_LOG_TWO_PI if full else 0.0)
    scale = 0.5 if reduction == "mean" else 1.0
    np.testing.assert_allclose(value, _reduced(expected, reduction), rtol=8 * EPS64, atol=0)
    np.testing.assert_allclose(gradients[0], np.array(input_gradient) * scale, rtol=8 * EPS64, atol=0)
    np.testing.assert_allclose(gradients[1], np.array(var_gradient) * scale, rtol=8 * EPS64, atol=0)


# ---------------------------------------------------------------- huber and smooth L1: NaN and infinite differences

NAN = math.nan
# input - target: NaN twice (either side NaN), +-inf, inside and outside the quadratic part.
PIECEWISE_INPUT = [NAN, 1.0, math.inf, 0.5, -math.inf, 0.25, 3.0]
PIECEWISE_TARGET = [0.0, NAN, 0.0, math.inf, 1.0, 0.0, 0.5]


def _piecewise_gradient(difference: np.ndarray, threshold: float, linear_slope: float, quadratic_scale: float):
    """PyTorch's gradient: +-linear_slope beyond the threshold, else difference * quadratic_scale (NaN stays NaN)."""
    with np.errstate(invalid="ignore"):
        return np.where(
            difference > threshold,
            linear_slope,
            np.where(difference < -threshold, -linear_slope, difference * quadratic_scale),
        )


PIECEWISE_CASES = [
    pytest.param(F.huber_loss, {"delta": 1.0}, 1.0, 1.0, 1.0, id="huber"),
    pytest.param(F.huber_loss, {"delta": 2.0}, 2.0, 2.0, 1.0, id="huber-delta-2"),
    pytest.param(F.smooth_l1_loss, {"beta": 1.0}, 1.0, 1.0, 1.0, id="smooth-l1"),
    pytest.param(F.smooth_l1_loss, {"beta": 0.5}, 0.5, 1.0, 2.0, id="smooth-l1-beta-half"),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("function, keywords, threshold, linear_slope, quadratic_scale", PIECEWISE_CASES)
def test_piecewise_losses_propagate_nan_differences(
    executor, reduction, function, keywords, threshold, linear_slope, quadratic_scale
):
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(PIECEWISE_INPUT, dtype=onnxnn.float64, requires_grad=True)
        target = onnxnn.tensor(PIECEWISE_TARGET, dtype=onnxnn.float64, requires_grad=True)
        _, (input_gradient, target_gradient) = _value_and_gradients(
            function(input, target, reduction=reduction, **keywords), [input, target]
        )
    difference = np.array(PIECEWISE_INPUT) - np.array(PIECEWISE_TARGET)
    expected = _piecewise_gradient(difference, threshold, linear_slope, quadratic_scale)
    expected = expected / (len(difference) if reduction == "mean" else 1)
    np.testing.assert_allclose(input_gradient, expected, rtol=4 * EPS64, atol=0)
    np.testing.assert_allclose(target_gradient, -expected, rtol=4 * EPS64, atol=0)


# ---------------------------------------------------------------- binary_cross_entropy: weight dtype, target range

BCE_INPUT = [0.25, 0.5, 0.75]
BCE_TARGET = [1.0, 0.0, 1.0]
BCE_WEIGHT = [1.0, 2.0, 0.1]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_keeps_the_input_dtype_under_a_wider_weight(executor, reduction):
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(BCE_INPUT, dtype=onnxnn.float32)
        target = onnxnn.tensor(BCE_TARGET, dtype=onnxnn.float32)
        weight = onnxnn.tensor(BCE_WEIGHT, dtype=onnxnn.float64)
        loss = F.binary_cross_entropy(input, target, weight, reduction=reduction)
        value = loss.numpy()
    assert loss.dtype is onnxnn.float32
    x, t = np.array(BCE_INPUT, np.float64), np.array(BCE_TARGET, np.float64)
    expected = -np.array(BCE_WEIGHT) * (t * np.log(x) + (1 - t) * np.log1p(-x))
    # float32 logs, one float32 rounding per term and per sum step
    np.testing.assert_allclose(value, _reduced(expected, reduction), rtol=8 * np.finfo(np.float32).eps, atol=0)


BCE_RANGE_CASES = [
    pytest.param([0.25, 0.5], [1.5, 0.0], "target", id="target-above-one"),
    pytest.param([0.25, 0.5], [1.0, -0.5], "target", id="target-below-zero"),
    pytest.param([0.25, 0.5], [NAN, 0.0], "target", id="target-nan"),
    pytest.param([0.25, 0.5], [1.0, math.inf], "target", id="target-inf"),
    pytest.param([1.5, 0.5], [2.0, 0.0], "input", id="input-checked-first"),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("input, target, name", BCE_RANGE_CASES)
def test_binary_cross_entropy_checks_the_range_of_input_and_target(executor, input, target, name):
    with onnxnn.set_executor(executor):
        with pytest.raises(RuntimeError, match=f"^all elements of {name} should be between 0 and 1$"):
            F.binary_cross_entropy(onnxnn.tensor(input), onnxnn.tensor(target), reduction="none")
