"""``onnxnn.autograd``: ``grad``, ``backward``, custom ``Function`` classes and the grad-mode switches, as in
``torch.autograd`` (with its deprecated ``Variable``, which every tensor is)."""

from __future__ import annotations

from ..runtime.backward import grad, run_backward
from ..runtime.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from . import functional, grad_mode
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .variable import Variable

__all__ = [
    "grad",
    "backward",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "grad_mode",
    "Variable",
    "variable",
    "functional",
    "detect_anomaly",
    "set_detect_anomaly",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulates the gradients of ``tensors`` into the ``.grad`` of graph leaves."""
    run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def variable(*args, **kwargs):
    """Removed, as in PyTorch, where the name (like this one) stands over the module of ``Variable``
    and raises: make tensors with ``onnxnn.tensor``.

    Raises:
        RuntimeError: always.
    """
    raise RuntimeError("onnxnn.autograd.variable(...) is deprecated, use onnxnn.tensor(...) instead")
