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
