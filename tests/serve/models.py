"""Small ONNX models the serving tests and benchmarks/bench_serve.py serve, built with onnx.helper."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tolerances import accumulation_bound

__all__ = [
    "FEATURES",
    "CLASSES",
    "GATHER_TABLE",
    "mlp_logits_bound",
    "write_mlp",
    "write_fixed_shape_model",
    "write_broken_model",
    "write_bool_model",
    "write_gather_model",
]

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def write_mlp(path, seed: int = 0, features: int = FEATURES, hidden: int = HIDDEN) -> str:
    """``logits = relu(x @ W1 + b1) @ W2 + b2`` and ``label = argmax(logits)``; x is FP32 [batch, features]."""
    rng = np.random.default_rng(seed)
    weights = {
        "W1": (rng.standard_normal((features, hidden)) / np.sqrt(features)).astype(np.float32),
        "b1": rng.standard_normal(hidden).astype(np.float32),
        "W2": (rng.standard_normal((hidden, CLASSES)) / np.sqrt(hidden)).astype(np.float32),
        "b2": rng.standard_normal(CLASSES).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "W2"], ["h3"]),
        helper.make_node("Add", ["h3", "b2"], ["logits"]),
        helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES]),
            helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"]),
        ],
        [numpy_helper.from_array(array, name) for name, array in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def mlp_logits_bound(x: np.ndarray, path) -> np.ndarray:
    """How far two float32 computations of write_mlp's logits for ``x`` may differ, elementwise.

    The server and a plain session may round differently (batch sizes pick other kernels): layer 1's
    bound, carried through relu (1-Lipschitz) and ``|W2|``, plus layer 2's own.
    """
    weights = {
        init.name: numpy_helper.to_array(init).astype(np.float64) for init in onnx.load(str(path)).graph.initializer
    }
    features, hidden = weights["W1"].shape
    hidden_magnitude = np.abs(x) @ np.abs(weights["W1"]) + np.abs(weights["b1"])
    first = accumulation_bound(hidden_magnitude, features + 1)
    second = accumulation_bound((hidden_magnitude + first) @ np.abs(weights["W2"]) + np.abs(weights["b2"]), hidden + 1)
    return first @ np.abs(weights["W2"]) + second


def write_fixed_shape_model(path) -> str:
    """``sum = a + b`` of INT32 [2, 3] and ``scaled = b * 2`` of FP64 [2, 3]: two inputs, fixed shapes."""
    nodes = [
        helper.make_node("Cast", ["b"], ["b_int"], to=TensorProto.INT32),
        helper.make_node("Add", ["a", "b_int"], ["sum"]),
        helper.make_node("Add", ["b", "b"], ["scaled"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fixed",
        [
            helper.make_tensor_value_info("a", TensorProto.INT32, [2, 3]),
            helper.make_tensor_value_info("b", TensorProto.DOUBLE, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("sum", TensorProto.INT32, [2, 3]),
            helper.make_tensor_value_info("scaled", TensorProto.DOUBLE, [2, 3]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def write_broken_model(path) -> str:
    """A file onnxruntime cannot load: an op that does not exist in the default domain."""
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"])],
        "broken",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def _save(path, name: str, nodes, inputs, outputs, initializers=()) -> str:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def write_bool_model(path) -> str:
    """``y = Cast(x, INT32)`` of a BOOL [batch, 4]: shows the bool each byte or JSON value became."""
    return _save(
        path,
        "boolean",
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)],
        [helper.make_tensor_value_info("x", TensorProto.BOOL, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["batch", 4])],
    )


GATHER_TABLE = np.arange(4, dtype=np.float32)


def write_gather_model(path) -> str:
    """``y = GATHER_TABLE[i]`` for INT64 ``i`` [batch]: onnxruntime fails on an index outside [-4, 3]."""
    return _save(
        path,
        "gather",
        [helper.make_node("Gather", ["table", "i"], ["y"], axis=0)],
        [helper.make_tensor_value_info("i", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])],
        [numpy_helper.from_array(GATHER_TABLE, "table")],
    )
