"""The canonical plan of a pending subgraph: node order, fed inputs, outputs and structural key.

``plan(targets)`` walks the pending history behind ``targets`` once. The key it builds holds op
types, attributes, topology, input shapes and dtypes, never data, so every repetition of a
computation finds the same compiled executable. ``ir.model_building.build_model`` turns a plan
into an ONNX model (for onnxruntime sessions and for export).
"""

from __future__ import annotations

import sys
import threading
import weakref

from .graph import OPSET_VERSION, is_held
from .mode import MODE

__all__ = [
    "GraphPlan",
    "plan",
    "computed_values",
    "assign_results",
    "realize_alongside",
    "realize_together",
    "together_with",
    "values_waiting_to_join",
    "OPSET_VERSION",
    "IR_VERSION",
]

# The IR version of every graph onnxnn builds, and (``OPSET_VERSION``, defined with ``Node``) the
# default-domain opset of a graph of onnxnn's own ops. onnx's default ir_version can be newer than
# what the installed onnxruntime reads, so it is pinned to a value onnxruntime >= 1.20 accepts.
IR_VERSION = 10


class GraphPlan:
    """The canonical form of one pending subgraph: nodes in topological order and their wiring.

    Threads share pending graphs (a model's intermediates read from several threads), so between
    a plan's walk and its compilation another thread may realize one of its values, or walk its
    nodes again and renumber them (``Node.position`` is the walk's scratch). A compilation
    therefore reads the wiring the walk found (``computed_values``), never the values' state.

    Args:
        nodes: the nodes in topological order.
        inputs: the realized values fed to the graph.
        outputs: the values the run computes.
        key: the structural cache key.
        walked: whether ``plan()`` made it: its key then says how each node input was found.
        computed: ``computed_values`` of the plan, when the caller knows it (a plan rewired from
            a walked one).
    """

    __slots__ = ("nodes", "inputs", "outputs", "key", "walked", "computed")

    def __init__(self, nodes, inputs, outputs, key, walked: bool = False, computed: dict | None = None):
        self.nodes = nodes  # list[Node], topological order
        self.inputs = inputs  # list[Value]: realized values fed to the graph
        self.outputs = outputs  # list[Value]: pending values the run computes
        self.key = key
        self.walked = walked
        self.computed = computed  # computed_values, found on first use (compilations only)


_plan_counter = [0]
# Frames the walk's callers may already use (module nesting, user code), on top of the history's depth.
_CALLER_FRAMES = 800
# How far the limit may be raised. Before 3.11 every Python call also takes C stack (about 0.5 KB
# a frame): 20,000 frames stay well inside the default 8 MB, and deeper histories get Python's
# RecursionError rather than a crash.
_MOST_FRAMES = 1_000_000 if sys.version_info >= (3, 11) else 20_000


def _make_room(depth: int) -> None:
    """Raises Python's recursion limit for a walk ``depth`` nodes deep (never lowers it again:
    lowering it while another thread walks would break that walk)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), min(depth + _CALLER_FRAMES, _MOST_FRAMES)))


def _visit_deep(visit, node) -> None:
    """``visit(node)``, the recursion limit raised first where ``node``'s history needs it."""
    if node.depth + _CALLER_FRAMES > sys.getrecursionlimit():
        _make_room(node.depth)
    visit(node)


# Pending values to compute in the next realization whose history they join (``realize_alongside``),
# by id, each a weak reference (a value nobody computes keeps no graph alive), oldest first.
_companions: dict = {}
# How many nodes a companion may add to a plan: a loss's tail (reduction, mean, negation) or a
# running statistic's update is a handful; a companion that needs more is left for its own realization.
_MOST_COMPANION_NODES = 64
# A loss per backward and two running statistics per BatchNorm layer (resnet50: 106) of a step.
_MOST_COMPANIONS = 1024


def realize_alongside(value) -> None:
    """Asks the next realization that computes part of ``value``'s history to compute ``value`` too.

    A BatchNorm layer in training registers its running statistics, which read the batch's
    statistics: left pending, each step's would keep that step's whole forward graph (its weights,
    its input) alive, to be run again when they are read. Only a value still held when that
    realization comes is computed. (A backward's loss joins its gradients' group instead,
    ``together_with``: the step computes the loss with them, and a loss read first computes them.)
    """
    trace = MODE.trace
    if trace is not None:  # a forward replay asks the same, in the same order
        trace.effects.append(("alongside", value))
    if value.data is not None:
        return
    with _WALKING:  # a walk takes companions out (``_companions_joining``)
        known = _companions.get(id(value))
        if known is not None and known() is value:
            return
        _companions[id(value)] = weakref.ref(value)
        if len(_companions) > _MOST_COMPANIONS:
            del _companions[next(iter(_companions))]


# Groups of pending values computed in one realization once it computes any of them (``realize_together``).
_groups: list = []
_MOST_GROUPS = 8


def realize_together(values) -> None:
    """Asks the first realization that computes any of ``values`` to compute all of them still held.

    A backward registers the gradients it left in the leaves' ``.grad``: they share its whole
    history, whose intermediates no live tensor holds, so a loop reading them one at a time (a
    gradient norm per parameter) would otherwise run that history once per gradient. The values
    of an enclosing ``together_with`` join the group (a backward's loss).
    """
    group = [value for value in values if value.data is None]
    if group and MODE.trace is not None:  # a traced backward's replay asks the same, in the same order
        MODE.trace.together.append(group)
    joining = _JOINING.blocks
    if joining:  # a new list: the trace keeps the values asked for, which its replay asks for again
        present = set(map(id, group))
        group = group + [value for value in joining[-1] if value.data is None and id(value) not in present]
    if len(group) > 1:
        # Weakly: a group that nobody computes (gradients dropped unread) keeps no graph alive.
        with _WALKING:  # a walk takes groups out (``_group_members``)
            _groups.append([weakref.ref(value) for value in group])
            del _groups[:-_MOST_GROUPS]


def values_waiting_to_join() -> bool:
    """Whether some pending values wait to join the next realization that reaches them
    (``realize_alongside``, ``realize_together``): a plan must then be walked to find them."""
    return bool(_companions or _groups)


class _Joining(threading.local):
    """Per thread (a backward's blocks): the values every group registered inside the thread's
    ``together_with`` blocks takes, innermost last."""

    def __init__(self):
        self.blocks: list = []


_JOINING = _Joining()


class together_with:
    """Within this block, every group that ``realize_together`` registers also takes ``values``.

    A backward puts its loss in its gradients' group. The optimizer's step, which computes the
    gradients, then computes the loss too (its last few nodes, which the gradients do not need),
    rather than leaving a second run of the forward pass to reading it; and a loss read before the
    step (``loss.backward(); total += loss.item(); optimizer.step()``) is computed with the
    gradients, by one run of the forward pass, instead of by a run of its own whose intermediates
    the gradients' run would compute again.
    """

    def __init__(self, values):
        self.values = list(values)

    def __enter__(self) -> "together_with":
        _JOINING.blocks.append(self.values)
        return self

    def __exit__(self, *exc_info) -> None:
        _JOINING.blocks.pop()


def _group_members(visit, mark: int, device) -> list:
    """Visits, for the plan being built (nodes carrying ``mark``), the held, pending members of every
    group it computes part of (``realize_together``), returns them, and forgets the groups it
    completes or nobody holds."""
    kept = []
    added = []
    for references in _groups:
        group = [value for reference in references if (value := reference()) is not None and value.data is None]
        if not any(value.node.plan_mark == mark for value in group):
            if any(map(is_held, group)):
                kept.append(references)
            continue
        for value in group:
            if value.device is device and is_held(value):  # devices are interned: identity is equality
                # A value whose node the plan has already (an unread output of a node with several: a
                # batch normalization's parameter gradients beside its input's) is added like one it visits.
                if value.node.plan_mark != mark:
                    _visit_deep(visit, value.node)
                added.append(value)
    _groups[:] = kept
    return added


def _joins_plan(node, mark: int) -> bool:
    """Whether ``node``'s pending history outside the plan being built (nodes not carrying ``mark``)
    is at most ``_MOST_COMPANION_NODES`` nodes and reads something the plan computes."""
    seen: set = set()
    stack = [node]
    joins = False
    while stack:
        current = stack.pop()
        if current.plan_mark == mark:
            joins = True
            continue
        if id(current) in seen:
            continue
        seen.add(id(current))
        if len(seen) > _MOST_COMPANION_NODES:
            return False
        stack.extend(value.node for value in current.inputs if value is not None and value.data is None)
    return joins


# The walk keeps its scratch on the values it visits (``plan_mark``, ``plan_count``), and threads
# running one model share its realized weights: two walks at once could read each other's input
# positions and wire a graph wrongly. Walks take turns (a few microseconds each); runs do not.
# A run's results are given to their values under the same lock (``assign_results``), so a walk
# never finds a value half realized (its data set, its link to its node not yet dropped).
_WALKING = threading.RLock()


def plan(targets: list, include_shared: bool = True) -> GraphPlan:
    """The canonical plan of ``targets``' pending history (``_plan``), one thread's walk at a time."""
    with _WALKING:
        return _plan(targets, include_shared)


def assign_results(values: list, results: list) -> None:
    """Gives each of ``values`` still pending its result from a run, and drops its link to its node.

    Under the walks' lock (see ``_WALKING``). A value another thread computed meanwhile keeps the
    data it has: readers may have taken it already.
    """
    with _WALKING:
        for value, result in zip(values, results):
            if value.data is None:
                value.data = result
                value.node = None


def _plan(targets: list, include_shared: bool) -> GraphPlan:
    """Walks the pending history of ``targets`` and builds its canonical plan and cache key.

    With ``include_shared`` (realization), pending intermediates still needed elsewhere (a live
    Tensor holds them, a backward function saved them: ``graph.is_held``) become extra outputs;
    without it (export, a backward pass), the outputs are exactly ``targets``, which may also be
    realized values.

    This runs on every realization, cache hit or not, so it is written for speed: one walk
    that orders the nodes, counts consumers, collects the fed inputs and builds the key.
    """
    # A post-order depth-first walk: a topological order that depends only on the structure
    # (input order, target order), never on object addresses or on when values were realized.
    # Each node's part of the key is built while its inputs are visited. The recursion is as deep
    # as the pending history (at most MAX_PENDING_DEPTH nodes, runtime/depth.py, except in an
    # export, which keeps a whole model pending): when that could pass Python's recursion limit,
    # the limit is raised for the walk (a Python-to-Python call uses no C stack from 3.11 on, and
    # a few thousand frames fit the default 8 MB stack on 3.10).
    _plan_counter[0] += 1
    mark = _plan_counter[0]  # visited nodes and values carry it (cheaper than sets keyed by id)
    order: list = []
    key: list = []
    inputs: list = []
    pending: list = []

    def visit(node) -> None:
        # The key is one flat sequence: each node's signature, then one entry per input: None
        # (omitted), an int >= 0 (a fed input's position), an int < 0 (a node output computed
        # in the plan) or a tuple (a structural constant's content).
        part = [node._signature or node.signature]
        append = part.append
        for value in node.inputs:
            if value is None:
                append(None)
            elif value.data is None:
                producer = value.node
                if producer.plan_mark != mark:
                    # ruff reports the recursive call as undefined because of the ``del visit``
                    # below, but it only runs while visit is bound (astral-sh/ruff#7733, #9349).
                    visit(producer)  # noqa: F821
                index = value.index
                append(~((producer.position << 16) | index) if index < 65536 else (producer.position, index))
                if value.plan_mark == mark:
                    value.plan_count += 1
                else:
                    value.plan_mark = mark
                    value.plan_count = 1
                    pending.append(value)
            elif value.static is not None:
                append(value.static)
            else:
                if value.plan_mark != mark:
                    value.plan_mark = mark
                    value.plan_count = len(inputs)
                    inputs.append(value)
                append(value.plan_count)
        node.plan_mark = mark
        node.position = len(order)
        order.append(node)
        key.extend(part)

    for target in targets:
        if target.data is None and target.node.plan_mark != mark:
            _visit_deep(visit, target.node)
    outputs = list(targets)
    if include_shared and (_companions or _groups):
        device = targets[0].device
        added = _companions_joining(visit, mark, device) if _companions else []
        if _groups:
            added += _group_members(visit, mark, device)
        # One that another added value reads (it carries ``mark`` once both are visited) is left to
        # the held values below, which become outputs anyway: no value is an output twice.
        known = set(map(id, outputs))
        for value in added:
            if value.plan_mark != mark and id(value) not in known:
                known.add(id(value))
                outputs.append(value)
    del visit  # the closure refers to itself: clearing it frees this walk without the cycle collector

    if include_shared:
        # ``graph.is_held``, inlined: it runs for every pending value of every realization.
        wanted = targets[0] if len(targets) == 1 else set(map(id, targets))
        for value in pending:
            if value is wanted or (type(wanted) is set and id(value) in wanted):
                continue
            if value.node.saved:
                outputs.append(value)
                continue
            holder = value.holder
            if holder is not None:
                handle = holder()
                if handle is not None:
                    held = handle._value
                    if held is value or (held.data is None and value in held.node.inputs):
                        outputs.append(value)
    plan_key = (
        tuple(key),
        tuple([(v.shape, v.dtype) for v in inputs]),
        tuple([(v.node.position, v.index, v.shape) if v.data is None else None for v in outputs]),
        targets[0].device,
    )
    return GraphPlan(order, inputs, outputs, plan_key, True)


def _companions_joining(visit, mark: int, device) -> list:
    """Visits the registered companions that join the plan being built (``realize_alongside``) and
    returns them; forgets those it takes, and those computed meanwhile or dropped."""
    added = []
    for key, reference in list(_companions.items()):
        value = reference()
        if value is None or value.data is not None or not is_held(value):
            del _companions[key]  # gone, computed meanwhile, or dropped by its user: forgotten
        elif value.node.plan_mark == mark:
            # The plan has its node: it is a target, an intermediate, or an unread output beside them.
            added.append(value)
            del _companions[key]
        elif value.device == device and _joins_plan(value.node, mark):
            _visit_deep(visit, value.node)
            added.append(value)
            del _companions[key]
    return added


def computed_values(plan: GraphPlan) -> dict:
    """The values ``plan`` computes, by ``id()``: ``(index of their node in plan.nodes, output index)``.

    A value the plan reads but does not compute is fed (``plan.inputs``) or a constant. For a plan
    ``plan()`` walked, this is what the walk found, read back from its key, whatever happened to
    the values since (see ``GraphPlan``); a plan made otherwise (a test's, a debugging tool's) is
    read from its values as they are.
    """
    computed = plan.computed
    if computed is None:
        computed = plan.computed = _walked_values(plan) if plan.walked else _pending_values(plan)
    return computed


def _walked_values(plan: GraphPlan) -> dict:
    # The key holds each node's signature, then one entry per input (see ``visit`` in ``_plan``): a
    # node output computed in the plan is an int < 0, or a (position, index) pair for an index past
    # 16 bits; a structural constant's content is a longer tuple, a fed input an int >= 0.
    entries = plan.key[0]
    computed: dict = {}
    cursor = 0
    for node in plan.nodes:
        cursor += 1
        for value in node.inputs:
            entry = entries[cursor]
            cursor += 1
            if type(entry) is int:
                if entry < 0:
                    computed[id(value)] = (~entry >> 16, ~entry & 0xFFFF)
            elif type(entry) is tuple and len(entry) == 2:
                computed[id(value)] = entry
    for value, entry in zip(plan.outputs, plan.key[2]):
        if entry is not None:  # None: an export's output that was realized already
            computed[id(value)] = entry[:2]
    return computed


def _pending_values(plan: GraphPlan) -> dict:
    position = {id(node): index for index, node in enumerate(plan.nodes)}
    computed: dict = {}
    for node in plan.nodes:
        for value in node.inputs:
            if value is not None and value.data is None:
                computed[id(value)] = (position[id(value.node)], value.index)
    for value in plan.outputs:
        if value.data is None:
            computed[id(value)] = (position[id(value.node)], value.index)
    return computed
