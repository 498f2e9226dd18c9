"""Anomaly detection: ``detect_anomaly`` and ``set_detect_anomaly``, as ``torch.autograd``'s.

In anomaly mode every backward node remembers the stack of the forward call that made it. When a
backward fails, a warning shows that stack; with ``check_nan`` (the default) the gradients each
node gives are computed at once and a NaN among them raises, naming the node. The checks run
every node's gradients as a graph of their own, so the mode is slow: for debugging only.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ..ir.mode import MODE

__all__ = [
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "set_anomaly_enabled",
]


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return MODE.anomaly


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks backward gradients for NaN (True unless turned off)."""
    return MODE.anomaly_check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turns anomaly detection on or off, at once (``torch.set_anomaly_enabled``)."""
    MODE.anomaly = bool(enabled)
    MODE.anomaly_check_nan = bool(check_nan)


class detect_anomaly:
    """Turns anomaly detection on inside the block or decorated function.

    Backward nodes made inside remember where their forward call was; a backward that fails warns
    with that traceback, and with ``check_nan`` a node giving a NaN gradient raises a RuntimeError
    naming it. Slow: for debugging only.

    Args:
        check_nan: raise when a backward node's gradient holds a NaN (default True).

    Example::

        >>> x = onnxnn.tensor([0.0], requires_grad=True)
        >>> with onnxnn.autograd.detect_anomaly():
        ...     (onnxnn.sqrt(x) * 0).sum().backward()
        RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self._previous: list = []  # one entry per entered block: the decorated function may recurse

    def __enter__(self) -> None:
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
            "enabled for debugging.",
            UserWarning,
            stacklevel=2,
        )
        self._previous.append((MODE.anomaly, MODE.anomaly_check_nan))
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc_info) -> None:
        set_anomaly_enabled(*self._previous.pop())

    def __call__(self, function: Callable) -> Callable:
        @functools.wraps(function)
        def with_anomaly_detection(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return with_anomaly_detection


class set_detect_anomaly:
    """Turns anomaly detection on or off at once; as a context manager, restores it on exit.

    Args:
        mode: True to turn anomaly detection on, False to turn it off.
        check_nan: raise when a backward node's gradient holds a NaN (default True).
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        self._previous = (MODE.anomaly, MODE.anomaly_check_nan)
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc_info) -> None:
        set_anomaly_enabled(*self._previous)
