"""Dynamic axes for exported graphs, found by tracing at two sizes.

Python code such as ``x.view(x.size(0), -1)`` turns a size into a structural constant when it is
recorded. Tracing once more with every dynamic axis resized shows which constants follow which
axis: each such constant ``k * size + c`` is replaced by a small ``Shape -> Gather -> Mul -> Add
-> Concat`` subgraph over the graph input, so the exported model runs at any size. Graph inputs
and outputs get symbolic dimensions.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..runtime.creation import as_tensor

__all__ = ["make_shapes_dynamic", "normalize_dynamic_axes"]


def normalize_dynamic_axes(dynamic_axes: dict, names: list[str]) -> dict[str, dict[int, str]]:
    """``{name: {axis: symbol}}`` from PyTorch's accepted forms (dicts or lists of axes)."""
    normalized = {}
    for name, axes in dynamic_axes.items():
        if name not in names:
            raise ValueError(
                f"to_onnx: dynamic_axes names '{name}', which is neither an input nor an output name (names: {names})"
            )
        if isinstance(axes, dict):
            normalized[name] = {int(axis): str(symbol) for axis, symbol in axes.items()}
        else:
            normalized[name] = {int(axis): f"{name}_dynamic_axes_{position + 1}" for position, axis in enumerate(axes)}
    return normalized


def widen_unit_axes(args: tuple, input_names: list[str], dynamic_axes: dict) -> tuple:
    """The example arguments with every dynamic axis of size 0 or 1 made size 2 (data repeated).

    A trace at size 1 specializes: broadcasting needs no node, ``expand`` to the same shape records
    none, so the trace at another size would differ in structure. PyTorch's ``torch.export`` refuses
    such examples for the same reason; tracing at 2 instead exports the graph every size shares.
    """
    names = list(input_names)
    axes = normalize_dynamic_axes({name: dims for name, dims in dynamic_axes.items() if name in names}, names)
    widened = []
    for arg, name in zip(args, input_names):
        shape = list(getattr(arg, "shape", ()))
        small = [axis % len(shape) for axis in axes.get(name, {}) if shape and shape[axis % len(shape)] < 2]
        if not small:
            widened.append(arg)
            continue
        for axis in small:
            shape[axis] = 2
        data = np.resize(arg.numpy(force=True), shape).astype(arg.dtype.numpy_dtype)
        if data.size == 0:  # np.resize of an empty array fills nothing: zeros of the new shape
            data = np.zeros(shape, arg.dtype.numpy_dtype)
        widened.append(as_tensor(data))
    return tuple(widened)


def _resized_arguments(args: tuple, input_names: list[str], axes: dict) -> tuple[tuple, list]:
    """Copies of the example arguments with every dynamic axis made larger, and the size sources."""
    resized, sources = [], []
    for arg, name in zip(args, input_names):
        dims = axes.get(name, {})
        if not dims:
            resized.append(arg)
            continue
        shape = list(arg.shape)
        new_shape = list(shape)
        for axis, symbol in dims.items():
            axis = axis % len(shape)
            new_shape[axis] = shape[axis] + 2
            sources.append((name, axis, shape[axis], new_shape[axis], symbol))
        data = np.resize(arg.numpy(force=True), new_shape).astype(arg.dtype.numpy_dtype)
        resized.append(as_tensor(data))
    return tuple(resized), sources


def _fit(first: int, second: int, sources: list) -> tuple | None:
    """The (source, k, c) with ``first = k * d1 + c`` and ``second = k * d2 + c``; k a nonzero integer."""
    best = None
    for source in sources:
        d1, d2 = source[2], source[3]
        if (first - second) % (d1 - d2):
            continue
        k = (first - second) // (d1 - d2)
        c = first - k * d1
        if k == 0:
            continue
        score = (c != 0, abs(k) != 1)
        if best is None or score < best[0]:
            best = (score, source, k, c)
    if best is None:
        return None
    return best[1:]


def _size_expression(graph_nodes: list, initializers: list, cache: dict, source, k: int, c: int) -> str:
    """Appends nodes computing ``k * size(input, axis) + c`` as a 1-element int64 tensor; returns its name."""
    name, axis = source[0], source[1]
    key = (name, axis, k, c)
    if key in cache:
        return cache[key]
    shape_name = f"{name}::shape"
    if shape_name not in cache:
        graph_nodes.append(helper.make_node("Shape", [name], [shape_name]))
        cache[shape_name] = shape_name
    size_name = f"{name}::size_{axis}"
    if size_name not in cache:
        index_name = f"{size_name}::index"
        initializers.append(numpy_helper.from_array(np.array([axis], np.int64), index_name))
        graph_nodes.append(helper.make_node("Gather", [shape_name, index_name], [size_name], axis=0))
        cache[size_name] = size_name
    result = size_name
    if k != 1:
        factor = f"{size_name}::times_{k}"
        initializers.append(numpy_helper.from_array(np.array([k], np.int64), factor + "::factor"))
        graph_nodes.append(helper.make_node("Mul", [result, factor + "::factor"], [factor]))
        result = factor
    if c != 0:
        shifted = f"{result}::plus_{c}"
        initializers.append(numpy_helper.from_array(np.array([c], np.int64), shifted + "::offset"))
        graph_nodes.append(helper.make_node("Add", [result, shifted + "::offset"], [shifted]))
        result = shifted
    cache[key] = result
    return result


def _check_same_structure(first, second) -> None:
    if len(first.plan.nodes) != len(second.plan.nodes) or any(
        a.signature != b.signature for a, b in zip(first.plan.nodes, second.plan.nodes)
    ):
        raise RuntimeError(
            "to_onnx: the traced graph changes structure when a dynamic axis changes size "
            "(Python control flow on a size?); export with fixed sizes instead"
        )


def make_shapes_dynamic(
    proto: onnx.ModelProto,
    model,
    args: tuple,
    input_names: list[str],
    output_names: list[str],
    dynamic_axes: dict,
    trace,
    retrace,
) -> None:
    """Rewrites ``proto`` in place so every ``dynamic_axes`` axis may change size at run time."""
    axes = normalize_dynamic_axes(dynamic_axes, list(input_names) + list(output_names))
    resized_args, sources = _resized_arguments(args, input_names, axes)
    if not sources:
        return
    second = retrace(resized_args)
    _check_same_structure(trace, second)

    prologue: list
    new_initializers: list
    cache: dict
    prologue, new_initializers, cache = [], [], {}
    graph_nodes = proto.graph.node
    for position, (node_a, node_b) in enumerate(zip(trace.plan.nodes, second.plan.nodes)):
        for slot, (value_a, value_b) in enumerate(zip(node_a.inputs, node_b.inputs)):
            if value_a is None or value_a.data is None:
                continue
            if value_a.static is not None:
                if value_b.static == value_a.static:
                    continue
                first, later = value_a.data.reshape(-1), value_b.data.reshape(-1)
                if value_a.data.ndim != 1 or first.shape != later.shape:
                    raise RuntimeError(
                        f"to_onnx: a shape argument of {node_a.op_type} depends on a dynamic axis "
                        "in a way onnxnn cannot express"
                    )
                pieces = []
                for element_a, element_b in zip(first.tolist(), later.tolist()):
                    if element_a == element_b:
                        constant_name = f"onnxnn::dim_constant_{element_a}"
                        if constant_name not in cache:
                            new_initializers.append(
                                numpy_helper.from_array(np.array([element_a], np.int64), constant_name)
                            )
                            cache[constant_name] = constant_name
                        pieces.append(constant_name)
                        continue
                    fitted = _fit(element_a, element_b, sources)
                    if fitted is None:
                        raise RuntimeError(
                            f"to_onnx: a size used by {node_a.op_type} ({element_a} at the traced "
                            "size) is not a multiple of a dynamic axis plus a constant"
                        )
                    pieces.append(_size_expression(prologue, new_initializers, cache, *fitted))
                computed = f"onnxnn::dynamic_shape_{position}_{slot}"
                prologue.append(helper.make_node("Concat", pieces, [computed], axis=0))
                graph_nodes[position].input[slot] = computed
            elif any(value_a is arg for arg in trace.arg_values):
                continue
            elif value_a.shape != value_b.shape or not np.array_equal(value_a.data, value_b.data):
                warnings.warn(
                    f"to_onnx: a constant used by {node_a.op_type} was computed from a traced size and "
                    "is baked into the graph; it will be wrong at other sizes",
                    UserWarning,
                    stacklevel=3,
                )

    if prologue:
        nodes = prologue + list(graph_nodes)
        del graph_nodes[:]
        graph_nodes.extend(nodes)
        proto.graph.initializer.extend(new_initializers)

    _drop_unused_initializers(proto)
    for graph_input in proto.graph.input:
        for axis, symbol in axes.get(graph_input.name, {}).items():
            dims = graph_input.type.tensor_type.shape.dim
            dims[axis % len(dims)].dim_param = symbol
    symbol_by_sizes = {(d1, d2): symbol for _, _, d1, d2, symbol in sources}
    for index, graph_output in enumerate(proto.graph.output):
        named = axes.get(graph_output.name, {})
        dims = graph_output.type.tensor_type.shape.dim
        for axis, (size_a, size_b) in enumerate(zip(trace.output_shapes[index], second.output_shapes[index])):
            if axis in named or axis - len(dims) in named:
                dims[axis].dim_param = named.get(axis, named.get(axis - len(dims)))
            elif size_a != size_b:
                dims[axis].dim_param = symbol_by_sizes.get((size_a, size_b), f"{graph_output.name}_dim_{axis}")


def _drop_unused_initializers(proto: onnx.ModelProto) -> None:
    """Structural constants replaced by computed shapes are no longer read: remove them."""
    used = {name for node in proto.graph.node for name in node.input}
    initializers = proto.graph.initializer
    # Deleted where they stand: re-adding the kept ones would copy every weight.
    for index in reversed(range(len(initializers))):
        if initializers[index].name not in used:
            del initializers[index]
