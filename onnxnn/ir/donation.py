"""Donated inputs: the arrays of a plan's inputs that nothing but the plan can read any more.

An optimizer step replaces every parameter and state by a new value, and the old ones are usually
read by nothing after the step's updates: the parameters' Tensors hold the new values already. A
kernel may then write its results over the old arrays (in place), instead of into fresh memory
whose every cache line a store must first read (resnet18's Momentum update: 4 ms instead of 7).

Values stay immutable for everyone who can observe them, as ``kernels/recycled_buffers.py`` keeps
them: an input is donated only when CPython's reference counts show that no one else holds its
value (a Tensor, a pending node that reads it, a backward that saved it) nor its array (a
``.numpy()`` result, another value sharing it). Reference counts decide only where results are
written, never what they are: a debugger holding a reference makes a step slower, not different.
The counts are only exact while a GIL serializes reference counting; a free-threaded interpreter
never donates.

``realization.realize_step`` runs a step's updates inside ``donating(dead_input_arrays(plan))``; the
update kernels ask :func:`donated` which arrays they may overwrite (``kernels/update_driver.py``).

A run that overwrites its inputs cannot be run again: should it stop after a write and before its
results reach their values, those values stay pending, and computing them later would apply the
update twice. So only a plan of one node donates (a second node's failure would follow the first
one's writes), and a keyboard interrupt during a ``donating`` block waits for its end, by which the
results have been assigned.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections import Counter
from itertools import chain
from typing import Any

__all__ = ["donating", "donated", "dead_input_arrays"]

_FREE_THREADED = not getattr(sys, "_is_gil_enabled", lambda: True)()

# References to a fed value while ``dead_input_arrays`` looks at it, besides the plan's own (its
# inputs list and its nodes' inputs): the loop's variable and getrefcount's argument.
_LOOKING_AT_VALUE = 2
# References to a donated value's array: the value's ``data``, the local variable and getrefcount's argument.
_ONLY_ITS_VALUE = 3

_NONE: frozenset = frozenset()


class _Scope(threading.local):
    arrays: frozenset = _NONE  # ids of the arrays the running plan's kernels may overwrite


_scope = _Scope()


def dead_input_arrays(plan) -> frozenset:
    """The ids of the arrays of ``plan``'s inputs (a ``GraphPlan``) that only the plan refers to: each
    the data of a value nothing outside the plan holds, and held by nothing but that value."""
    if _FREE_THREADED or len(plan.nodes) != 1:
        return _NONE
    held_by_plan = Counter(map(id, chain(plan.inputs, *[node.inputs for node in plan.nodes])))
    dead = []
    for value in plan.inputs:
        if sys.getrefcount(value) == held_by_plan[id(value)] + _LOOKING_AT_VALUE:
            data = value.data
            if sys.getrefcount(data) == _ONLY_ITS_VALUE:
                dead.append(id(data))
    return frozenset(dead)


class donating:
    """Within this block, this thread's kernels may overwrite the arrays whose ids are ``arrays``
    (``dead_input_arrays`` of the plan the block runs), and the block must assign the plan's results
    to their values. The arrays must stay alive until the block ends: an id names an array only
    while it lives. On the main thread, a SIGINT received in the block (Ctrl-C) is delivered when
    it ends."""

    def __init__(self, arrays: frozenset):
        self.arrays = arrays
        self.interrupted = False
        self.handler: Any = None  # the SIGINT handler the block replaced, while it defers SIGINT

    def __enter__(self) -> "donating":
        self.outer = _scope.arrays
        _scope.arrays = self.arrays
        if self.arrays and threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGINT)
            if handler is not None:  # None: installed outside Python, which could not be put back
                self.handler = handler
                signal.signal(signal.SIGINT, self._defer)
        return self

    def _defer(self, signal_number, frame) -> None:
        self.interrupted = True

    def __exit__(self, *exc_info) -> None:
        _scope.arrays = self.outer
        if self.handler is not None:
            signal.signal(signal.SIGINT, self.handler)
            if self.interrupted:
                signal.raise_signal(signal.SIGINT)


def donated() -> frozenset:
    """The ids of the arrays this thread's running kernels may overwrite (empty outside :class:`donating`)."""
    return _scope.arrays
