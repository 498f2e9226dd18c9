"""Small helpers shared by the export's rewrites of a finished ONNX graph (opset conversion, guards)."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from ..ir.attributes import attribute_subgraphs

__all__ = ["graphs_within", "fresh_name"]


def graphs_within(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes (an If's branches, a Loop's body), depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                yield from graphs_within(subgraph)


def fresh_name(base: str, taken: set) -> str:
    """``base``, or ``base_1``, ``base_2``... the first not in ``taken``; added to ``taken``."""
    name, count = base, 0
    while name in taken:
        count += 1
        name = f"{base}_{count}"
    taken.add(name)
    return name
