"""Small helpers shared by the export's rewrites of a finished ONNX graph (opset conversion, guards)."""

from __future__ import annotations

import re
import onnx

from ..ir.attributes import graphs_within  # re-exported: the export's rewrites walk graphs with it

__all__ = ["graphs_within", "fresh_name", "name_constants_anonymously", "ANONYMOUS_CONSTANT"]


def fresh_name(base: str, taken: set) -> str:
    """``base``, or ``base_1``, ``base_2``... the first not in ``taken``; added to ``taken``."""
    name, count = base, 0
    while name in taken:
        count += 1
        name = f"{base}_{count}"
    taken.add(name)
    return name


# How an export names a constant that is part of the graph, not of the module's state (a scalar of the
# forward, a reshape target, a decomposition's coefficient): ``from_onnx`` keeps these out of the
# imported module's parameters and buffers (import_/graph_module.py matches the same form).
ANONYMOUS_CONSTANT = re.compile(r"onnxnn::constant_[0-9]+")


def name_constants_anonymously(model: onnx.ModelProto, state_names) -> None:
    """Renames every initializer of ``model`` that is not in ``state_names`` (nor already anonymous,
    nor a graph output) to ``onnxnn::constant_N``, with every read of it.

    The constants that decompositions, opset lowerings and guards write carry names of their own
    (``node_4_constant_3``), which an import of the file took for the module's state: Parameters
    that a fine-tuning step then moved (an atan's polynomial coefficients, a clamp's infinite bound).
    """
    graph = model.graph
    keep = set(state_names) | {output.name for output in graph.output}
    renamed: dict = {}
    taken: set = set()
    graphs = list(graphs_within(graph))
    for each in graphs:
        taken.update(name for node in each.node for name in (*node.input, *node.output))
        taken.update(tensor.name for tensor in each.initializer)
    count = 0
    for tensor in graph.initializer:
        if tensor.name in keep or ANONYMOUS_CONSTANT.fullmatch(tensor.name):
            continue
        while f"onnxnn::constant_{count}" in taken:
            count += 1
        renamed[tensor.name] = tensor.name = f"onnxnn::constant_{count}"
        taken.add(tensor.name)
    if not renamed:
        return
    for each in graphs:
        for node in each.node:
            for position, name in enumerate(node.input):
                if name in renamed:
                    node.input[position] = renamed[name]
    for info in (*graph.input, *graph.value_info):
        if info.name in renamed:
            info.name = renamed[info.name]
