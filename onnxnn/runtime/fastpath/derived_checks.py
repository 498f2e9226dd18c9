"""Checks of data on values a traced forward computes: moved onto the value they are computed from.

PyTorch checks some data on every call: an embedding's indices in range. Where the indices are
still pending, the check computes them (``internal.check_known_data`` with ``force``). Realizing
them would make a trace note a read, and a trace that read data is not replayed: the nodes it
recorded might depend on what it read. For a check they do not: the check can only raise. The
common indices are computed from a buffer or from constants the forward makes: BERT's
``self.position_ids[:, :length]``, GPT-2's ``arange(past, past + length)[None, :]``. So they are
computed apart, with onnxnn's kernels over the few nodes that make them, and the value is left
pending, as recording left it, in plain calls as in traces (so that both leave the same graph).
In a trace, what a replay needs then depends on what the indices are made from:

- made from constants the forward made (not drew) alone: a replay makes the same constants and
  the same indices, so the check passes there as it did here; nothing is checked again;
- made from one other value (the buffer, an argument) and such constants: the check becomes one of
  that value, whose function computes the indices from its array first. A replay gathers that
  value, and a compiled call's prepared run finds it among its state, so both make the check on
  their own array, as on any other gathered value (``forward_replay._drawn_and_checked``).

Anything else (several such values, a value on a GPU, an op the kernels lack, a long history)
is computed as before, and the trace notes the read.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ...ir.device import CPU
from ...ir.executors import executor
from ...ir.mode import drawn_values
from ...ir.plan import plan

__all__ = ["derived_check"]

MOST_NODES = 64  # a check's pending history worth computing apart: a few index computations


def derived_check(value, check: Callable[[np.ndarray], None], trace=None) -> tuple | None:
    """``(source, source_check)`` for a check of the pending ``value`` (in ``trace``, if any), or None.

    ``source`` is the one realized value ``value`` is computed from besides constants (static ones,
    and in a trace those the traced forward made and did not draw), or None when there is none
    (outside a trace every realized value counts as a constant); ``source_check(array)`` computes
    ``value`` from ``source``'s array (ignored without a source) and checks it.
    """
    if trace is not None and trace.created is None:
        return None
    if not _short_history(value):
        return None  # a model's output (generated tokens): realizing it plans it once, not twice
    graph = plan([value])
    drawn = set() if trace is None else drawn_values(trace.effects)
    source_position = None
    for position, input in enumerate(graph.inputs):
        if input.device is not CPU or not isinstance(input.data, np.ndarray):
            return None
        if trace is not None and input.static is None and (input not in trace.created or input in drawn):
            if source_position is not None:
                return None
            source_position = position
    try:
        runner = executor("kernels").compile(graph)
    except (NotImplementedError, TypeError, RuntimeError):
        return None
    arrays = [input.data for input in graph.inputs]
    source = None if source_position is None else graph.inputs[source_position]
    return source, functools.partial(_computed_then_checked, runner, arrays, source_position, check)


def _short_history(value) -> bool:
    """Whether the pending ``value`` is computed by at most ``MOST_NODES`` nodes (walked no further)."""
    seen: set = set()
    pending = [value]
    while pending:
        node = pending.pop().node
        if node is None or id(node) in seen:
            continue
        if len(seen) == MOST_NODES:
            return False
        seen.add(id(node))
        pending.extend(input for input in node.inputs if input is not None and input.data is None)
    return True


def _computed_then_checked(runner, arrays: list, source_position: int | None, check, source_array) -> None:
    if source_position is not None:
        arrays = list(arrays)
        arrays[source_position] = source_array
    check(runner(arrays)[0])
