"""Reading ONNX node attributes the same way everywhere (shape rules, gradient rules, kernels)."""

from __future__ import annotations

__all__ = ["auto_pad_mode", "attribute_subgraphs"]


def auto_pad_mode(attrs: dict) -> str:
    """A node's ``auto_pad`` attribute as a str (models may store it as bytes), NOTSET by default."""
    mode = attrs.get("auto_pad", "NOTSET")
    return mode.decode() if isinstance(mode, bytes) else mode


def attribute_subgraphs(attribute) -> list:
    """The graphs an ``onnx.AttributeProto`` holds: its ``g`` (a GRAPH attribute, an If's branch) and its ``graphs``."""
    return ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs)
