"""onnxnn.nn: PyTorch's torch.nn API (Module, Parameter, containers, layers) recording ONNX graphs."""

from __future__ import annotations

from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter
from . import functional, init, parallel, utils  # noqa: E402
from .parallel import DataParallel

__all__ = [*_modules_all, "DataParallel", "Parameter", "Buffer", "functional", "init", "parallel", "utils"]
