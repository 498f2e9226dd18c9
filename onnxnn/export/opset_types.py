"""The opset an exported graph's element types need: ONNX defines some ops for some types only from
a later opset (bfloat16 Conv, pools and most activations from 22), so a bfloat16 model recorded at
onnxnn's opset 21 would fail the checker with onnx's own InferenceError. ``to_onnx`` declares the
first opset that defines every node for the types it reads, from ONNX's operator schemas."""

from __future__ import annotations

import onnx
from onnx import defs, helper, shape_inference

__all__ = ["opset_for_types"]


def opset_for_types(model: onnx.ModelProto, opset: int, newest: int, chosen: bool) -> int:
    """The lowest opset from ``opset`` to ``newest`` that defines each default-domain node of ``model``
    for the element types of its inputs.

    Args:
        chosen: whether the caller asked for ``opset``: then it is kept or refused, never raised.

    Raises:
        ValueError: naming the node's op and type, where ``opset`` was chosen and is too old, or no
            opset up to ``newest`` defines it.
    """
    graph = shape_inference.infer_shapes(_without_weights(model), strict_mode=False).graph
    types = {value.name: value.type.tensor_type.elem_type for value in [*graph.input, *graph.value_info]}
    needed = opset
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        for position, name in enumerate(node.input):
            element_type = types.get(name, 0)
            if not name or not element_type:
                continue
            type_string = f"tensor({helper.tensor_dtype_to_string(element_type)[len('TensorProto.') :].lower()})"
            first = _first_opset_defining(node.op_type, position, type_string, opset, newest)
            if first is None:
                raise ValueError(
                    f"to_onnx: no ONNX opset up to {newest} defines {node.op_type} for {type_string} inputs"
                )
            if chosen and first > opset:
                raise ValueError(
                    f"to_onnx: ONNX defines {node.op_type} for {type_string} inputs from opset {first}; "
                    f"opset_version {opset} is too old"
                )
            needed = max(needed, first)
    return needed


def _first_opset_defining(op_type: str, position: int, type_string: str, opset: int, newest: int) -> int | None:
    for version in range(opset, newest + 1):
        try:
            schema = defs.get_schema(op_type, version)
        except defs.SchemaError:
            continue
        formal = schema.inputs[min(position, len(schema.inputs) - 1)] if schema.inputs else None
        if formal is None:
            return version
        allowed = {formal.type_str}
        for constraint in schema.type_constraints:
            if constraint.type_param_str == formal.type_str:
                allowed = set(constraint.allowed_type_strs)
        if type_string in allowed:
            return version
    return None


def _without_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its initializers as typed inputs: inference reads their types, not their bytes."""
    graph = model.graph
    weights = [
        helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims) for tensor in graph.initializer
    ]
    light = helper.make_graph(graph.node, graph.name, [*graph.input, *weights], graph.output)
    return helper.make_model(
        light, opset_imports=model.opset_import, functions=model.functions, ir_version=model.ir_version
    )
