"""``skip_init``: build a module without running its default parameter initialization."""

from __future__ import annotations

import inspect

from .. import init as _init
from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """Constructs ``module_cls(*args, **kwargs)`` with its parameters left uninitialized (zero-filled).

    PyTorch builds the module on the meta device and materializes it with ``to_empty``; here the
    ``onnxnn.nn.init`` functions are no-ops during construction, which skips exactly the same work
    for modules that initialize through ``nn.init`` (as every ``onnxnn.nn`` layer does). Like
    PyTorch, the module must accept a ``device`` keyword argument.

    Example::

        >>> m = nn.utils.skip_init(nn.Linear, 5, 1)
        >>> nn.init.orthogonal_(m.weight)
    """
    if not (inspect.isclass(module_cls) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    with _init._skipping_initialization():
        return module_cls(*args, **kwargs)
