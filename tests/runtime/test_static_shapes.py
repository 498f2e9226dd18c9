"""Shape reads of a static graph folded into constants (runtime/static_shapes.py): each constant is
what onnxruntime's Shape or Size node computes, and a read whose shape is not known stays a node."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

from onnxnn.runtime.static_shapes import fold_static_shapes, has_static_inputs

# (op, attributes): every way ONNX's Shape slices (negative and out-of-range bounds clamp), and Size.
READS = [
    ("Shape", {}),
    ("Shape", {"start": 1, "end": 3}),
    ("Shape", {"start": -2}),
    ("Shape", {"end": -1}),
    ("Shape", {"start": 7}),
    ("Shape", {"start": -9, "end": 2}),
    ("Size", {}),
]


def _model(op: str, attributes: dict, batch) -> tuple:
    """Relu(x) read by ``op``; the read's result is doubled, so it is no graph output itself."""
    nodes = [
        helper.make_node("Relu", ["x"], ["y"]),
        helper.make_node(op, ["y"], ["read"], **attributes),
        helper.make_node("Add", ["read", "read"], ["doubled"]),
    ]
    graph = helper.make_graph(
        nodes,
        "read",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4, 5])],
        [helper.make_tensor_value_info("doubled", TensorProto.INT64, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _run(model) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.ones((2, 3, 4, 5), np.float32)})[0]


@pytest.mark.parametrize("op, attributes", READS, ids=[f"{op}{attributes}" for op, attributes in READS])
def test_a_read_of_a_known_shape_becomes_the_constant_onnxruntime_computes(op, attributes):
    model = _model(op, attributes, 2)
    folded = fold_static_shapes(model)
    assert [node.op_type for node in folded.graph.node] == ["Relu", "Add"]
    computed = _run(model)
    result = _run(folded)
    assert result.dtype == computed.dtype and result.shape == computed.shape
    np.testing.assert_array_equal(result, computed)


def test_a_read_of_a_shape_made_from_other_reads_is_folded_too():
    # Reshape(x, Concat(Shape(x)[:1], [-1])): the reshaped shape is known only by propagating the
    # values of the shape reads through Concat (the lowerings' pattern).
    nodes = [
        helper.make_node("Shape", ["x"], ["batch"], end=1),
        helper.make_node("Concat", ["batch", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Shape", ["flat"], ["read"]),
        helper.make_node("Add", ["read", "read"], ["doubled"]),
    ]
    graph = helper.make_graph(
        nodes,
        "flatten",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [helper.make_tensor_value_info("doubled", TensorProto.INT64, None)],
        [helper.make_tensor("rest", TensorProto.INT64, [1], [-1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    folded = fold_static_shapes(model)
    assert [node.op_type for node in folded.graph.node] == ["Concat", "Reshape", "Add"]
    np.testing.assert_array_equal(_run(folded), _run(model))


def test_a_graph_with_a_symbolic_input_is_not_static():
    assert has_static_inputs(_model("Size", {}, 2))
    assert not has_static_inputs(_model("Size", {}, "batch"))


def test_a_read_of_a_shape_inference_cannot_know_stays():
    # NonZero's count depends on the data: the Shape read of its result stays a node.
    nodes = [
        helper.make_node("NonZero", ["x"], ["where"]),
        helper.make_node("Shape", ["where"], ["extent"]),
        helper.make_node("Size", ["x"], ["size"]),
        helper.make_node("Add", ["size", "size"], ["count"]),
    ]
    graph = helper.make_graph(
        nodes,
        "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(name, TensorProto.INT64, None) for name in ("extent", "count")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    folded = fold_static_shapes(model)
    assert [node.op_type for node in folded.graph.node] == ["NonZero", "Shape", "Add"]  # Size of x is known
