"""Reading ONNX node attributes the same way everywhere (shape rules, gradient rules, kernels)."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["auto_pad_mode", "attribute_subgraphs", "graphs_within"]


def auto_pad_mode(attrs: dict) -> str:
    """A node's ``auto_pad`` attribute as a str (models may store it as bytes), NOTSET by default."""
    mode = attrs.get("auto_pad", "NOTSET")
    return mode.decode() if isinstance(mode, bytes) else mode


def attribute_subgraphs(attribute) -> list:
    """The graphs an ``onnx.AttributeProto`` holds: its ``g`` (a GRAPH attribute, an If's branch) and its ``graphs``."""
    return ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs)


def graphs_within(graph) -> Iterator:
    """``graph`` (an ``onnx.GraphProto``) and every graph nested in its nodes' attributes (an If's
    branches, a Loop's body), depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                yield from graphs_within(subgraph)
