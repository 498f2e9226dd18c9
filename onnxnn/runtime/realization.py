"""Realization: computing pending values, through caches keyed by structure.

``realize(values)`` plans the pending subgraph behind ``values`` (``ir.plan``: one walk builds its
canonical structural key, never data) and runs it with the runner kept for that structure
(``fastpath.plan_cache``: an onnxruntime session or onnxnn's kernels, chosen by a deterministic
cost model, and for inference with unchanged weights a specialized session). Pending
intermediates something else still needs (a live Tensor, a value saved for backward) are
returned by the same run, so nothing is computed twice.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..ir.caches import clear_caches
from ..ir.device import CPU
from ..ir.device_arrays import to_host
from ..ir.donation import dead_input_arrays, donating
from ..ir.domains import TRAINING_DOMAIN
from ..ir.executors import executor
from ..ir.mode import EXECUTORS, MODE, ModeSwitch, trace_data_read
from ..ir.plan import GraphPlan, assign_results, plan
from .device_sessions import upload_inputs
from .fastpath import dynamic_shapes, plan_cache

__all__ = [
    "realize",
    "run_plan",
    "realize_step",
    "data_of",
    "host_data",
    "recording_only",
    "set_executor",
    "get_executor",
    "cache_info",
    "dynamic_info",
    "clear_cache",
    "set_cache_size",
]


def realize(values, specialize: bool = True, donate: bool = False) -> None:
    """Computes every pending value in ``values`` (and the pending values still needed elsewhere).

    ``specialize=False``: the structure never gets an inference specialization (a run whose
    weights change every time, though the plan cannot tell). ``donate``: the run's kernels may
    write results over the inputs that nothing else can read any more (``ir.donation``).
    """
    if MODE.grad.recording_only:
        return
    if len(values) == 1:  # reading one tensor: the common case
        targets = [values[0]] if values[0].data is None else None
    else:
        targets = [value for value in dict.fromkeys(values) if value.data is None]  # Values hash by identity
    if not targets:
        return
    trace_data_read()
    profiler = MODE.profiler
    if profiler is not None:  # onnxnn.profiler times planning, compilation and each node's run
        profiler.realize(targets)
        return
    in_backward = MODE.grad.in_backward
    known = None
    if len(targets) == 1 and not in_backward:
        node = targets[0].node
        if node is None:
            return  # another thread has computed it since
        known = node.known_plan
    # (Another thread may still compute a target before the walk: the plan then has it as an output
    # that it feeds, or holds as a constant, and ``assign_results`` leaves its data as it is.)
    if known is None:
        run_plan(plan(targets, not in_backward), specialize, donate=donate)
    elif not known[0].realize(targets[0], known[1]):  # a forward replay's result (fastpath.known_plans)
        graph, found = known[0].plan_of(targets[0], known[1])
        run_plan(graph, specialize, found, donate)


def run_plan(
    graph: GraphPlan, specialize: bool = True, found: plan_cache.Entry | None = None, donate: bool = False
) -> plan_cache.Entry:
    """Computes ``graph``'s outputs (a plan of the pending values) and returns the entry that ran it
    (``found``, when the caller has it already). ``donate``: as ``realize``'s."""
    entry = found or plan_cache.entry(graph)
    if graph.key[3] is not CPU:
        assign_results(graph.outputs, _results(entry, graph, upload_inputs(graph.inputs), specialize))
    elif donate:
        # The dead arrays found before the inputs' list, which refers to every input array once more;
        # the results assigned inside the block (ir.donation says why).
        with donating(dead_input_arrays(graph)):
            inputs = [value.data for value in graph.inputs]
            assign_results(graph.outputs, _results(entry, graph, inputs, specialize))
    else:
        inputs = [value.data for value in graph.inputs]
        assign_results(graph.outputs, _results(entry, graph, inputs, specialize))
    return entry


def _results(entry: plan_cache.Entry, graph: GraphPlan, inputs: list, specialize: bool) -> list:
    """Runs ``entry`` (or its specialization) on ``graph``'s ``inputs`` (their arrays); returns the results."""
    specialization = entry.specialization
    if specialization is not None and specialization.matches(graph.inputs):
        results = specialization(inputs)
    elif entry.former and (specialization := plan_cache.former_specialization(entry, graph.inputs)) is not None:
        results = specialization(inputs)  # another model of the same structure
    else:
        results = entry.runner(inputs)
        if entry.watches_inputs:
            # On a GPU, never: embedding a value would copy it to the host and back into the
            # session, whose kernels read the device's weights where they lie anyway.
            if specialize and graph.key[3] is CPU:
                plan_cache.watch_stable_inputs(entry, graph)
            else:
                plan_cache.never_specialize(entry)
    return results


# An optimizer step whose results (new parameters and states) hold at least
# SPLIT_STEP_MIN_ELEMENTS[its update's op_type] elements, under "auto" on the CPU, runs in two:
# everything its updates read (the forward and backward passes) where the plan's executor choice
# puts it, then the updates alone, which "auto" gives onnxnn's kernels (plan_cache.choose). The
# kernels update large tensors block by block into recycled buffers (kernels/training.py), where
# onnxruntime makes a full out-of-place pass per elementwise op: an MLP's Adam update (670,000
# parameters, 13 passes) takes 1.3 ms instead of 2.1.
# - Momentum's four passes gain less, so its bound is higher (half a million parameters). An MLP's
#   SGD step with momentum (batch 16, one thread), split against one run: 118,000 parameters 1.10,
#   670,000 0.96, 1.9 million 0.96, 5.8 million 0.87; resnet18 (11.7 million, batch 8) 0.965, its
#   update taking 13 ms on the kernels where it added 16 to the step's session.
# - On more intra-op threads the compiled loops share a large update out among them
#   (compiled_updates.THREADED_MIN_ELEMENTS) while onnxruntime makes each pass on them: two threads,
#   the MLP's Adam step at batch 1 / 16 / 64 / 256 2.7 / 3.8 / 4.0 / 8.0 ms -> 2.0 / 2.2 / 3.3 / 6.3,
#   resnet18's SGD step 124 -> 101 ms (its update in one session took ~50 ms there). Without the
#   compiled loops the kernels' numpy formulas run on one thread, so then the split is for one thread
#   only (``set_num_threads(1)``, or a one-core machine), where they still beat onnxruntime's passes.
SPLIT_STEP_MIN_ELEMENTS = {
    **dict.fromkeys(("Adam", "Adagrad", "RMSprop", "Adamax", "NAdam", "RAdam", "Adadelta", "Rprop"), 1 << 16),
    # ASGD makes as few passes as Momentum (four to seven), so it takes Momentum's bound (below).
    # SGD without momentum makes two (three with weight decay): an MLP's step at batch 16, one run
    # against split, 670,000 parameters 2.24 / 2.41 ms, 1.9 million 6.65 / 6.42, 5.8 million 17.6 / 14.7.
    **dict.fromkeys(("Momentum", "ASGD", "SGD"), 1 << 20),
}


_shape_of = operator.attrgetter("shape")


def realize_step(values) -> None:
    """Computes an optimizer step: ``values`` are the new parameters and states it recorded.

    A large step on the CPU runs as several realizations, the updates' inputs (gradients) first, then
    each update node (see ``SPLIT_STEP_MIN_ELEMENTS``); otherwise it is one realization, as ``realize``.
    """
    # One optimizer records one kind of update node, so the first value says whether to look further.
    first = values[0].node if values else None
    if (
        first is None
        or first.domain != TRAINING_DOMAIN
        or first.op_type not in SPLIT_STEP_MIN_ELEMENTS
        or MODE.executor != "auto"
        or values[0].device.type != "cpu"
        # Every value's elements, an update's or not, in C: a small step (an SGD step of a few
        # tensors) stops here, before the loop below and the default thread count's system call.
        or sum(map(math.prod, map(_shape_of, values))) < SPLIT_STEP_MIN_ELEMENTS[first.op_type]
        or not plan_cache.updates_beat_sessions()
    ):
        realize(values)
        return
    updates: dict = {}
    elements = 0
    for value in values:
        node = value.node
        if value.data is None and node.domain == TRAINING_DOMAIN and node.op_type in SPLIT_STEP_MIN_ELEMENTS:
            updates[id(node)] = node
            elements += math.prod(value.shape)
    if elements >= SPLIT_STEP_MIN_ELEMENTS[first.op_type]:
        read = [value for node in updates.values() for value in node.inputs if value is not None and value.data is None]
        if read:
            # The weights of the next run are this run's results: never worth a specialization.
            realize(read, specialize=False)
        # Each update node on its own: the old parameters and states are usually dead now (their
        # Tensors hold the step's new values), and a plan of one node may write over them (ir.donation).
        for node in updates.values():
            realize([value for value in values if value.node is node], donate=True)
    realize(values)  # what is left: all of a small step, casts of the updates' results


def data_of(value):
    """The array of ``value``, realizing it (and its pending history) first if needed."""
    if value.static is None and MODE.trace is not None:  # trace_data_read, inline: every .numpy() runs this
        trace_data_read()
    data = value.data
    if data is None:
        realize((value,))
        data = value.data
    if type(data) is np.ndarray or data is None:
        return data
    return to_host(data)  # a value on a GPU: copied for the host, as PyTorch synchronizes and copies


def host_data(value):
    """``value``'s array if it is computed and in host memory, else None: never runs or copies anything.

    For the checks PyTorch's CPU kernels make on data (indices in range): a value still pending, or
    on a GPU (where PyTorch checks in its kernels), is not checked.
    """
    data = value.data
    return data if type(data) is np.ndarray else None


class set_executor(ModeSwitch):
    """Chooses what runs recorded graphs: ``"auto"`` (default), ``"onnxruntime"`` or ``"kernels"``.

    Takes effect at once, and also works as a context manager that restores the previous choice.
    ``eager=True`` realizes every op as it is recorded (a debugging mode: each intermediate value
    can be inspected, and an error points at the op that caused it).

    A plain call sets the choice of the process: every thread has it, except inside a block of its
    own. A ``with`` block sets it for the thread that runs the block only, as PyTorch's grad mode
    is per thread: one thread's debugging block leaves the others' work as it was.

    Args:
        name: the executor.
        eager: realize every op as it is recorded.

    Example::

        >>> with onnxnn.set_executor("kernels", eager=True):
        ...     y = (x * 2).relu()   # computed op by op by onnxnn's numpy kernels
    """

    def __init__(self, name: str = "auto", *, eager: bool = False):
        if name not in EXECUTORS:
            raise ValueError(f"set_executor: unknown executor {name!r}; choose one of {EXECUTORS}")
        super().__init__({"executor": name, "eager": bool(eager)})


def get_executor() -> str:
    """The executor selected by ``set_executor`` in this thread: "auto", "onnxruntime" or "kernels"."""
    return MODE.executor


class recording_only:
    """Within this block explicit realizations are skipped: a whole step is recorded, not run.

    Used to export a training step as one graph; reading a pending value inside raises.
    """

    def __enter__(self) -> "recording_only":
        MODE.grad.recording_only += 1
        return self

    def __exit__(self, *exc_info) -> None:
        MODE.grad.recording_only -= 1


def cache_info() -> dict:
    """Counters of the session cache: ``{"sessions", "hits", "misses", "capacity"}``.

    ``hits + misses`` counts the onnxruntime runs; ``misses`` the compilations, including the
    graphs with symbolic sizes that a structure seen at several sizes shares (``dynamic_info()``).
    """
    return executor("onnxruntime").cache_info()


def dynamic_info() -> dict:
    """Counters of the symbolic-size sharing: ``{"families", "generalized", "shared_runs"}``.

    ``generalized`` counts the signatures widened (each compiles one shared graph per executor
    that runs it); ``shared_runs`` the keys that took a shared graph instead of compiling their own.
    """
    return dynamic_shapes.dynamic_info()


def clear_cache() -> None:
    """Drops every compiled session, runner and specialization (every cache: ``clear_caches``)."""
    clear_caches()


def set_cache_size(capacity: int) -> None:
    """Bounds the number of compiled sessions and plan entries kept (least recently used go first)."""
    executor("onnxruntime").set_cache_size(capacity)
    plan_cache.set_capacity(capacity)
