"""Node attributes: shared, frozen attribute dicts key the caches exactly as plain dicts do.

Call sites that record the same attributes call after call (``F.linear``'s ``transB``, a layer's
convolution geometry, a Transpose's permutation) share one ``FrozenAttributes``; nodes recorded
with it must get the signature a plain dict gives, and it must never change.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.ir.graph import FrozenAttributes, Node, shared_attributes

ATTRIBUTE_SETS = {
    "ints": {"perm": [0, 2, 1, 3]},
    "several, unordered": {"strides": [1, 1], "pads": [1, 1, 1, 1], "group": 1, "kernel_shape": [3, 3]},
    "float and string": {"epsilon": 1e-5, "mode": "constant"},
    "nested": {"values": [[1, 2], [3]]},
}


@pytest.mark.parametrize("name", list(ATTRIBUTE_SETS))
def test_frozen_attributes_give_the_signature_of_the_plain_dict(name):
    plain = ATTRIBUTE_SETS[name]
    frozen = FrozenAttributes(plain)
    assert Node("Op", "", (), frozen, 1).signature == Node("Op", "", (), dict(plain), 1).signature
    assert dict(frozen) == plain


def test_shared_attributes_are_one_object_per_content_and_store_lists():
    first = shared_attributes((("perm", (1, 0)),))
    assert first is shared_attributes((("perm", (1, 0)),))
    assert first["perm"] == [1, 0] and first is not shared_attributes((("perm", (0, 1)),))


@pytest.mark.parametrize(
    "change",
    [
        lambda attrs: attrs.__setitem__("axis", 1),
        lambda attrs: attrs.__delitem__("axis"),
        lambda attrs: attrs.update(axis=2),
        lambda attrs: attrs.pop("axis"),
        lambda attrs: attrs.clear(),
        lambda attrs: attrs.setdefault("other", 1),
    ],
)
def test_frozen_attributes_refuse_every_change(change):
    attrs = FrozenAttributes(axis=0)
    with pytest.raises(TypeError, match="node attributes are immutable"):
        change(attrs)
    assert attrs == {"axis": 0}


def test_frozen_attributes_survive_pickle_and_copies():
    attrs = FrozenAttributes(perm=[1, 0])
    for restored in (pickle.loads(pickle.dumps(attrs)), copy.deepcopy(attrs), copy.copy(attrs)):
        assert type(restored) is FrozenAttributes and restored == attrs and restored.frozen == attrs.frozen


def test_a_convolution_checks_each_call_after_a_good_one():
    conv = nn.Conv2d(3, 4, 3)
    conv(onnxnn.randn(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match="to have 3 channels, but got 2 channels instead"):
        conv(onnxnn.randn(1, 2, 5, 5))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        conv(onnxnn.randn(1, 3, 2, 2))


def test_a_convolution_with_list_hyperparameters_is_computed_each_call():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 2, 6, 6)), rng.standard_normal((3, 2, 3, 3))
    first = F.conv2d(onnxnn.tensor(x), onnxnn.tensor(w), stride=[2, 1], padding=[1, 0]).numpy()
    second = F.conv2d(onnxnn.tensor(x), onnxnn.tensor(w), stride=(2, 1), padding=(1, 0)).numpy()
    np.testing.assert_array_equal(first, second)
    assert first.shape == (1, 3, 3, 4)


@pytest.mark.parametrize("attributes", [{"alpha": 0.0}, {"values": [1.0, 0.0]}], ids=["float", "floats"])
def test_negative_zero_attributes_key_apart_from_positive_zero(attributes):
    def negated(value):
        return [-item for item in value] if type(value) is list else -value

    negative = {name: negated(value) for name, value in attributes.items()}
    assert Node("Op", "", (), attributes, 1).signature != Node("Op", "", (), negative, 1).signature
    items = tuple((name, tuple(value) if type(value) is list else value) for name, value in attributes.items())
    negative_items = tuple((name, tuple(value) if type(value) is list else value) for name, value in negative.items())
    assert shared_attributes(negative_items).frozen != shared_attributes(items).frozen


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
@pytest.mark.parametrize("activation", ["leaky_relu", "elu"])
def test_a_negative_zero_slope_after_a_positive_one_gives_its_own_result(executor, activation):
    x = np.array([-1.0, 2.0], np.float32)
    slope = {"leaky_relu": lambda s: x * s, "elu": lambda s: s * np.expm1(x)}[activation]
    function = getattr(F, activation)
    with onnxnn.set_executor(executor):
        for sign in (0.0, -0.0, 0.0):
            result = function(onnxnn.from_numpy(x), sign).numpy()
            expected = np.where(x > 0, x, slope(sign)).astype(np.float32)
            np.testing.assert_array_equal(np.signbit(result), np.signbit(expected))
