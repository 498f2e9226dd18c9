"""``onnxnn.cuda``: whether onnxruntime's CUDA execution provider really works here."""

from __future__ import annotations

from .ir.device import cuda_is_available

__all__ = ["is_available", "device_count"]


def is_available() -> bool:
    """True when a session with onnxruntime's CUDA provider can be created (checked once, by trying)."""
    return cuda_is_available()


def device_count() -> int:
    return 1 if cuda_is_available() else 0
