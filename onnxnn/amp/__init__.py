"""Automatic mixed precision, as ``torch.amp``: :class:`autocast` regions and :class:`GradScaler`.

Example::

    >>> scaler = onnxnn.amp.GradScaler("cpu")
    >>> with onnxnn.autocast("cpu", dtype=onnxnn.float16):
    ...     loss = loss_fn(model(x), y)
    >>> scaler.scale(loss).backward()
    >>> scaler.step(optimizer)
    >>> scaler.update()
"""

from __future__ import annotations

from .autocast_mode import (
    autocast,
    clear_autocast_cache,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .grad_scaler import GradScaler, OptState

__all__ = [
    "autocast",
    "GradScaler",
    "OptState",
    "is_autocast_available",
    "is_autocast_enabled",
    "set_autocast_enabled",
    "get_autocast_dtype",
    "set_autocast_dtype",
    "is_autocast_cache_enabled",
    "set_autocast_cache_enabled",
    "clear_autocast_cache",
    "custom_fwd",
    "custom_bwd",
]
