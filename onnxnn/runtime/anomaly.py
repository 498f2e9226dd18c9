"""Anomaly mode's checks in the backward driver: where the failing node's forward call was.

``autograd.set_detect_anomaly`` turns on ``MODE.anomaly``. Backward nodes made meanwhile keep the
stack of their forward call (``autograd.FORWARD_STACKS``); the general backward driver then runs
each node through ``run_checked``, which warns with that stack when the node's backward raises
and, with ``MODE.anomaly_check_nan``, computes each gradient the node gives at once and raises
when one holds a NaN, as PyTorch's anomaly mode does. Computing every gradient on its own is
slow, which is why the mode is for debugging only (backward replays are off while it is on).
"""

from __future__ import annotations

import warnings

from ..ir.mode import MODE
from .autograd import FORWARD_STACKS, Function
from .grad_mode import no_grad

__all__ = ["run_checked"]


def run_checked(run, function: Function, slots: dict, create_graph: bool):
    """``run(function, slots, create_graph)``, the node's input gradients, checked as anomaly mode asks."""
    try:
        input_grads = run(function, slots, create_graph)
        if MODE.anomaly_check_nan:
            for position, gradient in enumerate(input_grads):
                if gradient is not None and _holds_nan(gradient):
                    raise RuntimeError(f"Function '{function.name()}' returned nan values in its {position}th output.")
    except Exception:
        _warn_forward_stack(function)
        raise
    return input_grads


def _holds_nan(gradient) -> bool:
    if not gradient.dtype.is_floating_point:
        return False
    with no_grad():
        return bool(gradient.detach().isnan().any())


def _warn_forward_stack(function: Function) -> None:
    stack = FORWARD_STACKS.get(function)
    if stack is None:
        message = (
            f"Error detected in {function.name()}. No forward pass information available. "
            "Enable detect anomaly during forward pass for more information."
        )
    else:
        message = f"Error detected in {function.name()}. Traceback of forward call that caused the error:\n" + "".join(
            stack
        )
    warnings.warn(message, UserWarning, stacklevel=2)
