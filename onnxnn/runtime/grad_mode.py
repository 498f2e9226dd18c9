"""Gradient mode: ``no_grad``, ``enable_grad`` and ``set_grad_enabled``, as context managers and decorators."""

from __future__ import annotations

import functools

from ..ir.mode import MODE

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode"]


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad are recorded for backward."""
    return MODE.grad.enabled


class _GradModeContext:
    """Base of the grad-mode switches: a context manager that also decorates functions."""

    mode = True

    def __enter__(self):
        self._previous = MODE.grad.enabled
        MODE.grad.enabled = self.mode
        return None

    def __exit__(self, *exc_info) -> None:
        MODE.grad.enabled = self._previous

    def __call__(self, function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with self._fresh():  # a context per call (calls may nest or run on other threads)
                return function(*args, **kwargs)

        return wrapper

    def _fresh(self) -> "_GradModeContext":
        """A context of this one's class and mode (``inference_mode(False)`` keeps its False)."""
        context = object.__new__(type(self))
        context.mode = self.mode
        return context


class no_grad(_GradModeContext):
    """Disables gradient recording inside the block or decorated function.

    Example::

        >>> with onnxnn.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    mode = False


class enable_grad(_GradModeContext):
    """Enables gradient recording inside the block, even within ``no_grad``."""

    mode = True


class inference_mode(no_grad):
    """Same as ``no_grad`` here: onnxnn tensors carry no extra inference-only state."""

    def __init__(self, mode: bool = True):
        self.mode = not mode


class set_grad_enabled(_GradModeContext):
    """Sets gradient recording on or off; takes effect at once and also works as a context manager."""

    def __init__(self, mode: bool):
        self._previous = MODE.grad.enabled
        self.mode = bool(mode)
        MODE.grad.enabled = self.mode

    def __enter__(self):
        return None

    def __exit__(self, *exc_info) -> None:
        MODE.grad.enabled = self._previous

    def __call__(self, function):
        MODE.grad.enabled = self._previous  # used as a decorator: the call above must not leak

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(self.mode):
                return function(*args, **kwargs)

        return wrapper
