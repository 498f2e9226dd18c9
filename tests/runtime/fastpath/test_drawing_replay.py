"""Forward replay of random draws: a layer with dropout replays in training, drawing new masks.

A forward that draws through ``internal.drawn_constant_tensor`` (dropout's masks) is replayed with
each draw made again, in the order the forward made them and whether or not its value is read, so
that the generator's stream moves as a plain call's: the same masks, losses, parameters and
generator state with the fast path on and off. Other draws (``onnxnn.randn`` in a forward) keep
the forward running at every call.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
import onnxnn.nn.functional as F
from onnxnn.runtime.fastpath import forward_replay

from .training_loops import recorded_steps


pytestmark = pytest.mark.usefixtures("fresh_replays")


class _DropsUnread(nn.Module):
    """Draws a mask it never reads: a replay must still draw it, or every later draw would shift."""

    __module__ = "onnxnn.nn.modules.test_only"

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x):
        F.dropout(x, 0.5)
        return F.dropout(self.linear(x), 0.25)


# Each model: how it is built, the shape of its input, and whether it replays whole (traced once, at
# the second step, and replayed at each of the six after it) or only its layers apart.
MODELS = [
    ("mlp_dropout", lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 3)), (5, 6), True),
    ("dropout_2d", lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.Dropout2d(0.5), nn.Flatten()), (3, 2, 5, 5), True),
    ("dropout_1d_3d", lambda: nn.Sequential(nn.Dropout1d(0.2), nn.Flatten(), nn.Linear(8, 4)), (3, 2, 4), True),
    (
        "transformer_encoder",
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True), 2),
        (3, 5, 16),
        True,
    ),
    ("unread_mask", _DropsUnread, (4, 6), True),
    ("rrelu", lambda: nn.Sequential(nn.Linear(6, 8), nn.RReLU(), nn.Linear(8, 3)), (5, 6), True),
    ("alpha_dropout", lambda: nn.Sequential(nn.Linear(6, 8), nn.SELU(), nn.AlphaDropout(0.2)), (5, 6), True),
    (
        "feature_alpha_dropout",
        lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.SELU(), nn.FeatureAlphaDropout(0.4), nn.Flatten()),
        (3, 2, 5, 5),
        True,
    ),
]


def _train(build, shape, fast: bool) -> tuple[list, dict]:
    """Eight Adam steps of ``build()``: every loss and parameter after each, and the generator's state."""
    record, _ = recorded_steps(
        build,
        shape,
        fast,
        lambda parameters: onnxnn.optim.Adam(parameters, lr=0.01),
        lambda model: [parameter.detach().numpy() for parameter in model.parameters()],
    )
    return record, onnxnn.get_rng_state()


@pytest.mark.parametrize("name, build, shape, whole", MODELS, ids=[model[0] for model in MODELS])
def test_a_training_forward_drawing_masks_replays_to_the_same_bits(name, build, shape, whole):
    replayed, replayed_state = _train(build, shape, fast=True)
    counts = forward_replay.replay_info()
    plain, plain_state = _train(build, shape, fast=False)
    if whole:
        assert counts == {"traced": 1, "replayed": 6}
    else:
        assert counts["traced"] > 1 and counts["replayed"] >= 6
    assert len(replayed) == len(plain)
    for got, expected in zip(replayed, plain):
        np.testing.assert_array_equal(got, expected)
    assert str(replayed_state) == str(plain_state)


def test_each_replayed_call_draws_a_new_mask():
    layer = nn.Dropout(0.5)
    x = onnxnn.ones(64)
    onnxnn.manual_seed(3)
    outputs = [layer(x).numpy() for _ in range(5)]
    assert forward_replay.replay_info()["replayed"] == 3
    for first, second in zip(outputs, outputs[1:]):
        assert not np.array_equal(first, second)
    onnxnn.manual_seed(3)
    with onnxnn.set_fast_path(False):
        expected = [layer(x).numpy() for _ in range(5)]
    for got, wanted in zip(outputs, expected):
        np.testing.assert_array_equal(got, wanted)
    assert set(np.unique(outputs[-1]).tolist()) == {0.0, 2.0}


def test_a_forward_drawing_outside_the_recorded_draws_is_never_replayed():
    class Noisy(nn.Module):
        __module__ = "onnxnn.nn.modules.test_only"

        def forward(self, x):
            return x + onnxnn.randn(*x.shape)

    layer = Noisy()
    x = onnxnn.zeros(8)
    results = [layer(x).numpy() for _ in range(4)]
    assert forward_replay.replay_info()["replayed"] == 0
    assert not np.array_equal(results[2], results[3])
