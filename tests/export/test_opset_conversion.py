"""Exporting at every supported opset: ops onnx's version converter cannot adapt are carried across.

onnx's converter has no adapter taking ``Pad`` or ``Split`` below opset 18; a ``Pad`` without
``axes`` means the same from opset 11 on, a ``Split`` given its sizes from 13, so models with them
export at every opset onnxnn supports. Ops newer than the opset (Gelu, Mish) are written as their
definitions; others are refused naming the opset they need. ``ConstantOfShape`` (no adapter below
opset 20, which only added element types) is carried across too; an op the converter cannot adapt
is refused naming it and the opset.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx, training_step_to_onnx
from onnxnn.export.onnx_export import MIN_OPSET_VERSION
from onnxnn.import_ import from_onnx
from onnxnn.ir.plan import OPSET_VERSION


class _Padded(nn.Module):
    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        return F.pad(x, (1, 2, 2, 1), mode=self.mode) * 2.0


MODELS = {
    "constant_pad": lambda: _Padded("constant"),
    "reflect_pad": lambda: _Padded("reflect"),
    "replicate_pad": lambda: _Padded("replicate"),
    "conv_reflect": lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
    "conv_replicate": lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate"),
    "avg_pool_padded": lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
}


@pytest.mark.parametrize("opset", range(MIN_OPSET_VERSION, OPSET_VERSION + 1))
@pytest.mark.parametrize("name", MODELS)
def test_padding_models_export_at_every_opset(name, opset):
    model = MODELS[name]().eval()
    x = onnxnn.randn(2, 3, 6, 7)
    proto = to_onnx(model, x, input_names=["x"], opset_version=opset)
    assert {(entry.domain, entry.version) for entry in proto.opset_import} == {("", opset)}
    assert all(node.domain == "" for node in proto.graph.node)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    with onnxnn.no_grad():
        expected = model(x).numpy()
    # The same float32 ops in the same order on both sides: equal up to a few roundings of the conv's sums.
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], expected, rtol=1e-5, atol=1e-6)


def test_a_training_step_with_padding_exports_at_the_lowest_opset():
    onnxnn.manual_seed(0)
    model = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
    x, target = onnxnn.randn(2, 2, 5, 5), onnxnn.randn(2, 3, 5, 5)
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    proto, signature = training_step_to_onnx(model, F.mse_loss, optimizer, (x, target), opset_version=MIN_OPSET_VERSION)
    assert {(entry.domain, entry.version) for entry in proto.opset_import} == {("", MIN_OPSET_VERSION)}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {**signature.initial_state, **dict(zip(signature.batch, (x.numpy(), target.numpy())))}
    outputs = dict(zip([output.name for output in session.get_outputs()], session.run(None, feeds)))
    loss = F.mse_loss(model(x), target)
    # A mean of 150 squared float32 differences: within a few hundred roundings of the value.
    np.testing.assert_allclose(outputs[signature.loss], loss.item(), rtol=1e-5)


class _Activation(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


# Ops newer than the target opset are written with the ops that define them.
NEWER_OPS = {
    "gelu": lambda: _Activation(F.gelu),
    "gelu_tanh": lambda: _Activation(lambda x: F.gelu(x, approximate="tanh")),
    "mish": lambda: _Activation(F.mish),
    "split": lambda: _Activation(lambda x: onnxnn.cat(onnxnn.split(x, 2, dim=-1)[::-1], -1) * 2.0),
    "transformer_layer_gelu": lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu"),
}


@pytest.mark.parametrize("opset", [MIN_OPSET_VERSION, 18, 19])
@pytest.mark.parametrize("name", NEWER_OPS)
def test_ops_newer_than_the_opset_export_as_their_definitions(name, opset):
    onnxnn.manual_seed(0)
    model = NEWER_OPS[name]().eval()
    for dtype, tolerance in ((onnxnn.float32, 1e-5), (onnxnn.float64, 1e-12)):
        model = model.to(dtype)
        x = onnxnn.randn(3, 4, 8, dtype=dtype) * 3
        proto = to_onnx(model, x, input_names=["x"], opset_version=opset)
        assert {(entry.domain, entry.version) for entry in proto.opset_import} == {("", opset)}
        session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        with onnxnn.no_grad():
            expected = model(x).numpy()
        # erf, tanh and softplus within a few ulps of onnxnn's fused forms, through a few products.
        np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], expected, rtol=tolerance, atol=tolerance)


def test_an_op_the_opset_lacks_and_nothing_defines_is_refused_naming_the_opset_it_needs():
    model = _Activation(lambda x: x & 7)
    with pytest.raises(ValueError, match="BitwiseAnd, which needs opset_version 18 or newer"):
        to_onnx(model, onnxnn.arange(6), opset_version=17)


def _zeros_of_the_batch_model() -> onnx.ModelProto:
    """``x + torch.zeros(x.shape[0], 3)`` as torch.onnx.export writes it (every LSTM's, GRU's and
    TransformerEncoderLayer's initial state is such a ConstantOfShape)."""

    def constant(name: str, dims: list, values: list) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, dims, values))

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        constant("first", [], [0]),
        helper.make_node("Gather", ["shape", "first"], ["batch"], axis=0),
        constant("zero", [1], [0]),
        helper.make_node("Unsqueeze", ["batch", "zero"], ["batch_1d"]),
        constant("three", [1], [3]),
        helper.make_node("Concat", ["batch_1d", "three"], ["zeros_shape"], axis=0),
        helper.make_node(
            "ConstantOfShape",
            ["zeros_shape"],
            ["zeros"],
            value=helper.make_tensor("value", TensorProto.FLOAT, [1], [0.0]),
        ),
        helper.make_node("Add", ["x", "zeros"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "zeros_of_the_batch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("opset", range(MIN_OPSET_VERSION, OPSET_VERSION + 1))
def test_constant_of_shape_is_carried_to_every_opset(opset):
    # ConstantOfShape has no adapter below opset 20; a float value means the same from opset 9 on.
    model = from_onnx(_zeros_of_the_batch_model()).eval()
    proto = to_onnx(model, onnxnn.randn(2, 3), input_names=["x"], opset_version=opset)
    assert {(entry.domain, entry.version) for entry in proto.opset_import} == {("", opset)}
    assert "ConstantOfShape" in [node.op_type for node in proto.graph.node]
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], x)  # x + 0 is x exactly


def test_an_op_without_an_adapter_is_refused_naming_it_and_the_opset():
    # GridSample-20 renamed its modes and took N-D grids; onnx's converter cannot take it lower.
    model = _Activation(lambda x: F.grid_sample(x, x.permute(0, 2, 3, 1)[..., :2].tanh(), align_corners=False))
    with pytest.raises(
        ValueError, match="uses GridSample, which onnx's version converter cannot write at opset_version 19"
    ):
        to_onnx(model.eval(), onnxnn.randn(1, 2, 3, 3), opset_version=19)
