"""Reads of shapes that a static graph knows, folded into constants before its session on a GPU.

Some lowerings read shapes in the graph (``Shape``, ``Size``: a batch normalization's element
count, a convolution gradient's spatial extent) so that one session can serve several input sizes
(``sessions.symbolic_inputs``). onnxruntime's CUDA provider leaves such shape arithmetic to the CPU
provider, which costs copies between the two, and a graph with any node on the CPU cannot be
captured as a CUDA graph (``fastpath/cuda_graphs.py``). Where every input's shape is fixed, ONNX's
shape inference gives the shapes read (propagating the values of shape reads through the ops that
compute a reshape's target from them), and each read becomes a constant; onnxruntime then folds
the arithmetic on them when the session is built.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["fold_static_shapes", "has_static_inputs"]

_FOLDED = frozenset({"Shape", "Size"})


def has_static_inputs(model: onnx.ModelProto) -> bool:
    """Whether every input of ``model``'s graph has a fixed shape."""
    return all(
        all(dim.HasField("dim_value") for dim in graph_input.type.tensor_type.shape.dim)
        for graph_input in model.graph.input
    )


def fold_static_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each ``Shape`` and ``Size`` node whose input's shape is known replaced by a
    constant (``model`` itself where there is none, or shape inference cannot run on it)."""
    if not any(node.op_type in _FOLDED for node in model.graph.node):
        return model
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # an op shape inference does not know stops nothing: the reads stay
        return model
    graph = inferred.graph
    shapes = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        dims = info.type.tensor_type.shape.dim
        if info.type.tensor_type.HasField("shape") and all(dim.HasField("dim_value") for dim in dims):
            shapes[info.name] = [dim.dim_value for dim in dims]
    for initializer in graph.initializer:
        shapes[initializer.name] = list(initializer.dims)
    outputs = {output.name for output in model.graph.output}
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    del folded.graph.node[:]
    for node in model.graph.node:
        shape = shapes.get(node.input[0]) if node.op_type in _FOLDED and node.input else None
        if shape is None or node.output[0] in outputs:
            folded.graph.node.append(node)
            continue
        value = np.array(_read(node, shape), np.int64)
        folded.graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
    return folded


def _read(node: onnx.NodeProto, shape: list) -> list | int:
    """What ``node`` (a Shape or Size node) reads from a tensor of ``shape``."""
    if node.op_type == "Size":
        return int(np.prod(shape, dtype=np.int64))
    attributes = {attribute.name: attribute.i for attribute in node.attribute}
    rank = len(shape)
    # ONNX's Shape(start, end): negative bounds count from the end, and both clamp to [0, rank].
    start, end = attributes.get("start", 0), attributes.get("end", rank)
    start, end = (min(max(bound + rank if bound < 0 else bound, 0), rank) for bound in (start, end))
    return shape[start:end]
