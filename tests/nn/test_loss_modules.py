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

@pytest.mark.parametrize("module, keys", [
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
])
def test_class_weights_are_buffers_in_the_state_dict(module, keys):
    loss = module()
    assert list(loss.state_dict()) == keys
    assert list(loss.parameters()) == []
    for key in keys:
        assert loss.state_dict()[key].shape == (3,)


def test_weight_buffer_follows_the_module_dtype():
    loss = nn.CrossEntropyLoss(weight=onnxnn.ones(3)).double()
    assert loss.weight.dtype is onnxnn.float64


@pytest.mark.parametrize("module, text", [
    (nn.L1Loss(), "L1Loss()"),
    (nn.KLDivLoss(reduction="batchmean", log_target=True), "KLDivLoss()"),
    (nn.HuberLoss(delta=2.0), "HuberLoss()"),
    (nn.PairwiseDistance(), "PairwiseDistance()"),
    (nn.TripletMarginWithDistanceLoss(), "TripletMarginWithDistanceLoss(\n  (distance_function): PairwiseDistance()\n)"),
])
def test_repr_matches_pytorch(module, text):
    assert repr(module) == text


@pytest.mark.parametrize("name", ["L1Loss", "NLLLoss", "NLLLoss2d", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss",
                                  "MSELoss", "BCELoss", "BCEWithLogitsLoss", "HingeEmbeddingLoss",
                                  "MultiLabelMarginLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss",
                                  "CrossEntropyLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss",
                                  "MarginRankingLoss", "MultiMarginLoss", "TripletMarginLoss",
                                  "TripletMarginWithDistanceLoss", "PairwiseDistance", "CTCLoss"])
def test_constructor_signature_and_attributes_match_torch(name):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name), getattr(torch.nn, name)
    our_parameters = inspect.signature(ours.__init__).parameters
    their_parameters = inspect.signature(theirs.__init__).parameters
    assert [(p.name, p.kind, p.default) for p in our_parameters.values()] == \
        [(p.name, p.kind, p.default) for p in their_parameters.values()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        our_module, their_module = ours(), theirs()
    for attribute in ("reduction", "ignore_index", "label_smoothing", "log_input", "full", "eps", "log_target",
                      "margin", "beta", "delta", "p", "swap", "norm", "keepdim", "blank", "zero_infinity"):
        assert getattr(our_module, attribute, None) == getattr(their_module, attribute, None), attribute


def test_cross_entropy_loss_module_with_weight_ignore_index_and_smoothing_matches_its_function():
    weight = onnxnn.tensor([0.5, 2.0, 1.0])
    x, target = onnxnn.randn(4, 3, 2), onnxnn.tensor([[0, 1], [2, -100], [1, 1], [0, 2]])
    module = nn.CrossEntropyLoss(weight=weight, ignore_index=-100, label_smoothing=0.2)
    np.testing.assert_array_equal(module(x, target).numpy(),
                                  F.cross_entropy(x, target, weight, ignore_index=-100, label_smoothing=0.2).numpy())


def test_legacy_size_average_and_reduce_map_to_a_reduction_with_a_warning():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        module = nn.SmoothL1Loss(size_average=False)
    assert module.reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.MultiMarginLoss(reduce=False).reduction == "none"


@pytest.mark.parametrize("criterion, make_target", [
    (lambda: nn.CrossEntropyLoss(label_smoothing=0.1), lambda rng: onnxnn.tensor(rng.integers(0, 3, 16))),
    (lambda: nn.MultiMarginLoss(), lambda rng: onnxnn.tensor(rng.integers(0, 3, 16))),
    (lambda: nn.BCEWithLogitsLoss(pos_weight=onnxnn.tensor([2.0, 1.0, 0.5])),
     lambda rng: onnxnn.tensor(rng.integers(0, 2, (16, 3)).astype(np.float32))),
    (lambda: nn.SmoothL1Loss(beta=0.5), lambda rng: onnxnn.tensor(rng.standard_normal((16, 3)).astype(np.float32))),
])
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
