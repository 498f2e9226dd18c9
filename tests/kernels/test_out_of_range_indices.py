"""Indices outside their axis raise RuntimeError on every executor, as onnxruntime raises it.

Indices known when an op is called are checked there (``Embedding``, ``gather`` with constant
indices); indices computed in the graph are only known when it runs, where onnxruntime refuses them
("indices element out of data bounds") and the kernels executor must refuse them too rather than
let numpy raise IndexError or wrap a write silently.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxnn
from onnxnn.import_ import from_onnx

EXECUTORS = ["onnxruntime", "kernels"]


def _model(op_type: str, data_shape, index_shape, output_shape, update_shape=None, **attributes):
    inputs = [
        helper.make_tensor_value_info("data", TensorProto.FLOAT, data_shape),
        helper.make_tensor_value_info("indices", TensorProto.INT64, index_shape),
    ]
    names = ["data", "indices"]
    if update_shape is not None:
        inputs.append(helper.make_tensor_value_info("updates", TensorProto.FLOAT, update_shape))
        names.append("updates")
    node = helper.make_node(op_type, names, ["out"], **attributes)
    graph = helper.make_graph(
        [node], op_type, inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, output_shape)]
    )
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


# op_type, data shape, indices (in range), indices (one out of range), output shape, updates shape, attributes
CASES = [
    ("Gather", [4, 3], [[0, -4], [3, 1]], [[0, 4], [3, 1]], [2, 2, 3], None, {"axis": 0}),
    ("Gather", [4, 3], [2, -3], [2, -4], [4, 2], None, {"axis": 1}),
    ("GatherElements", [3, 2], [[0, 2], [-3, 1]], [[0, 3], [1, 1]], [2, 2], None, {"axis": 0}),
    ("GatherND", [3, 2], [[0, 1], [2, -2]], [[0, 1], [2, 2]], [2], None, {}),
    ("ScatterElements", [3, 2], [[0, 2]], [[0, 5]], [3, 2], [1, 2], {"axis": 0}),
    ("ScatterND", [3, 2], [[1], [-1]], [[1], [3]], [3, 2], [2, 2], {}),
]


def _feeds(data_shape, indices, update_shape):
    rng = np.random.default_rng(0)
    feeds = [
        onnxnn.from_numpy(rng.standard_normal(data_shape).astype(np.float32)),
        onnxnn.tensor(indices, dtype=onnxnn.int64),
    ]
    if update_shape is not None:
        feeds.append(onnxnn.from_numpy(rng.standard_normal(update_shape).astype(np.float32)))
    return feeds


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "op_type, data_shape, good, bad, output_shape, update_shape, attributes",
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
def test_computed_indices_out_of_range_raise_runtime_error(
    executor, op_type, data_shape, good, bad, output_shape, update_shape, attributes
):
    model = _model(op_type, data_shape, np.shape(bad), output_shape, update_shape, **attributes)
    with onnxnn.set_executor(executor):
        with pytest.raises(RuntimeError):
            model(*_feeds(data_shape, bad, update_shape)).numpy()


@pytest.mark.parametrize(
    "op_type, data_shape, good, bad, output_shape, update_shape, attributes",
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
def test_indices_in_range_negative_ones_included_agree_across_executors(
    op_type, data_shape, good, bad, output_shape, update_shape, attributes
):
    model = _model(op_type, data_shape, np.shape(good), output_shape, update_shape, **attributes)
    results = []
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            results.append(model(*_feeds(data_shape, good, update_shape)).numpy())
    # Gathers and scatters copy elements: no arithmetic, so the executors agree exactly.
    np.testing.assert_array_equal(results[0], results[1])
