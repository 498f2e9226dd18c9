"""Backward replay: the second backward of a graph structure repeats the first one's recording.

Every gradient-rule check (tests/gradcheck.py) also compares a replayed backward with the general
driver's on new data; these cases cover what decides whether a backward may be replayed at all.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.fastpath import backward_replay
from onnxnn.runtime import depth
from onnxnn.runtime.depth import MAX_PENDING_DEPTH
from onnxnn.runtime.tensor import apply_op

from tolerances import assert_within, gamma, matmul_bound


@pytest.fixture(autouse=True)
def fresh_templates():
    backward_replay.clear_templates()
    yield
    backward_replay.clear_templates()


def _mlp_gradients(weight0: np.ndarray, weight1: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
    w0 = onnxnn.tensor(weight0, requires_grad=True)
    w1 = onnxnn.tensor(weight1, requires_grad=True)
    loss = ((onnxnn.tensor(x) @ w0).relu() @ w1).abs().sum()
    loss.backward()
    return [w0.grad.numpy(), w1.grad.numpy()]


def _numpy_mlp_gradients(weight0, weight1, x) -> list[np.ndarray]:
    hidden = x @ weight0
    output = np.maximum(hidden, 0) @ weight1
    gradient_output = np.sign(output)
    gradient_hidden = (gradient_output @ weight1.T) * (hidden > 0)
    return [x.T @ gradient_hidden, np.maximum(hidden, 0).T @ gradient_output]


def _numpy_mlp_gradient_bounds(weight0, weight1, x) -> list[np.ndarray]:
    """Rounding bounds of float32 computations of ``_numpy_mlp_gradients``.

    The ReLU masks and output signs are the exact ones unless a value lies within its rounding of
    zero, which these seeded values do not; the hidden values' own error (a 4-term matmul)
    reaches the second weight's gradient through a 3-term matmul with the signs.
    """
    weight0, weight1, x = (np.asarray(a, np.float64) for a in (weight0, weight1, x))
    hidden = x @ weight0
    output = np.maximum(hidden, 0) @ weight1
    gradient_output = np.sign(output)
    gradient_hidden = (gradient_output @ weight1.T) * (hidden > 0)
    hidden_error = gamma(x.shape[1]) * np.abs(x) @ np.abs(weight0)
    gradient_hidden_error = gamma(weight1.shape[1]) * np.abs(gradient_output) @ np.abs(weight1.T)
    return [
        matmul_bound(x.T, gradient_hidden) + np.abs(x.T) @ gradient_hidden_error,
        matmul_bound(np.maximum(hidden, 0).T, gradient_output) + hidden_error.T @ np.abs(gradient_output),
    ]


def test_the_second_backward_of_a_structure_is_replayed_with_the_new_values() -> None:
    rng = np.random.default_rng(0)
    for step in range(3):
        arrays = [rng.standard_normal(shape).astype(np.float32) for shape in [(4, 5), (5, 2), (3, 4)]]
        gradients = _mlp_gradients(*arrays)
        exact = _numpy_mlp_gradients(*[a.astype(np.float64) for a in arrays])
        for gradient, expected, bound in zip(gradients, exact, _numpy_mlp_gradient_bounds(*arrays)):
            assert_within(gradient, expected, bound)
    assert backward_replay.replay_info() == {"templates": 1, "unreplayable": 0, "traced": 1, "replayed": 2}


def test_a_template_is_compiled_when_its_structure_comes_back() -> None:
    # A one-off backward (a script's single step) does not pay for compiling its replay.
    arrays = [np.ones(shape, np.float32) for shape in [(4, 5), (5, 2), (3, 4)]]
    _mlp_gradients(*arrays)
    (template,) = backward_replay._templates.values()
    assert template.replay.__name__ == "compile_then_replay"
    _mlp_gradients(*arrays)
    assert template.replay.__name__ == "replay"
    assert backward_replay.replay_info()["replayed"] == 1


def test_a_replay_records_what_the_general_driver_records() -> None:
    rng = np.random.default_rng(1)
    _mlp_gradients(*[rng.standard_normal(shape).astype(np.float32) for shape in [(4, 5), (5, 2), (3, 4)]])
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in [(4, 5), (5, 2), (3, 4)]]
    replayed = _mlp_gradients(*arrays)
    with onnxnn.set_fast_path(False):
        general = _mlp_gradients(*arrays)
    for replayed_gradient, general_gradient in zip(replayed, general):
        np.testing.assert_array_equal(replayed_gradient, general_gradient)


def test_which_inputs_are_the_same_value_is_part_of_the_structure() -> None:
    # weight.grad = a * b: with a and b one tensor first, then two, the second backward must not
    # reuse the first one's "both factors are the same value".
    def weight_gradient(a: onnxnn.Tensor, b: onnxnn.Tensor) -> np.ndarray:
        weight = onnxnn.ones(3, requires_grad=True)
        (weight * a * b).sum().backward()
        return weight.grad.numpy()

    same = onnxnn.tensor([1.0, 2.0, 3.0])
    np.testing.assert_allclose(weight_gradient(same, same), [1.0, 4.0, 9.0])
    np.testing.assert_allclose(weight_gradient(same, onnxnn.tensor([4.0, 5.0, 6.0])), [4.0, 10.0, 18.0])
    assert backward_replay.replay_info()["templates"] == 2


def test_gradients_accumulate_into_existing_grads_on_replay() -> None:
    weight = onnxnn.tensor([1.0, -2.0], requires_grad=True)
    inputs = [[0.5, 1.0], [2.0, -1.0], [3.0, 4.0], [-1.0, 0.25]]
    for x in inputs:  # .grad unset once, then set: two structures, both replayed later
        (weight * onnxnn.tensor(x)).sum().backward()
    np.testing.assert_allclose(weight.grad.numpy(), np.sum(inputs, axis=0))
    assert backward_replay.replay_info()["replayed"] == 2


def test_backward_of_a_leaf_is_replayed() -> None:
    weight = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        weight.backward(onnxnn.tensor([0.5, 0.25]))
    np.testing.assert_allclose(weight.grad.numpy(), [1.5, 0.75])
    assert backward_replay.replay_info()["replayed"] == 1


def test_hooks_run_at_every_backward() -> None:
    calls = []
    for step in range(3):
        weight = onnxnn.tensor([1.0, 2.0], requires_grad=True)
        hidden = weight * 3
        hidden.register_hook(lambda gradient: calls.append(step) or gradient * 2)
        hidden.sum().backward()
        np.testing.assert_allclose(weight.grad.numpy(), [6.0, 6.0])
    assert calls == [0, 1, 2]
    assert backward_replay.replay_info()["traced"] == 0


def test_a_value_changed_in_place_after_it_was_saved_still_raises() -> None:
    for step in range(3):
        weight = onnxnn.tensor([1.0, 2.0], requires_grad=True)
        scaled = weight * 2
        loss = (scaled * scaled).sum()
        if step == 2:
            with onnxnn.no_grad():
                scaled.add_(1)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                loss.backward()
            assert weight.grad is None
        else:
            loss.backward()
            np.testing.assert_allclose(weight.grad.numpy(), [8.0, 16.0])


def test_a_freed_graph_still_raises_on_a_second_backward() -> None:
    for _ in range(2):
        weight = onnxnn.tensor([1.0, 2.0], requires_grad=True)
        loss = (weight * weight).sum()
        loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_retain_graph_keeps_a_replayed_graph_for_another_backward() -> None:
    for _ in range(2):
        weight = onnxnn.tensor([1.0, 2.0], requires_grad=True)
        loss = (weight * weight).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        np.testing.assert_allclose(weight.grad.numpy(), [4.0, 8.0])


def test_a_backward_whose_rule_read_data_is_never_replayed() -> None:
    # Dropout's gradient reads its training flag; as a tensor (not a structural constant) the flag
    # is data, so the same structure with the flag off must not replay the masked gradient.
    x = onnxnn.ones(64, requires_grad=True)
    for training in (True, False):
        x.grad = None
        output, _ = apply_op("Dropout", (x, onnxnn.tensor(0.5), onnxnn.tensor(training)))
        output.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(64, np.float32))
    assert backward_replay.replay_info() == {"templates": 0, "unreplayable": 1, "traced": 1, "replayed": 0}


def test_the_template_cache_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(backward_replay, "TEMPLATE_LIMIT", 3)
    for size in range(1, 8):
        weight = onnxnn.ones(size, requires_grad=True)
        (weight * 2).sum().backward()
        np.testing.assert_allclose(weight.grad.numpy(), np.full(size, 2.0))
    assert backward_replay.replay_info()["templates"] <= 3


def test_a_replay_bounds_the_pending_depth_as_recording_does(monkeypatch) -> None:
    # The same structure, first on a realized input, then on one with a long pending history:
    # the replayed gradient nodes then pass the backward's bound (here MAX_PENDING_DEPTH, so that
    # the forward stays pending) and must be realized on the way.
    monkeypatch.setattr(depth, "MAX_BACKWARD_PENDING_DEPTH", MAX_PENDING_DEPTH)

    def weight_gradient(input_depth: int) -> onnxnn.Tensor:
        weight = onnxnn.full((3,), 0.5, requires_grad=True)
        x = onnxnn.tensor([0.1, 0.2, 0.3])
        for _ in range(input_depth):
            x = x + 0.001
        y = weight * x
        for _ in range(MAX_PENDING_DEPTH * 3 // 10):
            y = y.sin()
        y.sum().backward()
        return weight.grad

    weight_gradient(0)
    replayed = weight_gradient(MAX_PENDING_DEPTH // 2)
    value = replayed._value
    assert value.data is not None or value.node.depth <= MAX_PENDING_DEPTH
    assert backward_replay.replay_info()["replayed"] == 1
    replayed.numpy()
    replayed = weight_gradient(MAX_PENDING_DEPTH // 2)
    with onnxnn.set_fast_path(False):
        # Each way a second time, compared: a structure's first run may take the kernels
        # (plan_cache.FIRST_RUNS_ON_KERNELS), which round differently from its compiled session.
        weight_gradient(MAX_PENDING_DEPTH // 2).numpy()
        general = weight_gradient(MAX_PENDING_DEPTH // 2)
    np.testing.assert_array_equal(replayed.numpy(), general.numpy())


def test_a_backward_past_the_forwards_bound_stays_pending_up_to_its_own() -> None:
    # Sines 3/4 of MAX_PENDING_DEPTH deep: with their backward the history passes MAX_PENDING_DEPTH,
    # but not MAX_BACKWARD_PENDING_DEPTH, so forward and backward run as one graph when read.
    weight = onnxnn.tensor([0.1, 0.2, 0.3], requires_grad=True)
    y = weight * 1.0
    for _ in range(MAX_PENDING_DEPTH * 3 // 4):
        y = y.sin()
    y.sum().backward()
    gradient = weight.grad._value
    assert gradient.data is None and MAX_PENDING_DEPTH < gradient.node.depth <= depth.MAX_BACKWARD_PENDING_DEPTH
    expected = np.array([0.1, 0.2, 0.3])
    derivative = np.ones(3)
    for _ in range(MAX_PENDING_DEPTH * 3 // 4):
        derivative *= np.cos(expected)
        expected = np.sin(expected)
    # 450 rounded sines and cosines and their products: a few ulps each, relative.
    np.testing.assert_allclose(weight.grad.numpy(), derivative, rtol=gamma(4 * 450))


def test_a_backward_deep_enough_to_be_realized_on_the_way_is_replayed(monkeypatch) -> None:
    monkeypatch.setattr(depth, "MAX_BACKWARD_PENDING_DEPTH", MAX_PENDING_DEPTH)

    # Sines 3/4 of MAX_PENDING_DEPTH deep keep the forward pending; their backward passes it and is realized
    # while recorded. That depends on structure only, so the next backward replays it.
    def weight_gradient(scale: float) -> np.ndarray:
        weight = onnxnn.tensor([0.1, 0.2, 0.3], requires_grad=True)
        y = weight * scale
        for _ in range(MAX_PENDING_DEPTH * 3 // 4):
            y = y.sin()
        y.sum().backward()
        return weight.grad.numpy()

    weight_gradient(1.0)
    replayed = weight_gradient(0.5)
    assert backward_replay.replay_info() == {"templates": 1, "unreplayable": 0, "traced": 1, "replayed": 1}
    with onnxnn.set_fast_path(False):
        general = weight_gradient(0.5)
    np.testing.assert_array_equal(replayed, general)
