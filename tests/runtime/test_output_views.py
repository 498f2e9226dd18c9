"""Graph outputs that reshape a computed value leave onnxnn's sessions as that value (runtime/output_views.py).

The specification: a session's results are what onnxruntime computes for the model as built,
shapes and values; where an output is a reshape (Reshape, Flatten, Squeeze, Unsqueeze) of a
value the graph computes, the session's model outputs that value instead (no copy into an
output buffer) and drops the reshape and its shape initializer when nothing else, a subgraph
included, reads it. Reshapes of graph inputs
or initializers, of values that leave the graph already, and outputs without a static shape stay.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn.runtime.output_views import move_reshapes_out
from onnxnn.runtime.sessions import CompiledSession


def _model(nodes, outputs, initializers=(), input_shape=(2, 3, 4)):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in outputs],
        initializer=list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _shape(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _onnxruntime(model, x):
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})


def _branch(name):
    """An If branch that reads the outer graph's shape constant ``s`` (outer-scope names are implicit inputs)."""
    nodes = [helper.make_node("Cast", ["s"], [f"{name}_cast"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", [f"{name}_cast"], [f"{name}_out"], keepdims=1)]  # fmt: skip
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [1])])


# name: (nodes, outputs as (name, shape or None), initializers, how many outputs move)
CASES = {
    "reshape of a computed value": (
        [helper.make_node("Relu", ["X"], ["R"]), helper.make_node("Reshape", ["R", "s"], ["Y"])],
        [("Y", [6, 4])],
        [_shape("s", [6, 4])],
        1,
    ),
    "flatten": (
        [helper.make_node("Neg", ["X"], ["N"]), helper.make_node("Flatten", ["N"], ["Y"], axis=2)],
        [("Y", [6, 4])],
        [],
        1,
    ),
    "unsqueeze then squeeze": (
        [
            helper.make_node("Abs", ["X"], ["A"]),
            helper.make_node("Unsqueeze", ["A", "axes"], ["U"]),
            helper.make_node("Squeeze", ["U", "axes"], ["Y"]),
        ],
        [("Y", [2, 3, 4])],
        [_shape("axes", [0])],
        1,
    ),
    "a reshape that another node also reads": (
        [
            helper.make_node("Relu", ["X"], ["R"]),
            helper.make_node("Reshape", ["R", "s"], ["Y"]),
            helper.make_node("Neg", ["Y"], ["Z"]),
        ],
        [("Y", [24]), ("Z", [24])],
        [_shape("s", [24])],
        1,
    ),
    "two reshapes of one value": (
        [
            helper.make_node("Relu", ["X"], ["R"]),
            helper.make_node("Reshape", ["R", "s"], ["Y"]),
            helper.make_node("Flatten", ["R"], ["W"], axis=1),
        ],
        [("Y", [24]), ("W", [2, 12])],
        [_shape("s", [24])],
        1,
    ),
    "a reshape of a value that leaves already": (
        [helper.make_node("Relu", ["X"], ["R"]), helper.make_node("Reshape", ["R", "s"], ["Y"])],
        [("R", [2, 3, 4]), ("Y", [24])],
        [_shape("s", [24])],
        0,
    ),
    "a branch reads the reshape's shape": (
        [
            helper.make_node("Relu", ["X"], ["R"]),
            helper.make_node("Reshape", ["R", "s"], ["Y"]),
            helper.make_node("If", ["cond"], ["Z"], then_branch=_branch("then"), else_branch=_branch("else")),
        ],
        [("Y", [24]), ("Z", [1])],
        [_shape("s", [24]), numpy_helper.from_array(np.array(True), "cond")],
        1,
    ),
    "a reshape of the graph input": (
        [helper.make_node("Reshape", ["X", "s"], ["Y"])],
        [("Y", [24])],
        [_shape("s", [24])],
        0,
    ),
    "a reshape of an initializer": (
        [helper.make_node("Reshape", ["c", "s"], ["Y"])],
        [("Y", [4])],
        [numpy_helper.from_array(np.arange(4, dtype=np.float32).reshape(2, 2), "c"), _shape("s", [4])],
        0,
    ),
    "an output without a static shape": (
        [helper.make_node("Relu", ["X"], ["R"]), helper.make_node("Reshape", ["R", "s"], ["Y"])],
        [("Y", None)],
        [_shape("s", [24])],
        0,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_session_returns_what_onnxruntime_computes_for_the_model_as_built(case):
    nodes, outputs, initializers, moved = CASES[case]
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    expected = _onnxruntime(_model(nodes, outputs, initializers), x)
    session = CompiledSession(_model(nodes, outputs, initializers), onnxnn.device("cpu"))
    assert len(session.output_views) == moved
    for result, reference in zip(session([x]), expected):
        assert result.shape == reference.shape and result.dtype == reference.dtype
        np.testing.assert_array_equal(result, reference)


def test_the_model_outputs_the_value_and_drops_the_reshape_and_its_shape():
    nodes, outputs, initializers, _ = CASES["reshape of a computed value"]
    model = _model(nodes, outputs, initializers)
    assert move_reshapes_out(model) == [(0, (6, 4))]
    assert [output.name for output in model.graph.output] == ["R"]
    assert [node.op_type for node in model.graph.node] == ["Relu"]
    assert list(model.graph.initializer) == []
    assert not model.graph.output[0].type.tensor_type.HasField("shape")  # the value's own, unknown here


def test_a_weight_gradient_that_ends_in_a_reshape_keeps_its_values():
    # ConvWeightGradient's one-MatMul form (few window rows) ends in a Reshape to (M, C, kh, kw).
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 16, 2, 2)).astype(np.float32)
    weight = onnxnn.tensor(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), requires_grad=True)
    with onnxnn.set_executor("onnxruntime"):
        onnxnn.nn.functional.conv2d(onnxnn.tensor(x), weight, padding=1).sum().backward()
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    expected = np.stack(
        [np.stack([padded[0, :, i : i + 2, j : j + 2].sum(axis=(1, 2)) for j in range(3)], -1) for i in range(3)], -2
    )
    np.testing.assert_allclose(weight.grad.numpy(), np.broadcast_to(expected, (32, 16, 3, 3)), rtol=1e-5, atol=1e-5)
