"""Loss functions where PyTorch's gradient or NaN handling has a specific form, and one_hot's empty case.

- ``kl_div`` (``log_target=False``) is PyTorch's ``xlogy(target, target) - target * input``: its target
  gradient ``log(target) + 1 - input`` is NaN at ``target == 0`` (xlogy's ``target / target``).
- ``poisson_nll_loss(full=True)`` adds Stirling's term computed everywhere and masked where
  ``target <= 1``: the masked term's zero gradient times ``log(target)`` and ``1 / target`` makes the
  target gradient NaN where ``target <= 0``.
- ``multi_margin_loss`` and ``multilabel_margin_loss`` add a hinge term only where it is ``> 0``, as
  PyTorch's kernels do: a NaN term counts as 0, in the value and the gradient; ``multi_margin_loss``'s
  class weight multiplies counted terms only.
- ``cosine_embedding_loss`` adds PyTorch's ``constexpr float EPSILON = 1e-12`` to each squared norm:
  in float64 that is 1e-12 rounded to float32, which sets the gradient at zero and tiny norms.
- ``one_hot`` of an empty tensor refuses ``num_classes <= 0``, not only -1.

Expected values are the formulas in numpy (PyTorch's CPU kernels written out as loops for the margin
losses), in float64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ("onnxruntime", "kernels")
EPS64 = np.finfo(np.float64).eps
NAN = math.nan


def _value_and_gradients(loss, leaves):
    gradients = onnxnn.autograd.grad(loss.sum(), leaves)
    return loss.detach().numpy(), [gradient.numpy() for gradient in gradients]


def _leaf(values) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


# ---------------------------------------------------------------- kl_div, poisson_nll_loss: target gradient

INPUT = np.array([-0.5, 0.3, 1.2, -2.0, 0.7, 0.4])
TARGET = np.array([0.0, 0.5, 0.0, 2.0, -0.5, 1.0])


def _log(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(values)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_kl_div_target_gradient_is_nan_at_zero_target(executor):
    with onnxnn.set_executor(executor):
        input, target = _leaf(INPUT), _leaf(TARGET)
        value, (input_gradient, target_gradient) = _value_and_gradients(
            F.kl_div(input, target, reduction="none"), [input, target]
        )
    log_target = _log(TARGET)
    expected_value = np.where(TARGET == 0, 0.0, TARGET * log_target) - TARGET * INPUT  # NaN at target < 0
    with np.errstate(invalid="ignore"):
        expected_target_gradient = log_target + TARGET / TARGET - INPUT  # NaN at 0 (0 / 0) and below
    np.testing.assert_allclose(value, expected_value, rtol=4 * EPS64, atol=0)
    np.testing.assert_allclose(input_gradient, -TARGET, rtol=0, atol=0)
    # The sum of terms up to 4 in size cancels to 0.007 at target 0.5: an absolute tolerance.
    np.testing.assert_allclose(target_gradient, expected_target_gradient, rtol=0, atol=16 * EPS64)
    assert np.isnan(target_gradient[[0, 2, 4]]).all()


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("log_input", (True, False))
def test_poisson_nll_loss_full_target_gradient(executor, log_input):
    input = INPUT if log_input else np.abs(INPUT) + 0.25
    eps = 1e-8
    with onnxnn.set_executor(executor):
        input_leaf, target_leaf = _leaf(input), _leaf(TARGET)
        loss = F.poisson_nll_loss(input_leaf, target_leaf, log_input=log_input, full=True, eps=eps, reduction="none")
        value, (input_gradient, target_gradient) = _value_and_gradients(loss, [input_leaf, target_leaf])
    # Stirling's term t log t - t + log(2 pi t) / 2 counts where t > 1; its zero gradient elsewhere
    # times log(t) and 1 / t is NaN where t <= 0, 0 in (0, 1].
    large = TARGET > 1
    log_target = _log(TARGET)
    with np.errstate(divide="ignore", invalid="ignore"):
        stirling = TARGET * log_target - TARGET + 0.5 * _log(2 * math.pi * TARGET)
        stirling_gradient = np.where(large, 1.0, 0.0) * (log_target + 0.5 / TARGET)
    if log_input:
        base, base_target_gradient, expected_input_gradient = (
            np.exp(input) - TARGET * input,
            -input,
            np.exp(input) - TARGET,
        )
    else:
        base = input - TARGET * np.log(input + eps)
        base_target_gradient, expected_input_gradient = -np.log(input + eps), 1 - TARGET / (input + eps)
    np.testing.assert_allclose(value, base + np.where(large, stirling, 0.0), rtol=8 * EPS64, atol=0)
    # Sums of terms up to about 8 in size (exp(2), log(2) + 1/4 + 2): absolute tolerances.
    np.testing.assert_allclose(input_gradient, expected_input_gradient, rtol=0, atol=32 * EPS64)
    np.testing.assert_allclose(target_gradient, base_target_gradient + stirling_gradient, rtol=0, atol=16 * EPS64)
    assert np.isnan(target_gradient[[0, 2, 4]]).all()


# ---------------------------------------------------------------- multi-class margin losses: NaN terms


def _multi_margin_reference(x, y, p, margin, weight):
    """PyTorch's CPU kernel: sum over i != y of w[y] * h(z), z = margin - x[y] + x[i], where z > 0."""
    loss, gradient = np.zeros(len(x)), np.zeros_like(x)
    classes = x.shape[1]
    for n, target in enumerate(y):
        w = 1.0 if weight is None else weight[target]
        for i in range(classes):
            z = margin - x[n, target] + x[n, i]
            if i == target or not z > 0:
                continue
            loss[n] += w * (z if p == 1 else z * z) / classes
            slope = w * (1.0 if p == 1 else 2 * z) / classes
            gradient[n, i] += slope
            gradient[n, target] -= slope
    return loss, gradient


def _multilabel_margin_reference(x, y):
    """PyTorch's CPU kernel: listed targets up to the first -1; z = 1 - x[y_j] + x[i] for i not a
    target, counted where z > 0."""
    loss, gradient = np.zeros(len(x)), np.zeros_like(x)
    classes = x.shape[1]
    for n in range(len(x)):
        listed = []
        for target in y[n]:
            if target < 0:
                break
            listed.append(target)
        for target in listed:
            for i in range(classes):
                z = 1 - x[n, target] + x[n, i]
                if i in listed or not z > 0:
                    continue
                loss[n] += z / classes
                gradient[n, i] += 1 / classes
                gradient[n, target] -= 1 / classes
    return loss, gradient


# NaN at a target's score, at another class's, at both; a row without NaN; a tie (z == 0) in row 3.
MARGIN_INPUT = np.array(
    [[0.5, NAN, -1.0, 0.2], [NAN, 0.1, 0.2, 0.9], [NAN, NAN, 0.3, -0.4], [1.0, 2.0, 0.3, 0.0], [0.5, 1.5, 0.1, 0.2]]
)
MULTI_TARGET = np.array([0, 0, 2, 1, 3])
CLASS_WEIGHT = np.array([1.5, NAN, 2.0, 0.5])  # NaN for class 1: row 3 (target 1) counts no term, 0 not NaN


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("p", (1, 2))
@pytest.mark.parametrize("weighted", (False, True))
def test_multi_margin_loss_skips_nan_terms(executor, p, weighted):
    x, y, weight = MARGIN_INPUT, MULTI_TARGET, CLASS_WEIGHT if weighted else None
    with onnxnn.set_executor(executor):
        input = _leaf(x)
        weight_tensor = None if weight is None else onnxnn.tensor(weight)
        loss = F.multi_margin_loss(input, onnxnn.tensor(y), p=p, weight=weight_tensor, reduction="none")
        value, (gradient,) = _value_and_gradients(loss, [input])
    expected_value, expected_gradient = _multi_margin_reference(x, y, p, 1.0, weight)
    np.testing.assert_allclose(value, expected_value, rtol=4 * EPS64, atol=0)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=4 * EPS64, atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduction", ("none", "sum", "mean"))
def test_multilabel_margin_loss_skips_nan_terms(executor, reduction):
    y = np.array([[0, -1, 1, 2], [2, 1, -1, 0], [3, -1, 0, 0], [1, 3, -1, 2], [0, 1, 2, 3]])
    with onnxnn.set_executor(executor):
        input = _leaf(MARGIN_INPUT)
        loss = F.multilabel_margin_loss(input, onnxnn.tensor(y), reduction=reduction)
        value, (gradient,) = _value_and_gradients(loss, [input])
    expected_value, expected_gradient = _multilabel_margin_reference(MARGIN_INPUT, y)
    scale = 1 / len(y) if reduction == "mean" else 1.0
    expected_value = {"none": expected_value, "sum": expected_value.sum(), "mean": expected_value.mean()}[reduction]
    np.testing.assert_allclose(value, expected_value, rtol=4 * EPS64, atol=0)
    np.testing.assert_allclose(gradient, expected_gradient * scale, rtol=4 * EPS64, atol=0)


# ---------------------------------------------------------------- cosine_embedding_loss: the epsilon

COSINE_EPSILON = float(np.float32(1e-12))  # PyTorch's ``constexpr float EPSILON = 1e-12``


def _cosine_reference(x1, x2):
    """cos = x1.x2 / sqrt((|x1|^2 + e)(|x2|^2 + e)) per row and its gradients with respect to x1, x2."""
    product = (x1 * x2).sum(1, keepdims=True)
    square1 = (x1 * x1).sum(1, keepdims=True) + COSINE_EPSILON
    square2 = (x2 * x2).sum(1, keepdims=True) + COSINE_EPSILON
    denominator = np.sqrt(square1 * square2)
    cosine = product / denominator
    return cosine[:, 0], x2 / denominator - cosine * x1 / square1, x1 / denominator - cosine * x2 / square2


ZERO = np.zeros(3)
SMALL = np.array([1e-7, -2e-7, 3e-8])  # squared norm 5e-14: the epsilon is most of it
ORDINARY = np.array([0.5, 0.1, -0.2])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "x1, x2",
    ((ZERO, ORDINARY), (ORDINARY, ZERO), (ZERO, ZERO), (SMALL, ORDINARY), (SMALL, SMALL), (ORDINARY, SMALL)),
    ids=("zero-ordinary", "ordinary-zero", "zero-zero", "small-ordinary", "small-small", "ordinary-small"),
)
def test_cosine_embedding_loss_epsilon_at_small_norms(executor, x1, x2):
    # Row 0 has target 1 (loss 1 - cos), row 1 target -1 with margin -0.5 (loss cos + 0.5, the hinge open).
    rows1, rows2 = np.stack([x1, x1]), np.stack([x2, x2 * -1.5])
    with onnxnn.set_executor(executor):
        input1, input2 = _leaf(rows1), _leaf(rows2)
        loss = F.cosine_embedding_loss(input1, input2, onnxnn.tensor([1.0, -1.0]), margin=-0.5, reduction="none")
        value, (gradient1, gradient2) = _value_and_gradients(loss, [input1, input2])
    cosine, cosine_gradient1, cosine_gradient2 = _cosine_reference(rows1, rows2)
    sign = np.array([[-1.0], [1.0]])
    np.testing.assert_allclose(value, [1 - cosine[0], cosine[1] + 0.5], rtol=4 * EPS64, atol=0)
    np.testing.assert_allclose(gradient1, sign * cosine_gradient1, rtol=16 * EPS64, atol=0)
    np.testing.assert_allclose(gradient2, sign * cosine_gradient2, rtol=16 * EPS64, atol=0)


# ---------------------------------------------------------------- one_hot: empty tensors


@pytest.mark.parametrize("shape", ((0,), (2, 0)))
@pytest.mark.parametrize("num_classes", (0, -1, -2))
def test_one_hot_of_empty_tensor_needs_positive_num_classes(shape, num_classes):
    with pytest.raises(RuntimeError, match="Can not infer total number of classes from empty tensor"):
        F.one_hot(onnxnn.zeros(shape, dtype=onnxnn.int64), num_classes)


@pytest.mark.parametrize("shape", ((0,), (2, 0)))
def test_one_hot_of_empty_tensor_with_positive_num_classes(shape):
    result = F.one_hot(onnxnn.zeros(shape, dtype=onnxnn.int64), 3)
    assert tuple(result.shape) == (*shape, 3)
    assert result.dtype is onnxnn.int64
