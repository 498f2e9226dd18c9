"""CumProd in imported models: forward as ONNX's node tests say, gradients by finite differences.

CumProd is newer than the opset onnxnn records; without a gradient it runs in numpy, with one it
is replayed in opset-21 ops (onnxnn/import_/cumulative.py). Both paths are checked against the
node tests' expected outputs (onnx's numpy reference), the gradient path against float64 central
differences, including inputs with one and two zeros (where out / x is undefined), on both executors.
"""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from gradcheck import check_gradients
from onnx import TensorProto, helper

import onnxnn
from onnxnn.import_ import from_onnx

ATTRIBUTES = [{}, {"exclusive": 1}, {"reverse": 1}, {"exclusive": 1, "reverse": 1}]


def _node_cases() -> list:
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [case for case in collect_testcases() if case.model.graph.node[0].op_type == "CumProd"]


def _model(attributes: dict, axis: int, shape: tuple) -> onnx.ModelProto:
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], **attributes)
    graph = helper.make_graph(
        [node], "cumprod", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, shape)],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, shape)],
        [helper.make_tensor("axis", TensorProto.INT64, (), [axis])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _reference(x: np.ndarray, axis: int, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """Directly from ONNX's definition: y[j] = product of x[i] over i <= j (< j exclusive; >= / > reversed)."""
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    out = np.empty_like(moved)
    for j in range(n):
        chosen = [i for i in range(n) if (i > j if exclusive else i >= j)] if reverse else \
                 [i for i in range(n) if (i < j if exclusive else i <= j)]
        out[..., j] = np.prod(moved[..., chosen], axis=-1)
    return np.moveaxis(out, -1, axis)


def test_the_node_tests_exist():
    assert len(_node_cases()) >= 4


@pytest.mark.parametrize("requires_grad", [False, True], ids=["numpy", "recorded"])
def test_node_tests_match_the_expected_outputs(requires_grad):
    for case in _node_cases():
        module = from_onnx(case.model)
        for inputs, outputs in case.data_sets:
            tensors = [onnxnn.tensor(array, requires_grad=requires_grad and array.dtype.kind == "f")
                       for array in inputs]
            result = module(*tensors)
            # A handful of products of small integers or short float rows: exact or within a few
            # ulps whichever order the factors are multiplied in.
            np.testing.assert_allclose(result.detach().numpy(), outputs[0], rtol=1e-6, err_msg=case.name)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("attributes", ATTRIBUTES, ids=lambda a: "_".join(a) or "inclusive")
@pytest.mark.parametrize("axis, x", [
    (1, np.random.default_rng(0).uniform(0.5, 1.5, (2, 4)) * np.array([1, -1, 1, -1])),
    (-2, np.random.default_rng(1).uniform(-1.5, 1.5, (3, 2))),
    (0, np.array([1.5, 0.0, -2.0, 0.7])),
    (0, np.array([0.0, 1.3, 0.0, -0.8, 2.0])),
], ids=["axis_1", "axis_minus_2", "one_zero", "two_zeros"])
def test_gradient_matches_finite_differences(executor, attributes, axis, x):
    with onnxnn.set_executor(executor):
        module = from_onnx(_model(attributes, axis, x.shape))
        with onnxnn.no_grad():
            np.testing.assert_allclose(module(onnxnn.tensor(x)).numpy(), _reference(x, axis % x.ndim, **attributes),
                                       rtol=1e-12)
        check_gradients(lambda t: module(t), [x])
