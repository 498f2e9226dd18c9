"""Forward replay of state written in place: a BatchNorm in training updates its running statistics.

A traced forward that rebinds its own state (``running.copy_(...)``, ``num_batches_tracked.add_(1)``)
is replayed with the same writes: after its nodes, each state tensor is rebound to the value the
trace wrote, with its version bumped and its views following, and the values the forward asked to
join the next realization (``realize_alongside``) are asked again. Everything must be bitwise what
the plain call leaves, buffers and versions included; a write a replay could not repeat (to an
argument, a global, through a view, onto a weight a backward function saved) keeps the forward
running at every call.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.runtime.fastpath import forward_replay

from .forwards import EXPECTED, Misbehaving
from .training_loops import recorded_steps

GLOBAL_COUNT = onnxnn.zeros(())


pytestmark = pytest.mark.usefixtures("fresh_replays")


class _OwnLayer(nn.Module):
    """A layer doing ``behaviour`` that claims to be onnxnn's (its module name), so that it may replay."""

    __module__ = "onnxnn.nn.modules.test_only"

    def __init__(self, behaviour: str):
        super().__init__()
        self.behaviour = behaviour
        self.weight = nn.Parameter(onnxnn.ones(3))
        base = onnxnn.zeros(2)
        self.register_buffer("base", base)
        self.register_buffer("through_view", base[0])

    def forward(self, x):
        if self.behaviour == "writes a weight its backward saved":
            y = x * self.weight
            with onnxnn.no_grad():
                self.weight.add_(1)
            return y
        if self.behaviour == "writes a weight, then its product saves it":
            with onnxnn.no_grad():
                self.weight.add_(1)
            return x * self.weight
        if self.behaviour == "writes through a view":
            self.through_view.add_(1)
            return x + self.base.sum()
        if self.behaviour == "writes a global tensor":
            GLOBAL_COUNT.add_(1)
            return x * 2
        raise AssertionError(self.behaviour)


class _StateChanging(Misbehaving):
    __module__ = "onnxnn.nn.modules.test_only"


def _cnn():
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1, bias=False),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 3),
        nn.BatchNorm1d(3, momentum=None),  # the cumulative average: 1 / num_batches_tracked
    )


# Each model: how it is built and the shape of its input.
MODELS = [
    ("batch_norm_1d", lambda: nn.BatchNorm1d(5), (6, 5)),
    ("batch_norm_2d_cumulative", lambda: nn.BatchNorm2d(3, momentum=None), (4, 3, 5, 5)),
    ("batch_norm_2d_without_affine", lambda: nn.BatchNorm2d(3, affine=False), (4, 3, 5, 5)),
    ("batch_norm_3d", lambda: nn.BatchNorm3d(2), (3, 2, 3, 3, 3)),
    ("instance_norm_tracking", lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True), (2, 3, 4, 4)),
    ("cnn_with_batch_norms", _cnn, (5, 2, 4, 4)),
    # Power iteration: each call writes the singular vectors twice, each write reading the other's.
    ("spectral_norm", lambda: nn.utils.parametrizations.spectral_norm(nn.Linear(6, 5), n_power_iterations=2), (4, 6)),
]


def _train(build, shape, fast: bool) -> tuple[list, list]:
    """Eight SGD steps of ``build()``: every loss, parameter and buffer after each, an evaluation-mode
    call after them (normalized with the running statistics), and the buffers' versions."""
    record, model = recorded_steps(
        build,
        shape,
        fast,
        lambda parameters: onnxnn.optim.SGD(parameters, lr=0.05, momentum=0.9) if parameters else None,
        lambda model: [tensor.numpy() for tensor in model.state_dict().values()],
    )
    model.eval()
    with onnxnn.no_grad(), onnxnn.set_fast_path(fast):
        record.append(model(onnxnn.ones(*shape)).numpy())
    return record, [tensor._version for tensor in model.buffers()]


@pytest.mark.parametrize("name, build, shape", MODELS, ids=[model[0] for model in MODELS])
def test_a_training_forward_writing_its_statistics_replays_to_the_same_bits(name, build, shape):
    replayed, replayed_versions = _train(build, shape, fast=True)
    counts = forward_replay.replay_info()
    plain, plain_versions = _train(build, shape, fast=False)
    assert counts["replayed"] >= 6  # traced at the second step, replayed at every later one
    assert len(replayed) == len(plain)
    for got, expected in zip(replayed, plain):
        np.testing.assert_array_equal(got, expected)
    assert replayed_versions == plain_versions


def test_a_forward_writing_its_own_intermediates_in_place_replays_whole():
    # ReLU(inplace=True) rewrites the first layer's output, which the same forward made: a replay's
    # nodes compute it again, so the Sequential replays as one (its Linears are not called apart).
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True), nn.Linear(8, 2))
    batches = [onnxnn.randn(3, 4) for _ in range(4)]
    with onnxnn.no_grad():
        replayed = [model(x).numpy() for x in batches]
        # The Sequential alone, traced at its second call: its Linears are never traced apart.
        assert forward_replay.replay_info() == {"traced": 1, "replayed": 2}
        with onnxnn.set_fast_path(False):
            plain = [model(x).numpy() for x in batches]
    for got, expected in zip(replayed, plain, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_a_replayed_forward_asks_for_its_statistics_with_the_next_run():
    # Left pending, each step's running statistics would keep that step's whole forward alive.
    layer = nn.BatchNorm1d(4)
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(4):
        optimizer.zero_grad()
        layer(onnxnn.randn(8, 4)).sum().backward()
        optimizer.step()
        assert layer.running_mean._value.data is not None and layer.running_var._value.data is not None
    assert forward_replay.replay_info()["replayed"] == 2


def test_a_view_of_a_running_statistic_follows_each_replayed_write():
    layer = nn.BatchNorm1d(4)
    view = layer.running_mean[1:3]
    x = onnxnn.randn(8, 4)
    with onnxnn.no_grad():
        for _ in range(4):
            layer(x)
    assert forward_replay.replay_info()["replayed"] == 2
    expected = x.numpy().mean(axis=0) * (1 - 0.9**4)
    np.testing.assert_allclose(layer.running_mean.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(view.numpy(), layer.running_mean.numpy()[1:3])
    assert layer.num_batches_tracked.item() == 4


def test_a_forward_counting_its_calls_in_a_buffer_replays():
    module = _StateChanging("changes its state").eval()
    with onnxnn.no_grad():
        for call, sign in enumerate((1, -1, 1, -1)):
            data = np.full((2, 2), sign, np.float32)
            np.testing.assert_array_equal(
                module(onnxnn.tensor(data)).numpy(), EXPECTED["changes its state"](data, call)
            )
    assert module.count.item() == 4 and module.count._version == 4
    assert forward_replay.replay_info()["replayed"] == 2


def test_a_weight_written_after_its_backward_saved_it_is_never_replayed():
    layer = _OwnLayer("writes a weight its backward saved")
    for call in range(3):
        output = layer(onnxnn.ones(3, requires_grad=True))  # the product saves the weight for its gradient
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            output.sum().backward()
        np.testing.assert_array_equal(layer.weight.detach().numpy(), np.full(3, call + 2.0))
    assert forward_replay.replay_info()["replayed"] == 0


def test_a_weight_written_before_its_product_saved_it_is_never_replayed():
    # A replay writes after its nodes: the product would save the version before the write.
    layer = _OwnLayer("writes a weight, then its product saves it")
    for call in range(3):
        x = onnxnn.ones(3, requires_grad=True)
        layer(x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full(3, call + 2.0))
    assert forward_replay.replay_info()["replayed"] == 0


@pytest.mark.parametrize("behaviour", ["writes through a view", "writes a global tensor"])
def test_a_write_a_replay_could_not_repeat_keeps_the_forward_running(behaviour):
    layer = _OwnLayer(behaviour)
    start = GLOBAL_COUNT.item()
    with onnxnn.no_grad():
        results = [layer(onnxnn.zeros(3)).numpy() for _ in range(4)]
    assert forward_replay.replay_info()["replayed"] == 0
    if behaviour == "writes through a view":
        np.testing.assert_array_equal(results[-1], np.full(3, 4.0))
        np.testing.assert_array_equal(layer.base.numpy(), [4.0, 0.0])
    else:
        assert GLOBAL_COUNT.item() == start + 4
