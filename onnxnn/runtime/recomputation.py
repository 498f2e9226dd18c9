"""The state a recomputation re-enters: per-thread switches of the layers above that change what
ops record.

``utils.checkpoint`` calls its function again during backward, usually outside the region the
first call ran in. PyTorch re-enters the first call's autocast state there, so that the
recomputation records the ops the first call recorded; onnxnn does the same through this table.
The layers that own such a switch (``amp``: autocast) register how to capture it, since the layers
below them, ``utils`` included, may not import them.
"""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Iterator

from ..ir.mode import MODE

__all__ = ["register_recomputation_state", "capture_recomputation_state", "recomputation_state"]

# Each entry captures its switch now and returns what re-enters it later (a context manager factory).
_CAPTURES: list[Callable[[], Callable[[], ContextManager]]] = []


def register_recomputation_state(capture: Callable[[], Callable[[], ContextManager]]) -> None:
    """Adds a switch to what ``capture_recomputation_state`` captures (once per owning module)."""
    _CAPTURES.append(capture)


def capture_recomputation_state() -> tuple:
    """This thread's switches now, for ``recomputation_state`` to re-enter."""
    return tuple(capture() for capture in _CAPTURES)


@contextlib.contextmanager
def recomputation_state(captured: tuple) -> Iterator[None]:
    """Runs the block, forward code recorded again, with the switches as ``captured``; restores
    them after. Inside a backward, the block's ops are recorded as forward ops (``GradMode.recomputing``):
    autocast casts them as it did the first call's."""
    grad_mode = MODE.grad
    with contextlib.ExitStack() as stack:
        for enter in captured:
            stack.enter_context(enter())
        grad_mode.recomputing += 1
        try:
            yield
        finally:
            grad_mode.recomputing -= 1
