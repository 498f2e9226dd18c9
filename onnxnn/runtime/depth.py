"""Depth bounding, in one place: how deep a pending history may grow before part of it runs.

Every node records its depth (one more than its deepest pending input's), so recording knows
at no cost when a history passes ``MAX_PENDING_DEPTH``: a buffer updated on every call (a running
mean) or a loop that never reads its result must not grow one unbounded graph. ``bound_depth``
then realizes the deep outputs; whether it does follows from the structure recorded so far,
never from data, so a backward being traced for replay stays replayable. Exporting a model
(``unbounded_depth``) must keep everything pending instead.
"""

from __future__ import annotations

from ..ir.graph import Node
from ..ir.mode import MODE
from .realization import realize

__all__ = [
    "MAX_PENDING_DEPTH",
    "MAX_BACKWARD_PENDING_DEPTH",
    "pending_depth",
    "refresh_depth",
    "bound_depth",
    "after_recording",
    "unbounded_depth",
    "exporting",
]

MAX_PENDING_DEPTH = 600
# While a backward is recorded its nodes may pass the bound up to this depth. A backward's chain is
# about as deep as its forward's again, and everything it reads (the forward's values) is held by
# the graph anyway: realized midway, its forward's saved values become outputs of one run and inputs
# of the next. A 2-layer LSTM(256, 256) over 64 steps of 32 (about 650 deep with its backward) took
# 235 ms a training step in three runs, 169 ms in one (one thread).
MAX_BACKWARD_PENDING_DEPTH = 3 * MAX_PENDING_DEPTH


def pending_depth(value) -> int:
    """How many pending nodes lie behind ``value`` at most (0 when realized or absent)."""
    if value is None or value.data is not None:
        return 0
    return value.node.depth


def refresh_depth(node: Node) -> int:
    """Recomputes ``node.depth`` (and that of its pending ancestors) from what is pending now.

    Depths are set when a node is recorded; values realized since then make them overestimates,
    which would otherwise grow step after step in a loop that records on top of a pending update.
    """
    order, stack, seen = [], [node], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        order.append(current)
        stack.extend(value.node for value in current.inputs if value is not None and value.data is None)
    # Recorded depths still order nodes topologically, so one pass in that order is enough.
    for current in sorted(order, key=_recorded_depth):
        current.depth = 1 + max(map(pending_depth, current.inputs), default=0)
    return node.depth


def _recorded_depth(node: Node) -> int:
    return node.depth


def _values_above(node: Node, level: int) -> list:
    """The pending values in ``node``'s history whose producers are deeper than ``level`` (depths fresh)."""
    found, stack, seen = [], [node], set()
    while stack:
        current = stack.pop()
        for value in current.inputs:
            if value is None or value.data is not None or id(value) in seen:
                continue
            seen.add(id(value))
            producer = value.node
            if producer.depth > level:
                found.append(value)
                stack.append(producer)
    return found


def bound_depth(node, outputs) -> None:
    """Realizes ``outputs`` (of ``node``) when their pending history is deeper than MAX_PENDING_DEPTH.

    The deep half of that history is realized in the same run: every pending value produced deeper
    than ``MAX_PENDING_DEPTH // 2``. Realizing ``outputs`` alone would leave their siblings (the
    other gates of a recurrence, the other paths of a gradient) just under the bound, and the next
    few ops would pass it again: a 64-step LSTM's backward then ran as ~250 small runs per step
    instead of a few. Values nothing else uses are freed with the run's nodes as before.

    Recording an op calls it (``tensor.apply_op``, when ``node.depth`` passes the bound), and so
    does a replayed backward.
    """
    # Inside ``unbounded_depth`` first: refreshing walks the whole pending history, and an export
    # records thousands of nodes past the bound (each walk its whole model: quadratic in its depth).
    # A backward's bound is checked on the recorded depth first (an overestimate) for the same reason.
    grad_mode = MODE.grad
    if grad_mode.unbounded_depth:
        return
    bound = MAX_BACKWARD_PENDING_DEPTH if grad_mode.in_backward else MAX_PENDING_DEPTH
    if node.depth <= bound or refresh_depth(node) <= bound:
        return
    trace = MODE.trace
    read_data = trace is not None and trace.read_data
    realize(list(outputs) + _values_above(node, bound // 2))
    if trace is not None:
        trace.read_data = read_data


def after_recording(node, outputs) -> None:
    """What recording an op does once its node exists: computes it at once in eager mode
    (``set_executor(..., eager=True)``), or bounds a history deeper than ``MAX_PENDING_DEPTH``.

    Recording Tensor ops (``tensor.apply_op``, which calls it only when one of the two applies)
    and recording on Values (``internal.record_op``) both end here.
    """
    if outputs[0].data is not None:  # an op without a shape rule, computed on the spot
        return
    if MODE.eager:
        realize(outputs)
    elif node.depth > MAX_PENDING_DEPTH:
        bound_depth(node, outputs)


class unbounded_depth:
    """Within this block a deep pending history stays pending: ``bound_depth`` realizes nothing.

    Exporting traces a model into one graph; a value realized on the way would reach the exported
    file as a constant computed from the example input, not as a function of the graph's inputs.
    """

    def __enter__(self) -> "unbounded_depth":
        MODE.grad.unbounded_depth += 1
        return self

    def __exit__(self, *exc_info) -> None:
        MODE.grad.unbounded_depth -= 1


def exporting() -> bool:
    """Whether an export is tracing now (inside ``unbounded_depth``): what it records goes into a file,
    so a value drawn or read while tracing would be written as a constant of the example."""
    return MODE.grad.unbounded_depth > 0
