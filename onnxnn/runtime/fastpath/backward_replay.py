"""Backward passes replayed: a training loop's backward is worked out once per graph structure.

A training loop builds an autograd graph of the same structure at every step, and its backward
records the same gradient nodes every time: gradient rules, the driver's bookkeeping and shape
rules give the same answers for the same op types, attributes, shapes, dtypes and topology (DESIGN
principle 3: on a cache hit, no autodiff runs). So the first backward of a structure runs the
general driver (``backward._execute``) under a trace, which keeps the nodes it recorded, the saved
values its rules read and what it left in each leaf's ``.grad``. Later backwards of the structure
replay that over the new step's values: one ``Node`` and its ``Value``s per gradient node, with no
rule, Tensor or gradient bookkeeping in between.

The structural key says everything the recording can depend on: per function its node's
signature, its inputs' shapes, dtypes, devices (static constants by content), which inputs and
outputs are the same value, and where its edges lead; per leaf whether ``.grad`` is set. Only
graphs with no hooks, no higher-order recording (``create_graph``) and nothing that read or
computed data while traced (a rule looking at data) are replayed (realizing a pending history
too deep to keep is structural: replays do it too); every other backward, and every error, takes the general driver.

A replay reads the leaves' gradients at its start and writes their sums at its end, so it runs under
``backward_ends.GRADIENT_LOCK``, as the general driver's accumulations do: backwards in several
threads into one model's parameters add every contribution.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

from ...ir.caches import WeightedCache, register_cache
from ...ir.graph import Value
from ...ir.mode import MODE, RecordingTrace, traced
from ...ir.plan import realize_together
from ..autograd import written_output
from ..backward_ends import GRADIENT_LOCK
from .recorded_steps import REPLAY_NAMESPACE, produced_by, slot_values, write_steps

__all__ = ["backward", "clear_templates", "replay_info"]

_LEAF = object()  # marks a leaf's part of a structural key
_UNREPLAYABLE = object()  # a structure whose trace depended on more than structure
# Templates are bounded by count and by their generated sources' lengths together (``ir.caches.
# WeightedCache``), least recently used evicted first: a template's source, namespace and tables
# grow with its backward (~0.8 MB of source for an LSTM unrolled over 50 steps), so structures that
# never repeat filled 256 of them with gigabytes. A training step's template takes 12 KB of source
# for an MLP, 95 KB for resnet18, 234 KB for a 6-layer transformer (d_model 64), 459 KB for a
# 12-layer one (d_model 256): the budget (~17 MB with the namespaces, about as large as the sources)
# leaves room for tens of such models at once.
TEMPLATE_LIMIT = 256  # a loop has a handful of structures; more means they never repeat
SOURCE_BUDGET = 1 << 23  # characters of the templates' sources together
_templates = WeightedCache(TEMPLATE_LIMIT, SOURCE_BUDGET)

# Where a replay finds a value of the new graph: the kinds of a Template gather.
_INPUT, _OUTPUT, _ROOT_GRADIENT, _LEAF_GRADIENT = range(4)


def backward(root: tuple, root_gradient, retain_graph: bool, engine) -> bool:
    """Runs ``root_gradient.backward()``-style accumulation through the graph behind ``root``.

    Args:
        root: the (function, output_nr) edge the gradient enters at.
        root_gradient: the Tensor that enters there.
        retain_graph: keep the functions' saved values for another backward.
        engine: the autograd engine (``runtime.backward.ENGINE``): its general driver
            ``execute``, and the ``Function``, ``AccumulateGrad`` and ``Tensor`` types.

    Returns:
        False when the graph must take the general driver (nothing was done), True when done.
    """
    # From the key (which says which leaves have a .grad) to a replay's last write of .grad: another
    # thread's backward into the same leaves waits, so none of their additions is lost.
    with GRADIENT_LOCK:
        found = _structure_key(root, root_gradient._value, engine)
        if found is None:
            return False
        key, order = found
        template = _templates.get(key)
        if template is None:
            if not _worth_tracing(key):
                return False
            _trace(key, order, root, root_gradient, retain_graph, engine)
            return True
        if template is _UNREPLAYABLE:
            return False
        template.recently_used = True  # kept over older unused templates (``SOURCE_BUDGET``)
        MODE.grad.in_backward += 1
        try:
            replayed = template.replay(order, root_gradient._value, retain_graph)
        finally:
            MODE.grad.in_backward -= 1
        _counts["replayed"] += replayed
        return replayed


def clear_templates() -> None:
    """Forgets every traced backward (they are rebuilt on the next backward of each structure)."""
    _templates.clear()
    _size_families.clear()
    _sightings.clear()
    _counts.update(traced=0, replayed=0)


register_cache("backward replay templates", clear_templates)


def replay_info() -> dict:
    """``{"templates", "unreplayable", "traced", "replayed"}``: structures kept, and backwards since cleared."""
    unreplayable = sum(template is _UNREPLAYABLE for template in _templates.values())
    return {"templates": len(_templates) - unreplayable, "unreplayable": unreplayable, **_counts}


_counts = {"traced": 0, "replayed": 0}


# ---------------------------------------------------------------- structures seen at many sizes
#
# The key holds shapes, and only running the rules says what they record at another size (a
# rule may compute a constant from a size in any way), so a template never serves another size.
# Building one (writing and compiling its code) costs about as much as six general backwards
# cost more than a replay, which a size that comes back only a few times (a loop over varying
# batch sizes) never earns back. So the first size of a structure is traced at once, as every
# structure used to be, and any other size of it only at its TRACE_AFTER_SIGHTINGS-th backward
# (by then the general driver has cost about what the template would have: at most twice the
# best choice in hindsight, whatever the sizes do); until then it takes the general driver.
# A template's code is compiled at its first replay, not when it is traced: a structure seen once
# (a script's one training step) pays for the trace only.
TRACE_AFTER_SIGHTINGS = 8
SIGHTINGS_LIMIT = 4096  # keys counted; more are forgotten together, as templates are
# Both tables hold the keys' hashes, not the keys: a key grows with its graph (~50 KB for an LSTM
# over packed sequences of 30 steps), and thousands of structures seen once held hundreds of
# megabytes. Two keys of one hash would only share a count (one traced sooner): templates are found
# by the key itself.
_size_families: dict = {}  # hash of the key with sizes abstracted -> hash of the first key seen of that structure
_sightings: dict = {}  # hash of a key -> backwards seen without a template


def _worth_tracing(key: tuple) -> bool:
    """Whether the first backwards of ``key`` should be traced now (see above)."""
    digest = hash(key)
    family = hash(_size_family(key))
    first = _size_families.get(family)
    if first is None:
        if len(_size_families) >= SIGHTINGS_LIMIT:
            _size_families.clear()
        _size_families[family] = digest
        return True
    if first == digest:
        return True
    if len(_sightings) >= SIGHTINGS_LIMIT:
        _sightings.clear()
    seen = _sightings.get(digest, 0) + 1
    if seen < TRACE_AFTER_SIGHTINGS:
        _sightings[digest] = seen
        return False
    _sightings.pop(digest, None)
    return True


def _size_family(key: tuple) -> tuple:
    """``key`` with each shape reduced to its rank and each static constant to its dtype and shape."""
    parts = []
    for item in key:
        if type(item) is tuple and item:
            head = item[0]
            if head == "c" and len(item) == 4:
                item = item[:3]  # a static constant's content
            elif head is _LEAF:
                item = (_LEAF, len(item[1]))
            elif type(head) is tuple and len(item) == 3:
                item = (len(head),) + item[1:]  # a value's (shape, dtype, device)
        parts.append(item)
    return tuple(parts)


def _structure_key(root: tuple, root_gradient: Value, engine):
    """The structural key of the backward graph behind ``root``, and its functions in key order.

    Functions are numbered in the order they are first reached, values (the nodes' inputs and
    outputs, the gradients) in the order they are first seen. Per function the key lists its node's
    signature and input count, then per input None, a static constant's content, a new value's
    ``(shape, dtype, device)`` or a seen value's number, then its outputs' numbers and its edges'
    function numbers (``(number, output_nr)`` where output_nr is not 0). Per leaf it lists the
    leaf's shape and its ``.grad`` like an input. None when the graph must not be replayed (hooks,
    a released node, a node of another kind than a recorded op's: a custom ``autograd.Function``'s
    backward is user Python, which may do anything).
    """
    Function, AccumulateGrad, ReleasedNode = engine.Function, engine.AccumulateGrad, engine.ReleasedNode
    root_function, root_output = root
    numbers: dict = {}
    if root_gradient.static is not None:
        key = [root_output, root_gradient.static]
    else:
        numbers[root_gradient] = 0
        key = [root_output, (root_gradient.shape, root_gradient.dtype, root_gradient.device)]
    append = key.append
    order = [root_function]
    position_of = {root_function: 0}
    for function in order:  # grows while it is walked
        if type(function) is Function or function.records_op:  # one class mostly (autograd.shown)
            node = function.node
            if (
                type(node) is ReleasedNode
                or function._hooks
                or function._pre_hooks
                or function._tensor_hooks
                or function._retained
            ):
                return None
            inputs, outputs, edges = node.inputs, function.outputs, function._edges
            if len(edges) != len(inputs):
                return None
            append(node.signature)
            append(len(inputs))
        elif type(function) is AccumulateGrad:
            variable = function.variable
            if (
                variable._backward_hooks
                or variable._post_accumulate_grad_hooks
                or function._hooks
                or function._pre_hooks
            ):
                return None
            append((_LEAF, variable._value.shape))
            gradient = variable.grad
            inputs, outputs, edges = (None if gradient is None else gradient._value,), (), ()
        else:
            return None  # another kind of node (a custom autograd.Function's): never replayed
        for value in inputs:
            if value is None:
                append(None)
            elif value.static is not None:
                append(value.static)
            else:
                number = numbers.get(value)
                if number is None:
                    numbers[value] = len(numbers)
                    append((value.shape, value.dtype, value.device))
                else:
                    append(number)
        for value in outputs:  # their metadata follows from the node; only aliasing matters
            number = numbers.get(value)
            if number is None:
                number = numbers[value] = len(numbers)
            append(number)
        for edge in edges:
            if edge is None or edge[0] is None:
                append(None)
                continue
            target = edge[0]
            target_position = position_of.get(target)
            if target_position is None:
                target_position = position_of[target] = len(order)
                order.append(target)
            append(target_position if edge[1] == 0 else (target_position, edge[1]))
    return tuple(key), order


def _trace(key: tuple, order: list, root: tuple, root_gradient, retain_graph: bool, engine) -> None:
    """Runs the general driver under a trace and keeps its Template for ``key`` (or that it has none)."""
    if MODE.trace is not None:  # a backward inside a traced one (a rule calling backward): no nesting
        engine.execute([root], [root_gradient], retain_graph=retain_graph, create_graph=False)
        return
    locations = _locations(order, root_gradient._value, engine.AccumulateGrad)
    gradients_before = [
        function.variable.grad if type(function) is engine.AccumulateGrad else None for function in order
    ]
    values_before = [None if gradient is None else gradient._value for gradient in gradients_before]
    _counts["traced"] += 1
    with traced(RecordingTrace()) as trace:  # this thread's recording only
        engine.execute([root], [root_gradient], retain_graph=retain_graph, create_graph=False)
    template = None
    if not trace.read_data:
        template = _Template.build(trace, order, locations, gradients_before, values_before, engine)
    if template is None:
        _templates.put(key, _UNREPLAYABLE, 1)
    else:
        _templates.put(key, template, len(template.source))


def _locations(order: list, root_gradient: Value, AccumulateGrad: Any) -> dict:
    """Where each value of the graph sits (a function's input or output, a gradient), first seen first."""
    locations: dict = {}
    if root_gradient.static is None:
        locations[root_gradient] = (0, _ROOT_GRADIENT, 0)
    for position, function in enumerate(order):
        if type(function) is AccumulateGrad:
            gradient = function.variable.grad
            if gradient is not None:
                locations.setdefault(gradient._value, (position, _LEAF_GRADIENT, 0))
            continue
        for index, value in enumerate(function.node.inputs):
            if value is not None and value.static is None:
                locations.setdefault(value, (position, _INPUT, index))
        for index, value in enumerate(function.outputs):
            locations.setdefault(value, (position, _OUTPUT, index))
    return locations


class _Template:
    """A traced backward: what to gather from a new graph, the nodes to record, what to leave in ``.grad``.

    Values are numbered in slots: the constants first (slot 0 is None, for absent inputs), then
    the values gathered from the new graph, then each recorded node's outputs. ``replay`` is that
    written out as straight-line Python (``source``), one local variable per slot: interpreting
    the same tables costs about twice as much per node.
    """

    __slots__ = (
        "checks",
        "constants",
        "gathers",
        "steps",
        "effects",
        "together",
        "functions",
        "released",
        "source",
        "replay",
        "recently_used",
    )
    checks: list[tuple[int, int]]  # (function position, saved input index) whose version is checked
    constants: list
    gathers: list
    steps: list[tuple]
    effects: list[tuple[int, bool, int]]  # (leaf function position, whether .grad existed, slot)
    together: list[tuple[int, ...]]  # the slots of each group realize_together was asked for, in its order
    functions: list[int]
    released: list  # per function of ``functions``, the ReleasedNode a replay leaves it (structural: shared)
    recently_used: bool  # replayed since the templates' evictions last came round (``WeightedCache``)
    source: str
    replay: Callable[..., bool]

    @classmethod
    def build(cls, trace, order: list, locations: dict, gradients_before: list, values_before: list, engine):
        """The Template of a traced backward, or None where it used a value it cannot find again."""
        AccumulateGrad = engine.AccumulateGrad
        produced = produced_by(trace.records)
        effects = []  # (leaf function position, whether .grad existed, value)
        for position, function in enumerate(order):
            if type(function) is not AccumulateGrad:
                continue
            gradient = function.variable.grad
            before = gradients_before[position]
            if before is None:
                if gradient is not None:
                    effects.append((position, False, gradient._value))
            elif gradient is not before:
                return None  # the driver replaced the .grad tensor itself: not what a replay does
            elif gradient._value is not values_before[position]:
                effects.append((position, True, gradient._value))
        parts = slot_values(trace.records, produced, [value for _, _, value in effects], locations)
        if parts is None:
            return None
        constants, gathers, template_steps, slots = parts
        template = cls()
        template.constants = constants
        template.gathers = gathers
        template.steps = template_steps
        template.effects = [(position, existed, slots[value]) for position, existed, value in effects]
        # The gradients the driver asked to be computed together, in its order: a replay asking for them in
        # another order would plan their realization differently, and round differently.
        template.together = [tuple(slots[value] for value in group if value in slots) for group in trace.together]
        position_of = {function: position for position, function in enumerate(order)}
        template.checks = sorted(
            {(position_of[function], index) for function, index in trace.saved_reads if function in position_of}
        )
        template.functions = [
            position for position, function in enumerate(order) if type(function) is not AccumulateGrad
        ]
        # What a released node keeps follows from the structure (op, attributes, constants, shapes):
        # made once here, from the traced graph (released by the trace unless it retained it).
        ReleasedNode = engine.ReleasedNode
        template.released = [
            order[position].node
            if type(order[position].node) is ReleasedNode
            else ReleasedNode(order[position].node, order[position].outputs)
            for position in template.functions
        ]
        template.source, template.replay = template._write_replay(engine.Tensor)
        template.recently_used = False
        return template

    def _write_replay(self, Tensor: type) -> tuple:
        """The source of ``replay(order, root_gradient, retain_graph) -> bool`` and the function itself.

        It returns False, having done nothing, when a saved value was changed in place since it
        was saved (the general driver then raises PyTorch's error), and True once it has recorded
        the nodes and set each leaf's ``.grad``.
        """
        namespace = dict(
            REPLAY_NAMESPACE, Tensor=Tensor, realize_together=realize_together, written_output=written_output
        )
        lines = ["def replay(order, root_gradient, retain_graph):"]
        for position, index in self.checks:
            if index < 0:  # a saved output's read (``GradContext.output``), recorded as ``~index``
                lines.append(f"    if written_output(order[{position}].outputs[{~index}]) is not None: return False")
                continue
            lines.append(f"    saved = order[{position}]._saved_versions[{index}]")
            lines.append("    if saved is not None and saved[0].value != saved[1]: return False")
        # The .grad tensors read and added to, each read once: a thread outside the backwards' lock
        # (another's ``zero_grad``) may set one to None meanwhile. Before anything is recorded, the
        # general driver then takes the leaves as they are; after, the sum goes to the tensor read.
        leaves = sorted(
            {position for position, kind, _ in self.gathers if kind == _LEAF_GRADIENT}
            | {position for position, existed, _ in self.effects if existed}
        )
        for position in leaves:
            lines.append(f"    grad_{position} = order[{position}].variable._grad")
            lines.append(f"    if grad_{position} is None: return False")
        for slot, value in enumerate(self.constants):
            namespace[f"value_{slot}"] = value
        sources = {
            _INPUT: "order[{}].node.inputs[{}]",
            _OUTPUT: "order[{}].outputs[{}]",
            _ROOT_GRADIENT: "root_gradient",
            _LEAF_GRADIENT: "grad_{}._value",
        }
        slot = len(self.constants)
        for position, kind, index in self.gathers:
            lines.append(f"    value_{slot} = " + sources[kind].format(position, index))
            slot += 1
        write_steps(self.steps, slot, namespace, lines)
        for position, existed, ref in self.effects:
            if existed:
                lines.append(f"    grad_{position}._rebind(value_{ref})")
            else:
                lines.append(f"    order[{position}].variable._grad = Tensor._from_value(value_{ref})")
        for group in self.together:  # computed together when any is (ir.plan.realize_together)
            if group:  # one gradient still joins the backward's loss (ir.plan.together_with)
                lines.append("    realize_together((" + "".join(f"value_{ref}, " for ref in group) + "))")
        if self.functions:
            lines.append("    if not retain_graph:  # what the general driver frees, as it runs each function")
            for position, released in zip(self.functions, self.released):
                namespace[f"released_{position}"] = released
                lines.append(
                    f"        function = order[{position}]; function.node.saved = False; "
                    f"function.node = released_{position}; function.outputs = released_{position}.outputs"
                )
        lines.append("    return True")
        source = "\n".join(lines) + "\n"

        def compile_then_replay(order, root_gradient, retain_graph) -> bool:
            # Compiling costs a few general backwards (3 ms for an MLP's): a structure pays it when it
            # comes back, so a one-off backward (a script's single step) does not.
            exec(compile(source, f"<onnxnn backward replay {next(_replay_numbers)}>", "exec"), namespace)
            replay: Callable[..., bool] = namespace["replay"]  # type: ignore[assignment]  # defined by the source
            self.replay = replay
            return replay(order, root_gradient, retain_graph)

        return source, compile_then_replay


_replay_numbers = itertools.count()
