"""Graphs exported in training mode (``torch.onnx.export(..., training=TrainingMode.TRAINING)``).

A BatchNormalization with ``training_mode=1`` normalizes by the batch, as the file says, in both
module modes (onnxruntime computes the same); in ``train()`` the module's running statistics (the
initializers only the node reads, buffers after import) move by ONNX's rule, as PyTorch's layer
moves its buffers. Expected values are numpy formulas of ONNX's definition.

A Dropout with ``training_mode=True`` exported back by ``to_onnx`` stays a Dropout node, so each run
of the written file draws a new mask as the original file does.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

FLOAT = TensorProto.FLOAT
MOMENTUM = 0.8
EPSILON = 1e-3
RUNNING_MEAN, RUNNING_VAR = [0.5, -1.0, 2.0], [1.0, 4.0, 0.25]


def training_batch_norm(graph_outputs: int):
    """The node, its updated statistics read as graph outputs or (torch.onnx.export's) not read."""
    node = helper.make_node(
        "BatchNormalization",
        ["x", "scale", "bias", "running_mean", "running_var"],
        ["y", "new_mean", "new_var"],
        epsilon=EPSILON,
        momentum=MOMENTUM,
        training_mode=1,
    )
    initializers = [
        helper.make_tensor(name, FLOAT, [3], values)
        for name, values in (
            ("scale", [1.0, 2.0, 0.5]),
            ("bias", [0.0, 1.0, -1.0]),
            ("running_mean", RUNNING_MEAN),
            ("running_var", RUNNING_VAR),
        )
    ]
    graph = helper.make_graph(
        [node],
        "training",
        [helper.make_tensor_value_info("x", FLOAT, [4, 3, 2])],
        [
            helper.make_tensor_value_info(name, FLOAT, shape)
            for name, shape in zip(node.output[:graph_outputs], ([4, 3, 2], [3], [3]))
        ],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


def expected(x: np.ndarray):
    mean, variance = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    shape = (1, 3, 1)
    y = (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + EPSILON)
    y = y * np.reshape([1.0, 2.0, 0.5], shape) + np.reshape([0.0, 1.0, -1.0], shape)
    new_mean = np.array(RUNNING_MEAN) * MOMENTUM + mean * (1 - MOMENTUM)
    new_var = np.array(RUNNING_VAR) * MOMENTUM + variance * (1 - MOMENTUM)
    return y, new_mean, new_var


@pytest.mark.parametrize("graph_outputs", [1, 3])
def test_train_mode_normalizes_by_the_batch_and_moves_the_running_statistics(graph_outputs):
    module = from_onnx(training_batch_norm(graph_outputs)).train()
    assert sorted(name for name, _ in module.named_buffers()) == ["running_mean", "running_var"]
    x = np.random.default_rng(0).standard_normal((4, 3, 2)).astype(np.float32)
    y, new_mean, new_var = expected(x.astype(np.float64))
    results = module(onnxnn.tensor(x))
    results = results if isinstance(results, tuple) else (results,)
    # Eight terms per statistic, then a handful of roundings per element.
    np.testing.assert_allclose(results[0].detach().numpy(), y, rtol=1e-5, atol=1e-5)
    for result, statistic in zip(results[1:], (new_mean, new_var)):
        np.testing.assert_allclose(result.detach().numpy(), statistic, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(module.running_mean.numpy(), new_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(module.running_var.numpy(), new_var, rtol=1e-5, atol=1e-6)


def test_eval_mode_normalizes_by_the_batch_and_leaves_the_running_statistics():
    module = from_onnx(training_batch_norm(3)).eval()
    x = np.random.default_rng(1).standard_normal((4, 3, 2)).astype(np.float32)
    with onnxnn.no_grad():
        y = module(onnxnn.tensor(x))[0].numpy()
    np.testing.assert_allclose(y, expected(x.astype(np.float64))[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(module.running_mean.numpy(), np.float32(RUNNING_MEAN))
    np.testing.assert_array_equal(module.running_var.numpy(), np.float32(RUNNING_VAR))


DROPOUT_RATIO = 0.25


def training_dropout(graph_outputs: int):
    """``Dropout(x, ratio, training_mode=True)`` as torch.onnx.export writes it in training mode."""
    node = helper.make_node("Dropout", ["x", "ratio", "training_mode"], ["y", "mask"][:graph_outputs])
    graph = helper.make_graph(
        [node],
        "dropout",
        [helper.make_tensor_value_info("x", FLOAT, ["n", 40])],
        [
            helper.make_tensor_value_info("y", FLOAT, ["n", 40]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, ["n", 40]),
        ][:graph_outputs],
        [
            helper.make_tensor("ratio", FLOAT, [], [DROPOUT_RATIO]),
            helper.make_tensor("training_mode", TensorProto.BOOL, [], [True]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("graph_outputs", [1, 2])
def test_training_dropout_exported_back_draws_a_new_mask_on_every_run(graph_outputs):
    module = from_onnx(training_dropout(graph_outputs)).eval()
    x = np.random.default_rng(2).uniform(0.5, 2.0, (30, 40)).astype(np.float32)
    proto = to_onnx(module, (onnxnn.tensor(x),), input_names=["x"], dynamic_axes={"x": {0: "n"}})
    assert [node.op_type for node in proto.graph.node] == ["Dropout"]
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    masks = []
    for _ in range(2):
        results = session.run(None, {"x": x})
        y = results[0]
        kept = y != 0
        # Kept elements are x / (1 - ratio): one float32 division, so within one rounding.
        np.testing.assert_allclose(y[kept], x[kept] / np.float32(1 - DROPOUT_RATIO), rtol=2.0**-24, atol=0)
        if graph_outputs == 2:
            np.testing.assert_array_equal(results[1], kept)
        masks.append(kept)
    # 1200 independent draws: equal masks on two runs have probability 0.625 ** 1200.
    assert not np.array_equal(masks[0], masks[1])
