"""``onnxnn.autograd.grad_mode`` (PyTorch's ``torch.autograd.grad_mode``): the grad-mode switches,
the same objects as ``onnxnn.no_grad`` and the others."""

from __future__ import annotations

from ..runtime.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
]
