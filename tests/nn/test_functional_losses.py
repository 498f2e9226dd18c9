"""onnxnn.nn.functional's losses (regression, classification, binary) against numpy formulas, finite
differences and PyTorch's error messages. Linear, activations, dropout and batch norm are in
test_functional_layers.py.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F

from .functional_cases import _log_softmax

RNG = np.random.default_rng(1234)


def _randn(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- regression losses

REDUCTIONS = ["mean", "sum", "none"]
_NUMPY_REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "loss, reference",
    [
        (F.mse_loss, lambda x, t: (x - t) ** 2),
        (F.l1_loss, lambda x, t: np.abs(x - t)),
    ],
)
def test_regression_losses(loss, reference, reduction):
    x, t = _randn(4, 5), _randn(4, 5)
    result = loss(onnxnn.tensor(x), onnxnn.tensor(t), reduction=reduction)
    np.testing.assert_allclose(result.numpy(), _NUMPY_REDUCE[reduction](reference(x, t)), rtol=1e-12)
    check_gradients(lambda a, b: loss(a, b, reduction=reduction), [x, t])


def test_mse_loss_grad_fn_and_broadcast_warning():
    x = onnxnn.randn(3, 1, requires_grad=True)
    with pytest.warns(UserWarning, match="Using a target size .* that is different to the input size"):
        loss = F.mse_loss(x, onnxnn.randn(3))
    assert loss.shape == () and loss.grad_fn.name() == "MseLossBackward0"


@pytest.mark.parametrize(
    "size_average, reduce, equivalent",
    [
        (None, False, "none"),
        (False, None, "sum"),
        (True, True, "mean"),
    ],
)
def test_legacy_size_average_and_reduce_map_to_a_reduction(size_average, reduce, equivalent):
    x, t = onnxnn.randn(3, 4), onnxnn.randn(3, 4)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        legacy = F.mse_loss(x, t, size_average=size_average, reduce=reduce)
    np.testing.assert_allclose(legacy.numpy(), F.mse_loss(x, t, reduction=equivalent).numpy())


@pytest.mark.parametrize("loss", [F.mse_loss, F.l1_loss, F.binary_cross_entropy_with_logits])
def test_invalid_reduction_raises(loss):
    with pytest.raises(ValueError, match="elementwise_mean is not a valid value for reduction"):
        loss(onnxnn.rand(3), onnxnn.rand(3), reduction="elementwise_mean")


# ---------------------------------------------------------------- classification losses


def _numpy_nll(log_probs, target, weight=None, ignore_index=-100, reduction="mean"):
    """nll over (N, C, d...) log-probabilities, written out element by element."""
    classes = log_probs.shape[1]
    weight = np.ones(classes) if weight is None else weight
    losses = np.zeros(target.shape)
    weights = np.zeros(target.shape)
    for position in np.ndindex(target.shape):
        label = target[position]
        if label == ignore_index:
            continue
        index = (position[0], label) + position[1:]
        losses[position] = -weight[label] * log_probs[index]
        weights[position] = weight[label]
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / weights.sum()


CLASS_CASES = [
    # (input shape, target shape, weight?, ignore_index)
    ((5, 4), (5,), False, -100),
    ((5, 4), (5,), True, -100),
    ((6, 4), (6,), True, 2),
    ((6, 4), (6,), False, 1),
    ((3, 4, 2, 2), (3, 2, 2), True, 0),
]


def _class_targets(shape, classes, ignore_index):
    target = RNG.integers(0, classes, shape)
    if ignore_index >= 0:
        target.reshape(-1)[0] = ignore_index  # at least one ignored element
    return target


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("input_shape, target_shape, weighted, ignore_index", CLASS_CASES)
def test_nll_loss_and_cross_entropy_with_class_indices(input_shape, target_shape, weighted, ignore_index, reduction):
    x = _randn(*input_shape)
    target = _class_targets(target_shape, input_shape[1], ignore_index)
    weight = np.abs(_randn(input_shape[1])) + 0.1 if weighted else None
    log_probs = _log_softmax(x, 1)
    expected = _numpy_nll(log_probs, target, weight, ignore_index, reduction)
    weight_tensor = onnxnn.tensor(weight) if weighted else None
    nll = F.nll_loss(
        onnxnn.tensor(log_probs), onnxnn.tensor(target), weight_tensor, ignore_index=ignore_index, reduction=reduction
    )
    ce = F.cross_entropy(
        onnxnn.tensor(x), onnxnn.tensor(target), weight_tensor, ignore_index=ignore_index, reduction=reduction
    )
    np.testing.assert_allclose(nll.numpy(), expected, rtol=1e-10)
    np.testing.assert_allclose(ce.numpy(), expected, rtol=1e-10)
    extra = [weight] if weighted else []
    # The class weight takes no gradient (PyTorch refuses one that requires it).
    check_gradients(
        lambda a, t, *w: F.cross_entropy(a, t, *w, ignore_index=ignore_index, reduction=reduction),
        [x, target] + extra,
        requires_grad=[True, False] + [False] * len(extra),
    )
    check_gradients(
        lambda a, t, *w: F.nll_loss(a, t, *w, ignore_index=ignore_index, reduction=reduction),
        [log_probs, target] + extra,
        requires_grad=[True, False] + [False] * len(extra),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_records_log_softmax_and_one_negative_log_likelihood_node(reduction):
    x = _randn(4, 5).astype(np.float32)
    target = np.array([0, 4, -100, 2])
    loss = F.cross_entropy(onnxnn.tensor(x), onnxnn.tensor(target), reduction=reduction)
    node = loss._value.node
    assert node.op_type == "NegativeLogLikelihoodLoss"
    assert dict(node.attrs) == {"ignore_index": -100, "reduction": reduction}
    assert node.inputs[0].node.op_type == "LogSoftmax"
    expected = _numpy_nll(_log_softmax(x.astype(np.float64), 1), target, None, -100, reduction)
    # float32 log-softmax over 5 classes, then a sum of 3 terms: a few float32 ulps.
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_cross_entropy_refuses_computed_targets_out_of_range(executor):
    # Targets known at the call are checked there (PyTorch's IndexError); computed ones when they run.
    with onnxnn.set_executor(executor):
        targets = onnxnn.tensor([1, 2, 3]) * 2
        with pytest.raises((IndexError, RuntimeError)):
            F.cross_entropy(onnxnn.randn(3, 4), targets).item()


def _numpy_label_smoothing(x, target, weight, ignore_index, reduction, smoothing):
    classes = x.shape[1]
    log_probs = _log_softmax(x, 1)
    weight_vector = np.ones(classes) if weight is None else weight
    nll = _numpy_nll(log_probs, target, weight, ignore_index, reduction)
    shape = (1, classes) + (1,) * (x.ndim - 2)
    smooth = -(log_probs * weight_vector.reshape(shape)).sum(1)
    smooth[target == ignore_index] = 0
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        valid = target != ignore_index
        smooth = smooth.sum() / weight_vector[target[valid]].sum()
    return (1 - smoothing) * nll + smooth * smoothing / classes


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("input_shape, target_shape, weighted, ignore_index", CLASS_CASES)
def test_cross_entropy_label_smoothing_with_class_indices(input_shape, target_shape, weighted, ignore_index, reduction):
    x = _randn(*input_shape)
    target = _class_targets(target_shape, input_shape[1], ignore_index)
    weight = np.abs(_randn(input_shape[1])) + 0.1 if weighted else None
    result = F.cross_entropy(
        onnxnn.tensor(x),
        onnxnn.tensor(target),
        onnxnn.tensor(weight) if weighted else None,
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=0.2,
    )
    expected = _numpy_label_smoothing(x, target, weight, ignore_index, reduction, 0.2)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)
    check_gradients(
        lambda a, t: F.cross_entropy(a, t, ignore_index=ignore_index, reduction=reduction, label_smoothing=0.2),
        [x, target],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "shape, weighted, smoothing",
    [
        ((4, 5), False, 0.0),
        ((4, 5), True, 0.0),
        ((4, 5), True, 0.3),
        ((2, 3, 4), False, 0.1),
    ],
)
def test_cross_entropy_with_class_probabilities(shape, weighted, smoothing, reduction):
    x = _randn(*shape)
    probabilities = np.exp(_log_softmax(_randn(*shape), 1))
    weight = np.abs(_randn(shape[1])) + 0.1 if weighted else None
    result = F.cross_entropy(
        onnxnn.tensor(x),
        onnxnn.tensor(probabilities),
        onnxnn.tensor(weight) if weighted else None,
        reduction=reduction,
        label_smoothing=smoothing,
    )
    classes = shape[1]
    target = probabilities * (1 - smoothing) + smoothing / classes
    weight_shape = (1, classes) + (1,) * (len(shape) - 2)
    terms = _log_softmax(x, 1) * target * (np.ones(weight_shape) if weight is None else weight.reshape(weight_shape))
    expected = {"none": -terms.sum(1), "sum": -terms.sum(), "mean": -terms.sum() / (x.size / classes)}[reduction]
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)
    check_gradients(
        lambda a, p: F.cross_entropy(a, p, reduction=reduction, label_smoothing=smoothing), [x, probabilities]
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_unbatched_input(reduction):
    x = _randn(5)
    result = F.cross_entropy(onnxnn.tensor(x), onnxnn.tensor(3), reduction=reduction)
    assert result.shape == ()
    np.testing.assert_allclose(result.numpy(), -_log_softmax(x, 0)[3], rtol=1e-12)


def test_cross_entropy_with_every_target_ignored_is_nan_for_mean():
    result = F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([-100, -100]))
    assert math.isnan(result.item())


@pytest.mark.parametrize(
    "input_shape, target, error, message",
    [
        ((3, 4), [0, 1], ValueError, r"Expected input batch_size \(3\) to match target batch_size \(2\)\."),
        ((2, 4), [0, 4], IndexError, r"Target 4 is out of bounds\."),
        ((2, 4), [-1, 0], IndexError, r"Target -1 is out of bounds\."),
        ((2, 4, 3), [[0, 1], [1, 2]], RuntimeError, r"Expected target size \[2, 3\], got \[2, 2\]"),
        ((2, 4), [[0, 1], [1, 2]], RuntimeError, "0D or 1D target tensor expected, multi-target not supported"),
    ],
)
def test_class_index_errors_follow_pytorch(input_shape, target, error, message):
    with pytest.raises(error, match=message):
        F.cross_entropy(onnxnn.randn(*input_shape), onnxnn.tensor(target))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: F.nll_loss(onnxnn.randn(2, 3), onnxnn.rand(2)),
            RuntimeError,
            "expected scalar type Long but found Float",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([0, 1]), onnxnn.ones(4)),
            RuntimeError,
            r"weight tensor should be defined either for all 3 classes or no classes "
            r"but got weight tensor of shape: \[4\]",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([0, 1]), label_smoothing=1.5),
            RuntimeError,
            "label_smoothing must be between 0.0 and 1.0. Got: 1.5",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.rand(2, 3), ignore_index=1),
            RuntimeError,
            "ignore_index is not supported for floating point target",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([[0, 1, 2], [1, 1, 0]])),
            RuntimeError,
            "Expected floating point type for target with class probabilities, got Long",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([0, 1]), reduction="avg"),
            ValueError,
            "avg is not a valid value for reduction",
        ),
    ],
)
def test_cross_entropy_argument_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_cross_entropy_grad_fn_name():
    logits = onnxnn.randn(3, 4, requires_grad=True)
    assert F.cross_entropy(logits, onnxnn.tensor([0, 1, 2])).grad_fn.name() == "NllLossBackward0"


def test_one_hot():
    result = F.one_hot(onnxnn.tensor([0, 2, 1]))
    assert result.dtype is onnxnn.int64
    np.testing.assert_array_equal(result.numpy(), np.eye(3, dtype=np.int64)[[0, 2, 1]])
    assert F.one_hot(onnxnn.tensor([[1], [0]]), num_classes=4).shape == (2, 1, 4)


# ---------------------------------------------------------------- binary losses


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    x = 1 / (1 + np.exp(-_randn(4, 3)))
    t = RNG.random((4, 3))
    weight = RNG.random((4, 3)) + 0.5 if weighted else None
    expected = -(t * np.log(x) + (1 - t) * np.log(1 - x)) * (1 if weight is None else weight)
    extra = [onnxnn.tensor(weight)] if weighted else []
    result = F.binary_cross_entropy(onnxnn.tensor(x), onnxnn.tensor(t), *extra, reduction=reduction)
    np.testing.assert_allclose(result.numpy(), _NUMPY_REDUCE[reduction](expected), rtol=1e-10)
    check_gradients(  # the weight takes no gradient (PyTorch refuses one that requires it)
        lambda a, b, *w: F.binary_cross_entropy(a, b, *w, reduction=reduction),
        [x, t] + ([weight] if weighted else []),
        requires_grad=[True, True] + ([False] if weighted else []),
    )


def test_binary_cross_entropy_clamps_the_log_at_minus_100():
    loss = F.binary_cross_entropy(onnxnn.tensor([0.0, 1.0]), onnxnn.tensor([1.0, 0.0]), reduction="none")
    np.testing.assert_array_equal(loss.numpy(), [100.0, 100.0])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted, pos_weighted", [(False, False), (True, False), (False, True), (True, True)])
def test_binary_cross_entropy_with_logits(reduction, weighted, pos_weighted):
    x, t = _randn(4, 3) * 3, RNG.random((4, 3))
    weight = RNG.random((4, 3)) + 0.5 if weighted else None
    pos_weight = RNG.random(3) + 0.5 if pos_weighted else None
    sigmoid = 1 / (1 + np.exp(-x))
    positive = t * np.log(sigmoid) * (1 if pos_weight is None else pos_weight)
    expected = -(positive + (1 - t) * np.log(1 - sigmoid)) * (1 if weight is None else weight)
    result = F.binary_cross_entropy_with_logits(
        onnxnn.tensor(x),
        onnxnn.tensor(t),
        onnxnn.tensor(weight) if weighted else None,
        reduction=reduction,
        pos_weight=onnxnn.tensor(pos_weight) if pos_weighted else None,
    )
    np.testing.assert_allclose(result.numpy(), _NUMPY_REDUCE[reduction](expected), rtol=1e-9)
    check_gradients(
        lambda a, b: F.binary_cross_entropy_with_logits(
            a,
            b,
            onnxnn.tensor(weight) if weighted else None,
            reduction=reduction,
            pos_weight=onnxnn.tensor(pos_weight) if pos_weighted else None,
        ),
        [x, t],
    )


def test_binary_cross_entropy_with_logits_is_stable_for_large_logits():
    loss = F.binary_cross_entropy_with_logits(
        onnxnn.tensor([100.0, -100.0, 1000.0]), onnxnn.tensor([0.0, 1.0, 1.0]), reduction="none"
    )
    np.testing.assert_allclose(loss.numpy(), [100.0, 100.0, 0.0], atol=1e-5)


@pytest.mark.parametrize(
    "loss, message",
    [
        (
            F.binary_cross_entropy,
            r"Using a target size \(onnxnn.Size\(\[3\]\)\) that is different to the input size "
            r"\(onnxnn.Size\(\[3, 1\]\)\) is deprecated",
        ),
        (
            F.binary_cross_entropy_with_logits,
            r"Target size \(onnxnn.Size\(\[3\]\)\) must be the same as input size "
            r"\(onnxnn.Size\(\[3, 1\]\)\)",
        ),
    ],
)
def test_binary_losses_require_matching_shapes(loss, message):
    with pytest.raises(ValueError, match=message):
        loss(onnxnn.rand(3, 1), onnxnn.rand(3))


def test_no_warnings_from_ordinary_calls():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.cross_entropy(onnxnn.randn(3, 4), onnxnn.tensor([0, 1, 3]))
        F.mse_loss(onnxnn.randn(3), onnxnn.randn(3))
        F.softmax(onnxnn.randn(3, 4), dim=1)
