"""``use_deterministic_algorithms``: results that do not vary from run to run, as PyTorch's switch asks.

onnxnn's kernels are deterministic, and so are onnxruntime's CPU kernels at a fixed thread count
(their reductions split work the same way every run). Some of onnxruntime's GPU kernels are not
(atomic additions in scatters and reductions, convolution algorithms picked by timing): with the
switch on, the sessions built from then on set onnxruntime's ``use_deterministic_compute``, which
makes those kernels take their deterministic forms.
"""

from __future__ import annotations

from .ir.caches import clear_caches
from .ir.mode import MODE

__all__ = [
    "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled",
    "set_deterministic_debug_mode",
    "get_deterministic_debug_mode",
]

_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Sets whether computations must give the same results on every run with the same inputs.

    Args:
        mode: True to ask for deterministic kernels, False (the default state) to allow others.
        warn_only: kept as PyTorch's flag (its operations without a deterministic form warn
            instead of raising); every kernel onnxnn runs has a deterministic form.

    Example::

        >>> onnxnn.use_deterministic_algorithms(True)
        >>> onnxnn.are_deterministic_algorithms_enabled()
        True
    """
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(
            f"use_deterministic_algorithms(): argument 'warn_only' must be bool, not {type(warn_only).__name__}"
        )
    state = (mode, warn_only)
    if state[0] != MODE.deterministic[0]:
        clear_caches()  # sessions built before keep the kernels they were built with
    MODE.deterministic = state


def are_deterministic_algorithms_enabled() -> bool:
    """Whether ``use_deterministic_algorithms(True)`` is in force."""
    return MODE.deterministic[0]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether ``use_deterministic_algorithms`` was turned on with ``warn_only=True``."""
    return MODE.deterministic[1]


def set_deterministic_debug_mode(debug_mode: int | str) -> None:
    """``use_deterministic_algorithms`` by PyTorch's debug-mode names.

    Args:
        debug_mode: "default" or 0 (off), "warn" or 1 (on, warn only), "error" or 2 (on).
    """
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, int):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """0 when deterministic algorithms are off, 1 when on with ``warn_only``, 2 when on."""
    enabled, warn_only = MODE.deterministic
    return 0 if not enabled else 1 if warn_only else 2
