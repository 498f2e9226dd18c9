"""Gradient mode: ``no_grad``, ``enable_grad`` and ``set_grad_enabled``, as context managers and decorators."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ..ir.mode import MODE

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
]


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad are recorded for backward."""
    return MODE.grad.enabled


def _wrap_generator(make_context: Callable[[], Any], function: Callable) -> Callable:
    """A generator function running ``function``'s generator with a context from ``make_context`` around
    each resume, as PyTorch's: the mode holds inside the body and the caller's returns at each yield."""

    @functools.wraps(function)
    def generator_context(*args, **kwargs):
        generator = function(*args, **kwargs)
        try:
            with make_context():
                response = generator.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with make_context():
                        generator.close()
                    raise
                except BaseException as error:  # thrown in by the caller: the body handles it
                    with make_context():
                        response = generator.throw(error)
                else:
                    with make_context():
                        response = generator.send(request)
        except StopIteration as stop:
            return stop.value

    return generator_context


class _GradModeContext:
    """Base of the grad-mode switches: a context manager that also decorates functions."""

    mode = True

    def __enter__(self):
        self._previous = MODE.grad.enabled
        MODE.grad.enabled = self.mode
        return None

    def __exit__(self, *exc_info) -> None:
        MODE.grad.enabled = self._previous

    def __call__(self, function: Callable) -> Callable:
        # A context per call (calls may nest or run on other threads); a generator's body runs
        # between its caller's steps, so the mode is set around each resume, not around the call.
        if inspect.isgeneratorfunction(function):
            return _wrap_generator(self._fresh, function)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with self._fresh():
                return function(*args, **kwargs)

        return wrapper

    def _fresh(self) -> "_GradModeContext":
        """A context of this one's class and mode (``inference_mode(False)`` keeps its False)."""
        context = object.__new__(type(self))
        context.mode = self.mode
        return context


class _BareDecorator(_GradModeContext):
    """A switch that also decorates without parentheses (``@no_grad``), as PyTorch's."""

    def __new__(cls, function: Callable | None = None):
        if function is None:
            return super().__new__(cls)
        return cls()(function)


class no_grad(_BareDecorator):
    """Disables gradient recording inside the block or decorated function.

    Also a decorator, with or without parentheses; a decorated generator function runs its body
    without gradients at every resume.

    Example::

        >>> with onnxnn.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    mode = False


class enable_grad(_BareDecorator):
    """Enables gradient recording inside the block, even within ``no_grad``.

    Also a decorator, with or without parentheses (see :class:`no_grad`).
    """

    mode = True


class inference_mode(no_grad):
    """Same as ``no_grad`` here: onnxnn tensors carry no extra inference-only state.

    Args:
        mode: whether to enable inference mode (``True``, the default), or a function to decorate.
    """

    def __new__(cls, mode: Any = True):
        # As PyTorch's: anything but a bool is the function of a decorator without parentheses.
        if isinstance(mode, bool):
            return object.__new__(cls)
        return cls()(mode)

    def __init__(self, mode: bool = True):
        self.mode = not mode

    def __enter__(self):
        self._previous_inference = MODE.grad.inference
        MODE.grad.inference = not self.mode
        return super().__enter__()

    def __exit__(self, *exc_info) -> None:
        super().__exit__(*exc_info)
        MODE.grad.inference = self._previous_inference


def is_inference_mode_enabled() -> bool:
    """True inside an ``inference_mode()`` block (and not in an ``inference_mode(False)`` one within it)."""
    return MODE.grad.inference


class set_grad_enabled(_GradModeContext):
    """Sets gradient recording on or off; takes effect at once and also works as a context manager.

    Args:
        mode: whether to enable gradient recording (a bool).

    Raises:
        TypeError: ``mode`` is not a bool.
    """

    def __init__(self, mode: bool):
        if type(mode) is not bool:
            # As PyTorch's: a truthy string such as "no" would otherwise enable gradients.
            raise TypeError(
                f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, not {type(mode).__name__}"
            )
        self._previous = MODE.grad.enabled
        self.mode = mode
        MODE.grad.enabled = mode

    def __enter__(self):
        return None

    def __exit__(self, *exc_info) -> None:
        MODE.grad.enabled = self._previous

    def __call__(self, function: Callable) -> Callable:
        MODE.grad.enabled = self._previous  # used as a decorator: the call above must not leak
        return super().__call__(function)

    def _fresh(self) -> "set_grad_enabled":
        return set_grad_enabled(self.mode)
