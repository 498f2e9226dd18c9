"""Forward replay of checks on data: a loss checks its replayed call's target indices.

A forward that checks an argument's data through ``internal.check_known_data`` (cross entropy's
target indices in range, PyTorch's CPU check) records the same nodes whatever the data, so it
replays: each replay checks its own argument's array, when it is already computed, before
recording anything. A check after a state write keeps the forward running (a replay writes after
its nodes, so a raising check would leave the state as the plain call does not).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
import onnxnn.nn.functional as F
from onnxnn.ir.plan import plan
from onnxnn.runtime.fastpath import derived_checks, forward_replay

from .training_loops import recorded_steps

pytestmark = pytest.mark.usefixtures("fresh_replays")


class _Classifier(nn.Module):
    """A model whose forward ends in its loss: a linear layer, then cross entropy on fixed targets."""

    __module__ = "onnxnn.nn.modules.test_only"

    def __init__(self, loss: nn.Module):
        super().__init__()
        self.linear = nn.Linear(6, 4)
        self.loss = loss
        self.register_buffer("target", onnxnn.tensor([0, 3, 1, 2, 3]))

    def forward(self, x):
        return self.loss(self.linear(x), self.target)


class _Lookup(nn.Module):
    """Indexes its table with its argument, or with its own index buffer (Swin's relative position bias)."""

    __module__ = "onnxnn.nn.modules.test_only"

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(onnxnn.randn(5, 3))
        self.register_buffer("index", onnxnn.tensor([[0, 4], [2, -1]]))

    def forward(self, index=None):
        return self.table[self.index if index is None else index] * 2


class _NormalizedThenChecked(nn.Module):
    """Writes its running statistics, then checks its targets: never replayed."""

    __module__ = "onnxnn.nn.modules.test_only"

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x, target):
        return F.cross_entropy(self.norm(x), target)


@pytest.mark.parametrize(
    "build",
    [lambda: _Classifier(nn.CrossEntropyLoss()), lambda: _Classifier(nn.CrossEntropyLoss(label_smoothing=0.1))],
    ids=["cross_entropy", "cross_entropy_smoothed"],
)
def test_a_loss_checking_its_targets_replays_to_the_same_bits(build):
    def train(fast):
        return recorded_steps(
            lambda: nn.Sequential(build()),
            (5, 6),
            fast,
            lambda parameters: onnxnn.optim.SGD(parameters, lr=0.1),
            lambda model: [parameter.detach().numpy() for parameter in model.parameters()],
        )[0]

    replayed = train(True)
    counts = forward_replay.replay_info()
    plain = train(False)
    assert counts == {"traced": 1, "replayed": 6}
    for got, expected in zip(replayed, plain):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("loss", [nn.CrossEntropyLoss(), nn.NLLLoss()], ids=["cross_entropy", "nll"])
def test_a_replayed_loss_refuses_a_target_out_of_range_before_recording(loss):
    x = onnxnn.randn(4, 3, requires_grad=True)
    for _ in range(3):
        loss(x, onnxnn.tensor([0, 1, 2, 1]))
    assert forward_replay.replay_info()["replayed"] == 1
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        loss(x, onnxnn.tensor([0, 1, 3, 1]))
    # Ignored targets pass, and a target still pending (computed by an op) is never run to be checked.
    ignored = loss(x, onnxnn.tensor([0, -100, 2, 1]))
    pending = loss(x, onnxnn.tensor([0, 1, 1, 0]) + 1)
    assert forward_replay.replay_info()["replayed"] == 3
    with onnxnn.set_fast_path(False):
        np.testing.assert_array_equal(
            ignored.detach().numpy(), loss(x, onnxnn.tensor([0, -100, 2, 1])).detach().numpy()
        )
        np.testing.assert_array_equal(pending.detach().numpy(), loss(x, onnxnn.tensor([1, 2, 2, 1])).detach().numpy())


# Each checking layer: how it is built, its arguments (realized: checked) at a good call and at a bad
# one, and what the bad call raises.
CHECKING_LAYERS = [
    (
        "binary_cross_entropy",
        nn.BCELoss,
        lambda: (onnxnn.rand(6), onnxnn.rand(6)),
        lambda: (onnxnn.tensor([0.5, 1.5, 0.2, 0.1, 0.0, 1.0]), onnxnn.rand(6)),
        (RuntimeError, "should be between 0 and 1"),
    ),
    (
        "multi_margin",
        nn.MultiMarginLoss,
        lambda: (onnxnn.randn(3, 4), onnxnn.tensor([0, 3, 1])),
        lambda: (onnxnn.randn(3, 4), onnxnn.tensor([0, 4, 1])),
        (RuntimeError, "target out of range"),
    ),
    (
        "multilabel_margin",
        nn.MultiLabelMarginLoss,
        lambda: (onnxnn.randn(2, 4), onnxnn.tensor([[3, 0, -1, 1], [1, 2, 3, -1]])),
        lambda: (onnxnn.randn(2, 4), onnxnn.tensor([[3, -2, -1, 1], [1, 2, 3, -1]])),
        (RuntimeError, "'target' is out of range"),
    ),
    (
        "gaussian_nll",
        nn.GaussianNLLLoss,
        lambda: (onnxnn.randn(5), onnxnn.randn(5), onnxnn.rand(5)),
        lambda: (onnxnn.randn(5), onnxnn.randn(5), onnxnn.tensor([0.1, -0.2, 0.3, 0.4, 0.5])),
        (ValueError, "var has negative entry"),
    ),
    (
        "embedding",
        lambda: nn.Embedding(5, 3, padding_idx=0),
        lambda: (onnxnn.tensor([[0, 4], [2, 1]]),),
        lambda: (onnxnn.tensor([[0, 5], [2, 1]]),),
        (IndexError, "index out of range in self: index 5"),
    ),
    (
        "embedding_bag_offsets",
        lambda: nn.EmbeddingBag(5, 3, mode="sum"),
        lambda: (onnxnn.tensor([0, 4, 2, 1]), onnxnn.tensor([0, 2])),
        lambda: (onnxnn.tensor([0, 4, 2, 1]), onnxnn.tensor([1, 2])),
        (RuntimeError, "offsets\\[0\\] has to be 0"),
    ),
    (
        "embedding_bag_indices",
        lambda: nn.EmbeddingBag(5, 3, mode="mean"),
        lambda: (onnxnn.tensor([0, 4, 2, 1]), onnxnn.tensor([0, 2])),
        lambda: (onnxnn.tensor([0, 9, 2, 1]), onnxnn.tensor([0, 2])),
        (RuntimeError, "Index 1 of input takes value 9"),
    ),
    (
        "indexing",
        _Lookup,
        lambda: (onnxnn.tensor([[0, 4], [2, -1]]),),
        lambda: (onnxnn.tensor([[0, 5], [2, -1]]),),
        (IndexError, "index 5 is out of bounds for dimension 0 with size 5"),
    ),
    (
        "max_unpool",
        lambda: nn.MaxUnpool2d(2),
        lambda: (onnxnn.randn(1, 1, 2, 2), onnxnn.tensor([[[[0, 3], [9, 14]]]])),
        lambda: (onnxnn.randn(1, 1, 2, 2), onnxnn.tensor([[[[0, 3], [9, 16]]]])),
        (RuntimeError, "Found an invalid max index: 16"),
    ),
]


@pytest.mark.parametrize("name, build, good, bad, raised", CHECKING_LAYERS, ids=[layer[0] for layer in CHECKING_LAYERS])
def test_a_replayed_layer_checks_its_own_call_data(name, build, good, bad, raised):
    layer = build()
    arguments = good()
    results = [layer(*arguments) for _ in range(3)]
    assert forward_replay.replay_info()["replayed"] == 1
    with onnxnn.set_fast_path(False):
        np.testing.assert_array_equal(results[-1].detach().numpy(), layer(*arguments).detach().numpy())
    error, match = raised
    bad_arguments = bad()
    with pytest.raises(error, match=match):
        layer(*bad_arguments)
    with onnxnn.set_fast_path(False), pytest.raises(error, match=match):
        layer(*bad_arguments)


def test_an_index_held_by_the_module_is_gathered_and_checked_at_each_replay():
    layer = _Lookup()
    results = [layer() for _ in range(4)]
    assert forward_replay.replay_info() == {"traced": 1, "replayed": 2}
    table = layer.table.detach().numpy()
    for result in results:
        np.testing.assert_array_equal(result.detach().numpy(), table[[[0, 4], [2, -1]]] * 2)
    with onnxnn.no_grad():
        layer.index[0, 1] = 3  # the replay reads the buffer as it is now
    np.testing.assert_array_equal(layer().detach().numpy(), table[[[0, 3], [2, -1]]] * 2)
    with onnxnn.no_grad():
        layer.index[0, 1] = 7
    layer.index.numpy()  # computed: checked before anything is recorded (a pending index is not run to be)
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 5"):
        layer()
    assert forward_replay.replay_info()["traced"] == 1


def test_a_check_of_an_index_the_forward_makes_is_made_once_when_traced():
    class ConstantLookup(_Lookup):
        __module__ = "onnxnn.nn.modules.test_only"

        def forward(self, index=None):
            return self.table[onnxnn.tensor([[0, 4], [2, -1]])] * 2

    layer = ConstantLookup()
    results = [layer() for _ in range(4)]
    assert forward_replay.replay_info() == {"traced": 1, "replayed": 2}
    expected = layer.table.detach().numpy()[[[0, 4], [2, -1]]] * 2
    for result in results:
        np.testing.assert_array_equal(result.detach().numpy(), expected)


def test_a_replayed_embedding_computes_pending_indices_to_check_them():
    # A negative index would wrap around in a Gather: it must be refused, pending or not.
    layer = nn.Embedding(5, 3)
    indices = onnxnn.tensor([0, 4, 2])
    for _ in range(3):
        layer(indices)
    assert forward_replay.replay_info()["replayed"] == 1
    with pytest.raises(IndexError, match="index -1 is not in"):
        layer(onnxnn.tensor([1, 0, 3]) - 1)
    looked_up = layer(onnxnn.tensor([1, 0, 3]) + 1)
    np.testing.assert_array_equal(looked_up.detach().numpy(), layer.weight.detach().numpy()[[2, 1, 4]])


def test_a_check_after_a_state_write_keeps_the_forward_running():
    model = _NormalizedThenChecked()
    reference = _NormalizedThenChecked()
    x = onnxnn.randn(5, 4)
    for target in ([0, 1, 2, 3, 0], [1, 1, 2, 3, 0], [2, 1, 2, 3, 0]):
        model(x, onnxnn.tensor(target))
        with onnxnn.set_fast_path(False):
            reference(x, onnxnn.tensor(target))
    with pytest.raises(IndexError):
        model(x, onnxnn.tensor([0, 1, 2, 4, 0]))
    with onnxnn.set_fast_path(False), pytest.raises(IndexError):
        reference(x, onnxnn.tensor([0, 1, 2, 4, 0]))
    # The statistics moved at the refused call too, before its check, as PyTorch's do.
    np.testing.assert_array_equal(model.norm.running_mean.numpy(), reference.norm.running_mean.numpy())
    assert model.norm.num_batches_tracked.item() == 4


class _Positions(nn.Module):
    """Token and position embeddings; the positions made by the forward (GPT-2's ``arange``), sliced
    from a buffer (BERT's ``position_ids``) or computed from the argument (an offset)."""

    __module__ = "onnxnn.nn.modules.test_only"

    def __init__(self, positions: str):
        super().__init__()
        self.positions = positions
        self.tokens, self.places = nn.Embedding(20, 4), nn.Embedding(8, 4)
        self.register_buffer("position_ids", onnxnn.tensor(np.arange(8)[None, :]))

    def forward(self, ids, offset=None):
        length = ids.shape[1]
        if self.positions == "made":
            places = onnxnn.arange(length)[None, :]
        elif self.positions == "buffer":
            places = self.position_ids[:, :length]
        else:
            places = ids + offset
        return self.tokens(ids) + self.places(places)


def _expected(model, ids: np.ndarray, places: np.ndarray) -> np.ndarray:
    return model.tokens.weight.detach().numpy()[ids] + model.places.weight.detach().numpy()[places]


@pytest.mark.parametrize("positions", ["made", "buffer", "argument"])
def test_an_embedding_of_computed_positions_replays_checking_them(positions):
    model = _Positions(positions)
    ids = np.array([[3, 1, 4], [1, 5, 2]])
    places = ids + 2 if positions == "argument" else np.arange(3)[None, :]
    results = [model(onnxnn.tensor(ids), 2) for _ in range(4)]
    assert forward_replay.replay_info() == {"traced": 1, "replayed": 2}
    for result in results:
        np.testing.assert_array_equal(result.detach().numpy(), _expected(model, ids, places))
    with onnxnn.set_fast_path(False):
        np.testing.assert_array_equal(results[-1].detach().numpy(), model(onnxnn.tensor(ids), 2).detach().numpy())


@pytest.mark.parametrize(
    "positions, break_it, index",
    [
        ("buffer", lambda model: model.position_ids.__setitem__((0, 1), 9), 9),
        ("argument", lambda model: None, 8),
    ],
)
def test_a_replay_refuses_computed_positions_out_of_range(positions, break_it, index):
    model = _Positions(positions)
    for _ in range(3):
        model(onnxnn.tensor([[3, 1, 4]]), 2)
    assert forward_replay.replay_info()["replayed"] == 1
    with onnxnn.no_grad():
        break_it(model)
    model.position_ids.numpy()  # computed: the replay reads it as it is now
    ids = onnxnn.tensor([[3, 6, 4]])  # 6 + 2 is past the 8 places
    message = f"index out of range in self: index {index}"
    with pytest.raises(IndexError, match=message):
        model(ids, 2)
    assert forward_replay.replay_info()["traced"] == 1  # refused by the replay's check
    with onnxnn.set_fast_path(False), pytest.raises(IndexError, match=message):
        model(ids, 2)


@pytest.mark.parametrize("nodes, computed_apart", [(3, True), (derived_checks.MOST_NODES + 6, False)])
def test_pending_indices_are_computed_apart_only_when_their_history_is_short(monkeypatch, nodes, computed_apart):
    # A long history (tokens a model generated) is realized as the rest of the call would: planning
    # it apart first, to find it too long, would walk it twice.
    planned = []
    monkeypatch.setattr(derived_checks, "plan", lambda values: planned.append(values) or plan(values))
    layer = nn.Embedding(5, 2)
    indices = onnxnn.tensor([1, 3])
    for _ in range(nodes):
        indices = indices + 0
    looked_up = layer(indices)
    assert (indices._value.data is None) == computed_apart  # computed apart, the value is left pending
    assert bool(planned) == computed_apart
    np.testing.assert_array_equal(looked_up.detach().numpy(), layer.weight.detach().numpy()[[1, 3]])
