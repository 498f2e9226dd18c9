"""Graph outputs that only reshape a value the graph computes leave the session as that value.

onnxruntime gives every graph output a buffer of its own, so a graph that ends in a Reshape (a
weight gradient that one MatMul computes as ``(M, C * taps)`` and the node declares as
``(M, C, kh, kw)``, a flattened activation) copies the whole tensor into it: 0.5 ms for a
512x512x3x3 gradient, run after run. numpy reshapes a C-contiguous array without a copy. So a
session's model outputs the reshaped value itself, and the session reshapes its result.

Only reshapes to a static shape move out: a graph with symbolic sizes (``symbolic_inputs``) has
no output shape to restore.
"""

from __future__ import annotations

import onnx

from ..ir.model_building import names_read

__all__ = ["move_reshapes_out"]

# Ops whose output is their first input's elements in the same order: what numpy's reshape gives.
_RESHAPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def move_reshapes_out(model: onnx.ModelProto) -> list[tuple[int, tuple[int, ...]]]:
    """Rewrites ``model`` in place so that outputs made by a reshape of a computed value output that
    value; returns ``(output position, shape)`` for the results to reshape after each run.

    A reshape left without a consumer is removed. Outputs of graph inputs and initializers, and
    values that already leave the graph, stay as they are.
    """
    graph = model.graph
    producers = {name: node for node in graph.node for name in node.output if name}
    computed = set(producers) - {value.name for value in graph.input} - {init.name for init in graph.initializer}
    leaving = {output.name for output in graph.output}
    moved: list[tuple[int, tuple[int, ...]]] = []
    bypassed: set = set()  # ids of the reshape nodes whose outputs no longer leave the graph
    for position, output in enumerate(graph.output):
        node = producers.get(output.name)
        shape = _static_shape(output)
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type not in _RESHAPES or shape is None:
            continue
        source = node.input[0]
        if source not in computed or source in leaving:
            continue
        bypassed.add(id(node))
        leaving.discard(output.name)
        leaving.add(source)
        output.name = source
        # Its declared shape was the reshape's; the value's own is unknown here (no shape inference
        # for it), and onnxruntime needs none.
        output.type.tensor_type.ClearField("shape")
        moved.append((position, shape))
    if moved:
        # Subgraphs count: a branch may read the outer graph's values and constants.
        read = names_read(graph.node) | leaving
        kept = [node for node in graph.node if id(node) not in bypassed or any(name in read for name in node.output)]
        del graph.node[:]
        graph.node.extend(kept)
        # onnxruntime warns of initializers no node reads (the removed reshapes' shapes).
        read = names_read(graph.node) | leaving
        initializers = [init for init in graph.initializer if init.name in read]
        del graph.initializer[:]
        graph.initializer.extend(initializers)
    return moved


def _static_shape(value: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims = tensor_type.shape.dim
    if not all(dim.HasField("dim_value") for dim in dims):
        return None
    return tuple(dim.dim_value for dim in dims)
