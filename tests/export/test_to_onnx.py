"""to_onnx: exported graphs run in plain onnxruntime with the module's outputs and names."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
from layer_chains import assert_same_model_output, chain_steps, relu_step
from tolerances import assert_close_to_matmul
from onnx import TensorProto, helper

import onnxnn
from onnxnn import nn
from onnxnn.export import max_opset_version, to_onnx
from onnxnn.import_ import from_onnx


class FlattenNet(nn.Module):
    """Shape-dependent Python (x.view(x.size(0), -1)) that must not bake the traced batch in."""

    def __init__(self):
        super().__init__()
        self.features = nn.Linear(4, 6)
        self.norm = nn.BatchNorm1d(18)
        self.head = nn.Linear(18, 2)

    def forward(self, x):
        hidden = self.features(x).relu()
        return self.head(self.norm(hidden.view(x.size(0), -1)))

    def chain_steps(self, shape):
        return (
            chain_steps(self.features)
            + [relu_step(), ("reshape", (shape[0], -1))]
            + chain_steps(self.norm)
            + chain_steps(self.head)
        )


def _session(proto):
    return onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


MODELS = [
    ("mlp", lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), (5, 4)),
    ("flatten_batchnorm", FlattenNet, (5, 3, 4)),
    ("dropout_in_eval", lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Tanh()), (2, 4)),
]


@pytest.mark.parametrize("name, build, shape", MODELS, ids=[m[0] for m in MODELS])
def test_exported_model_matches_the_module_in_onnxruntime(name, build, shape):
    model = build().eval()
    x = onnxnn.randn(*shape)
    proto = to_onnx(model, x, input_names=["x"], output_names=["y"])
    onnx.checker.check_model(proto, full_check=True)
    names = [init.name for init in proto.graph.initializer]
    state = model.state_dict()
    # Initializers are named by state_dict keys, in state_dict order; every parameter is used here
    # (an unused buffer such as num_batches_tracked in eval mode is left out, as PyTorch does).
    assert [n for n in names if n in state] == [k for k in state if k in names]
    assert {k for k, _ in model.named_parameters()} <= set(names)
    for init in proto.graph.initializer:
        if init.name in state:
            np.testing.assert_array_equal(onnx.numpy_helper.to_array(init), state[init.name].numpy())
    (result,) = _session(proto).run(None, {"x": x.numpy()})
    assert_same_model_output(result, model, x)


@pytest.mark.parametrize("name, build, shape", MODELS, ids=[m[0] for m in MODELS])
def test_dynamic_batch_axis_runs_at_other_sizes(name, build, shape):
    model = build().eval()
    proto = to_onnx(
        model,
        onnxnn.randn(*shape),
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
    )
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    session = _session(proto)
    for batch in (1, 3, 11):
        x = onnxnn.randn(batch, *shape[1:])
        (result,) = session.run(None, {"x": x.numpy()})
        assert_same_model_output(result, model, x)


class _Function(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


class _Recurrent(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.layer = kind(3, 4, batch_first=True)

    def forward(self, x):
        return self.layer(x)[0]  # no initial state: zeros of the batch's size


# Shapes that follow one of two independent dynamic axes, or their product: each size grows by
# its own amount in the export's traces, so a size following T is not taken for one following B.
# The last entry: rounded operations each output accumulates (0: data moved, compared exactly).
TWO_AXES_MODELS = [
    ("drop-last-step", lambda: _Function(lambda x: x[:, :-1]), (2, 6, 3), 0),
    ("batch-times-length", lambda: _Function(lambda x: x.reshape(x.shape[0] * x.shape[1], -1) * 2), (2, 5, 3), 0),
    ("roll-along-length", lambda: _Function(lambda x: onnxnn.roll(x, 2, 1)), (2, 6, 3), 0),
    # Nine steps of 4 gates over 3 + 4 inputs, through sigmoid and tanh.
    ("lstm-without-state", lambda: _Recurrent(nn.LSTM), (2, 5, 3), 9 * 16),
    ("gru-without-state", lambda: _Recurrent(nn.GRU), (2, 5, 3), 9 * 16),
    # Attention over 9 positions of width 8, a 16-wide feed-forward and two layer norms.
    ("transformer-layer", lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), (2, 5, 8), 128),
]


@pytest.mark.parametrize("name, build, shape, operations", TWO_AXES_MODELS, ids=[m[0] for m in TWO_AXES_MODELS])
def test_dynamic_batch_and_length_axes_run_at_other_sizes(name, build, shape, operations):
    onnxnn.manual_seed(0)
    model = build().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no constant baked in from a traced size
        proto = to_onnx(
            model, onnxnn.randn(*shape), input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b", 1: "t"}}
        )
    session = _session(proto)
    for batch, length in ((3, shape[1]), (shape[0], 9), (4, 7), (1, 2)):
        x = onnxnn.randn(batch, length, *shape[2:])
        (result,) = session.run(None, {"x": x.numpy()})
        expected = model(x).detach().numpy()
        assert result.shape == expected.shape
        bound = 2 * operations * 2.0**-24 * max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(result, expected, rtol=0, atol=bound)


class _ClassToken(nn.Module):
    """A ViT's class token: ``expand`` to the batch records no node when the batch is 1."""

    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(onnxnn.randn(1, 1, 4))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(onnxnn.cat([self.token.expand(x.shape[0], -1, -1), x], 1))


def test_an_example_of_batch_1_exports_the_graph_every_batch_shares():
    # Traced at 1, broadcasting and same-shape expands need no node; to_onnx traces dynamic axes
    # of size 0 or 1 at size 2 instead, so the export neither refuses nor specializes.
    model = _ClassToken().eval()
    proto = to_onnx(
        model,
        onnxnn.randn(1, 3, 4),
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
    )
    session = _session(proto)
    token, weight, bias = (p.detach().numpy() for p in (model.token, model.proj.weight, model.proj.bias))
    for batch in (1, 2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
        (result,) = session.run(None, {"x": x})
        rows = np.concatenate([np.broadcast_to(token, (batch, 1, 4)), x], 1)
        assert_close_to_matmul(result, rows, weight.T, bias)


@pytest.mark.parametrize("opset", [17, 18, 21, max_opset_version()])
def test_every_supported_opset_exports_and_runs(opset):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).eval()
    x = onnxnn.randn(2, 3)
    proto = to_onnx(model, x, opset_version=opset)
    assert next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")) == opset
    (result,) = _session(proto).run(None, {"input_0": x.numpy()})
    assert_same_model_output(result, model, x)


def test_writes_to_paths_and_file_objects(tmp_path):
    model = nn.Linear(3, 2).eval()
    x = onnxnn.randn(1, 3)
    proto = to_onnx(model, x, tmp_path / "model.onnx")
    assert onnx.load(str(tmp_path / "model.onnx")) == proto
    buffer = io.BytesIO()
    to_onnx(model, x, buffer)
    assert onnx.load_from_string(buffer.getvalue()) == proto


def test_external_data_above_a_threshold(tmp_path):
    model = nn.Linear(64, 64).eval()
    path = tmp_path / "big.onnx"
    proto = to_onnx(model, onnxnn.randn(1, 64), path, external_data=1024)
    assert (tmp_path / "big.onnx.data").exists()
    assert path.stat().st_size < 4096, "weights live in the external file"
    loaded = onnx.load(str(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = onnxnn.randn(1, 64)
    assert_same_model_output(session.run(None, {"input_0": x.numpy()})[0], model, x)
    assert len(proto.graph.initializer) == len(loaded.graph.initializer)


def test_training_mode_export_warns_and_keeps_the_mode():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with pytest.warns(UserWarning, match="training mode"):
        to_onnx(model, onnxnn.randn(4, 3))
    assert model.training
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_onnx(model.eval(), onnxnn.randn(4, 3))


def test_multiple_inputs_and_outputs_keep_their_names_and_order():
    class TwoWay(nn.Module):
        def forward(self, a, b):
            return a + b, a * b

    a, b = onnxnn.randn(2, 3), onnxnn.randn(2, 3)
    proto = to_onnx(TwoWay().eval(), (a, b), input_names=["a", "b"], output_names=["sum", "product"])
    assert [i.name for i in proto.graph.input] == ["a", "b"]
    assert [o.name for o in proto.graph.output] == ["sum", "product"]
    total, product = _session(proto).run(None, {"a": a.numpy(), "b": b.numpy()})
    # One correctly rounded float32 operation each: the same bits in every order.
    np.testing.assert_array_equal(total, a.numpy() + b.numpy())
    np.testing.assert_array_equal(product, a.numpy() * b.numpy())


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"opset_version": 12}, ValueError, "opset_version 12 is not supported"),
        ({"opset_version": 99}, ValueError, "opset_version 99 is not supported"),
        ({"input_names": ["a", "b"]}, ValueError, "2 input_names given for 1 inputs"),
        ({"dynamic_axes": {"nope": [0]}}, ValueError, "dynamic_axes names 'nope'"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        to_onnx(nn.Linear(2, 2).eval(), onnxnn.randn(1, 2), **kwargs)


def test_a_non_tensor_argument_is_a_type_error():
    with pytest.raises(TypeError, match="argument 0 must be a Tensor"):
        to_onnx(nn.Linear(2, 2).eval(), "not a tensor")


def test_state_named_like_generated_names_re_exports():
    """Optimized models name folded weights like onnxnn's generated names ("node_0_0",
    "onnxnn::constant_0"); re-exporting the imported module must keep the graph SSA."""
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "node_0_0"], ["a"]),
            helper.make_node("Mul", ["a", "onnxnn::constant_0"], ["b"]),
            helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.FLOAT, [2], [3.0, 4.0])),
            helper.make_node("Add", ["b", "c"], ["y"]),
        ],
        "names",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [
            helper.make_tensor("node_0_0", TensorProto.FLOAT, [2], [1.0, 2.0]),
            helper.make_tensor("onnxnn::constant_0", TensorProto.FLOAT, [2], [5.0, 6.0]),
        ],
    )
    module = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])).eval()
    x = np.array([0.5, -1.0], np.float32)
    proto = to_onnx(module, onnxnn.tensor(x), input_names=["x"])
    assert {"node_0_0", "onnxnn::constant_0"} <= {tensor.name for tensor in proto.graph.initializer}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], (x + [1.0, 2.0]) * [5.0, 6.0] + [3.0, 4.0])
