"""Replayed and compiled calls return tensors that alias each other and their inputs as the forward's did.

A forward may return one tensor twice, a view of another returned tensor (``y[0]``, ``y.t()``), or a
view of its argument or of a weight (``nn.Unflatten``): in PyTorch, and in onnxnn's plain call, an
in-place op on one then shows in the others. A replay (``forward_replay``) and a compiled call's
prepared run (``compiled_calls``) make those views again from what they were made of, with the op
that made them; aliasing they could not make again (``y.detach()``) is never replayed.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.fastpath import compiled_calls, forward_replay

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


# (name, what the forward returns from its argument x, the linear layer and y = layer(x), whether the
# compiled call's prepared run serves it)
RETURNED = [
    ("same tensor twice", lambda x, layer, y: (y, y), True),
    ("a row of it", lambda x, layer, y: (y, y[0]), True),
    ("a view of it", lambda x, layer, y: (y, y.view(-1)), True),
    ("its transpose in a dict", lambda x, layer, y: {"a": y, "b": y.t()}, True),
    ("the view first", lambda x, layer, y: [y.t(), y], True),
    ("a view of a dropped view", lambda x, layer, y: (y, y.t()[1]), True),
    ("a piece of a split", lambda x, layer, y: (y, y.chunk(2, dim=1)[1]), True),
    ("a view of the argument", lambda x, layer, y: (y, x.view(-1)), True),
    ("a view of the weight", lambda x, layer, y: (layer.weight.t(), y), True),
    ("a detached alias", lambda x, layer, y: (y, y.detach()), False),
    ("overlapping views of a dropped tensor", lambda x, layer, y: _dropped(y * 2, lambda z: (z[0], z.view(-1))), False),
    ("pieces of a dropped tensor", lambda x, layer, y: _dropped(y * 2, lambda z: (*z.split(2, dim=1), y, y[1])), True),
]


def _dropped(z, views):
    return views(z)  # z is gone when the forward returns: only its views hold its storage


def _module(library, returned):
    class Returning(library.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = library.nn.Linear(4, 4)

        def forward(self, x):
            return returned(x, self.layer, self.layer(x))

    return Returning().eval()


def _flat(result) -> list:
    items = result.values() if isinstance(result, dict) else result
    return list(items)


@pytest.mark.parametrize("name, returned, prepared", RETURNED, ids=[case[0] for case in RETURNED])
def test_a_compiled_calls_returned_tensors_alias_as_the_forwards(name, returned, prepared):
    model = _module(onnxnn, returned)
    reference = _module(torch, returned)
    with torch.no_grad():
        for mine, theirs in zip(model.parameters(), reference.parameters()):
            theirs.copy_(torch.from_numpy(mine.detach().numpy()))
    compiled = onnxnn.compile(model)
    x_array = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
    with onnxnn.no_grad(), torch.no_grad():
        for _ in range(4):  # traced at the second call, prepared at the third
            x, expected_x = onnxnn.from_numpy(x_array.copy()), torch.from_numpy(x_array.copy())
            got, expected = _flat(compiled(x)), _flat(reference(expected_x))
            for index, (mine, theirs) in enumerate(zip(got, expected)):  # a write to each, seen in its aliases
                mine.add_(100.0 * (index + 1))
                theirs.add_(100.0 * (index + 1))
            assert [[a is b for b in got] for a in got] == [[a is b for b in expected] for a in expected]
            assert [item._base is x for item in got] == [item._base is expected_x for item in expected]
            for mine, theirs in zip(got + [x, model.layer.weight], expected + [expected_x, reference.layer.weight]):
                # 4 products summed and a few writes added, each rounding at most eps of the largest value
                expected_array = theirs.detach().numpy()
                bound = 16 * np.finfo(np.float32).eps * (1 + np.abs(expected_array).max())
                np.testing.assert_allclose(mine.detach().numpy(), expected_array, rtol=0, atol=bound)
    assert (compiled_calls.compiled_info()["prepared"] > 0) == prepared


def test_a_replayed_unflatten_stays_a_view_of_its_argument():
    layer, reference = onnxnn.nn.Unflatten(1, (2, 2)).eval(), torch.nn.Unflatten(1, (2, 2)).eval()
    x, expected_x = onnxnn.zeros(3, 4), torch.zeros(3, 4)
    with onnxnn.no_grad(), torch.no_grad():
        for _ in range(4):  # traced at the second call, replayed after
            y, expected_y = layer(x), reference(expected_x)
            x.add_(1.0)
            expected_x.add_(1.0)
            assert (y._base is x) == (expected_y._base is expected_x)
            np.testing.assert_array_equal(y.numpy(), expected_y.numpy())
            y.mul_(2.0)  # and a write through the view reaches the argument
            expected_y.mul_(2.0)
            np.testing.assert_array_equal(x.numpy(), expected_x.numpy())
    assert forward_replay.replay_info()["replayed"] > 0
