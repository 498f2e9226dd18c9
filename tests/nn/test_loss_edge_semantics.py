"""Losses at the edges of their domains, as PyTorch 2.13 defines them: binary cross entropy at
saturated probabilities, hinge losses at their kink, regression losses at infinite differences, and
the arguments PyTorch refuses.

Every expectation is PyTorch's formula written in numpy (its backward kernels' formulas where the
gradient is not the derivative of the forward formula), never a value computed by onnxnn.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn.runtime.internal import known_data

EXECUTORS = ["onnxruntime", "kernels"]
# PyTorch's binary_cross_entropy_backward divides by at least this, a C float in every dtype.
BCE_EPSILON = float(np.float32(1e-12))


def _bce_input_gradient(p, t, g):
    """PyTorch's binary_cross_entropy_backward: ``g * (p - t) / max((1 - p) * p, 1e-12)``."""
    return g * (p - t) / np.maximum((1 - p) * p, p.dtype.type(BCE_EPSILON))


# ---------------------------------------------------------------- binary cross entropy


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bce_gradient_is_pytorchs_at_probabilities_of_0_and_1(executor):
    p = np.array([0.0, 1.0, 0.0, 1.0, 1e-13, 0.3], np.float64)
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.5, 0.8], np.float64)
    with onnxnn.set_executor(executor):
        probabilities = onnxnn.tensor(p, requires_grad=True)
        loss = F.binary_cross_entropy(probabilities, onnxnn.tensor(t), reduction="sum")
        loss.backward()
        gradient = probabilities.grad.numpy()
        value = loss.item()
    # Finite everywhere: -1/eps and 1/eps where the prediction is certain and wrong, 0 where right.
    np.testing.assert_allclose(gradient, _bce_input_gradient(p, t, 1.0), rtol=1e-12)
    # The loss is unchanged: logs clamped at -100.
    with np.errstate(divide="ignore"):
        expected = -(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log(1 - p), -100))
    np.testing.assert_allclose(value, expected.sum(), rtol=1e-12)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bce_of_a_saturated_float32_sigmoid_gives_its_logits_a_finite_gradient(executor):
    x = np.array([20.0, -20.0, 0.5], np.float32)  # sigmoid(20) is exactly 1 in float32
    t = np.array([1.0, 0.0, 1.0], np.float32)
    with onnxnn.set_executor(executor):
        logits = onnxnn.tensor(x, requires_grad=True)
        probabilities = onnxnn.sigmoid(logits)
        F.binary_cross_entropy(probabilities, onnxnn.tensor(t)).backward()
        p = probabilities.detach().numpy()
        gradient = logits.grad.numpy()
    assert p[0] == 1.0
    # Through the sigmoid's p * (1 - p), from the loss's mean of 3 elements.
    expected = p * (1 - p) * _bce_input_gradient(p, t, np.float32(1 / 3))
    assert np.all(np.isfinite(gradient))
    np.testing.assert_allclose(gradient, expected, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype, kind", [(onnxnn.float32, np.float32), (onnxnn.float64, np.float64)])
def test_bce_of_a_tiny_probability_with_target_0_is_that_probability(dtype, kind, executor):
    # -log1p(-p) = p + p**2 / 2 + ...: PyTorch's kernel takes log1p; log(1 - p) is 0 below eps / 2.
    p = np.asarray([1e-30, 1e-12, 1e-9, 3e-5], kind)
    with onnxnn.set_executor(executor):
        loss = F.binary_cross_entropy(onnxnn.tensor(p), onnxnn.zeros(4, dtype=dtype), reduction="none").numpy()
    exact = -np.log1p(-p.astype(np.float64))
    np.testing.assert_allclose(loss, exact, rtol=4 * np.finfo(kind).eps, atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bce_target_gradient_is_minus_the_logit_times_weight(executor):
    p = np.array([0.0, 1.0, 0.3, 0.9], np.float64)
    t = np.array([0.2, 0.4, 0.5, 1.0], np.float64)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float64)
    with onnxnn.set_executor(executor):
        target = onnxnn.tensor(t, requires_grad=True)
        probabilities = onnxnn.tensor(p, requires_grad=True)
        F.binary_cross_entropy(probabilities, target, onnxnn.tensor(w)).backward()
        target_gradient = target.grad.numpy()
        input_gradient = probabilities.grad.numpy()
    with np.errstate(divide="ignore"):
        expected = -np.log(p / (1 - p)) * w / p.size  # PyTorch's -logit(p): +inf at 0, -inf at 1, unclamped
    np.testing.assert_allclose(target_gradient, expected, rtol=1e-12)
    np.testing.assert_allclose(input_gradient, _bce_input_gradient(p, t, w / p.size), rtol=1e-12)


def test_bce_second_derivative_is_that_of_pytorchs_gradient_formula():
    p = np.array([0.2, 0.7], np.float64)
    t = np.array([0.1, 0.9], np.float64)
    probabilities = onnxnn.tensor(p, requires_grad=True)
    loss = F.binary_cross_entropy(probabilities, onnxnn.tensor(t), reduction="sum")
    (gradient,) = onnxnn.autograd.grad(loss, probabilities, create_graph=True)
    gradient.sum().backward()
    variance = p * (1 - p)
    expected = (variance - (p - t) * (1 - 2 * p)) / variance**2  # d/dp of (p - t) / (p (1 - p))
    np.testing.assert_allclose(probabilities.grad.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
def test_bce_keeps_half_precision(dtype):
    p = onnxnn.tensor([0.25, 0.5], dtype=dtype, requires_grad=True)
    loss = F.binary_cross_entropy(p, onnxnn.tensor([1.0, 0.0], dtype=dtype), reduction="sum")
    loss.backward()
    assert loss.dtype is dtype and p.grad.dtype is dtype
    np.testing.assert_allclose(loss.to(onnxnn.float64).item(), -np.log(0.25) - np.log(0.5), rtol=2.0**-7)
    np.testing.assert_allclose(p.grad.to(onnxnn.float64).numpy(), [-4.0, 2.0], rtol=2.0**-7)


def test_bce_refuses_a_target_of_another_dtype():
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        F.binary_cross_entropy(onnxnn.tensor([0.5]), onnxnn.tensor([1.0], dtype=onnxnn.float64))


@pytest.mark.parametrize("value", [1.5, -0.5, float("nan")])
def test_bce_refuses_probabilities_outside_0_1_already_in_memory(value):
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(onnxnn.tensor([value, 0.2]), onnxnn.tensor([1.0, 0.0]))


def test_bce_does_not_compute_a_pending_input_to_check_it():
    probabilities = onnxnn.tensor([0.75, 0.2]) * 2  # pending: 1.5 is only known once computed
    loss = F.binary_cross_entropy(probabilities, onnxnn.tensor([1.0, 0.0]), reduction="none")
    assert known_data(probabilities) is None
    assert np.isnan(loss.numpy()[0])


# ---------------------------------------------------------------- hinge losses at the kink


@pytest.mark.parametrize("executor", EXECUTORS)
def test_margin_ranking_loss_passes_the_gradient_at_tied_scores(executor):
    # max(0, -y (x1 - x2) + margin) with ties and margin 0: PyTorch's clamp_min passes the gradient
    # where the clamped term is 0 (x >= 0), so tied (e.g. zero-initialized) scorers still learn.
    y = np.array([1.0, -1.0, 1.0])
    with onnxnn.set_executor(executor):
        a = onnxnn.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = onnxnn.tensor([1.0, 2.0, 1.0], requires_grad=True)
        F.margin_ranking_loss(a, b, onnxnn.tensor(y)).backward()
        gradients = a.grad.numpy(), b.grad.numpy()
    term = -y * (np.array([1.0, 2.0, 3.0]) - np.array([1.0, 2.0, 1.0]))
    passed = (term >= 0) / np.float32(3)
    np.testing.assert_array_equal(gradients[0], (-y * passed).astype(np.float32))
    np.testing.assert_array_equal(gradients[1], (y * passed).astype(np.float32))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_hinge_embedding_loss_passes_the_gradient_at_the_margin(executor):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor([1.0, 0.5], requires_grad=True)
        F.hinge_embedding_loss(x, onnxnn.tensor([-1.0, -1.0]), margin=1.0, reduction="sum").backward()
        gradient = x.grad.numpy()
    np.testing.assert_array_equal(gradient, [-1.0, -1.0])  # d/dx max(0, 1 - x), x = 1 included


@pytest.mark.parametrize("executor", EXECUTORS)
def test_cosine_embedding_loss_passes_the_gradient_at_cosine_equal_to_margin(executor):
    u, v = np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])
    with onnxnn.set_executor(executor):
        first = onnxnn.tensor(u, requires_grad=True)
        F.cosine_embedding_loss(first, onnxnn.tensor(v), onnxnn.tensor([-1.0])).backward()
        gradient = first.grad.numpy()
    # d cos / du for cos = u.v / sqrt((|u|^2 + eps)(|v|^2 + eps)), at u.v = 0: v / sqrt(...).
    magnitudes = np.sqrt(((u * u).sum() + 1e-12) * ((v * v).sum() + 1e-12))
    np.testing.assert_allclose(gradient, v / magnitudes, rtol=1e-6)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("with_distance", [False, True])
def test_triplet_losses_pass_the_gradient_at_the_margin(executor, with_distance):
    anchor, positive, negative = np.zeros((1, 2)), np.array([[1.0, 0.0]]), np.array([[2.0, 0.0]])
    with onnxnn.set_executor(executor):
        tensors = [onnxnn.tensor(a, requires_grad=True) for a in (anchor, positive, negative)]
        if with_distance:
            euclidean = lambda a, b: ((a - b) * (a - b)).sum(-1).sqrt()  # noqa: E731  (no eps: the tie is exact)
            loss = F.triplet_margin_with_distance_loss(*tensors, distance_function=euclidean, margin=1.0)
        else:
            loss = F.triplet_margin_loss(*tensors, margin=1.0, eps=0.0)
        loss.backward()
        gradients = [tensor.grad.numpy() for tensor in tensors]
    # margin + d(a, p) - d(a, n) = 1 + 1 - 2 = 0: the gradients of the two Euclidean distances pass.
    to_positive, to_negative = positive - anchor, negative - anchor
    unit_positive = to_positive / np.linalg.norm(to_positive)
    unit_negative = to_negative / np.linalg.norm(to_negative)
    np.testing.assert_array_equal(gradients[1], unit_positive)
    np.testing.assert_array_equal(gradients[2], -unit_negative)
    np.testing.assert_array_equal(gradients[0], unit_negative - unit_positive)


# ---------------------------------------------------------------- regression losses at infinity


def _smooth_l1_gradient(d, beta):
    """PyTorch's smooth_l1_backward (huber_backward is delta times it, with beta = delta)."""
    return np.where(d <= -beta, -1.0, np.where(d >= beta, 1.0, d / beta))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("loss", ["smooth_l1", "huber"])
def test_smooth_l1_and_huber_gradients_are_finite_at_infinite_differences(executor, loss):
    x = np.array([np.inf, 0.0, 2.0, 0.25, -np.inf])
    y = np.array([0.0, np.inf, 0.0, 0.0, 1.0])
    beta = 0.5
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(x, requires_grad=True)
        if loss == "smooth_l1":
            F.smooth_l1_loss(input, onnxnn.tensor(y), reduction="sum", beta=beta).backward()
        else:
            F.huber_loss(input, onnxnn.tensor(y), reduction="sum", delta=beta).backward()
        gradient = input.grad.numpy()
    with np.errstate(invalid="ignore"):
        expected = _smooth_l1_gradient(x - y, beta) * (beta if loss == "huber" else 1.0)
    np.testing.assert_allclose(gradient, expected, rtol=1e-15)


# ---------------------------------------------------------------- arguments PyTorch refuses


@pytest.mark.parametrize("dtype", [onnxnn.int32, onnxnn.int16, onnxnn.int8, onnxnn.bool])
@pytest.mark.parametrize("loss", [F.cross_entropy, F.nll_loss])
def test_class_index_targets_must_be_int64_or_uint8(loss, dtype):
    name = {onnxnn.int32: "Int", onnxnn.int16: "Short", onnxnn.int8: "Char", onnxnn.bool: "Bool"}[dtype]
    with pytest.raises(RuntimeError, match=f"expected target dtype to be Long or Byte, but got {name}"):
        loss(onnxnn.zeros(2, 3), onnxnn.tensor([0, 1]).to(dtype))


def test_uint8_class_indices_are_accepted_without_spatial_dimensions():
    logits = np.array([[0.0, 1.0, 2.0], [2.0, 0.0, -1.0]])
    loss = F.cross_entropy(onnxnn.tensor(logits), onnxnn.tensor([2, 0], dtype=onnxnn.uint8), reduction="none")
    log_probabilities = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    np.testing.assert_allclose(loss.numpy(), -log_probabilities[[0, 1], [2, 0]], rtol=1e-6)
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Byte"):
        F.cross_entropy(onnxnn.zeros(2, 3, 4), onnxnn.zeros(2, 4, dtype=onnxnn.uint8))


@pytest.mark.parametrize(
    "loss, kernel",
    [(F.mse_loss, "mse_cpu"), (F.smooth_l1_loss, "smooth_l1_cpu"), (F.huber_loss, "huber_cpu")],
)
def test_regression_losses_refuse_integer_values(loss, kernel):
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for 'Long'"):
        loss(onnxnn.tensor([1, 2]), onnxnn.tensor([0, 0]))
    loss(onnxnn.tensor([1, 2]), onnxnn.tensor([0.0, 0.0]))  # one floating operand is enough


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.bool])
@pytest.mark.parametrize("argument", ["input_lengths", "target_lengths"])
def test_ctc_lengths_must_be_integral(argument, dtype):
    lengths = {"input_lengths": onnxnn.tensor([4]), "target_lengths": onnxnn.tensor([1])}
    lengths[argument] = lengths[argument].to(dtype)
    log_probs = onnxnn.zeros(4, 1, 3).log_softmax(2)
    with pytest.raises(RuntimeError, match=f"{argument} must be integral"):
        F.ctc_loss(log_probs, onnxnn.tensor([[1]]), lengths["input_lengths"], lengths["target_lengths"])


@pytest.mark.parametrize(
    "call, function, argument",
    [
        (
            lambda tensor: F.binary_cross_entropy_with_logits(onnxnn.zeros(2), onnxnn.ones(2), weight=tensor),
            "binary_cross_entropy_with_logits",
            "weight",
        ),
        (
            lambda tensor: F.binary_cross_entropy_with_logits(onnxnn.zeros(2), onnxnn.ones(2), pos_weight=tensor),
            "binary_cross_entropy_with_logits",
            "pos_weight",
        ),
        (lambda tensor: F.soft_margin_loss(onnxnn.zeros(2), tensor), "soft_margin_loss", "target"),
        # Class weights of class-index targets (probability targets' weight is differentiable).
        (
            lambda tensor: F.nll_loss(onnxnn.zeros(3, 2), onnxnn.tensor([0, 1, 1]), weight=tensor),
            "nll_loss_forward",
            "weight",
        ),
        (
            lambda tensor: F.cross_entropy(onnxnn.zeros(3, 2), onnxnn.tensor([0, 1, 1]), weight=tensor),
            "nll_loss_forward",
            "weight",
        ),
        (
            lambda tensor: F.cross_entropy(
                onnxnn.zeros(3, 2, 1, 1), onnxnn.zeros(3, 1, 1, dtype=onnxnn.int64), weight=tensor
            ),
            "nll_loss2d_forward",
            "weight",
        ),
        (
            lambda tensor: F.binary_cross_entropy(onnxnn.full((2,), 0.5), onnxnn.ones(2), weight=tensor),
            "binary_cross_entropy",
            "weight",
        ),
        (
            lambda tensor: F.multi_margin_loss(onnxnn.zeros(2, 2), onnxnn.tensor([0, 1]), weight=tensor),
            "multi_margin_loss",
            "weight",
        ),
    ],
)
def test_arguments_without_a_gradient_must_not_require_one(call, function, argument):
    tensor = onnxnn.ones(2, requires_grad=True)
    message = f"The function '{function}' is not differentiable with respect to argument '{argument}'"
    with pytest.raises(RuntimeError, match=message):
        call(tensor)
    with onnxnn.no_grad():  # PyTorch checks only while gradients are recorded
        call(tensor)


def test_pad_sequence_refuses_an_unknown_padding_side_with_a_runtime_error():
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, but got mid."):
        onnxnn.nn.utils.rnn.pad_sequence([onnxnn.ones(2), onnxnn.ones(1)], padding_side="mid")


def test_adam_refuses_fused_and_foreach_together():
    # An optimizer's refusal found with the losses' (tests/optim holds the optimizers' own tests).
    parameters = [onnxnn.nn.Parameter(onnxnn.zeros(1))]
    for optimizer in (onnxnn.optim.Adam, onnxnn.optim.AdamW):
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
            optimizer(parameters, fused=True, foreach=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        onnxnn.optim.Adam(parameters, fused=True, foreach=False)
