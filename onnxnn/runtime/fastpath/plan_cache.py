"""What realization keeps per plan structure: the runner the executor choice gave it, and for
inference with unchanged weights a specialized session.

``entry(plan)`` is one dict lookup on a hit. On a miss the executor is chosen by ``choose`` (a
deterministic cost model over sizes and op kinds, never timing: a program's results never depend
on the machine's load), a structure family seen at several sizes may share one graph with
symbolic sizes (``dynamic_shapes``), and otherwise the chosen executor compiles the plan; a
structure "auto" gives onnxruntime runs on the kernels first and compiles its session when it
comes back (``FIRST_RUNS_ON_KERNELS``).
"""

from __future__ import annotations

import threading
import weakref

from ...ir.caches import WeightedCache, register_cache
from ...ir.domains import OPTIMIZER_UPDATES, TRAINING_DOMAIN
from ...ir.dtypes import bfloat16, float16, float64
from ...ir.executors import executor
from ...ir.mode import EXECUTORS, MODE
from ...ir.plan import GraphPlan
from ...ir.model_building import build_model
from ..sessions import lowers_for
from ..split_sessions import session_runner
from ..threads import get_num_threads
from . import dynamic_shapes
from .straight_line import accelerate_when_run_again

__all__ = [
    "Entry",
    "entry",
    "entry_needing_no_nodes",
    "choose",
    "clear",
    "set_capacity",
    "set_budget",
    "watch_stable_inputs",
    "former_specialization",
    "never_specialize",
]

# ---------------------------------------------------------------- the executor choice
#
# "auto" runs a plan on onnxnn's kernels when both hold:
# - every value is small (at most AUTO_KERNELS_MAX_ELEMENTS elements) and none is float16: numpy
#   runs one thread per op, onnxruntime many, and a float16 plan must not switch executors (both
#   round per op, but a last-bit difference in float32 can round to a whole float16 ulp);
# - the kernels' estimated time is below a session run's: per node the kernels pay Python's call
#   overhead, a session pays one fixed cost per run and less per node; convolutions and recurrences
#   cost the kernels more per element (im2col copies, a Python loop over time steps) than
#   onnxruntime's fused routines. (Matrix products call BLAS on both sides: no extra weight.)
# Otherwise onnxruntime runs it; an op or dtype one executor lacks sends the plan to the other
# (float64 recurrent nodes go to the kernels before any cost is weighed).
# A plan of optimizer updates alone (realization.realize_step) goes to the kernels whatever its
# size, unless it updates float16/bfloat16 tensors: the kernels update large tensors block by
# block into recycled buffers, faster than onnxruntime's out-of-place passes, on one intra-op
# thread, and on more where the compiled loops share them out (``updates_beat_sessions``).
# The constants are microseconds measured once on a 2-core x86 machine (numpy 2, onnxruntime 1.2x);
# they only move the boundary, and the choice depends on nothing but the plan's structure.
AUTO_KERNELS_MAX_ELEMENTS = 4096
KERNEL_NODE_COST = 1.0
KERNEL_ELEMENT_COST = 0.001
SESSION_RUN_COST = 40.0
SESSION_NODE_COST = 0.8
SESSION_ELEMENT_COST = 0.0005
HEAVY_FOR_KERNELS = frozenset({"Conv", "ConvTranspose", "LSTM", "GRU", "RNN"})
HEAVY_KERNEL_FACTOR = 4.0
# Ops onnxruntime's CPU provider has float32 kernels for only: a plan computing one in float64
# runs on the kernels, whatever its size. Compiling a session would fail for the recurrences; the
# unary ops have float64 forms for onnxruntime (ops/float64_decompositions.py: what a pinned
# executor and exports run), but 11-65 elementwise passes each, where numpy makes one: a float64
# MLP step with atan activations took 0.5-0.66 of the time on the kernels.
FLOAT32_ONLY_IN_ONNXRUNTIME = frozenset(
    {"LSTM", "GRU", "RNN", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cosh", "Erf", "Sinh", "Tan"}
)


# On a GPU, "auto" gives onnxruntime every plan (its sessions replay a repeated structure as a CUDA
# graph), except a large plan of elementwise nodes alone that the kernels executor runs as generated
# CuPy kernels (kernels/cuda_fusion.py): one pass over memory where a session makes one per node.
# bench_cuda_fusion.py's api rows (H200, float32, tensors recorded and computed every call), the
# kernels' time over the sessions' for its four workloads: 0.27-0.54 at 2^24 elements, 0.67-0.81 at
# 2^23, 0.92-1.11 at 2^22 and 0.93-1.33 at 2^21 and below, where onnxnn's per-call costs (the same
# for both) and the generated kernels' launch outweigh the passes saved.
GPU_FUSED_MIN_ELEMENTS = 1 << 23


def _elements(shape) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size


def choose(plan: GraphPlan) -> str:
    """The executor "auto" gives ``plan``: "kernels" or "onnxruntime" (see the rules above)."""
    if plan.key[3].type != "cpu":
        large = any(_elements(value.shape) >= GPU_FUSED_MIN_ELEMENTS for value in plan.outputs)
        return "kernels" if large and executor("kernels").runs_fused(plan) else "onnxruntime"
    if _updates_only(plan) and updates_beat_sessions():
        return "kernels"
    for node in plan.nodes:
        if node.op_type in FLOAT32_ONLY_IN_ONNXRUNTIME and not node.domain and node.inputs[0].dtype is float64:
            return "kernels"
    for value in plan.inputs:
        if value.dtype is float16 or _elements(value.shape) > AUTO_KERNELS_MAX_ELEMENTS:
            return "onnxruntime"
    kernel_cost = 0.0
    session_cost = SESSION_RUN_COST
    for node in plan.nodes:
        elements = 0
        for value in node.inputs:
            if value is None:
                continue
            if value.dtype is float16:
                return "onnxruntime"
            size = _elements(value.shape)
            if size > AUTO_KERNELS_MAX_ELEMENTS:
                return "onnxruntime"
            elements += size
        factor = HEAVY_KERNEL_FACTOR if node.op_type in HEAVY_FOR_KERNELS else 1.0
        kernel_cost += KERNEL_NODE_COST + elements * KERNEL_ELEMENT_COST * factor
        session_cost += SESSION_NODE_COST + elements * SESSION_ELEMENT_COST
    for value in plan.outputs:
        if value.dtype is float16 or _elements(value.shape) > AUTO_KERNELS_MAX_ELEMENTS:
            return "onnxruntime"
    return "kernels" if kernel_cost <= session_cost else "onnxruntime"


def updates_beat_sessions() -> bool:
    """Whether the kernels run a large optimizer update faster than onnxruntime's sessions: on one
    intra-op thread always, on more where their compiled loops share the threads out."""
    return get_num_threads() == 1 or executor("kernels").updates_share_threads


def _updates_only(plan: GraphPlan) -> bool:
    for node in plan.nodes:
        if node.domain != TRAINING_DOMAIN or node.op_type not in OPTIMIZER_UPDATES:
            return False
    return all(value.dtype is not float16 and value.dtype is not bfloat16 for value in plan.inputs)


# ---------------------------------------------------------------- first runs on the kernels
#
# A structure's first run on onnxruntime pays for compiling its session (3-15 ms a graph, and
# ~20 ms more to import onnxruntime in a fresh process), which a one-off call (an interactive
# forward, a single prediction, a script's first step) never earns back. So under "auto", a
# structure that onnxruntime would run is run FIRST_RUNS_ON_KERNELS times on the kernels, which
# compile in well under a millisecond, and its session is compiled when it comes back. Only
# structures the kernels run at a comparable speed take this path: on the CPU, without
# convolutions or recurrences, without float16/bfloat16 (whose per-op rounding must come from one
# executor), and at most FIRST_RUNS_MAX_ELEMENTS elements read by all nodes together. Like the
# executor choice, it depends on the structure and the count of runs only, never on timing.
FIRST_RUNS_ON_KERNELS = 1
FIRST_RUNS_MAX_ELEMENTS = 1 << 22


def _first_runs_on_kernels(plan: GraphPlan) -> bool:
    if not FIRST_RUNS_ON_KERNELS or plan.key[3].type != "cpu":
        return False
    elements = 0
    for node in plan.nodes:
        if node.op_type in HEAVY_FOR_KERNELS:
            return False
        for value in node.inputs:
            if value is not None:
                if value.dtype is float16 or value.dtype is bfloat16:
                    return False
                elements += _elements(value.shape)
        if elements > FIRST_RUNS_MAX_ELEMENTS:
            return False
    return choose(plan) == "onnxruntime"


def _other(name: str) -> str:
    return "onnxruntime" if name == "kernels" else "kernels"


def _compiled(plan: GraphPlan, name: str):
    runner = executor(name).compile(plan)
    if name == "kernels" and MODE.fast_path:
        accelerate_when_run_again(runner)
    return runner, name


def _compile(plan: GraphPlan, name: str):
    """The runner of ``plan`` on the executor ``name`` selects, falling back for "auto"."""
    if name != "auto":
        return _compiled(plan, name)
    chosen = choose(plan)
    try:
        return _compiled(plan, chosen)
    except (RuntimeError, NotImplementedError, TypeError) as error:
        # One executor lacks an op or dtype here (onnxruntime has no float64 Erf): the other may have it.
        try:
            return _compiled(plan, _other(chosen))
        except (RuntimeError, NotImplementedError, TypeError) as other_error:
            # Both reasons matter: an op one executor lacks, an opset the other cannot load.
            # add_note is Python 3.11+ (3.10 raises the first reason alone).
            if hasattr(error, "add_note"):
                error.add_note(f"(the {_other(chosen)} executor cannot run it either: {other_error})")
            raise error from None


class Entry:
    """What is kept for one structure on one executor: its runner and inference specializations.

    ``sessions`` is the onnxruntime executor's session cache when a session runs the structure
    (its counters count every run, found here or there), else None. ``specialization`` is the
    last one used, ``former`` the others, most recently used first (``SPECIALIZATIONS_PER_STRUCTURE``).
    """

    __slots__ = (
        "runner",
        "is_session",
        "sessions",
        "specialization",
        "former",
        "stable_runs",
        "stable_inputs",
        "runs_before_compiling",
        "recently_used",
        "dropped",
    )

    def __init__(self, runner, executor_name: str, runs_before_compiling: int = 0):
        self.runner = runner
        self.recently_used = False  # hit since the table's evictions last came round (``WeightedCache``)
        self.dropped = False  # evicted or cleared from its table (``WeightedCache``): a holder must let it go
        # > 0: a structure's first runs on the kernels; this many more before its session is compiled.
        self.runs_before_compiling = runs_before_compiling
        self.is_session = executor_name == "onnxruntime"
        self.sessions = executor("onnxruntime").cache if self.is_session else None
        self.specialization: Specialization | None = None
        self.former: list[Specialization] = []
        # _NEVER once the structure is never to be specialized; its runs are counted per set of
        # inputs watched (``stable_inputs``, see ``watch_stable_inputs``).
        self.stable_runs = 0
        self.stable_inputs: list | None = None

    def hit(self) -> None:
        """Counts a run of this entry found rather than compiled: it is kept over entries no run used since
        the table's evictions last came round (``NODE_BUDGET``), and its session's run is a hit of the
        session cache. Every path that runs a found entry counts it here, the prepared runs included."""
        self.recently_used = True
        sessions = self.sessions
        if sessions is not None:
            sessions.hits += 1

    @property
    def watches_inputs(self) -> bool:
        """Whether a run of this entry's session counts towards a specialization (``watch_stable_inputs``)."""
        return self.is_session and self.stable_runs >= 0


# Entries are bounded by count and by the nodes of their plans together (``ir.caches.WeightedCache``),
# least recently used evicted first. What an entry holds (a kernel plan, ~1-2 KB a node; a session,
# ~5 KB) grows with its graph, so a count alone let structures that never repeat (an LSTM unrolled
# over each new length) fill it with gigabytes. A training step of resnet18 uses 401 nodes, of a
# 6-layer transformer (d_model 64) 702, of a 12-layer one (d_model 256) 1,709, their inference 69,
# 152 and a few hundred: the budget leaves room for tens of such models at once. An entry running a
# graph its structure family shares (``dynamic_shapes``) weighs 1: the family holds the graph.
CAPACITY = 512
NODE_BUDGET = 1 << 15
_entries: dict[str, WeightedCache] = {name: WeightedCache(CAPACITY, NODE_BUDGET) for name in EXECUTORS}
# Held while the entries change: a structure compiled (threads meeting a new structure at once
# compile it once), its first runs on the kernels counted, its inputs watched and specialized, a
# former specialization made current. A hit and a run never take it. Reentrant: a compilation may
# realize a value, whose plan may be new too.
_CHANGING = threading.RLock()


def _shared_entry(plan: GraphPlan, name: str) -> Entry | None:
    """An entry running the graph its structure family shares across sizes (``dynamic_shapes``), or None.

    The executor is chosen as for the plan itself. The entry is this size's own, so a size that
    comes back with the same weights still gets its inference specialization (a static session
    with the weights embedded, which onnxruntime optimizes better than the shared graph); sizes
    that keep changing never repeat and never compile one.
    """
    kind = choose(plan) if name == "auto" else name
    sessions = executor("onnxruntime").cache
    compiled = sessions.misses
    runner = dynamic_shapes.shared_runner(plan, kind)
    if runner is None and name == "auto":
        kind = _other(kind)  # one executor cannot take the shared graph: the other may
        runner = dynamic_shapes.shared_runner(plan, kind)
    if runner is None:
        return None
    shared = Entry(runner, kind)
    if shared.is_session and sessions.misses == compiled:
        sessions.hits += 1  # found, not compiled: a hit of the session cache like any other
    return shared


def _compiled_entry(plan: GraphPlan, name: str) -> tuple[Entry, int]:
    """The entry of the graph ``plan``'s structure family shares, or else of ``plan`` compiled alone,
    and its weight in the table (see ``NODE_BUDGET``)."""
    shared = _shared_entry(plan, name)
    if shared is not None:
        return shared, 1
    return Entry(*_compile(plan, name)), len(plan.nodes)


def entry_needing_no_nodes(key: tuple, inputs: list) -> Entry | None:
    """``entry`` of a plan of structure ``key`` reading ``inputs``, when running it reads nothing
    else of the plan: no compilation is due, and the inputs are not watched for a specialization
    (their specialization runs, or the structure never gets one). Else None.

    A plan known without its nodes (``known_plans``) runs only then.
    """
    table = _entries[MODE.executor]
    found = table.get(key)
    if found is None or found.runs_before_compiling:
        return None
    if found.watches_inputs:
        specialization = found.specialization
        if specialization is None or not specialization.matches(inputs):
            return None  # the walk's plan then runs it through ``entry``, which counts its hit
    found.hit()
    return found


def entry(plan: GraphPlan) -> Entry:
    """The entry of ``plan``'s structure under the current executor selection, compiling on a miss."""
    name = MODE.executor
    table = _entries[name]
    found = table.get(plan.key)
    if found is not None and not found.runs_before_compiling:
        found.hit()
        return found
    with _CHANGING:  # threads meeting a new structure at once: one compiles it, the others find it
        return _entry_changing(plan, name, table)


def _entry_changing(plan: GraphPlan, name: str, table: WeightedCache) -> Entry:
    """``entry`` of a structure that is new, or whose first runs are on the kernels (under ``_CHANGING``)."""
    key = plan.key
    found = table.get(key)
    if found is not None:
        table.move_to_end(key)
        if found.runs_before_compiling:
            found.runs_before_compiling -= 1
            if found.runs_before_compiling:
                return found
            found, weight = _compiled_entry(plan, name)  # the structure came back: now worth its session
            table.put(key, found, weight)
            return found
        sessions = found.sessions
        if sessions is not None:
            sessions.hits += 1
        return found
    # A new size of a family whose shared graph is compiled costs no compilation: it runs there.
    if name == "auto" and _first_runs_on_kernels(plan) and not dynamic_shapes.has_shared_graph(plan):
        try:
            # Not accelerated: generating its straight-line code costs more than the runs it serves.
            # Nor kept in the kernels' plan cache: this entry holds it until the structure comes back
            # and gets its session, which frees it (a structure seen once, once evicted, too).
            found = Entry(executor("kernels").compile_uncached(plan, key[3]), "kernels", FIRST_RUNS_ON_KERNELS)
        except (RuntimeError, NotImplementedError, TypeError):
            found = None  # an op or dtype the kernels lack: onnxruntime from the first run
    if found is None:
        found, weight = _compiled_entry(plan, name)
    else:
        weight = len(plan.nodes)
    table.put(key, found, weight)
    return found


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
# A run over this many elements of inputs that change (a batch of activations) is long enough that
# embedding even small unchanged inputs pays: a normalization's statistics and affine parameters
# fold into one scale and shift (BatchNorm2d(64) on 8x64x56x56: 12% faster per call).
SPECIALIZE_MIN_RUN_ELEMENTS = 1 << 16
# Models of one architecture in one process (an ensemble, fine-tuned variants) share a structure:
# each gets a specialization of its own weights, up to this many; later ones run the general
# session (none is replaced while its weights live: models taking turns would then compile one at
# every turn). Twice as many sets of inputs are watched, so that models taking turns are counted.
# With one per structure, two models taking turns were never specialized, or replaced each other's.
SPECIALIZATIONS_PER_STRUCTURE = 4
_WATCHED_INPUT_SETS = 2 * SPECIALIZATIONS_PER_STRUCTURE
_NEVER = -(1 << 30)


class Specialization:
    """A session with a structure's unchanged inputs embedded, for the runs that feed those very values.

    It refers to them weakly: once one is gone (its model dropped), the specialization can never
    match again, and its entry forgets it at once, which frees the copy of the weights the session
    holds. ``retired`` says it was forgotten or the entries were cleared (a compiled call's
    prepared run holding it must not run it then).
    """

    __slots__ = ("positions", "references", "rest", "session", "retired", "__weakref__")

    def __init__(self, plan: GraphPlan, positions: list[int], entry: Entry):
        self.positions = positions
        self.retired = False

        def forget(_reference, entry=entry, specialization=weakref.ref(self)) -> None:
            # Without ``_CHANGING``: the collector may call this in any thread, in the middle of
            # anything. A retired specialization never matches, so a lost race leaves at most one
            # in the lists that is never used, and dropped with its entry.
            found = specialization()
            if found is None:
                return
            found.retired = True
            if entry.specialization is found:
                entry.specialization = None
            else:
                _discard(entry.former, found)

        self.references = [weakref.ref(plan.inputs[position], forget) for position in positions]
        embedded = set(positions)
        self.rest = [i for i in range(len(plan.inputs)) if i not in embedded]
        roles = [
            ("initializer", f"weight_{i}") if i in embedded else ("input", f"input_{i}")
            for i in range(len(plan.inputs))
        ]
        device, lower = plan.key[3], lowers_for(plan.key[3])
        compile_model = executor("onnxruntime").compile_model
        # Cut around compiled nodes as the general session is, so that its values do not change
        # when the specialization takes over.
        self.session = session_runner(
            plan,
            device,
            lambda kept: build_model(plan, roles, lower=lower, kept=kept),
            lambda part: compile_model(part, device),
        )

    def matches(self, inputs: list) -> bool:
        for position, reference in zip(self.positions, self.references):
            if inputs[position] is not reference():
                return False
        return True

    def __call__(self, inputs: list) -> list:
        return self.session([inputs[i] for i in self.rest])


def _weakly(values: list) -> list:
    # The inputs of the last run, weakly: a structure's entry must not keep a dropped model's weights.
    # Scalars never count as unchanged (None), so they stay fed: plain calls make theirs anew on the
    # CPU where a forward replay or a device's shared scalars keep one value, and both must get the
    # same specialization (bitwise the same with the fast path on and off).
    return [weakref.ref(value) if value.shape else None for value in values]


def _worth_embedding(stable: list, inputs: list) -> bool:
    """Whether the unchanged inputs (``stable``, None where an input changed) are worth a second
    compilation with them embedded: one is large (weights), or the run is long and one is more than
    a scalar (a normalization's statistics). Unchanged scalars alone (a learning rate, a loss's
    ignore_index: a training step's) fold into nothing that repays compiling its graph again
    (resnet152's step: 9 s)."""
    varying = 0
    any_stable = False
    for before, value in zip(stable, inputs):
        if before is None:
            varying += value.data.size
        elif value.data.size >= SPECIALIZE_MIN_ELEMENTS:  # ``before`` refers to this very value
            return True
        elif value.data.ndim:
            any_stable = True
    return any_stable and varying >= SPECIALIZE_MIN_RUN_ELEMENTS


def _discard(items: list, item) -> None:
    """Removes ``item`` from ``items`` if it is there (a callback in another thread may have already)."""
    try:
        items.remove(item)
    except ValueError:
        pass


def watch_stable_inputs(found: Entry, plan: GraphPlan) -> None:
    """Counts runs in which a structure's inputs were the very same values; specializes after a few.

    Only structures with a large stable input (weights), or small stable inputs beside a large
    changing one, are specialized; every input that stayed the same is embedded then
    (BatchNormalization statistics too, so they fold into the convolutions), while per-call values
    (the batch, scalars) stay inputs. Several sets of inputs are watched at once
    (``stable_inputs``: ``[runs, inputs]`` pairs, the latest first), so models of one structure
    taking turns are each specialized.
    """
    with _CHANGING:
        _watch(found, plan)


def _watch(found: Entry, plan: GraphPlan) -> None:
    """``watch_stable_inputs``, under ``_CHANGING``."""
    if found.stable_runs < 0:
        return  # another thread found the structure not worth watching, or failed to compile it
    candidates = found.stable_inputs
    if candidates is None:
        if found.specialization is not None or found.former:
            pass  # a structure specialized before: another model's weights come
        elif any(node.domain == TRAINING_DOMAIN and node.op_type in OPTIMIZER_UPDATES for node in plan.nodes):
            # An optimizer's step: its parameters change every run by construction, and what stays
            # is at most the batch of a loop that reuses one (a second session for that costs an
            # arena of its own, ~25 MB for an MLP, for nothing a real loop would see).
            found.stable_runs = _NEVER
            return
        elif not (len(plan.inputs) > 1 and any(v.data.size >= SPECIALIZE_MIN_ELEMENTS for v in plan.inputs)):
            # Input shapes are part of the structure: never any large input. A single input that
            # stayed would be the whole computation embedded, a cache of one result, not worth a
            # session (and watching each run of a weightless layer costs it a few microseconds).
            found.stable_runs = _NEVER
            return
        found.stable_inputs = [[1, _weakly(plan.inputs)]]
        return
    inputs = plan.inputs
    best: list | None = None
    stable: list = []
    most = -1
    for candidate in candidates:  # the one sharing the most elements with this run's inputs
        kept = [
            before if before is not None and before() is value else None for before, value in zip(candidate[1], inputs)
        ]
        shared = sum(value.data.size for before, value in zip(kept, inputs) if before is not None)
        if shared > most and _worth_embedding(kept, inputs):
            best, stable, most = candidate, kept, shared
    if best is None:
        candidates.insert(0, [1, _weakly(inputs)])
        del candidates[_WATCHED_INPUT_SETS:]
        return
    best[0], best[1] = best[0] + 1, stable
    if best[0] < SPECIALIZE_AFTER_RUNS:
        return
    candidates.remove(best)
    found.stable_inputs = candidates or None
    if (found.specialization is not None) + len(found.former) >= SPECIALIZATIONS_PER_STRUCTURE:
        return  # as many as a structure keeps: these weights run the general session
    try:
        made = Specialization(plan, [i for i, v in enumerate(stable) if v is not None], found)
    except RuntimeError:
        found.stable_runs, found.stable_inputs = _NEVER, None  # onnxruntime could not compile it: never again
        return
    if found.specialization is not None:
        found.former.insert(0, found.specialization)
    found.specialization = made


def prepared_run_holds(found: Entry, specialization: "Specialization | None") -> bool:
    """Whether a run prepared with ``found``'s ``specialization`` (None: its runner, the structure then
    unspecialized) may still run it: ``found`` still in the table, and the specialization not retired,
    or no specialization made since. (A compiled call's and a known plan's prepared runs,
    ``compiled_calls``, ``known_plans``.)"""
    if found.dropped:
        return False  # evicted: its sessions are to be let go
    if specialization is None:
        return found.specialization is None and not found.former
    return not specialization.retired


def former_specialization(found: Entry, inputs: list) -> Specialization | None:
    """The entry's former specialization embedding ``inputs``, made its current one; or None."""
    with _CHANGING:
        for specialization in list(found.former):
            if specialization.matches(inputs):
                _discard(found.former, specialization)
                if found.specialization is not None:
                    found.former.insert(0, found.specialization)
                found.specialization = specialization
                return specialization
        # Another thread may have made it the current one meanwhile (models taking turns).
        current = found.specialization
        return current if current is not None and current.matches(inputs) else None


def never_specialize(found: Entry) -> None:
    """Stops watching a structure's inputs: its entry never gets an inference specialization."""
    with _CHANGING:
        found.stable_runs, found.stable_inputs = _NEVER, None


def clear() -> None:
    """Drops every entry (runners and specializations)."""
    with _CHANGING:
        for table in _entries.values():
            for found in table.values():
                for specialization in [found.specialization, *found.former]:
                    if specialization is not None:
                        specialization.retired = True  # a compiled call's prepared run lets it go too
            table.clear()


def set_capacity(capacity: int) -> None:
    """Bounds the number of entries kept per executor selection (least recently used are dropped first)."""
    with _CHANGING:
        for table in _entries.values():
            table.bound(capacity=capacity)


def set_budget(nodes: int) -> None:
    """Bounds the nodes of the entries' plans together, per executor selection (``NODE_BUDGET``)."""
    with _CHANGING:
        for table in _entries.values():
            table.bound(budget=nodes)


register_cache("plan entries", clear)
