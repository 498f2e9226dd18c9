"""The official ONNX node test cases, run through the kernels executor.

The cases come from ``onnx.backend.test.case.node.collect_testcases()``: the installed onnx
package ships the generators (inputs and expected outputs computed by numpy reference code),
not the ``data/node`` directories. Each single-node case whose op has a kernel becomes a plan
of one ``Node`` over realized input ``Value``s, with output ``Value``s typed like the expected
outputs. The plan is built directly rather than through ``apply_op`` so that the case tests the
kernel alone: onnxnn's shape rules cover the PyTorch-shaped subset of each op that the Tensor
API records, while the node tests exercise every attribute of the ONNX spec.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx_node_test_cases import all_node_test_cases

from onnxnn.kernels import compile_plan, kernels
from onnxnn.ir.device import CPU
from onnxnn.ir.dtypes import as_dtype
from onnxnn.ir.plan import GraphPlan
from onnxnn.ir.graph import Node, Value

__all__ = ["node_cases", "run_case", "Unrepresentable"]


class Unrepresentable(Exception):
    """The case uses something an onnxnn graph cannot hold (a dtype, a sequence, a subgraph)."""


@functools.lru_cache(maxsize=1)
def node_cases() -> tuple:
    """Every single-node ONNX test case whose op has a kernel, sorted by name."""
    cases = all_node_test_cases()
    selected = []
    for case in cases:
        nodes = case.model.graph.node
        if len(nodes) == 1 and (nodes[0].domain, nodes[0].op_type) in kernels:
            selected.append(case)
    return tuple(sorted(selected, key=lambda case: case.name))


def _attribute(attribute: onnx.AttributeProto):
    if attribute.type in (
        onnx.AttributeProto.GRAPH,
        onnx.AttributeProto.GRAPHS,
        onnx.AttributeProto.SPARSE_TENSOR,
        onnx.AttributeProto.TYPE_PROTO,
    ):
        raise Unrepresentable(f"attribute {attribute.name} of type {attribute.type}")
    value = helper.get_attribute_value(attribute)
    if isinstance(value, onnx.TensorProto):
        return _array(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [item.decode() for item in value]
    return value


def _array(value) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        value = numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)) or value is None:
        raise Unrepresentable("sequence or optional value")
    return np.asarray(value)


def _onnxnn_dtype(elem_type: int):
    try:
        return as_dtype(elem_type)
    except TypeError:
        raise Unrepresentable(f"element type {onnx.TensorProto.DataType.Name(elem_type)}") from None


def _value_infos(infos) -> dict:
    return {info.name: info.type.tensor_type.elem_type for info in infos}


def build_plan(case):
    """(plan, input arrays, expected arrays) of a single-node case; Unrepresentable if impossible."""
    proto = case.model.graph.node[0]
    inputs, expected = case.data_sets[0]
    input_types = _value_infos(case.model.graph.input)
    output_types = _value_infos(case.model.graph.output)
    attrs = {attribute.name: _attribute(attribute) for attribute in proto.attribute}
    for key in ("to", "dtype"):
        if isinstance(attrs.get(key), int):
            _onnxnn_dtype(attrs[key])
    present = iter(inputs)
    values, feeds = [], []
    for name in proto.input:
        if not name:
            values.append(None)
            continue
        value_dtype = _onnxnn_dtype(input_types[name])
        array = _array(next(present)).astype(value_dtype.numpy_dtype, copy=False)
        value = Value(None, 0, array.shape, value_dtype, CPU, array)
        values.append(value)
        feeds.append(value)
    node = Node(proto.op_type, proto.domain, tuple(values), attrs, len(proto.output))
    node.position = 0
    outputs, wanted = [], []
    present_outputs = iter(expected)
    for index, name in enumerate(proto.output):
        if not name:
            continue
        value_dtype = _onnxnn_dtype(output_types[name])
        array = _array(next(present_outputs)).astype(value_dtype.numpy_dtype, copy=False)
        outputs.append(Value(node, index, array.shape, value_dtype, CPU))
        wanted.append(array)
    plan = GraphPlan([node], feeds, outputs, ("onnx node test", case.name))
    return plan, [value.data for value in feeds], wanted


def run_case(case) -> str | None:
    """Runs one case; returns None when it passes, else a one-line reason."""
    plan, feeds, wanted = build_plan(case)
    try:
        results = compile_plan(plan)(feeds)
    except Exception as error:  # a failing case is reported, not raised: the table tracks it
        return f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    for position, (result, reference) in enumerate(zip(results, wanted)):
        if result.dtype != reference.dtype or result.shape != reference.shape:
            return (
                f"output {position}: got {result.dtype}{list(result.shape)}, "
                f"expected {reference.dtype}{list(reference.shape)}"
            )
        if reference.dtype.kind in "fV" or reference.dtype == np.float16:
            actual, desired = result.astype(np.float64), reference.astype(np.float64)
            if not np.allclose(actual, desired, rtol=case.rtol, atol=case.atol, equal_nan=True):
                worst = np.nanmax(np.abs(actual - desired)) if actual.size else 0.0
                return f"output {position}: values differ (max abs error {worst:.3g})"
        elif not np.array_equal(result, reference):
            return f"output {position}: values differ"
    return None
