"""Specification of importing ``ai.onnx.ml`` models (scikit-learn pipelines as skl2onnx writes them).

The models are built by hand with ``onnx.helper``; the expected outputs are onnxruntime's, running
the same model directly. ML nodes run in onnxruntime without gradients: they hold nothing to train,
and a backward through them raises naming the op and node.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn.import_ import from_onnx

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
ML = "ai.onnx.ml"
X = np.array([[0.2, -1.0, 3.0], [1.5, 0.4, -0.7], [-2.0, 2.5, 0.1], [0.9, 0.0, 1.0]], np.float32)


def ml_model(nodes, outputs, ml_opset=3, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "pipeline", [helper.make_tensor_value_info("x", FLOAT, [None, 3])], outputs, list(initializers)
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)], ir_version=8
    )


def linear_regressor():
    node = helper.make_node(
        "LinearRegressor",
        ["x"],
        ["y"],
        domain=ML,
        coefficients=[0.5, -1.0, 2.0, 1.0, 1.0, -3.0],
        intercepts=[0.25, -1.0],
        targets=2,
    )
    return ml_model([node], [helper.make_tensor_value_info("y", FLOAT, [None, 2])], ml_opset=1)


def scaler_normalizer_regressor():
    nodes = [
        helper.make_node("Scaler", ["x"], ["scaled"], domain=ML, offset=[0.1, -0.2, 0.3], scale=[2.0, 0.5, 1.5]),
        helper.make_node("Normalizer", ["scaled"], ["normal"], domain=ML, norm="L2"),
        helper.make_node(
            "LinearRegressor", ["normal"], ["y"], domain=ML, coefficients=[1.0, 2.0, 3.0], intercepts=[0.5]
        ),
    ]
    return ml_model(nodes, [helper.make_tensor_value_info("y", FLOAT, [None, 1])], ml_opset=1)


# Two trees of depth one on features 0 and 2: a leaf per side.
TREES = dict(
    nodes_treeids=[0, 0, 0, 1, 1, 1],
    nodes_nodeids=[0, 1, 2, 0, 1, 2],
    nodes_featureids=[0, 0, 0, 2, 0, 0],
    nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"] * 2,
    nodes_values=[0.5, 0.0, 0.0, 0.0, 0.0, 0.0],
    nodes_truenodeids=[1, 0, 0, 1, 0, 0],
    nodes_falsenodeids=[2, 0, 0, 2, 0, 0],
)


def tree_regressor():
    node = helper.make_node(
        "TreeEnsembleRegressor",
        ["x"],
        ["y"],
        domain=ML,
        n_targets=1,
        aggregate_function="SUM",
        target_treeids=[0, 0, 1, 1],
        target_nodeids=[1, 2, 1, 2],
        target_ids=[0, 0, 0, 0],
        target_weights=[1.5, -0.5, 0.25, 2.0],
        **TREES,
    )
    return ml_model([node], [helper.make_tensor_value_info("y", FLOAT, [None, 1])])


def tree_classifier_zipmap():
    tree = helper.make_node(
        "TreeEnsembleClassifier",
        ["x"],
        ["label", "probabilities"],
        domain=ML,
        class_treeids=[0, 0, 0, 0, 1, 1, 1, 1],
        class_nodeids=[1, 1, 2, 2, 1, 1, 2, 2],
        class_ids=[0, 1, 0, 1, 0, 1, 0, 1],
        class_weights=[0.8, 0.2, 0.3, 0.7, 0.6, 0.4, 0.1, 0.9],
        classlabels_int64s=[10, 20],
        post_transform="SOFTMAX",
        **TREES,
    )
    zipmap = helper.make_node(
        "ZipMap", ["probabilities"], ["output_probability"], domain=ML, classlabels_int64s=[10, 20]
    )
    map_type = helper.make_map_type_proto(INT64, helper.make_tensor_type_proto(FLOAT, []))
    return ml_model(
        [tree, zipmap],
        [
            helper.make_tensor_value_info("label", INT64, [None]),
            helper.make_value_info("output_probability", helper.make_sequence_type_proto(map_type)),
        ],
    )


MODELS = {
    "linear_regressor": linear_regressor,
    "scaler_normalizer_regressor": scaler_normalizer_regressor,
    "tree_regressor": tree_regressor,
    "tree_classifier_zipmap": tree_classifier_zipmap,
}


def onnxruntime_outputs(model: onnx.ModelProto, x: np.ndarray) -> list:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


@pytest.mark.parametrize("name", sorted(MODELS))
def test_ml_pipelines_load_and_forward_gives_onnxruntimes_result(name):
    model = MODELS[name]()
    expected = onnxruntime_outputs(model, X)
    module = from_onnx(model)
    outputs = module(X)
    outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        if isinstance(want, list):  # ZipMap: a list of {label: probability}
            assert got == want
        else:
            np.testing.assert_array_equal(got.numpy(), want)  # the same computation, so the same bits


@pytest.mark.parametrize("name", sorted(MODELS))
def test_ml_pipelines_hold_nothing_to_train(name):
    assert list(from_onnx(MODELS[name]()).parameters()) == []


def test_backward_through_an_ml_op_raises_naming_the_op_and_node():
    # A trainable MatMul feeding a LinearRegressor: its weight would silently get no gradient.
    weight = numpy_helper.from_array(np.eye(3, dtype=np.float32), "weight")
    nodes = [
        helper.make_node("MatMul", ["x", "weight"], ["h"]),
        helper.make_node("LinearRegressor", ["h"], ["y"], domain=ML, coefficients=[1.0, 2.0, 3.0], name="head"),
    ]
    model = ml_model(nodes, [helper.make_tensor_value_info("y", FLOAT, [None, 1])], ml_opset=1, initializers=[weight])
    module = from_onnx(model)
    assert [name for name, _ in module.named_parameters()] == ["weight"]
    y = module(X)
    np.testing.assert_array_equal(y.detach().numpy(), onnxruntime_outputs(model, X)[0])
    with pytest.raises(RuntimeError, match="LinearRegressor node 'head' \\(domain ai.onnx.ml\\)"):
        y.sum().backward()


def test_without_gradients_an_ml_op_records_no_backward():
    with onnxnn.no_grad():
        y = from_onnx(linear_regressor())(onnxnn.tensor(X, requires_grad=True))
    assert y.grad_fn is None
