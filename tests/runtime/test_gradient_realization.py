"""A backward's gradients are computed together: reading them one at a time runs the backward once.

The gradients ``loss.backward()`` leaves in the leaves' ``.grad`` share one pending history, whose
intermediates no live tensor holds. The first realization that computes any of them computes all
that are still held (``ir.plan.realize_together``), so a loop over the parameters reading each
gradient costs one run of the backward, not one per parameter. The loss joins them: read after the
backward and before the optimizer's step, it is computed with the gradients (the step then runs
only the update), rather than by a run of the forward pass that the gradients' run would repeat.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
import onnxnn.runtime.realization as realization
from onnxnn import nn
from onnxnn.ir.plan import realize_alongside, realize_together


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


def test_reading_the_loss_after_the_backward_computes_the_gradients_with_it(plans):
    model = _model()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):  # the general driver, then the traced backward's replays
        loss = _backward(model, step)
        del plans[:]
        loss.item()
        # One run: the loss and every gradient (the forward pass runs once for both).
        (outputs,) = plans
        gradients = {id(p.grad._value) for p in model.parameters()}
        assert gradients <= set(map(id, outputs)) and loss._value in outputs
        del plans[:]
        optimizer.step()
        [p.detach().numpy() for p in model.parameters()]
        # Then the update alone: it reads the computed gradients.
        assert len(plans) == 1 and len(plans[0]) == len(gradients)


def test_a_gradient_nobody_holds_any_more_is_not_computed():
    model = _model()
    loss = _backward(model, 0)
    dropped = model[0].weight.grad._value  # the value only: no live tensor holds it once .grad is cleared
    model[0].weight.grad = None
    model[4].bias.grad.numpy()
    assert dropped.data is None
    assert not any(_pending(p.grad) for p in model.parameters() if p.grad is not None)
    assert not _pending(loss)


@pytest.mark.parametrize("read", ["a_weights_gradient", "the_loss"])
def test_a_normalizations_parameter_gradients_are_computed_with_its_inputs(read, plans):
    # A batch normalization's gradient node has three outputs: its input's gradient, which the
    # convolution's gradients read, and its scale's and bias's, which nothing reads. Computed by the
    # same run as the others, they are returned by it, not computed again by another.
    model = _batch_norm_model()
    rng = np.random.default_rng(3)
    x = onnxnn.tensor(rng.standard_normal((4, 3, 6, 6)).astype(np.float32))
    loss = F.cross_entropy(model(x), onnxnn.tensor(rng.integers(0, 3, 4)))
    loss.backward()
    del plans[:]
    if read == "the_loss":
        loss.item()
    else:
        model[0].weight.grad.numpy()
    assert len(plans) == 1
    assert not any(_pending(p.grad) for p in model.parameters())


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


# ---------------------------------------------------------------- outputs beside those a run reads


@pytest.mark.parametrize("ask", ["alongside", "together"])
def test_an_unread_output_of_a_node_the_run_computes_is_returned_by_it(ask, plans):
    # One Split node's two halves: the sum reads the first; the second, which nothing reads, asked
    # for with the first's realization, comes from that run as the node's second output.
    x = onnxnn.tensor(np.random.default_rng(4).standard_normal((4, 5)).astype(np.float32))
    first, second = (x * 2.0).chunk(2)
    assert first._value.node is second._value.node
    if ask == "alongside":
        realize_alongside(second._value)
    else:
        realize_together([first._value, second._value])
    total = first.sum()
    del plans[:]
    total.numpy()
    assert len(plans) == 1 and second._value in plans[0]
    np.testing.assert_array_equal(second.numpy(), x.numpy()[2:] * np.float32(2.0))
    assert len(plans) == 1


def test_a_traced_backward_keeps_no_loss_alive():
    # The loss joins the gradients' group at each backward, the traced one's too: the trace keeps the
    # gradients it asked for, never that step's loss (its replays would hold it for good).
    import gc
    import weakref

    model = _model()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(3):
        loss = _backward(model, step)
        losses.append(weakref.ref(loss._value))
        optimizer.step()
        loss.item()
    del loss
    gc.collect()
    assert [reference() for reference in losses] == [None] * 3


def test_a_single_gradient_is_computed_with_the_loss_on_replayed_backwards_too(plans):
    onnxnn.manual_seed(0)
    layer = nn.Linear(6, 1, bias=False)
    x = onnxnn.tensor(np.random.default_rng(7).standard_normal((5, 6)).astype(np.float32))
    for step in range(3):  # the general driver, then the traced backward's replays
        layer.zero_grad()
        loss = (layer(x) * float(step + 1)).pow(2).sum()
        loss.backward()
        del plans[:]
        loss.item()
        assert len(plans) == 1 and layer.weight.grad._value in plans[0]
