"""onnxnn's CPU sessions cut around the nodes that onnxnn's compiled code runs faster (``compiled_forms``).

A convolution's weight gradient over few channels costs onnxruntime a GEMM per kernel tap over a
copied window of the input; onnxnn's compiled loop takes a third of that time
(kernels/compiled_convolutions.py). A plan holding such nodes is built with them as recorded
(``build_model(kept=...)``) and cut into stages: each node gets a level, the number of compiled
nodes on its longest path from the plan's inputs; the nodes of each level run as one session,
then that level's compiled nodes. A step's weight gradients read only values of level 0, so alone
they cut it into a first session, the loops, and a second session for what reads their results
(an optimizer's update recorded in the same step), if anything does. Batch normalization's and
ReLU's gradients (kernels/compiled_normalization.py) sit on the path itself: a ResNet's step runs
as a session between each two normalization layers. Those sessions share one memory arena
(``SPLIT_PART_KEY``, runtime/sessions.py), so the buffers each frees are the next one's. The
runner returns what the one session would have returned.

A session of more than ``MOST_SESSION_NODES`` nodes, between compiled nodes or in a plan without
any, is cut further into pieces run one after another: onnxruntime builds a session in time
superlinear in its nodes, and a deep network's training step on small images is a graph of
thousands. A value passed on between stages is dropped once its last reader has run.

The compiled nodes use as many threads as onnxnn's sessions (``onnxnn.get_num_threads()`` when the
plan is compiled). On more than one thread, a compiled node whose results no stage reads before
a later session has run (a weight gradient, read only by the update at the end of the step) runs
beside those sessions on a thread of its own (``BESIDE_THREADS``), and what does not lead to a
compiled node (an optimizer's update) runs in the last session, so that the weight gradients are
read only there. onnxruntime's kernels gain little from a second thread (a small ResNet's step:
1.17x in all, its stride-2 ConvTranspose none), so that step on two threads took 0.90-0.92 of the
time with its weight gradients beside the sessions.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import onnx
from onnx import helper, numpy_helper

from ..ir.plan import GraphPlan
from ..ir.model_building import names_read, work_estimate
from ..ir.registry import compiled_forms, compiled_readers
from .threads import get_num_threads

__all__ = ["SplitSession", "session_runner", "SPINNING_MOST_SESSIONS", "compiled_node_name", "SPLIT_PART_KEY"]

# The metadata key marking a model as one session of a cut plan, its value the whole plan's
# ``work_estimate`` and the cut's number of sessions (``create_session`` and ``CompiledSession`` read it).
SPLIT_PART_KEY = "onnxnn.split_part"


# The most sessions a cut plan may have for their thread pools to spin. A pool spinning after its run
# takes the cores from the next session and the compiled loops between them: a small ResNet's step
# cut into 16 sessions took 4x as long on two threads, MobileNetV2's into 78 5x; without spinning,
# 0.83-0.87 of the time they took on one thread each. Spinning within runs only (``create_session``)
# still cost the small ResNet's step 1.09x its time without. A plan cut only around its weight
# gradients (two sessions) loses to the wake-ups of hundreds of small ops without spinning:
# MobileNetV2's step on two threads 249 ms spinning, 273 not.
SPINNING_MOST_SESSIONS = 2

# The threads of a compiled node run beside the sessions: one, so that the sessions' threads and it
# share the cores without waiting for each other (two made the small ResNet's step 0.94 of the
# time instead of 0.90-0.92).
BESIDE_THREADS = 1

# The thread that runs compiled nodes beside the sessions (``SplitSession.beside``), made on first use.
_BESIDE: list = []
if hasattr(os, "register_at_fork"):
    # A forked child has none of the parent's threads: it makes its own on first use.
    os.register_at_fork(after_in_child=_BESIDE.clear)


def _beside_pool() -> ThreadPoolExecutor:
    if not _BESIDE:
        _BESIDE.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="onnxnn-beside"))
    return _BESIDE[0]


class SplitSession:
    """A plan's runner: stages, each a session or a compiled node, run in order.

    Every array of a run has a slot in one list, in the order they appear: the plan's inputs, the
    model's constants that compiled nodes read, then each stage's outputs. A stage is ``(run, input
    slots, is_session, plan index)``, the last the compiled node's index in the plan (None for a session).
    ``beside`` maps the index of each compiled stage that runs beside the sessions to its output count;
    ``released[i]`` holds the slots that no stage after stage ``i`` reads and the run does not return,
    dropped once it has run (a large session's pieces pass on values that die in the next piece).
    """

    __slots__ = ("stages", "threads", "output_slots", "constants", "absorbed", "beside", "released")

    def __init__(
        self,
        stages: list,
        threads: int,
        output_slots: list,
        constants: list,
        absorbed: int = 0,
        beside: dict | None = None,
    ):
        self.stages = stages
        self.threads = threads
        self.output_slots = output_slots
        self.constants = constants
        self.absorbed = absorbed  # readers a compiled node computes (``compiled_readers``), not the sessions
        self.beside = beside or {}
        self.released = _released_slots(stages, output_slots)

    @property
    def sessions(self) -> int:
        return sum(1 for _, _, is_session, _ in self.stages if is_session)

    @property
    def compiled(self) -> int:
        return sum(1 for _, _, is_session, _ in self.stages if not is_session)

    def __call__(self, inputs: list) -> list:
        arrays = [*inputs, *self.constants]
        threads = self.threads
        if not self.beside:
            for (run, slots, is_session, _), released in zip(self.stages, self.released):
                feeds = [arrays[slot] for slot in slots]
                arrays.extend(run(feeds) if is_session else run(feeds, threads))
                for slot in released:
                    arrays[slot] = None
            return [arrays[slot] for slot in self.output_slots]
        return self._run_beside(arrays, threads)

    def _run_beside(self, arrays: list, threads: int) -> list:
        """Runs the stages as ``__call__`` does, those in ``beside`` on the side thread: a slot they
        fill holds ``(future, output index)`` until a stage reads it."""
        beside = self.beside
        waiting: dict = {}  # slot -> (future, index of the output)
        futures = []
        try:
            for position, (run, slots, is_session, _) in enumerate(self.stages):
                if waiting:
                    for slot in slots:
                        found = waiting.pop(slot, None)
                        if found is not None:
                            arrays[slot] = found[0].result()[found[1]]
                feeds = [arrays[slot] for slot in slots]
                count = beside.get(position)
                if count is None:
                    arrays.extend(run(feeds) if is_session else run(feeds, threads))
                else:
                    future = _beside_pool().submit(run, feeds, BESIDE_THREADS)
                    futures.append(future)
                    waiting.update((len(arrays) + index, (future, index)) for index in range(count))
                    arrays.extend([None] * count)
                for slot in self.released[position]:
                    arrays[slot] = None
            for slot, (future, index) in waiting.items():
                arrays[slot] = future.result()[index]
        finally:
            # A stage that failed leaves nothing running: every loop beside it has ended (errors included).
            for future in futures:
                future.exception()
        return [arrays[slot] for slot in self.output_slots]


def _released_slots(stages: list, output_slots: list) -> list:
    """For each stage, the slots whose last reader it is, the run's outputs left out."""
    last_reader = {slot: index for index, (_, slots, _, _) in enumerate(stages) for slot in slots}
    for slot in output_slots:
        last_reader.pop(slot, None)
    released: list = [[] for _ in stages]
    for slot, index in last_reader.items():
        released[index].append(slot)
    return released


def _split_or_model(
    plan: GraphPlan, device, build: Callable, compile_model: Callable
) -> SplitSession | onnx.ModelProto:
    """``plan``'s runner cut around its compiled nodes and into pieces of at most ``MOST_SESSION_NODES``
    nodes, or the model to compile as one session where it is not cut.

    Only on the CPU, where the compiled code runs. ``build(kept)`` builds the plan's model with the
    nodes whose ids are in ``kept`` as recorded (as ``build_model(plan, kept=kept)``, with whatever
    else the caller's sessions take: lowerings, symbolic sizes, inputs embedded as constants);
    ``compile_model(model)`` compiles one part (a session on the plan's device). A specialized
    session's compiled nodes read its constants, so its values are the general session's. The
    compiled nodes read their sizes from their inputs at each run, so a graph shared across sizes
    (``fastpath.dynamic_shapes``) is cut like any other, and gives the same values.
    """
    if device.type != "cpu":
        return build(frozenset())
    threads = get_num_threads()
    runs = {}
    for position, node in enumerate(plan.nodes):
        form = compiled_forms.get(node.op_type, node.domain)
        run = form(node, threads) if form is not None else None
        if run is not None:
            runs[id(node)] = (compiled_node_name(node, position), (run, position))
    absorbed = _absorb_readers(plan, runs, threads)
    model = build(frozenset(runs))
    if not runs and (threads > 1 or len(model.graph.node) <= MOST_SESSION_NODES):
        return model  # one session: in pieces only on one thread (see MOST_SESSION_NODES)
    cut = _cut(model, dict(runs.values()), compile_model, absorbed, threads)
    return cut if cut is not None else (build(frozenset()) if runs else model)


# The longest chain of only readers a compiled node is offered (``compiled_readers``): a residual
# block's Add and ReLU after its last normalization.
_MOST_READERS = 2


def _absorb_readers(plan: GraphPlan, runs: dict, threads: int) -> dict:
    """Gives nodes with a ``compiled_readers`` entry the chain of only readers of their first output that
    their entry takes, as compiled nodes (updating ``runs``); returns how many readers the cut drops
    after each such node, by its name."""
    candidates = [
        (position, node, absorb)
        for position, node in enumerate(plan.nodes)
        if (absorb := compiled_readers.get(node.op_type, node.domain)) is not None
    ]
    if not candidates:
        return {}
    readers: dict = {}  # (id of the producing node, output index) -> positions of the nodes reading it
    for position, node in enumerate(plan.nodes):
        for value in node.inputs:
            if value is not None and value.data is None:
                readers.setdefault((id(value.node), value.index), []).append(position)
    held = {(id(value.node), value.index) for value in plan.outputs if value.data is None}
    taken: set = set()  # readers already absorbed (a residual Add reads two normalizations)

    def only_reader(node):
        """The only reader of ``node``'s first output, None where it has others, none, is held, or is
        compiled or absorbed already."""
        read_by = readers.get((id(node), 0), [])
        if len(read_by) != 1 or (id(node), 0) in held:
            return None
        reader = plan.nodes[read_by[0]]
        return None if id(reader) in runs or id(reader) in taken else reader

    absorbing: dict = {}
    for position, node, absorb in candidates:
        chain: list = []
        reader = only_reader(node)
        while reader is not None and len(chain) < _MOST_READERS:
            chain.append(reader)
            reader = only_reader(reader)
        absorbed = absorb(node, chain, threads) if chain else None
        if absorbed is not None:
            run, count = absorbed
            name = compiled_node_name(node, position)
            runs[id(node)] = (name, (run, position))
            absorbing[name] = count
            taken.update(map(id, chain[:count]))
    return absorbing


def session_runner(plan: GraphPlan, device, build: Callable, compile_model: Callable):
    """``plan``'s runner on onnxruntime: cut around its compiled nodes and into sessions of at most
    ``MOST_SESSION_NODES`` nodes (``_split_or_model``, with the same arguments), else one session of
    the model ``build`` makes, compiled by ``compile_model``."""
    found = _split_or_model(plan, device, build, compile_model)
    return found if isinstance(found, SplitSession) else compile_model(found)


def compiled_node_name(node, position: int) -> str:
    """The name ``build_model`` gives the plan's node at ``position``, by which the cut finds it."""
    return f"{node.op_type}_{position}"


def _cut(
    model: onnx.ModelProto, runs: dict, compile_model: Callable, absorbed: dict, threads: int
) -> SplitSession | None:
    graph = model.graph
    if absorbed:
        _drop_absorbed(graph, absorbed)
    whole_work = work_estimate(model)
    # Each value's level: 0 for the plan's inputs, a node's inputs' highest, plus one after a compiled node.
    levels: dict = {}
    stages: dict = {}  # (level, 0 for the session or 1 for the compiled nodes) -> nodes
    for node in graph.node:
        level = max((levels.get(name, 0) for name in names_read([node])), default=0)
        compiled = node.name in runs
        stages.setdefault((level, int(compiled)), []).append(node)
        for name in node.output:
            levels[name] = level + compiled
    if threads > 1:
        _run_sinks_last(graph, runs, stages)
    initializers = {initializer.name: initializer for initializer in graph.initializer}
    compiled_reads = {name for (_, kind), nodes in stages.items() if kind for node in nodes for name in node.input}
    stages = _in_pieces(stages)
    # The sessions, pieces included, for their pools' spinning (``create_session``).
    session_stages = sum(1 for key in stages if not key[1])
    if not compiled_reads and len(stages) == 1:
        return None  # neither compiled nor large
    _repeat_views(graph, stages)

    inputs = {graph_input.name: graph_input for graph_input in graph.input}
    # The constants compiled nodes read (a specialized session's embedded inputs) come after the inputs,
    # then, where a compiled node leaves an optional input out (a DFT's length), a slot holding None.
    constants = sorted(compiled_reads & initializers.keys())
    left_out = [""] if "" in compiled_reads else []
    slots = {name: slot for slot, name in enumerate([*inputs, *constants, *left_out])}
    types = {name: value.type.tensor_type.elem_type for name, value in inputs.items()}
    types.update((name, initializers[name].data_type) for name in constants)
    wanted = {output.name for output in graph.output}
    order = sorted(stages)
    # What each stage's nodes read from outside it, so that earlier stages return it.
    read_later = [names_read(stages[key]) - {name for node in stages[key] for name in node.output} for key in order]
    result = []
    counts = []  # each stage's output count
    for index, key in enumerate(order):
        nodes = stages[key]
        if key[1]:  # compiled nodes, each a stage of its own
            for node in nodes:
                run, position = runs[node.name]
                result.append((run, [slots[name] for name in node.input], False, position))
                counts.append(len(node.output))
                # A compiled form's results have its first input's dtype, except where its run names
                # others (``output_dtypes``: a MaxPool's Indices are int64).
                dtypes = getattr(run, "output_dtypes", None) or [None] * len(node.output)
                for name, dtype in zip(node.output, dtypes):
                    slots[name] = len(slots)
                    types[name] = types[node.input[0]] if dtype is None else helper.np_dtype_to_tensor_dtype(dtype)
            continue
        computed = [name for node in nodes for name in node.output if name]
        needed_later = wanted.union(*read_later[index + 1 :])
        # A view repeated here (``_repeat_views``) that an earlier stage returned already keeps that slot.
        outputs = [name for name in computed if name in needed_later and name not in slots]
        if not outputs:
            continue
        reads = [name for name in sorted(read_later[index] - set(computed)) if name and name not in initializers]
        part_inputs = [
            inputs[name] if name in inputs else helper.make_tensor_value_info(name, types[name], None) for name in reads
        ]
        part = _part(model, nodes, part_inputs, outputs, initializers, f"{whole_work} {session_stages}")
        session = compile_model(part)
        # The outputs' element types as onnxruntime inferred them, for later stages' inputs.
        types.update((value.name, _ELEMENT_TYPES[value.type]) for value in session.session.get_outputs())
        result.append((session, [slots[name] for name in reads], True, None))
        counts.append(len(outputs))
        for name in outputs:
            slots[name] = len(slots)
    output_slots = [slots[output.name] for output in graph.output]
    arrays = [numpy_helper.to_array(initializers[name]) for name in constants] + [None] * len(left_out)
    beside = _beside_stages(result, counts, len(inputs) + len(arrays)) if threads > 1 else {}
    return SplitSession(result, threads, output_slots, arrays, sum(absorbed.values()), beside)


def _run_sinks_last(graph: onnx.GraphProto, runs: dict, stages: dict) -> None:
    """Moves the session nodes from which no compiled node is reached (an optimizer's update reading
    the weight gradients) to the last session, in place, so that the compiled nodes they read can
    run beside the sessions before it (``_beside_stages``).

    Whatever reads such a node is one too, and each was at a level no later than the last
    session's, so every node still runs after what it reads.
    """
    last = max((level for level, kind in stages if not kind), default=None)
    if last is None:
        return
    reaching: set = set()  # names read on the way to a compiled node
    for node in reversed(graph.node):
        if node.name in runs or not reaching.isdisjoint(node.output):
            reaching.update(node.input)
    moved: list = []
    for (level, kind), nodes in list(stages.items()):
        if kind or level == last:
            continue
        kept: list = []
        for node in nodes:
            (moved if reaching.isdisjoint(node.output) else kept).append(node)
        if not kept:
            del stages[(level, kind)]
        elif len(kept) != len(nodes):
            stages[(level, kind)] = kept
    if moved:
        position = {id(node): index for index, node in enumerate(graph.node)}
        stages[(last, 0)] = sorted([*stages.get((last, 0), []), *moved], key=lambda node: position[id(node)])


# The most nodes one session of a plan holds; a larger session is cut into pieces that run one after
# another. onnxruntime's allocation planner and graph transformers take time superlinear in a
# graph's nodes (the planner looks for each output's buffer through every buffer freed before it):
# resnet152's training step at 32x32 has a session of 12,900 nodes, 14 s to build in one piece and
# 4.3 s in four pieces of 3,200 (3.4 s in eight of 1,600; the pieces pass on 1,500 values). The
# pieces run as fast as the one session (resnet50/101/152 steps at 32x32, batch 8 and 16, one and two
# threads: 0.97-1.01 of its time), and the first step of resnet152 took 9.6 s instead of 22. Pieces
# count as sessions for spinning (SPINNING_MOST_SESSIONS): resnet152's step at batch 2 on two threads,
# two sessions around its compiled loops, in pieces took 1.17x its time with their pools spinning (a
# loaded machine) and 0.94x without (a quiet one). A plan without compiled nodes stays one session on
# more than one thread: a 12-layer encoder's step in two pieces took 1.56x its time spinning, 1.19x
# not (its many small ops want the spinning threads).
MOST_SESSION_NODES = 2500


def _in_pieces(stages: dict) -> dict:
    """``stages`` keyed ``(level, kind, piece)``: each session's nodes (in order) cut into pieces of at
    most ``MOST_SESSION_NODES`` (a piece then repeats the views it reads: ``_repeat_views``), a compiled
    stage as piece 0."""
    pieces: dict = {}
    for (level, kind), nodes in stages.items():
        count = -(-len(nodes) // MOST_SESSION_NODES) if not kind else 1
        size = -(-len(nodes) // count)
        for piece in range(count):
            pieces[(level, kind, piece)] = nodes[piece * size : (piece + 1) * size]
    return pieces


def _beside_stages(stages: list, counts: list, first_slot: int) -> dict:
    """The compiled stages whose results no stage reads before a session after them has run, by
    index, each with its output count (``SplitSession.beside``). ``counts``: each stage's output
    count; its outputs fill the slots after the previous stage's, from ``first_slot``."""
    starts = [first_slot]
    for count in counts:
        starts.append(starts[-1] + count)
    beside = {}
    for index, (_, _, is_session, _) in enumerate(stages):
        if is_session:
            continue
        start, end = starts[index], starts[index + 1]
        for _, slots, later_is_session, _ in stages[index + 1 :]:
            if any(start <= slot < end for slot in slots):
                break  # read before a session could run beside it
            if later_is_session:
                beside[index] = counts[index]
                break
    return beside


# onnxruntime's names of element types ("tensor(float)") -> ONNX's.
_ELEMENT_TYPES = {f"tensor({name.lower()})": number for name, number in onnx.TensorProto.DataType.items()}


# Ops whose output is their input's data in another shape: onnxruntime's kernels return a view where
# they can, but as a session's output the data is copied into a buffer of its own.
_VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


def _repeat_views(graph: onnx.GraphProto, stages: dict) -> None:
    """Repeats in each session the view ops whose results it reads from earlier stages, so that those
    stages return the views' inputs instead.

    A view returned by a session is copied into a buffer of its own at every run, where its input,
    written by the node that computes it, costs nothing more to return and the repeated view costs
    nothing to compute: resnet18's 512 x 512 x 3 x 3 weights flattened for a GEMM took 3.7 ms each
    to copy, and the reshaped activations between its sessions a few more.
    """
    views = {
        node.output[0]: node for node in graph.node if node.op_type in _VIEW_OPS and node.domain in ("", "ai.onnx")
    }
    if not views:
        return
    for key, nodes in stages.items():
        if key[1]:  # compiled nodes
            continue
        computed = {name for node in nodes for name in node.output}
        repeated: list = []

        def repeat(name: str) -> None:
            view = views.get(name)
            if view is None or name in computed:
                return
            for read in view.input:
                repeat(read)
            repeated.append(view)
            computed.add(name)

        for node in list(nodes):
            for name in node.input:
                repeat(name)
        nodes[:0] = repeated


def _drop_absorbed(graph: onnx.GraphProto, absorbing: dict) -> None:
    """Removes from ``graph`` the readers each absorbing node takes (``absorbing``: their number by the
    node's name), following the chain of only readers from its first output: the node reads what they
    read besides the chain (after its own inputs), and what read the last one's output reads that first
    output instead, which the absorbing run fills with it. (Readers are found by what they read: a
    profiler's model renames every node but the compiled ones.)"""
    renamed = {}
    for node in [node for node in graph.node if node.name in absorbing]:
        passed = node.output[0]
        for _ in range(absorbing[node.name]):
            reader = next(candidate for candidate in graph.node if passed in candidate.input)
            node.input.extend(name for name in reader.input if name != passed)
            graph.node.remove(reader)
            renamed[reader.output[0]] = node.output[0]
            passed = reader.output[0]
    for node in graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
    for output in graph.output:
        if output.name in renamed:
            output.name = renamed[output.name]
    _sort_topologically(graph)


def _sort_topologically(graph: onnx.GraphProto) -> None:
    """Orders ``graph``'s nodes so that each comes after the nodes computing what it reads, otherwise
    keeping their order: an absorbing node now reads what its readers read (a residual), which may be
    computed after it."""
    producers = {name: index for index, node in enumerate(graph.node) for name in node.output if name}
    nodes = list(graph.node)
    placed = [False] * len(nodes)
    order: list = []
    for start in range(len(nodes)):
        stack = [(start, False)]
        while stack:
            index, inputs_placed = stack.pop()
            if placed[index]:
                continue
            if inputs_placed:
                placed[index] = True
                order.append(nodes[index])
                continue
            stack.append((index, True))
            for name in names_read([nodes[index]]):
                producer = producers.get(name)
                if producer is not None and not placed[producer]:
                    stack.append((producer, False))
    del graph.node[:]
    graph.node.extend(order)


def _part(model: onnx.ModelProto, nodes: list, inputs: list, outputs: list, initializers: dict, cut: str):
    """A model of ``nodes`` reading ``inputs`` (value infos) and the initializers they read, computing
    ``outputs``: with the full model's value info where it has one, else with the type left to onnxruntime."""
    read = names_read(nodes)
    known = {output.name: output for output in model.graph.output}
    graph = helper.make_graph(
        nodes,
        model.graph.name,
        inputs,
        [known.get(name) or onnx.ValueInfoProto(name=name) for name in outputs],
        [initializer for name, initializer in initializers.items() if name in read],
    )
    part = helper.make_model(
        graph,
        opset_imports=list(model.opset_import),
        ir_version=model.ir_version,
        producer_name="onnxnn",
        functions=list(model.functions),
    )
    # Its session takes the shared arena, and the whole plan's threads (its own inputs have no sizes).
    part.metadata_props.add(key=SPLIT_PART_KEY, value=cut)
    return part
