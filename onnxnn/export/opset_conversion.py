"""Converting an exported model to an older opset, around the gaps of onnx's version converter.

onnx's converter needs an adapter for every op whose schema changed between the two opsets, and
has none to take ``Pad`` below opset 18 (18 added the optional ``axes`` input, 19 the ``wrap``
mode). A ``Pad`` without ``axes`` and in another mode means the same at opset 11 through 21, so it
is carried across unchanged: moved into a private domain for the conversion (the converter leaves
other domains alone) and moved back after it.
"""

from __future__ import annotations

import onnx

from ..ir.attributes import attribute_subgraphs

__all__ = ["convert_opset"]

_CARRIED_DOMAIN = "ai.onnxnn.unchanged_across_opsets"


def _unchanged_since(node: onnx.NodeProto) -> int | None:
    """The oldest opset at which ``node`` (a node of opset 21) means what it means now, if known."""
    if node.op_type != "Pad" or node.domain not in ("", "ai.onnx"):
        return None
    if len(node.input) > 3 and node.input[3]:
        return None  # axes: opset 18
    mode = next((attribute.s for attribute in node.attribute if attribute.name == "mode"), b"constant")
    return None if mode == b"wrap" else 11


def _carried(node: onnx.NodeProto, opset: int) -> bool:
    since = _unchanged_since(node)
    return since is not None and since <= opset


def _graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                yield from _graphs(subgraph)


def convert_opset(proto: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``proto`` converted to ``opset`` by onnx's converter, carrying across what it cannot adapt."""
    from onnx import version_converter  # deferred: only a non-default opset needs the converter

    if not any(_carried(node, opset) for graph in _graphs(proto.graph) for node in graph.node):
        return version_converter.convert_version(proto, opset)
    shielded = onnx.ModelProto()
    shielded.CopyFrom(proto)
    for node in (node for graph in _graphs(shielded.graph) for node in graph.node):
        if _carried(node, opset):
            node.domain = _CARRIED_DOMAIN
    shielded.opset_import.add(domain=_CARRIED_DOMAIN, version=1)
    converted = version_converter.convert_version(shielded, opset)
    for node in (node for graph in _graphs(converted.graph) for node in graph.node):
        if node.domain == _CARRIED_DOMAIN:
            node.domain = ""
    kept = [entry for entry in converted.opset_import if entry.domain != _CARRIED_DOMAIN]
    del converted.opset_import[:]
    converted.opset_import.extend(kept)
    return converted
