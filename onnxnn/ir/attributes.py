"""Reading ONNX node attributes the same way everywhere (shape rules, gradient rules, kernels)."""

from __future__ import annotations

__all__ = ["auto_pad_mode"]


def auto_pad_mode(attrs: dict) -> str:
    """A node's ``auto_pad`` attribute as a str (models may store it as bytes), NOTSET by default."""
    mode = attrs.get("auto_pad", "NOTSET")
    return mode.decode() if isinstance(mode, bytes) else mode
