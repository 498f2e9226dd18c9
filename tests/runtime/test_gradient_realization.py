"""A backward's gradients are computed together: reading them one at a time runs the backward once.

The gradients ``loss.backward()`` leaves in the leaves' ``.grad`` share one pending history, whose
intermediates no live tensor holds. The first realization that computes any of them computes all
that are still held (``ir.plan.realize_together``), so a loop over the parameters reading each
gradient costs one run of the backward, not one per parameter. A realization that computes none of
them (the loss, read after the backward) leaves them pending, for the optimizer's step to compute
with its update.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
import onnxnn.runtime.realization as realization
from onnxnn import nn


@pytest.fixture
def plans(monkeypatch):
    """The plans realizations build, from now on (each a list of its output values)."""
    built: list = []
    original = realization.plan

    def counted(targets, include_shared=True):
        graph = original(targets, include_shared)
        built.append(graph.outputs)
        return graph

    monkeypatch.setattr(realization, "plan", counted)
    return built


def _model():
    onnxnn.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def _backward(model, seed):
    rng = np.random.default_rng(seed)
    x = onnxnn.tensor(rng.standard_normal((5, 6)).astype(np.float32))
    y = onnxnn.tensor(rng.integers(0, 3, 5))
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss


def _pending(tensor) -> bool:
    return tensor._value.data is None


@pytest.mark.parametrize("order", ["first_layer_first", "last_layer_first"])
def test_reading_gradients_one_at_a_time_runs_the_backward_once(order, plans):
    model = _model()
    parameters = list(model.parameters())
    if order == "last_layer_first":
        parameters.reverse()
    # The first backwards of a structure run the general driver, the later ones its traced replay.
    for step in range(4):
        _backward(model, step).item()
        del plans[:]
        norms = [parameters[0].grad.norm().item()]
        # The first norm's realization computed every gradient.
        assert not any(_pending(p.grad) for p in parameters)
        norms += [p.grad.norm().item() for p in parameters[1:]]
        gradients = [p.grad.numpy() for p in parameters]
        # Then one small realization per later norm (each reads a realized gradient), none for the arrays.
        assert len(plans) == len(parameters)
        assert all(len(outputs) == 1 for outputs in plans[1:])
        assert all(gradient.size for gradient in gradients)
        assert norms == pytest.approx([np.linalg.norm(g) for g in gradients], rel=1e-6)


def test_gradients_read_one_at_a_time_equal_those_computed_with_the_step():
    model, reference = _model(), _model()
    _backward(model, 1)
    _backward(reference, 1)
    one_at_a_time = [p.grad.numpy() for p in model.parameters()]
    together = onnxnn.stack([p.grad.reshape(-1).sum() for p in reference.parameters()])
    together.numpy()
    for gradient, expected in zip(one_at_a_time, (p.grad.numpy() for p in reference.parameters())):
        np.testing.assert_array_equal(gradient, expected)


def test_reading_the_loss_after_the_backward_leaves_the_gradients_for_the_step(plans):
    model = _model()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = _backward(model, step)
        loss.item()
        assert all(_pending(p.grad) for p in model.parameters())
        del plans[:]
        optimizer.step()
        [p.detach().numpy() for p in model.parameters()]
        # The gradients and the update in one realization.
        assert len(plans) == 1


def test_a_gradient_nobody_holds_any_more_is_not_computed():
    model = _model()
    _backward(model, 0).item()
    dropped = model[0].weight.grad._value  # the value only: no live tensor holds it once .grad is cleared
    model[0].weight.grad = None
    model[4].bias.grad.numpy()
    assert dropped.data is None
    assert not any(_pending(p.grad) for p in model.parameters() if p.grad is not None)


def test_gradients_dropped_unread_keep_no_graph_alive():
    # The group refers to its gradients weakly: once nothing holds them, their history can be freed.
    import gc
    import weakref

    model = _model()
    _backward(model, 0)
    gradient = weakref.ref(model[0].weight.grad._value)
    model.zero_grad()
    gc.collect()
    assert gradient() is None


# ---------------------------------------------------------------- running statistics


def _batch_norm_model():
    onnxnn.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 3)
    )


def _batch_norm_step(model, optimizer, seed):
    rng = np.random.default_rng(seed)
    x = onnxnn.tensor(rng.standard_normal((4, 3, 6, 6)).astype(np.float32))
    y = onnxnn.tensor(rng.integers(0, 3, 4))
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return x, loss


def test_running_statistics_are_computed_with_the_step_that_computes_the_batch(plans):
    # Left pending, each step's running statistics would hold that step's whole forward graph (its
    # weights and input) until read, and reading them would run every such forward pass again.
    model = _batch_norm_model()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    expected_mean = np.zeros(8, np.float32)
    for step in range(4):
        conv_weight = model[0].weight.detach().numpy().copy()
        conv_bias = model[0].bias.detach().numpy().copy()
        del plans[:]
        x, loss = _batch_norm_step(model, optimizer, step)
        loss.item()
        assert len(plans) == 1  # forward, backward, update, loss and statistics in one run
        assert not _pending(model[1].running_mean) and not _pending(model[1].running_var)
        activations = F.conv2d(x, onnxnn.tensor(conv_weight), onnxnn.tensor(conv_bias), padding=1).numpy()
        expected_mean = 0.9 * expected_mean + 0.1 * activations.mean(axis=(0, 2, 3))
        np.testing.assert_allclose(model[1].running_mean.numpy(), expected_mean, rtol=1e-5, atol=1e-6)


def test_a_training_loop_keeps_no_earlier_steps_weights_alive():
    import gc
    import weakref

    model = _batch_norm_model()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    weights = []
    for step in range(5):
        _batch_norm_step(model, optimizer, step)[1].item()
        weights.append(weakref.ref(model[0].weight._value))
    gc.collect()
    # The last step's weights are the model's; every earlier step's value is gone.
    assert [reference() is None for reference in weights] == [True] * 4 + [False]


@pytest.mark.parametrize(
    "norm",
    [lambda: nn.BatchNorm2d(8), lambda: nn.InstanceNorm2d(8, affine=True, track_running_stats=True)],
    ids=["batch_norm", "instance_norm"],
)
def test_every_normalization_with_running_statistics_computes_them_in_the_step(norm, plans):
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), norm(), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 3))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        del plans[:]
        _batch_norm_step(model, optimizer, step)[1].item()
        assert len(plans) == 1
        assert not _pending(model[1].running_mean) and not _pending(model[1].running_var)
