"""CumProd and TensorScatter in imported models: forward as ONNX's node tests say, gradients by
finite differences.

Both are newer than the opset onnxnn records and have no function body; onnxnn/import_/newer_ops.py
replays them in opset-21 ops (CumProd without a gradient in numpy). Each path is checked against
the node tests' expected outputs (onnx's numpy reference) and gradients against float64 central
differences on both executors: CumProd with inputs holding one and two zeros (where out / x is
undefined), TensorScatter in both modes, with and without write indices, wrapping around.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from gradcheck import check_gradients
from onnx import TensorProto, helper
from onnx_node_test_cases import all_node_test_cases

import onnxnn
from onnxnn.import_ import from_onnx

ATTRIBUTES = [{}, {"exclusive": 1}, {"reverse": 1}, {"exclusive": 1, "reverse": 1}]


@functools.lru_cache(maxsize=1)
def _all_node_cases() -> tuple:
    return all_node_test_cases()


def _node_cases(op_type: str) -> list:
    return [case for case in _all_node_cases() if case.model.graph.node[0].op_type == op_type]


def _model(attributes: dict, axis: int, shape: tuple) -> onnx.ModelProto:
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        "cumprod",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, shape)],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, shape)],
        [helper.make_tensor("axis", TensorProto.INT64, (), [axis])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _reference(x: np.ndarray, axis: int, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """Directly from ONNX's definition: y[j] = product of x[i] over i <= j (< j exclusive; >= / > reversed)."""
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    out = np.empty_like(moved)
    for j in range(n):
        chosen = (
            [i for i in range(n) if (i > j if exclusive else i >= j)]
            if reverse
            else [i for i in range(n) if (i < j if exclusive else i <= j)]
        )
        out[..., j] = np.prod(moved[..., chosen], axis=-1)
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("op_type", ["CumProd", "TensorScatter"])
def test_the_node_tests_exist(op_type):
    assert len(_node_cases(op_type)) >= 3


@pytest.mark.parametrize("op_type, requires_grad", [("CumProd", False), ("CumProd", True), ("TensorScatter", True)])
def test_node_tests_match_the_expected_outputs(op_type, requires_grad):
    for case in _node_cases(op_type):
        module = from_onnx(case.model)
        for inputs, outputs in case.data_sets:
            tensors = [
                onnxnn.tensor(array, requires_grad=requires_grad and array.dtype.kind == "f") for array in inputs
            ]
            result = module(*tensors)
            # A handful of products of small integers or short float rows: exact or within a few
            # ulps whichever order the factors are multiplied in.
            np.testing.assert_allclose(result.detach().numpy(), outputs[0], rtol=1e-6, err_msg=case.name)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("attributes", ATTRIBUTES, ids=lambda a: "_".join(a) or "inclusive")
@pytest.mark.parametrize(
    "axis, x",
    [
        (1, np.random.default_rng(0).uniform(0.5, 1.5, (2, 4)) * np.array([1, -1, 1, -1])),
        (-2, np.random.default_rng(1).uniform(-1.5, 1.5, (3, 2))),
        (0, np.array([1.5, 0.0, -2.0, 0.7])),
        (0, np.array([0.0, 1.3, 0.0, -0.8, 2.0])),
    ],
    ids=["axis_1", "axis_minus_2", "one_zero", "two_zeros"],
)
def test_cumprod_gradient_matches_finite_differences(executor, attributes, axis, x):
    with onnxnn.set_executor(executor):
        module = from_onnx(_model(attributes, axis, x.shape))
        with onnxnn.no_grad():
            np.testing.assert_allclose(
                module(onnxnn.tensor(x)).numpy(), _reference(x, axis % x.ndim, **attributes), rtol=1e-12
            )
        check_gradients(lambda t: module(t), [x])


def _tensor_scatter_model(mode: str, axis: int, cache: tuple, update: tuple, with_indices: bool) -> onnx.ModelProto:
    inputs = ["cache", "update"] + (["write_indices"] if with_indices else [])
    node = helper.make_node("TensorScatter", inputs, ["present"], mode=mode, axis=axis)
    graph = helper.make_graph(
        [node],
        "tensor_scatter",
        [
            helper.make_tensor_value_info("cache", TensorProto.DOUBLE, cache),
            helper.make_tensor_value_info("update", TensorProto.DOUBLE, update),
        ]
        + ([helper.make_tensor_value_info("write_indices", TensorProto.INT64, (cache[0],))] if with_indices else []),
        [helper.make_tensor_value_info("present", TensorProto.DOUBLE, cache)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


def _tensor_scatter_reference(cache, update, write_indices, mode, axis):
    """ONNX's pseudocode for TensorScatter, written out."""
    present = cache.copy()
    axis %= cache.ndim
    for prefix in np.ndindex(cache.shape[:axis]):
        for step in range(update.shape[axis]):
            position = write_indices[prefix[0]] + step
            if mode == "circular":
                position %= cache.shape[axis]
            present[prefix + (position,)] = update[prefix + (step,)]
    return present


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "mode, axis, cache, update, write_indices",
    [
        ("linear", -2, (2, 5, 3), (2, 2, 3), np.array([0, 3])),
        ("linear", 1, (2, 4, 2), (2, 4, 2), None),
        ("circular", -1, (2, 2, 4), (2, 2, 3), np.array([3, 1])),
        ("circular", 2, (1, 2, 3, 2), (1, 2, 2, 2), np.array([2])),
    ],
    ids=["linear_decode", "linear_prefill_full", "circular_wraps", "circular_4d"],
)
def test_tensor_scatter_gradient_matches_finite_differences(executor, mode, axis, cache, update, write_indices):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(cache), rng.standard_normal(update)]
    with_indices = write_indices is not None
    if with_indices:
        arrays.append(write_indices)
    indices = write_indices if with_indices else np.zeros(cache[0], dtype=np.int64)
    with onnxnn.set_executor(executor):
        module = from_onnx(_tensor_scatter_model(mode, axis, cache, update, with_indices))
        with onnxnn.no_grad():
            result = module(*[onnxnn.tensor(array) for array in arrays]).numpy()
        np.testing.assert_array_equal(result, _tensor_scatter_reference(*arrays[:2], indices, mode, axis))
        check_gradients(lambda *tensors: module(*tensors), arrays)
