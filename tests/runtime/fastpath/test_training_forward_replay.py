"""Forward replay while training: a module call that records gradients replays its traced nodes and the
backward functions its forward made, so training loops skip the layers' Python as inference does.

A replay must leave the graph a plain call leaves: the same nodes (bitwise the same steps with the
fast path off), the same backward graph (names, edges to the leaves' accumulators, saved versions
that refuse a weight changed in place), and must never stand in for a forward that would record
otherwise: which tensors require gradients is part of the structure. A training-mode forward that
updates running statistics replays its writes (test_state_write_replay.py), one that draws dropout
masks draws them anew (test_drawing_replay.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.runtime.fastpath import forward_replay


pytestmark = pytest.mark.usefixtures("fresh_replays")


def _mlp():
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def _cnn():
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.LayerNorm(16), nn.Linear(16, 3)
    )


def _backward_names(function, depth: int = 0) -> list:
    """The backward graph under ``function``: each node's name and depth, edges in order."""
    if function is None:
        return [(depth, None)]
    names = [(depth, function.name())]
    for next_function, _ in function.next_functions:
        names += _backward_names(next_function, depth + 1)
    return names


# Each loop: the model, its input shape, its optimizer, and the steps' interventions.
LOOPS = [
    ("mlp_sgd_momentum", _mlp, (5, 6), lambda params: onnxnn.optim.SGD(params, lr=0.05, momentum=0.9), None),
    ("mlp_adam", _mlp, (5, 6), lambda params: onnxnn.optim.Adam(params, lr=0.01), None),
    ("cnn_sgd", _cnn, (3, 2, 4, 4), lambda params: onnxnn.optim.SGD(params, lr=0.05), None),
    ("mlp_input_needs_gradient", _mlp, (5, 6), lambda params: onnxnn.optim.SGD(params, lr=0.05), "input"),
    ("mlp_layer_frozen_midway", _mlp, (5, 6), lambda params: onnxnn.optim.SGD(params, lr=0.05), "freeze"),
]


def _train(build, shape, optimizer_for, intervention, fast: bool):
    onnxnn.manual_seed(0)
    model = build()
    optimizer = optimizer_for(model.parameters())
    rng = np.random.default_rng(1)
    record = []
    with onnxnn.set_fast_path(fast):
        for step in range(8):
            if intervention == "freeze" and step == 4:
                model[2].requires_grad_(False)
            x = onnxnn.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=intervention == "input")
            optimizer.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            optimizer.step()
            record.append(loss.detach().numpy())
            if intervention == "input":
                record.append(x.grad.numpy())
            record += [parameter.detach().numpy() for parameter in model.parameters()]
    return record


@pytest.mark.parametrize("name, build, shape, optimizer_for, intervention", LOOPS, ids=[loop[0] for loop in LOOPS])
def test_a_training_loop_replays_its_forward_to_the_same_bits(name, build, shape, optimizer_for, intervention):
    replayed = _train(build, shape, optimizer_for, intervention, fast=True)
    counts = forward_replay.replay_info()
    plain = _train(build, shape, optimizer_for, intervention, fast=False)
    assert counts["replayed"] >= 4  # traced at the second step (again after a freeze), replayed after
    assert len(replayed) == len(plain)
    for got, expected in zip(replayed, plain):
        np.testing.assert_array_equal(got, expected)


def test_a_replayed_forward_has_the_backward_graph_of_a_plain_one():
    model = _mlp()
    x = onnxnn.randn(4, 6, requires_grad=True)
    with onnxnn.set_fast_path(False):
        plain = model(x)
    model(x), model(x)
    replayed = model(x)
    assert forward_replay.replay_info()["replayed"] == 1
    assert replayed.requires_grad and not replayed.is_leaf
    assert _backward_names(replayed.grad_fn) == _backward_names(plain.grad_fn)
    # Edges reach the very accumulators of the parameters and of the input.
    leaves = {id(parameter) for parameter in [*model.parameters(), x]}
    stack, reached = [replayed.grad_fn], set()
    while stack:
        function = stack.pop()
        for next_function, _ in function.next_functions:
            if next_function is None:
                continue
            if hasattr(next_function, "variable"):
                reached.add(id(next_function.variable))
            else:
                stack.append(next_function)
    assert reached == leaves


def test_a_weight_changed_in_place_after_a_replayed_forward_refuses_backward():
    model = _mlp()
    x = onnxnn.randn(4, 6)
    model(x), model(x)
    output = model(x)
    assert forward_replay.replay_info()["replayed"] == 1
    with onnxnn.no_grad():
        model[2].weight.mul_(2)  # read by the gradient of the first layer's output
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        output.sum().backward()


def test_an_argument_with_history_keeps_its_edge():
    # The replayed call's input is another op's result: gradients flow through both.
    model = _mlp()
    w = onnxnn.randn(6, requires_grad=True)
    base = onnxnn.randn(4, 6)
    gradients = []
    for fast in (True, True, True, False):
        w.grad = None
        with onnxnn.set_fast_path(fast):
            model(base * w).sum().backward()
        gradients.append(w.grad.numpy())
    assert forward_replay.replay_info()["replayed"] == 1
    np.testing.assert_array_equal(gradients[2], gradients[3])


def test_which_tensors_need_gradients_is_part_of_the_structure():
    model = _mlp()
    x = onnxnn.randn(4, 6)
    model(x), model(x)
    model[0].weight.requires_grad_(False)
    output = model(x)  # a new structure: no backward function edge to the frozen weight
    output.sum().backward()
    assert model[0].weight.grad is None and model[0].bias.grad is not None
    with onnxnn.no_grad():
        assert not model(x).requires_grad


def test_anomaly_mode_runs_the_forward():
    model = _mlp()
    x = onnxnn.randn(4, 6)
    with onnxnn.autograd.set_detect_anomaly(True):
        for _ in range(3):
            model(x).sum().backward()
    assert forward_replay.replay_info()["replayed"] == 0
