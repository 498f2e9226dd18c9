"""The fallback for ops without a shape rule: ONNX shape inference, or running the node at once.

Principle 2 of the design: shapes are known at record time. Ops with a registered rule compute
them cheaply; any other standard op (typically from an imported model) is inferred by onnx's
shape inference on a one-node model, and when the output shape depends on data (NonZero,
Unique, ...) the node is computed right away, as PyTorch synchronizes for such ops.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ..ir import dtypes
from ..ir.kernel_registry import kernels
from ..ir.plan import OPSET_VERSION
from ..ir.model_building import onnx_attribute_value
from .realization import realize
from .sessions import check_onnxruntime_opset, create_session, newest_onnxruntime_opset

__all__ = ["infer_node_outputs", "run_node_eagerly"]


def _node_model(
    op_type: str, domain: str, inputs: tuple, attrs: dict, num_outputs: int | None, opset: int
) -> tuple[onnx.ModelProto, list[str]]:
    input_names = ["" if value is None else f"input_{i}" for i, value in enumerate(inputs)]
    graph_inputs = [
        helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape)
        for name, value in zip(input_names, inputs)
        if value is not None
    ]
    count = num_outputs if num_outputs is not None else _default_output_count(op_type, domain, opset)
    output_names = [f"output_{i}" for i in range(count)]
    node = helper.make_node(
        op_type,
        input_names,
        output_names,
        domain=domain or None,
        **{k: onnx_attribute_value(v) for k, v in attrs.items()},
    )
    graph = helper.make_graph([node], "node", graph_inputs, [helper.ValueInfoProto(name=n) for n in output_names])
    # Constant inputs (axes, shapes) help inference resolve data-dependent shapes.
    for name, value in zip(input_names, inputs):
        if value is not None and value.data is not None and value.data.size <= 64:
            graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(value.data), name))
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10), output_names


def _default_output_count(op_type: str, domain: str, opset: int) -> int:
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except Exception:
        return 1
    required = [o for o in schema.outputs if o.option != onnx.defs.OpSchema.FormalParameterOption.Optional]
    return max(1, len(required))


def infer_node_outputs(
    op_type: str, domain: str, inputs: tuple, attrs: dict, num_outputs: int | None = None, opset: int = OPSET_VERSION
):
    """Output (shape, dtype) pairs by ONNX shape inference at ``opset``, or None when a shape depends on data."""
    model, output_names = _node_model(op_type, domain, inputs, attrs, num_outputs, opset)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as error:
        raise RuntimeError(
            f"{op_type}: ONNX shape inference rejected the inputs "
            f"{[None if v is None else list(v.shape) for v in inputs]}: {error}"
        ) from None
    found = {info.name: info for info in list(inferred.graph.value_info) + list(inferred.graph.output)}
    metas = []
    for name in output_names:
        info = found.get(name)
        if info is None or not info.type.tensor_type.HasField("shape"):
            return None
        dims = info.type.tensor_type.shape.dim
        if any(not dim.HasField("dim_value") for dim in dims):
            return None
        metas.append((tuple(dim.dim_value for dim in dims), dtypes.as_dtype(info.type.tensor_type.elem_type)))
    return metas


def run_node_eagerly(
    op_type: str, domain: str, inputs: tuple, attrs: dict, num_outputs: int | None = None, opset: int = OPSET_VERSION
) -> list:
    """Realizes the inputs and computes the node (at ``opset``) now; returns the output arrays.

    onnxruntime computes it, or onnxnn's own kernel when the node needs an opset newer than the
    installed onnxruntime runs (Range of float16 bounds, which opset 27 added).
    """
    realize([value for value in inputs if value is not None])
    if opset > OPSET_VERSION and opset > newest_onnxruntime_opset() and _kernel_runs(op_type, domain, inputs):
        return _run_kernel(op_type, domain, inputs, attrs, num_outputs, opset)
    model, output_names = _node_model(op_type, domain, inputs, attrs, num_outputs, opset)
    del model.graph.initializer[:]
    for output in model.graph.output:
        output.type.tensor_type.elem_type = onnx.TensorProto.UNDEFINED
    check_onnxruntime_opset(model)
    model = onnx.shape_inference.infer_shapes(model)
    session = create_session(model, threads=1)
    feeds = {f"input_{i}": value.data for i, value in enumerate(inputs) if value is not None}
    return session.run(None, feeds)


_LOW_PRECISION = (dtypes.float16.numpy_dtype, dtypes.bfloat16.numpy_dtype)


def _kernel_runs(op_type: str, domain: str, inputs: tuple) -> bool:
    """Whether onnxnn has a kernel for the op that takes the dtype of its first input."""
    kernel_types = kernels.types.get((domain, op_type))
    first = next((value for value in inputs if value is not None), None)
    return kernel_types is not None and (first is None or first.dtype.name in kernel_types)


def _run_kernel(op_type: str, domain: str, inputs: tuple, attrs: dict, num_outputs: int | None, opset: int) -> list:
    """The node computed by its numpy kernel; float16/bfloat16 inputs widened to float32 and float32
    results rounded back, as the kernels executor runs kernels that do not take them natively."""
    arrays = [None if value is None else np.asarray(value.data) for value in inputs]
    low = next((array.dtype for array in arrays if array is not None and array.dtype in _LOW_PRECISION), None)
    widen = low is not None and (domain, op_type) not in kernels.native_low_precision
    if widen:
        arrays = [array.astype(np.float32) if array is not None and array.dtype == low else array for array in arrays]
    count = num_outputs if num_outputs is not None else _default_output_count(op_type, domain, opset)
    results = kernels.table[(domain, op_type)](
        np, arrays, {**attrs, "_num_outputs": count, "_used_outputs": tuple(range(count))}
    )
    if widen:
        results = [result.astype(low) if result.dtype == np.float32 else result for result in results]
    return [np.asarray(result, order="C") for result in results]
