"""Loss modules: class weights as buffers, reprs, constructor signatures and attributes as PyTorch's.

The modules' values are checked through the shared table in test_losses.py (each module against its
functional form and the numpy formula); this file holds what is particular to the classes.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn


# ---------------------------------------------------------------- modules: state, reprs, constructors


@pytest.mark.parametrize(
    "module, keys",
    [
        (lambda: nn.CrossEntropyLoss(), []),
        (lambda: nn.CrossEntropyLoss(weight=onnxnn.ones(3)), ["weight"]),
        (lambda: nn.NLLLoss(weight=onnxnn.ones(3)), ["weight"]),
        (lambda: nn.NLLLoss2d(weight=onnxnn.ones(3)), ["weight"]),
        (lambda: nn.BCELoss(weight=onnxnn.ones(3)), ["weight"]),
        (lambda: nn.BCEWithLogitsLoss(pos_weight=onnxnn.ones(3)), ["pos_weight"]),
        (lambda: nn.BCEWithLogitsLoss(weight=onnxnn.ones(3), pos_weight=onnxnn.ones(3)), ["weight", "pos_weight"]),
        (lambda: nn.MultiMarginLoss(weight=onnxnn.ones(3)), ["weight"]),
        (lambda: nn.MultiLabelSoftMarginLoss(weight=onnxnn.ones(3)), ["weight"]),
        (lambda: nn.MSELoss(), []),
        (lambda: nn.TripletMarginWithDistanceLoss(), []),
    ],
)
def test_class_weights_are_buffers_in_the_state_dict(module, keys):
    loss = module()
    assert list(loss.state_dict()) == keys
    assert list(loss.parameters()) == []
    for key in keys:
        assert loss.state_dict()[key].shape == (3,)


def test_weight_buffer_follows_the_module_dtype():
    loss = nn.CrossEntropyLoss(weight=onnxnn.ones(3)).double()
    assert loss.weight.dtype is onnxnn.float64


@pytest.mark.parametrize(
    "module, text",
    [
        (nn.L1Loss(), "L1Loss()"),
        (nn.KLDivLoss(reduction="batchmean", log_target=True), "KLDivLoss()"),
        (nn.HuberLoss(delta=2.0), "HuberLoss()"),
        (nn.PairwiseDistance(), "PairwiseDistance()"),
        (
            nn.TripletMarginWithDistanceLoss(),
            "TripletMarginWithDistanceLoss(\n  (distance_function): PairwiseDistance()\n)",
        ),
    ],
)
def test_repr_matches_pytorch(module, text):
    assert repr(module) == text


@pytest.mark.parametrize(
    "name",
    [
        "L1Loss",
        "NLLLoss",
        "NLLLoss2d",
        "PoissonNLLLoss",
        "GaussianNLLLoss",
        "KLDivLoss",
        "MSELoss",
        "BCELoss",
        "BCEWithLogitsLoss",
        "HingeEmbeddingLoss",
        "MultiLabelMarginLoss",
        "SmoothL1Loss",
        "HuberLoss",
        "SoftMarginLoss",
        "CrossEntropyLoss",
        "MultiLabelSoftMarginLoss",
        "CosineEmbeddingLoss",
        "MarginRankingLoss",
        "MultiMarginLoss",
        "TripletMarginLoss",
        "TripletMarginWithDistanceLoss",
        "PairwiseDistance",
        "CTCLoss",
        "LinearCrossEntropyLoss",
    ],
)
def test_constructor_signature_and_attributes_match_torch(name):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name), getattr(torch.nn, name)
    our_parameters = inspect.signature(ours.__init__).parameters
    their_parameters = inspect.signature(theirs.__init__).parameters
    assert [(p.name, p.kind, p.default) for p in our_parameters.values()] == [
        (p.name, p.kind, p.default) for p in their_parameters.values()
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arguments = (5, 3) if name == "LinearCrossEntropyLoss" else ()
        our_module, their_module = ours(*arguments), theirs(*arguments)
    for attribute in (
        "reduction",
        "ignore_index",
        "label_smoothing",
        "log_input",
        "full",
        "eps",
        "log_target",
        "margin",
        "beta",
        "delta",
        "p",
        "swap",
        "norm",
        "keepdim",
        "blank",
        "zero_infinity",
        "num_classes",
        "out_features",
        "options",
    ):
        assert getattr(our_module, attribute, None) == getattr(their_module, attribute, None), attribute


def test_cross_entropy_loss_module_with_weight_ignore_index_and_smoothing_matches_its_function():
    weight = onnxnn.tensor([0.5, 2.0, 1.0])
    x, target = onnxnn.randn(4, 3, 2), onnxnn.tensor([[0, 1], [2, -100], [1, 1], [0, 2]])
    module = nn.CrossEntropyLoss(weight=weight, ignore_index=-100, label_smoothing=0.2)
    np.testing.assert_array_equal(
        module(x, target).numpy(), F.cross_entropy(x, target, weight, ignore_index=-100, label_smoothing=0.2).numpy()
    )


def test_legacy_size_average_and_reduce_map_to_a_reduction_with_a_warning():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        module = nn.SmoothL1Loss(size_average=False)
    assert module.reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.MultiMarginLoss(reduce=False).reduction == "none"


@pytest.mark.parametrize(
    "criterion, make_target",
    [
        (lambda: nn.CrossEntropyLoss(label_smoothing=0.1), lambda rng: onnxnn.tensor(rng.integers(0, 3, 16))),
        (lambda: nn.MultiMarginLoss(), lambda rng: onnxnn.tensor(rng.integers(0, 3, 16))),
        (
            lambda: nn.BCEWithLogitsLoss(pos_weight=onnxnn.tensor([2.0, 1.0, 0.5])),
            lambda rng: onnxnn.tensor(rng.integers(0, 2, (16, 3)).astype(np.float32)),
        ),
        (lambda: nn.SmoothL1Loss(beta=0.5), lambda rng: onnxnn.tensor(rng.standard_normal((16, 3)).astype(np.float32))),
    ],
)
def test_a_model_trains_with_the_criterion(criterion, make_target):
    rng = np.random.default_rng(3)
    model = nn.Linear(5, 3)
    loss_function = criterion()
    x, target = onnxnn.tensor(rng.standard_normal((16, 5)).astype(np.float32)), make_target(rng)
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = loss_function(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Gradient descent with a small step on a convex loss of a linear model: the loss goes down.
    assert losses[-1] < 0.9 * losses[0]


@pytest.mark.parametrize(
    "kwargs, shapes",
    [
        ({}, {"linear.weight": (3, 5)}),
        ({"bias": True, "out_features": (2, 4)}, {"linear.weight": (24, 5), "linear.bias": (24,)}),
        ({"weight": onnxnn.ones(3)}, {"weight": (3,), "linear.weight": (3, 5)}),
    ],
)
def test_linear_cross_entropy_loss_state_is_a_flat_linear_layer(kwargs, shapes):
    module = nn.LinearCrossEntropyLoss(5, 3, **kwargs)
    assert {k: tuple(v.shape) for k, v in module.state_dict().items()} == shapes
    assert list(module.state_dict()) == list(shapes)


def test_linear_cross_entropy_loss_repr_matches_pytorch():
    assert repr(nn.LinearCrossEntropyLoss(5, 3, bias=True, ignore_index=1)) == (
        "LinearCrossEntropyLoss(\n"
        "  in_features=5, num_classes=3, out_features=(), bias=True, reduction=mean, ignore_index=1, "
        "label_smoothing=0.0, options=None\n"
        "  (linear): Linear(in_features=5, out_features=3, bias=True)\n)"
    )


@pytest.mark.parametrize(
    "kwargs, target",
    [
        ({}, [0, 2, 1, 1]),
        ({"bias": True, "out_features": (2,), "label_smoothing": 0.1}, [[0, 2], [1, 1], [2, 2], [0, 0]]),
        ({"bias": True, "ignore_index": 1, "reduction": "none"}, [0, 2, 1, 1]),
    ],
)
def test_linear_cross_entropy_loss_matches_torch_with_its_parameters(kwargs, target):
    torch = pytest.importorskip("torch")
    ours = nn.LinearCrossEntropyLoss(5, 3, **kwargs).double()
    theirs = torch.nn.LinearCrossEntropyLoss(5, 3, **kwargs).double()
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((4, 5))
    result, expected = ours(onnxnn.tensor(x), onnxnn.tensor(target)), theirs(torch.tensor(x), torch.tensor(target))
    result.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(result.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    for (name, parameter), (_, their_parameter) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(
            parameter.grad.numpy(), their_parameter.grad.numpy(), rtol=1e-10, atol=1e-15, err_msg=name
        )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: nn.LinearCrossEntropyLoss(5, 3, weight=onnxnn.ones(4)),
            r"expected weight shape to be \(3,\), got \(4,\)",
        ),
        (
            lambda: nn.LinearCrossEntropyLoss(5, 3, label_smoothing=1.5),
            r"expected label_smoothing to be in range \[0, 1\]",
        ),
        (
            lambda: F.linear_cross_entropy(onnxnn.randn(2, 3, 5), onnxnn.randn(3, 5), onnxnn.tensor([0, 1])),
            "expected input with dimensionality 1 or 2, got 3",
        ),
        (
            lambda: F.linear_cross_entropy(onnxnn.randn(2, 4), onnxnn.randn(3, 5), onnxnn.tensor([0, 1])),
            r"expected equal input and linear_weight last dimensions \(in_features\), got 4 and 5, respectively",
        ),
        (
            lambda: F.linear_cross_entropy(onnxnn.randn(5), onnxnn.randn(3, 2, 5), onnxnn.tensor([0, 1])),
            r"K-dimensional loss defined by linear_weight shape \(3, 2, 5\) requires batched input",
        ),
        (
            lambda: F.linear_cross_entropy(onnxnn.randn(2, 5), onnxnn.randn(3, 5), onnxnn.rand(2, 3), ignore_index=0),
            "ignore_index cannot be specified when target contains probabilities",
        ),
    ],
)
def test_linear_cross_entropy_argument_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_every_torch_loss_class_has_a_counterpart():
    torch = pytest.importorskip("torch")
    loss_module = torch.nn.modules.loss
    names = {
        name
        for name, value in vars(loss_module).items()
        if inspect.isclass(value) and value.__module__ == loss_module.__name__ and not name.startswith("_")
    }
    assert sorted(name for name in names | {"AdaptiveLogSoftmaxWithLoss"} if not hasattr(nn, name)) == []


@pytest.mark.parametrize(
    "module, error, message",
    [
        (nn.MultiMarginLoss(), RuntimeError, "target out of range"),
        (nn.CrossEntropyLoss(), IndexError, "Target 7 is out of bounds"),
        (nn.NLLLoss(), IndexError, "Target 7 is out of bounds"),
    ],
)
def test_a_replayed_criterion_still_checks_its_targets(module, error, message):
    # In evaluation mode under no_grad a module's forward is replayed by shapes after its second
    # call; checks on the targets' values must not be replayed away.
    module.eval()
    scores = onnxnn.randn(2, 3)
    with onnxnn.no_grad():
        for _ in range(3):
            module(scores, onnxnn.tensor([0, 2]))
        with pytest.raises(error, match=message):
            module(scores, onnxnn.tensor([0, 7]))


@pytest.mark.parametrize("ignore_index", [0, 2, -100])
@pytest.mark.parametrize("loss", [F.nll_loss, F.cross_entropy])
def test_a_batch_of_only_ignored_targets_has_a_zero_gradient(loss, ignore_index):
    # The mean over no counted targets is 0 / 0 (NaN, as PyTorch's), but PyTorch's gradient writes
    # nothing for ignored targets: a batch of padding must not put NaN into the weights.
    scores = onnxnn.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    value = loss(scores, onnxnn.tensor([ignore_index, ignore_index]), ignore_index=ignore_index)
    value.backward()
    assert np.isnan(value.item())
    np.testing.assert_array_equal(scores.grad.numpy(), np.zeros((2, 3)))


@pytest.mark.parametrize("ignore_index", [1, -100])
@pytest.mark.parametrize("loss", [F.nll_loss, F.cross_entropy])
def test_counted_targets_all_weighing_zero_have_a_nan_gradient(loss, ignore_index):
    # Unlike a batch of padding, counted targets whose class weights are all 0 give PyTorch's
    # -w / total = 0 / 0 on their rows (NaN), and ignored rows nothing (0).
    scores = onnxnn.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    weight = onnxnn.tensor([0.0, 1.0, 0.0, 1.0], dtype=onnxnn.float64)
    targets = [0, 1, 2] if ignore_index == 1 else [0, 2, 2]
    value = loss(scores, onnxnn.tensor(targets), weight=weight, ignore_index=ignore_index)
    value.backward()
    assert np.isnan(value.item())
    expected_nan = np.zeros((3, 4), bool)
    for row, target in enumerate(targets):
        counted = target != ignore_index
        if loss is F.cross_entropy:
            expected_nan[row] = counted  # through the softmax, the counted rows' every entry
        else:
            expected_nan[row, target] = counted  # the counted targets' own entries
    gradient = scores.grad.numpy()
    np.testing.assert_array_equal(np.isnan(gradient), expected_nan)
    np.testing.assert_array_equal(gradient[~expected_nan], 0.0)
