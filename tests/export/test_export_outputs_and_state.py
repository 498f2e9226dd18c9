"""What an export writes for outputs no node computes and for state the forward shares or updates.

- An output that is an input or a state tensor itself (``nn.Identity``, an eval Dropout, a
  same-shape view, a returned parameter) is passed on by an Identity, never frozen as the example.
- Copies of a layer (``copy.deepcopy``, whose parameters share one immutable value) keep their own
  names in a training export; a tensor registered twice (tied weights) stays one initializer.
- A parameter or buffer the forward updates in place keeps its name (the value the graph read).
- ``Embedding(max_norm=...)`` renormalizes the rows the fed indices look up, not the example's.

Expected values come from numpy formulas and the graph's own inputs, run by plain onnxruntime.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx
from onnxnn.runtime.internal import value_of


def _run(proto, feeds: dict) -> list:
    return onnxruntime.InferenceSession(proto.SerializeToString()).run(None, feeds)


class _TwoOutputs(nn.Module):
    def forward(self, x, y):
        return x, y * 2


class _ReturnsItsWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(onnxnn.full((3,), 2.0))

    def forward(self, x):
        return x * self.w, self.w


# (name, module, example arguments, dynamic axes, fed arrays, expected outputs of the fed arrays)
ONES, TWOS = np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)
PASSED_ON = [
    ("identity", nn.Identity(), (onnxnn.zeros(2, 3),), None, [ONES], lambda x: [x]),
    (
        "one output of two",
        _TwoOutputs(),
        (onnxnn.zeros(2, 3), onnxnn.zeros(2, 3)),
        None,
        [ONES, TWOS],
        lambda x, y: [x, 2 * y],
    ),
    (
        "eval dropouts, dynamic batch",
        nn.Sequential(nn.Dropout(0.5), nn.AlphaDropout(0.3), nn.Dropout2d(0.5)).eval(),
        (onnxnn.zeros(4, 3, 5, 2),),
        {"input_0": {0: "batch"}},
        [np.arange(60, dtype=np.float32).reshape(2, 3, 5, 2)],
        lambda x: [x],
    ),
    ("same-shape view", nn.Flatten(1), (onnxnn.zeros(2, 3),), None, [ONES], lambda x: [x]),
    (
        "a returned parameter",
        _ReturnsItsWeight(),
        (onnxnn.zeros(2, 3),),
        None,
        [ONES],
        lambda x: [2 * x, np.full(3, 2.0)],
    ),
]


@pytest.mark.parametrize(
    "module,arguments,dynamic_axes,fed,expected", [case[1:] for case in PASSED_ON], ids=[case[0] for case in PASSED_ON]
)
def test_an_output_no_node_computes_is_passed_on(module, arguments, dynamic_axes, fed, expected):
    names = [f"input_{index}" for index in range(len(arguments))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "input read by no node" warning either
        proto = to_onnx(module.eval(), arguments, input_names=names, dynamic_axes=dynamic_axes)
    results = _run(proto, dict(zip(names, fed)))
    for result, want in zip(results, expected(*fed)):
        np.testing.assert_array_equal(result, want)
    imported = from_onnx(proto)
    outputs = imported(*[onnxnn.tensor(array) for array in fed])
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for result, want in zip(outputs, expected(*fed)):
        np.testing.assert_array_equal(result.detach().numpy(), want)


def test_copies_of_a_layer_keep_their_own_names_in_a_training_export():
    layer = nn.Linear(3, 3)
    model = nn.Sequential(layer, nn.Tanh(), copy.deepcopy(layer))
    assert value_of(model[0].weight) is value_of(model[2].weight)  # the premise: one shared value
    proto = to_onnx(model, onnxnn.randn(2, 3), training=True)
    assert [initializer.name for initializer in proto.graph.initializer] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    imported = from_onnx(proto)
    with onnxnn.no_grad():
        imported.get_parameter("2.weight").zero_()
    assert imported.get_parameter("0.weight").abs().sum().item() > 0  # untied in the imported model
    assert value_of(model[0].weight) is value_of(model[2].weight)  # the export left the model as it was
    assert model.training


def test_a_weight_registered_twice_stays_one_initializer():
    embedding, output = nn.Embedding(5, 3), nn.Linear(3, 5, bias=False)
    output.weight = embedding.weight
    proto = to_onnx(nn.Sequential(embedding, output), onnxnn.tensor([[1, 2]]), training=True)
    assert [initializer.name for initializer in proto.graph.initializer] == ["0.weight"]


class _ClampsItsState(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(onnxnn.full((3,), 2.0))
        self.register_buffer("scale", onnxnn.full((3,), 3.0))

    def forward(self, x):
        y = x * self.w * self.scale
        with onnxnn.no_grad():
            self.w.clamp_(max=0.5)
            self.scale.mul_(0.5)
        return y + self.w


def test_state_the_forward_updates_in_place_keeps_its_name():
    model = _ClampsItsState()
    proto = to_onnx(model.eval(), onnxnn.zeros(2, 3), input_names=["x"])
    assert {"w", "scale"} <= {initializer.name for initializer in proto.graph.initializer}
    (result,) = _run(proto, {"x": ONES})
    np.testing.assert_array_equal(result, np.full((2, 3), 1 * 2.0 * 3.0 + 0.5, np.float32))
    assert {name for name, _ in from_onnx(proto).named_parameters()} >= {"w"}
    assert model.w.tolist() == [2.0, 2.0, 2.0] and model.scale.tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalizes_the_rows_fed_indices_look_up(norm_type):
    weight = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32) * 2
    embedding = nn.Embedding(10, 4, max_norm=1.0, norm_type=norm_type)
    with onnxnn.no_grad():
        embedding.weight.copy_(onnxnn.tensor(weight))
    proto = to_onnx(embedding.eval(), onnxnn.tensor([[1, 2, 3]]), dynamic_axes={"input_0": {1: "length"}})
    indices = np.array([[5, 6, 7, 5, 0]])
    (result,) = _run(proto, {"input_0": indices})
    rows = weight[indices[0]].astype(np.float64)
    norms = np.linalg.norm(rows, ord=norm_type, axis=1, keepdims=True)
    factors = np.where(norms > 1.0, 1.0 / (norms + 1e-7), 1.0).astype(np.float32)
    expected = (weight[indices[0]] * factors).astype(np.float32)
    # A norm of 4 float32 terms, then one product: a few float32 roundings.
    np.testing.assert_allclose(result[0], expected, rtol=4 * 2**-23, atol=0)
    np.testing.assert_array_equal(embedding.weight.detach().numpy(), weight)  # the export changed nothing


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_max_norm_renormalizes_the_rows_fed_indices_look_up(mode):
    weight = np.random.default_rng(1).standard_normal((10, 4)).astype(np.float32) * 2
    bags = nn.EmbeddingBag(10, 4, max_norm=1.0, mode=mode)
    with onnxnn.no_grad():
        bags.weight.copy_(onnxnn.tensor(weight))
    proto = to_onnx(bags.eval(), onnxnn.tensor([[1, 2, 3], [4, 4, 1]]))
    indices = np.array([[5, 6, 7], [0, 8, 9]])
    (result,) = _run(proto, {"input_0": indices})
    rows = weight[indices].astype(np.float64)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    renormed = (weight[indices] * np.where(norms > 1.0, 1.0 / (norms + 1e-7), 1.0).astype(np.float32)).astype(
        np.float32
    )
    expected = {"sum": renormed.sum(1), "mean": renormed.mean(1), "max": renormed.max(1)}[mode]
    np.testing.assert_allclose(result, expected, rtol=8 * 2**-23, atol=1e-6)  # 3-term sums of float32 rows
    np.testing.assert_array_equal(bags.weight.detach().numpy(), weight)
