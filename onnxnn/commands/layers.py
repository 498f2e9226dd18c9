"""An ONNX graph as layers: each node's module scope, the shapes inference gives, MACs and bytes.

``summary`` prints these rows and ``graph`` draws clusters from the same scopes. A node's scope comes
from PyTorch's exporter names (``/layer1/conv1/Conv`` -> ``layer1.conv1``) where the model has them,
else from the parameters it reads: initializer names are ``state_dict`` keys (``layer1.conv1.weight``),
so a node reading ``3.weight`` (directly or through a ``Transpose`` of it) belongs to module ``3``.
Nodes that read no parameter have no scope and are layers of their own (``Relu``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx

__all__ = ["Layer", "Analysis", "analyze", "MAC_RULES"]

_FLOAT_TYPES = frozenset(
    {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
)


@dataclass
class Layer:
    """One row: a module scope's consecutive nodes, or one node without a scope."""

    name: str  # the module path ("layer1.conv1"), or the node's op type for a node without a scope
    scope: str | None
    nodes: list = field(default_factory=list)
    parameters: int = 0
    macs: int | None = 0
    output_shape: tuple | None = None


@dataclass
class Analysis:
    """What ``analyze`` finds out about a model."""

    layers: list
    shapes: dict  # value name -> tuple of ints/strs, or None where inference found nothing
    elem_types: dict  # value name -> TensorProto element type
    parameters: int
    buffers: int
    parameter_bytes: int
    buffer_bytes: int
    input_bytes: int
    activation_bytes: int
    macs: int
    hidden_nodes: int  # integer shape arithmetic, counted but not shown
    scope_of: dict  # node index -> scope or None


def _dims(value_type) -> tuple | None:
    if value_type.WhichOneof("value") != "tensor_type" or not value_type.tensor_type.HasField("shape"):
        return None
    return tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in value_type.tensor_type.shape.dim
    )


def _numel(shape) -> int | None:
    if shape is None or not all(isinstance(size, int) for size in shape):
        return None
    return math.prod(shape)


def _itemsize(elem_type: int) -> int:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    except (KeyError, TypeError, ValueError):  # strings, sequences
        return 0


def _with_input_shapes(model: onnx.ModelProto, input_shapes: dict) -> onnx.ModelProto:
    """A copy of the model whose graph inputs declare ``input_shapes`` (dynamic axes made concrete)."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for graph_input in fixed.graph.input:
        if graph_input.name in input_shapes and graph_input.type.WhichOneof("value") == "tensor_type":
            dims = graph_input.type.tensor_type.shape.dim
            for dim, size in zip(dims, input_shapes[graph_input.name]):
                dim.Clear()
                dim.dim_value = size
    return fixed


def _infer(model: onnx.ModelProto) -> tuple[dict, dict]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # inference is best effort: unknown ops or bad shapes leave values unknown
        inferred = model
    shapes, elem_types = {}, {}
    graph = inferred.graph
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        shapes[info.name] = _dims(info.type)
        if info.type.WhichOneof("value") == "tensor_type":
            elem_types[info.name] = info.type.tensor_type.elem_type
    for initializer in graph.initializer:
        shapes[initializer.name] = tuple(initializer.dims)
        elem_types[initializer.name] = initializer.data_type
    return shapes, elem_types


def _scope_from_name(name: str) -> str | None:
    """PyTorch exporter's node name -> module path; ``/Relu`` -> None (a top-level node).

    Its levels are attribute names (``/layer1/conv1/Conv`` -> ``layer1.conv1``) or, below containers,
    full names (``/layer1/layer1.0/conv1/Conv`` -> ``layer1.0.conv1``, ``/0/0.0/Conv`` -> ``0.0``).
    """
    if not name.startswith("/"):
        return None
    path = ""
    for part in name.split("/")[1:-1]:
        if not part:
            continue
        path = part if not path or part.startswith(path + ".") else f"{path}.{part}"
    return path or None


def _scope_from_parameter(name: str) -> str | None:
    if "::" in name:  # onnxnn's exporter constants (``onnxnn::dim_constant_3``), not module state
        return None
    return name.rpartition(".")[0] if "." in name else ""


def _node_scopes(graph: onnx.GraphProto) -> tuple[dict, set]:
    """Each node's scope, and the indices of nodes that compute on initializers only (folded into their scope)."""
    initializers = {initializer.name for initializer in graph.initializer}
    value_scope = {name: _scope_from_parameter(name) for name in initializers}
    constant_values = set(initializers)
    scopes, constant_nodes = {}, set()
    for index, node in enumerate(graph.node):
        inputs = [name for name in node.input if name]
        named = _scope_from_name(node.name)
        found = next((value_scope[name] for name in inputs if value_scope.get(name) is not None), None)
        scope = named if named is not None else found
        if all(name in constant_values for name in inputs):
            constant_values.update(node.output)
            constant_nodes.add(index)
        scopes[index] = scope
        if index in constant_nodes and scope is not None:
            value_scope.update((name, scope) for name in node.output)
    return scopes, constant_nodes


def _mac_matmul(node, shapes) -> int | None:
    left, output = shapes.get(node.input[0]), shapes.get(node.output[0])
    if left is None or _numel(output) is None or not left or not isinstance(left[-1], int):
        return None
    return _numel(output) * left[-1]  # type: ignore[operator]  # not None: checked above


def _mac_gemm(node, shapes) -> int | None:
    left, output = shapes.get(node.input[0]), shapes.get(node.output[0])
    trans_a = next((attribute.i for attribute in node.attribute if attribute.name == "transA"), 0)
    if left is None or _numel(output) is None or len(left) != 2:
        return None
    inner = left[0] if trans_a else left[1]
    return _numel(output) * inner if isinstance(inner, int) else None  # type: ignore[operator]  # as above


def _mac_conv(node, shapes) -> int | None:
    weight, output = shapes.get(node.input[1]), shapes.get(node.output[0])
    if _numel(weight) is None or _numel(output) is None:
        return None
    return _numel(output) * math.prod(weight[1:])  # weight: [C_out, C_in / groups, *kernel]


def _mac_conv_transpose(node, shapes) -> int | None:
    weight, data = shapes.get(node.input[1]), shapes.get(node.input[0])
    if _numel(weight) is None or _numel(data) is None:
        return None
    return _numel(data) * math.prod(weight[1:])  # weight: [C_in, C_out / groups, *kernel]


# op_type -> multiply-accumulates of one node from the shapes; ops not here count 0 (elementwise work
# is not a multiply-accumulate, which is how torchinfo and fvcore count too).
MAC_RULES = {
    "MatMul": _mac_matmul,
    "Gemm": _mac_gemm,
    "Conv": _mac_conv,
    "ConvTranspose": _mac_conv_transpose,
}


def _is_shape_arithmetic(node, elem_types) -> bool:
    return all(elem_types.get(name) in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) for name in node.output)


def analyze(model: onnx.ModelProto, input_shapes: dict) -> Analysis:
    """Layers, shapes, parameter counts, MACs and bytes of ``model`` fed inputs of ``input_shapes``."""
    graph = model.graph
    shapes, elem_types = _infer(_with_input_shapes(model, input_shapes))
    shapes.update(input_shapes)
    scopes, constant_nodes = _node_scopes(graph)
    parameter_sizes = {}
    parameters = buffers = parameter_bytes = buffer_bytes = 0
    for initializer in graph.initializer:
        count, size = math.prod(initializer.dims), _itemsize(initializer.data_type)
        if initializer.data_type in _FLOAT_TYPES:  # what from_onnx makes Parameters; the rest are buffers
            parameters += count
            parameter_bytes += count * size
            parameter_sizes[initializer.name] = count
        else:
            buffers += count
            buffer_bytes += count * size
    layers: list
    layers, hidden, total_macs, activation_bytes = [], 0, 0, 0
    for index, node in enumerate(graph.node):
        scope = scopes[index]
        macs = MAC_RULES[node.op_type](node, shapes) if node.op_type in MAC_RULES else 0
        total_macs += macs or 0
        for name in node.output:
            if elem_types.get(name) in _FLOAT_TYPES and index not in constant_nodes:
                activation_bytes += (_numel(shapes.get(name)) or 0) * _itemsize(elem_types[name])
        if scope is None and (index in constant_nodes or _is_shape_arithmetic(node, elem_types)):
            hidden += 1
            continue
        if not layers or scope is None or layers[-1].scope != scope:
            layers.append(Layer(name=scope if scope is not None else node.op_type, scope=scope))
        layer = layers[-1]
        layer.nodes.append(node)
        layer.macs = None if layer.macs is None or macs is None else layer.macs + macs
        layer.parameters += sum(parameter_sizes.pop(name, 0) for name in node.input)
        if index not in constant_nodes:
            layer.output_shape = shapes.get(node.output[0]) if node.output else None
    input_bytes = sum(
        (_numel(shape) or 0) * _itemsize(elem_types.get(name, onnx.TensorProto.FLOAT))
        for name, shape in input_shapes.items()
    )
    return Analysis(
        layers=layers,
        shapes=shapes,
        elem_types=elem_types,
        parameters=parameters,
        buffers=buffers,
        parameter_bytes=parameter_bytes,
        buffer_bytes=buffer_bytes,
        input_bytes=input_bytes,
        activation_bytes=activation_bytes,
        macs=total_macs,
        hidden_nodes=hidden,
        scope_of=scopes,
    )
