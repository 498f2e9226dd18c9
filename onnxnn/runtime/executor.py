"""Realization: run pending values on the selected executor, through caches keyed by structure.

``realize(values)`` plans the pending subgraph behind ``values`` (``plan.plan``: one walk builds
its canonical structural key, never data) and runs it. One dict lookup per realization finds
everything kept for that structure: the compiled runner (an onnxruntime session or onnxnn's
kernels) and, for inference with unchanged weights, a specialized session. Pending intermediates
that something else still references (a live Tensor, a value saved for backward) are returned by
the same run, so nothing is computed twice.
"""
from __future__ import annotations

from collections import OrderedDict
from time import perf_counter

from . import dynamic_shapes as _dynamic
from . import graph as _graph
from .dtypes import float16 as _FLOAT16
from .plan import IR_VERSION, OPSET_VERSION, GraphPlan, build_model, plan
from .sessions import CompiledSession, SessionCache, create_session

__all__ = ["realize", "cache_info", "dynamic_info", "clear_cache", "set_cache_size", "set_executor", "get_executor",
           "recording_only", "unbounded_depth", "OPSET_VERSION", "IR_VERSION", "build_model", "plan", "create_session"]

_sessions = SessionCache()

# ---------------------------------------------------------------- executor selection
#
# "auto" runs a plan on onnxruntime unless every value in it is small, or onnxruntime cannot
# compile it (ops or dtypes it lacks, e.g. float64 Erf or LeakyRelu: then onnxnn's kernels take it).
# For a plan of small values neither executor wins everywhere: the kernels' generated code pays
# numpy's per-call cost on every node, a session run pays a fixed cost and little per node, and both
# depend on the machine. So such a plan runs on the kernels, and from its TRIAL_FROM_RUN-th run on
# (a structure that runs only a few times never compiles a session) a session also runs it, timed,
# for TRIAL_RUNS runs; the faster then keeps the plan.
AUTO_KERNELS_MAX_ELEMENTS = 4096
TRIAL_FROM_RUN = 5
TRIAL_RUNS = 3
EXECUTORS = ("auto", "onnxruntime", "kernels")


class _Selection:
    name = "auto"
    eager = False
    recording_only = 0
    unbounded_depth = 0


SELECTION = _Selection()


class set_executor:
    """Chooses what runs recorded graphs: ``"auto"`` (default), ``"onnxruntime"`` or ``"kernels"``.

    Takes effect at once, and also works as a context manager that restores the previous choice.
    ``eager=True`` realizes every op as it is recorded (a debugging mode: each intermediate value
    can be inspected, and an error points at the op that caused it).

    Example::

        >>> with onnxnn.set_executor("kernels", eager=True):
        ...     y = (x * 2).relu()   # computed op by op by onnxnn's numpy kernels
    """

    def __init__(self, name: str = "auto", *, eager: bool = False):
        if name not in EXECUTORS:
            raise ValueError(f"set_executor: unknown executor {name!r}; choose one of {EXECUTORS}")
        self._previous = (SELECTION.name, SELECTION.eager)
        SELECTION.name, SELECTION.eager = name, bool(eager)

    def __enter__(self) -> "set_executor":
        return self

    def __exit__(self, *exc_info) -> None:
        SELECTION.name, SELECTION.eager = self._previous


def get_executor() -> str:
    return SELECTION.name



def _suits_kernels(graph: GraphPlan) -> bool:
    """Whether every value of the plan is small, and none is float16.

    float16 stays on onnxruntime: both executors compute each float16 op in float32 and round its
    result (PyTorch's CPU semantics), but a last-bit difference in float32 can round to a whole
    float16 ulp, and "auto" must not switch between the two from one run of a model to the next.
    """
    for values in [graph.inputs, graph.outputs] + [node.inputs for node in graph.nodes]:
        for value in values:
            if value is None:
                continue
            if value.dtype is _FLOAT16:
                return False
            size = 1
            for dim in value.shape:
                size *= dim
            if size > AUTO_KERNELS_MAX_ELEMENTS:
                return False
    return True


def _kernels_runner(graph: GraphPlan):
    from ..kernels.executor import array_module, cached_plan
    return cached_plan(graph, array_module(graph.key[3]))


def _compile(graph: GraphPlan, name: str) -> tuple:
    """The runner of ``graph`` on executor ``name``, and whether "auto" should time it against a session."""
    if name == "onnxruntime":
        return _sessions.get(graph), False
    if name == "kernels":
        return _kernels_runner(graph), False
    if graph.key[3].type == "cpu" and _suits_kernels(graph):
        try:
            return _kernels_runner(graph), True
        except (NotImplementedError, TypeError):
            return _sessions.get(graph), False
    try:
        return _sessions.get(graph), False
    except RuntimeError as error:
        # onnxruntime lacks a kernel for an op or dtype here: onnxnn's own kernels take the plan.
        try:
            return _kernels_runner(graph), False
        except (NotImplementedError, TypeError):
            raise error from None


class _Entry:
    """What is kept for one structure on one executor: its runner, trial and inference specialization."""

    __slots__ = ("runner", "is_session", "trial", "specialization", "stable_runs", "stable_inputs")

    def __init__(self, runner, trial: bool):
        self.runner = runner
        self.is_session = isinstance(runner, CompiledSession)
        self.trial = _Trial() if trial else None
        self.specialization = None
        self.stable_runs = 0
        self.stable_inputs = None


class _Trial:
    """auto's timed comparison of the kernels (the entry's runner) with a session, for one structure.

    Results always come from the kernels while the trial lasts; the session's runs are timed and
    discarded, so two runs of a structure never differ in rounding because of the trial itself.
    """

    __slots__ = ("session", "runs", "times")

    def __init__(self):
        self.session = None
        self.runs = 0
        self.times = ([], [])  # seconds per run: kernels, session

    def run(self, entry: _Entry, graph: GraphPlan, inputs: list) -> list:
        self.runs += 1
        if self.runs < TRIAL_FROM_RUN:  # structures that do not come back compile no session
            return entry.runner(inputs)
        start = perf_counter()
        results = entry.runner(inputs)
        middle = perf_counter()
        if self.session is None:
            try:
                self.session = _sessions.get(graph)
                self.session(inputs)  # its first run warms it up: not timed
            except RuntimeError:  # onnxruntime cannot compile or run it: the kernels keep it
                entry.trial = None
            return results
        self.session(inputs)
        self.times[0].append(middle - start)
        self.times[1].append(perf_counter() - middle)
        if len(self.times[1]) >= TRIAL_RUNS:
            if min(self.times[1]) < min(self.times[0]):
                entry.runner, entry.is_session = self.session, True
            entry.trial = None
        return results


_entries = {name: OrderedDict() for name in EXECUTORS}


def _shared_entry(graph: GraphPlan, name: str) -> _Entry | None:
    """An entry running the graph its structure family shares across sizes (``dynamic_shapes``), or None.

    The executor is chosen as ``_compile`` chooses it, from this key's sizes, but with no timed trial
    and no inference specialization: those are per size, and sizes that keep changing never repeat.
    """
    if name == "auto":
        kind = "kernels" if graph.key[3].type == "cpu" and _suits_kernels(graph) else "session"
    else:
        kind = "session" if name == "onnxruntime" else "kernels"
    compiled = _sessions.misses
    runner = _dynamic.shared_runner(graph, kind, _sessions)
    if runner is None and name == "auto":
        # onnxruntime or the kernels cannot take the shared graph: the other may (as _compile falls back).
        kind = "session" if kind == "kernels" else "kernels"
        runner = _dynamic.shared_runner(graph, kind, _sessions)
    if runner is None:
        return None
    entry = _Entry(runner, False)
    entry.is_session = kind == "session"  # counted as session runs; never specialized
    entry.stable_runs = _NEVER
    if entry.is_session and _sessions.misses == compiled:
        _sessions.hits += 1  # found, not compiled: a hit of the session cache like any other
    return entry


def _entry(graph: GraphPlan) -> _Entry:
    table = _entries[SELECTION.name]
    entry = table.get(graph.key)
    if entry is not None:
        if entry.is_session:
            _sessions.hits += 1  # the session cache's counters count every run, found here or there
        return entry
    entry = _shared_entry(graph, SELECTION.name)
    if entry is None:
        entry = _Entry(*_compile(graph, SELECTION.name))
    table[graph.key] = entry
    if len(table) > _sessions.capacity:
        table.popitem(last=False)
    return entry


# ---------------------------------------------------------------- inference specialization
#
# Parameters are data: a training step feeds them to the compiled graph like any input. When the
# same large inputs (the weights of a model serving requests) come back unchanged run after run,
# a second session is compiled with every unchanged input embedded as an initializer, so
# onnxruntime can fold constants, fuse BatchNormalization into convolutions and pre-pack weights.
# Values never change in place, so "the same Value object" means "the same data"; the
# specialization holds those objects, and any other input falls back to the general session.
SPECIALIZE_AFTER_RUNS = 3
SPECIALIZE_MIN_ELEMENTS = 4096
_NEVER = -(1 << 30)


class _Specialization:
    __slots__ = ("positions", "values", "rest", "session")

    def __init__(self, graph: GraphPlan, positions: list[int]):
        self.positions = positions
        self.values = [graph.inputs[position] for position in positions]
        embedded = set(positions)
        self.rest = [i for i in range(len(graph.inputs)) if i not in embedded]
        roles = [("initializer", f"weight_{i}") if i in embedded else ("input", f"input_{i}")
                 for i in range(len(graph.inputs))]
        self.session = CompiledSession(build_model(graph, roles), graph.key[3])

    def matches(self, inputs: list) -> bool:
        for position, value in zip(self.positions, self.values):
            if inputs[position] is not value:
                return False
        return True

    def __call__(self, inputs: list) -> list:
        return self.session([inputs[i] for i in self.rest])


def _watch_stable_inputs(entry: _Entry, graph: GraphPlan) -> None:
    """Counts runs in which a structure's inputs were the very same values; specializes after a few.

    Only structures with a large stable input (weights) are specialized; every input that stayed
    the same is embedded then (BatchNormalization statistics too, so they fold into the
    convolutions), while per-call values (the batch, scalars) stay inputs.
    """
    seen = entry.stable_inputs
    if seen is None:
        if any(v.data.size >= SPECIALIZE_MIN_ELEMENTS for v in graph.inputs):
            entry.stable_runs, entry.stable_inputs = 1, list(graph.inputs)
        else:
            entry.stable_runs = _NEVER  # input shapes are part of the structure: never any large input
        return
    stable = [before if before is value else None for before, value in zip(seen, graph.inputs)]
    if not any(v is not None and v.data.size >= SPECIALIZE_MIN_ELEMENTS for v in stable):
        entry.stable_runs, entry.stable_inputs = 1, list(graph.inputs)
        return
    entry.stable_runs += 1
    entry.stable_inputs = stable
    if entry.stable_runs >= SPECIALIZE_AFTER_RUNS:
        entry.stable_inputs = None
        try:
            entry.specialization = _Specialization(graph, [i for i, v in enumerate(stable) if v is not None])
        except RuntimeError:
            entry.stable_runs = _NEVER  # onnxruntime could not compile it: never try again


class recording_only:
    """Within this block explicit realizations are skipped: a whole step is recorded, not run.

    Used to export a training step as one graph; reading a pending value inside raises.
    """

    def __enter__(self) -> "recording_only":
        SELECTION.recording_only += 1
        return self

    def __exit__(self, *exc_info) -> None:
        SELECTION.recording_only -= 1




class unbounded_depth:
    """Within this block a deep pending history stays pending: ``bound_depth`` realizes nothing.

    Exporting traces a model into one graph; a value realized on the way would reach the exported
    file as a constant computed from the example input, not as a function of the graph's inputs.
    """

    def __enter__(self) -> "unbounded_depth":
        SELECTION.unbounded_depth += 1
        return self

    def __exit__(self, *exc_info) -> None:
        SELECTION.unbounded_depth -= 1


def realize(values) -> None:
    """Computes every pending value in ``values`` (and the pending values still referenced elsewhere)."""
    if SELECTION.recording_only:
        return
    if len(values) == 1:  # reading one tensor: the common case
        targets = [values[0]] if values[0].data is None else None
    else:
        targets = [value for value in dict.fromkeys(values) if value.data is None]  # Values hash by identity
    if not targets:
        return
    _graph.trace_data_read()
    graph = plan(targets)
    entry = _entry(graph)
    inputs = [value.data for value in graph.inputs]
    specialization = entry.specialization
    if entry.trial is not None:
        results = entry.trial.run(entry, graph, inputs)
    elif specialization is not None and specialization.matches(graph.inputs):
        results = specialization(inputs)
    else:
        results = entry.runner(inputs)
        if entry.is_session and entry.stable_runs >= 0:
            _watch_stable_inputs(entry, graph)
    for value, result in zip(graph.outputs, results):
        value.data = result
        value.node = None


def bound_depth(node, outputs) -> None:
    """Realizes ``outputs`` (of ``node``) when their pending history is deeper than MAX_PENDING_DEPTH.

    Recording an op calls it, and so does a replayed backward (``backward_replay``). Whether it
    realizes follows from the structure recorded so far, never from data, so a backward being
    traced for replay stays replayable.
    """
    if _graph.refresh_depth(node) <= _graph.MAX_PENDING_DEPTH or SELECTION.unbounded_depth:
        return
    trace = _graph.TRACE
    read_data = trace is not None and trace.read_data
    realize(outputs)
    if trace is not None:
        trace.read_data = read_data


# ---------------------------------------------------------------- cache control

def cache_info() -> dict:
    """Counters of the session cache: ``{"sessions", "hits", "misses", "capacity"}``.

    ``hits + misses`` counts the onnxruntime runs; ``misses`` the compilations, including the
    graphs with symbolic sizes that a structure seen at several sizes shares (``dynamic_info()``).
    """
    return {"sessions": len(_sessions.sessions), "hits": _sessions.hits, "misses": _sessions.misses,
            "capacity": _sessions.capacity}


def dynamic_info() -> dict:
    """Counters of the symbolic-size sharing: ``{"families", "generalized", "shared_runs"}``.

    ``generalized`` counts the signatures widened (each compiles one shared graph per executor
    that runs it); ``shared_runs`` the keys that took a shared graph instead of compiling their own.
    """
    return _dynamic.dynamic_info()


def clear_cache() -> None:
    """Drops every compiled session, runner and specialization, and resets the counters."""
    _sessions.sessions.clear()
    _sessions.hits = _sessions.misses = 0
    for table in _entries.values():
        table.clear()
    _dynamic.clear()


def set_cache_size(capacity: int) -> None:
    """Bounds the number of compiled sessions kept (least recently used are dropped first)."""
    _sessions.capacity = capacity
    while len(_sessions.sessions) > capacity:
        _sessions.sessions.popitem(last=False)
    for table in _entries.values():
        while len(table) > capacity:
            table.popitem(last=False)
