"""Models written for opsets older than 21 load with their own meaning: onnx's version converter,
and where it carries a node over unchanged or refuses it, onnxnn's own rewrite first.

Expected values come from numpy formulas of the old ops' definitions.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxnn
from onnxnn import ModelLoadError
from onnxnn.import_ import from_onnx

FLOAT = TensorProto.FLOAT


def make_model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "old", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -2])
def test_an_old_hardmax_keeps_its_two_dimensional_meaning(opset, axis):
    # Hardmax-1/11 flattened everything from axis on into one row; Hardmax-13 works along axis alone,
    # and onnx's version converter carries the node over as it is.
    attributes = {} if axis is None else {"axis": axis}
    proto = make_model(
        [helper.make_node("Hardmax", ["x"], ["y"], **attributes)],
        [helper.make_tensor_value_info("x", FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", FLOAT, [2, 3, 4])],
        opset=opset,
    )
    x = np.random.default_rng(0).permutation(24).astype(np.float32).reshape(2, 3, 4)  # no ties
    flat_axis = 1 if axis is None else axis % 3
    rows = x.reshape(int(np.prod(x.shape[:flat_axis])), -1)
    expected = (rows == rows.max(axis=1, keepdims=True)).astype(np.float32).reshape(x.shape)
    for executor in ("kernels", "onnxruntime"):
        with onnxnn.set_executor(executor):
            np.testing.assert_array_equal(from_onnx(proto)(onnxnn.tensor(x)).numpy(), expected)


def _batch_norm_with_saved_statistics(read_saved_mean: bool):
    """torch.onnx.export's BatchNormalization at opset 13 in training: five outputs, the saved mean and
    variance unread (or, here, the saved mean read as a second graph output)."""
    channels = 3
    statistics = [
        helper.make_tensor(name, FLOAT, [channels], values)
        for name, values in (
            ("scale", [1.0, 2.0, 0.5]),
            ("bias", [0.0, 1.0, -1.0]),
            ("mean", [0.0] * 3),
            ("var", [1.0] * 3),
        )
    ]
    node = helper.make_node(
        "BatchNormalization",
        ["x", "scale", "bias", "mean", "var"],
        ["y", "running_mean", "running_var", "saved_mean", "saved_var"],
        epsilon=1e-3,
        momentum=0.9,
    )
    outputs = [helper.make_tensor_value_info("y", FLOAT, [4, channels])]
    if read_saved_mean:
        outputs.append(helper.make_tensor_value_info("saved_mean", FLOAT, [channels]))
    return make_model([node], [helper.make_tensor_value_info("x", FLOAT, [4, channels])], outputs, statistics)


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
def test_an_opset_13_batch_norm_in_training_normalizes_by_the_batch(executor):
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    mean, variance = x.mean(axis=0), x.var(axis=0)
    expected = (x - mean) / np.sqrt(variance + np.float32(1e-3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, -1.0]
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        actual = from_onnx(_batch_norm_with_saved_statistics(False))(onnxnn.tensor(x)).numpy()
    # Four terms per statistic, then a handful of roundings per element.
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_an_opset_13_batch_norm_whose_saved_statistics_are_read_is_refused_clearly():
    with pytest.raises(ModelLoadError, match="from opset 13 to opset 21.*BatchNormalization"):
        from_onnx(_batch_norm_with_saved_statistics(True))
