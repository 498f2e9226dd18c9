"""What replays return: the containers a forward returned its tensors in, made again around new ones.

Tuples, lists, dicts with string keys and None, as before; and the named containers models return:
namedtuples, ``OrderedDict`` and dict subclasses made from their fields by keyword (transformers'
``ModelOutput``, onnxnn's in ``models.language``). A container that its own constructor would not
make again from its contents (one keeping attributes, or renaming its fields) keeps its forward
running at every call, returning what the forward returns.
"""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.models.language import ModelOutput
from onnxnn.runtime.fastpath import compiled_calls, forward_replay

pytestmark = pytest.mark.usefixtures("fresh_replays")

Pair = collections.namedtuple("Pair", ["logits", "hidden"])


class _Stamped(dict):
    """A dict keeping an attribute of its own, which a dict made again from its items lacks."""

    _serial = itertools.count()

    def __init__(self, **fields):
        super().__init__(**fields)
        self.serial = next(self._serial)


class _Renaming(dict):
    """A dict whose constructor renames its fields: made again from its items, its keys differ."""

    def __init__(self, **fields):
        super().__init__({f"out_{key}": value for key, value in fields.items()})


CONTAINERS = {
    "tuple": lambda logits, hidden: (logits, (hidden, None)),
    "dict": lambda logits, hidden: {"logits": logits, "hidden": hidden},
    "namedtuple": lambda logits, hidden: Pair(logits, hidden),
    "OrderedDict": lambda logits, hidden: collections.OrderedDict(logits=logits, hidden=hidden),
    "ModelOutput": lambda logits, hidden: ModelOutput(logits=logits, hidden=hidden, attentions=None),
    "nested": lambda logits, hidden: ModelOutput(logits=logits, pair=Pair(hidden, [hidden * 2])),
}
NOT_MADE_AGAIN = {
    "keeps attributes": lambda logits, hidden: _Stamped(logits=logits, hidden=hidden),
    "renames its fields": lambda logits, hidden: _Renaming(logits=logits, hidden=hidden),
}


FORWARD_RUNS = [0]  # forwards that ran their Python (a replay runs none)


class _Returning(nn.Module):
    """Two linear layers whose outputs the forward returns in the container named ``container``."""

    def __init__(self, container: str):
        super().__init__()
        self.container = container
        self.body, self.head = nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x):
        FORWARD_RUNS[0] += 1
        hidden = onnxnn.tanh(self.body(x))
        make = CONTAINERS.get(self.container) or NOT_MADE_AGAIN[self.container]
        return make(self.head(hidden), hidden)


class _OnnxnnReturning(_Returning):
    __module__ = "onnxnn.nn.modules.test_only"  # replayed like onnxnn's own layers, compiled or not


def _layout(result):
    """The result's containers and keys, with each tensor's array in its place."""
    if isinstance(result, onnxnn.Tensor):
        return result.numpy()
    if result is None:
        return None
    if isinstance(result, dict):
        return (type(result), [(key, _layout(item)) for key, item in result.items()])
    return (type(result), [_layout(item) for item in result])


def _assert_same(result, expected) -> None:
    if isinstance(expected, np.ndarray):
        np.testing.assert_array_equal(result, expected)
        return
    if expected is None:
        assert result is None
        return
    (kind, theirs), (found_kind, mine) = expected, result
    assert found_kind is kind and len(mine) == len(theirs)
    if issubclass(kind, dict):  # (key, layout) entries, in order
        assert [key for key, _ in mine] == [key for key, _ in theirs]
        mine, theirs = [layout for _, layout in mine], [layout for _, layout in theirs]
    for item, expected_item in zip(mine, theirs):
        _assert_same(item, expected_item)


def _calls(module, compiled: bool, count: int = 5) -> list:
    FORWARD_RUNS[0] = 0
    onnxnn.manual_seed(0)
    x = onnxnn.randn(4, 8)
    if compiled:
        module = onnxnn.compile(module)
    with onnxnn.no_grad():
        return [_layout(module(x)) for _ in range(count)]


@pytest.mark.parametrize("container", CONTAINERS)
def test_a_compiled_call_returns_its_container_around_the_prepared_runs_results(container):
    onnxnn.manual_seed(0)
    model = _Returning(container).eval()
    compiled_calls.reset_counts()
    results = _calls(model, compiled=True)
    assert compiled_calls.compiled_info()["prepared"] >= 2
    assert FORWARD_RUNS[0] == 2  # noted at its first call, traced at its second
    with onnxnn.set_fast_path(False):
        expected = _calls(model, compiled=False)
    for result in results[1:]:  # the first ran on the kernels, as the plain call's first did
        _assert_same(result, expected[-1])


@pytest.mark.parametrize("container", CONTAINERS)
def test_a_replayed_forward_returns_its_container(container):
    onnxnn.manual_seed(0)
    model = _OnnxnnReturning(container).eval()
    results = _calls(model, compiled=False)
    assert forward_replay.replay_info() == {"traced": 1, "replayed": 3}
    assert FORWARD_RUNS[0] == 2
    with onnxnn.set_fast_path(False):
        expected = _calls(model, compiled=False)
    for result in results[1:]:
        _assert_same(result, expected[-1])


@pytest.mark.parametrize("container", NOT_MADE_AGAIN)
@pytest.mark.parametrize("compiled", [False, True], ids=["replay", "compiled"])
def test_a_container_its_constructor_would_not_make_again_keeps_the_forward_running(container, compiled):
    onnxnn.manual_seed(0)
    model = _OnnxnnReturning(container).eval()
    compiled_calls.reset_counts()
    results = _calls(model, compiled=compiled)
    assert FORWARD_RUNS[0] == 5
    assert compiled_calls.compiled_info() == {"computed": 0, "prepared": 0}
    with onnxnn.set_fast_path(False):
        expected = _calls(model, compiled=False)
    kind = _Stamped if container == "keeps attributes" else _Renaming
    for result in results[1:]:
        assert result[0] is kind
        _assert_same(result, expected[-1])
