"""``onnxnn.compile``: PyTorch's ``torch.compile`` entry point.

Implemented in :mod:`onnxnn.runtime.compilation`, below ``nn``, so that ``nn.Module.compile``
reaches it without importing the top-level package.
"""

from __future__ import annotations

from .runtime.compilation import compile  # noqa: A004  (torch.compile's name)

__all__ = ["compile"]
