"""Utilities for modules: ``onnxnn.nn.utils`` (PyTorch's ``torch.nn.utils``)."""
from __future__ import annotations

from .init_utils import skip_init

__all__ = ["skip_init"]
