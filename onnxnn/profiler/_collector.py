"""What a profiling window collects, and the hooks that feed it.

While a window is open the collector is ``MODE.profiler`` and ``MODE.observer``:

- every recorded node is noted with the path of the module whose forward recorded it (a module
  stack kept by global forward pre- and post-hooks), the ``record_function`` ranges open then,
  and on request its input shapes, output bytes and the user's source lines;
- every realization comes here (``realize``): planning, compilation on a miss (the ModelProto
  build and the InferenceSession creation) and the run are timed, and each node's time is taken
  from onnxruntime's own profiler (sessions of the collector's, created with
  ``enable_profiling``: the normal session cache is never touched, so normal sessions stay
  unprofiled) or, for plans the executor choice gives onnxnn's kernels, from the kernels'
  node-by-node loop;
- backward passes report their span (``begin_range``/``end_range`` from the autograd engine).

A window watches every thread, not only the one that opened it (PyTorch's records that thread's
ops only): its observer is the process's (a thread inside an ``observing`` block, a checkpoint,
passes its nodes on to it), each thread's module stack and ranges are its own, and every event
carries the thread that ran it.

The fast path is switched off while a window is open (its results are bitwise the same): replayed
backwards create their nodes in generated code, which neither the observer nor the node timings
would see.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
import traceback

from ..ir.executors import executor
from ..ir.mode import MODE, process_observer
from ..ir.plan import assign_results, plan
from ..ir.model_building import build_model
from ..nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from ..runtime.fastpath.plan_cache import choose
from ..runtime.sessions import CompiledSession, lowers_for, session_for
from ..runtime.split_sessions import SplitSession, compiled_node_name, session_runner
from .events import FunctionEvent

__all__ = ["Collector", "Options"]

# onnxnn's own files: a stack frame inside them is not the user's line that recorded an op.
_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The names given to the nodes of profiled sessions: "p<plan index>.<part>:<op type>". onnxruntime
# keeps them in its events, also inside the name of a kernel that fuses several nodes.
_NODE_NAME = re.compile(r"p(\d+)\.\d+:")
_PLAN_INDEX_OF_OUTPUT = re.compile(r"node_(\d+)_")
_FLOP_OPS = frozenset({"MatMul", "Gemm"})


class Options:
    """The ``profile`` arguments the collector reads."""

    __slots__ = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "cuda")

    def __init__(self, record_shapes, profile_memory, with_stack, with_flops, with_modules, cuda):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.cuda = cuda


class _Record:
    """What the observer learned about one recorded node.

    It keeps the node's op type, never the node: a node refers to its inputs' arrays, and records
    held for a whole window would keep every step's arrays alive (each run then writing fresh,
    page-faulting memory: a profiled step three times slower than an unprofiled one).
    """

    __slots__ = ("op_type", "module", "scope", "input_shapes", "stack", "memory", "flops")

    def __init__(self, op_type, module, scope, input_shapes, stack, memory, flops):
        self.op_type = op_type
        self.module = module
        self.scope = scope
        self.input_shapes = input_shapes
        self.stack = stack
        self.memory = memory
        self.flops = flops


class _Run:
    """One run of a profiled session: its interval and the records of its plan's nodes."""

    __slots__ = ("thread", "start_ns", "end_ns", "op_types", "records", "kept", "indices")

    def __init__(self, thread, start_ns, end_ns, op_types, records, kept, indices=None):
        self.thread = thread
        self.op_types = op_types  # of the plan's nodes, in plan order (not the nodes: see _Record)
        self.records = records  # per node: (its _Record or None, whether it ran before)
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.records = records
        self.kept = kept  # False for a run during warmup: onnxruntime's events of it are dropped
        # The plan indices of the nodes the session computes (a split session's part), or None: all.
        self.indices = indices


class _ThreadState(threading.local):
    def __init__(self):
        self.ranges: list = []  # open ranges: [name, kind, start_ns, args]
        self.modules: list = []  # paths of the modules whose forward is running
        # (thread, op types, records, kept) of the plan a runner is running: a split session's stages read it.
        self.running: tuple | None = None


def _flops(node) -> int:
    """2 * M * N * K of a matrix product, from the recorded shapes."""
    if node.op_type not in _FLOP_OPS or len(node.inputs) < 2 or node.inputs[1] is None:
        return 0
    a, b = node.inputs[0].shape, node.inputs[1].shape
    if len(a) < 2 or len(b) < 2:
        return 0
    if node.op_type == "Gemm":
        m, k = (a[1], a[0]) if node.attrs.get("transA") else (a[0], a[1])
        n = b[0] if node.attrs.get("transB") else b[1]
        return 2 * m * n * k
    batch = 1
    for dim in a[:-2]:
        batch *= dim
    return 2 * batch * a[-2] * a[-1] * b[-1]


def _user_stack() -> list:
    """The caller's frames outside onnxnn, innermost first, as torch formats them: ``file(line): function``."""
    frames = []
    for frame in reversed(traceback.extract_stack()):
        if os.path.abspath(frame.filename).startswith(_PACKAGE_DIRECTORY):
            continue
        frames.append(f"{frame.filename}({frame.lineno}): {frame.name}")
    return frames


class Collector:
    """The events of one profiling window (see the module docstring)."""

    def __init__(self, options: Options):
        self.options = options
        self.origin_ns = time.perf_counter_ns()
        self.events: list = []
        # id(node) -> _Record of a node recorded and not yet run, and of one that ran. Both hold
        # the node, so an id is never reused within the window (memory the window gives back).
        self.pending: dict = {}
        self.ran: dict = {}
        self.sessions: dict = {}  # plan key -> its runner: a CompiledSession, or a SplitSession of them
        self.profiled: list = []  # every CompiledSession compiled here, each profiled by onnxruntime
        self.part_indices: dict = {}  # id(CompiledSession) of a split session's part -> its nodes' plan indices
        self.runs: dict = {}  # id(CompiledSession) -> list of _Run
        self.recording = False  # False during warmup: hooks run, events are dropped
        self.directory = tempfile.mkdtemp(prefix="onnxnn-profile-")
        self.state = _ThreadState()
        self._saved: tuple | None = None
        self._handles: list = []

    # ------------------------------------------------------------ installing the hooks

    def install(self) -> None:
        """Becomes ``MODE.profiler`` and the process's ``MODE.observer`` (chaining the one found there;
        not the calling thread's ``observing`` block's, which ends with its block and passes its
        thread's nodes on to the process's)."""
        previous = process_observer()
        self._saved = (MODE.profiler, previous, MODE.fast_path)
        if previous is None:
            MODE.observer = self.observe
        else:

            def chained(node, outputs) -> None:
                previous(node, outputs)
                self.observe(node, outputs)

            MODE.observer = chained
        MODE.profiler = self
        MODE.fast_path = False
        self._handles = [
            register_module_forward_pre_hook(self._module_entered),
            register_module_forward_hook(self._module_left, always_call=True),
        ]

    def uninstall(self) -> None:
        """Restores the modes found by ``install`` and removes the module hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._saved is not None:
            MODE.profiler, MODE.observer, MODE.fast_path = self._saved
            self._saved = None

    def now(self) -> int:
        return time.perf_counter_ns() - self.origin_ns

    # ------------------------------------------------------------ ranges and modules

    def begin_range(self, name: str, kind: str = "range", args: dict | None = None) -> None:
        self.state.ranges.append([name, kind, self.now(), args])

    def end_range(self) -> None:
        ranges = self.state.ranges
        if not ranges:
            return  # opened before this window
        name, kind, start, args = ranges.pop()
        if self.recording:
            self.events.append(FunctionEvent(name, kind, threading.get_ident(), start, self.now(), args=args))

    def _module_entered(self, module, args) -> None:
        modules = self.state.modules
        if not modules:
            path = "model"
        else:
            parent_path, parent = modules[-1]
            child = next((name for name, m in parent._modules.items() if m is module), None)
            path = f"{parent_path}.{child if child is not None else type(module).__name__}"
        modules.append((path, module))
        self.begin_range(f"nn.Module: {type(module).__name__}", "module", {"module": path})

    def _module_left(self, module, args, output) -> None:
        modules = self.state.modules
        if modules and modules[-1][1] is module:
            modules.pop()
            self.end_range()

    # ------------------------------------------------------------ recording

    def observe(self, node, outputs) -> None:
        """``MODE.observer``: notes who recorded ``node``."""
        state = self.state
        options = self.options
        module = state.modules[-1][0] if state.modules else None
        scope = tuple(name for name, kind, _, _ in state.ranges if kind == "range")
        shapes = [list(v.shape) if v is not None else [] for v in node.inputs] if options.record_shapes else None
        memory = 0
        if options.profile_memory:
            for value in outputs:
                size = value.dtype.numpy_dtype.itemsize
                for dim in value.shape:
                    size *= dim
                memory += size
        stack = _user_stack() if options.with_stack else None
        flops = _flops(node) if options.with_flops else 0
        self.pending[id(node)] = _Record(node.op_type, module, scope, shapes, stack, memory, flops)
        self.ran.pop(id(node), None)  # a node that ran before had this id: it is gone

    def _op_event(self, op_type, noted, kind: str, thread, start, end, args=None, device="CPU") -> FunctionEvent:
        record, recomputed = noted
        name = f"{op_type} (recomputed)" if recomputed else op_type
        if record is None:
            return FunctionEvent(name, kind, thread, start, end, args=args, device_type=device)
        event_args = {"module": record.module} if record.module is not None else {}
        if args:
            event_args.update(args)
        return FunctionEvent(
            name,
            kind,
            thread,
            start,
            end,
            module=record.module,
            scope=record.scope,
            input_shapes=record.input_shapes,
            stack=record.stack,
            memory=record.memory,
            flops=record.flops,
            args=event_args,
            device_type=device,
        )

    # ------------------------------------------------------------ realization

    def realize(self, targets: list) -> None:
        """``runtime.realization.realize`` while profiling: plans, compiles and runs, timing each."""
        thread = threading.get_ident()
        self.begin_range("onnxnn::realize")
        try:
            self.begin_range("onnxnn::plan")
            try:
                graph = plan(targets, not MODE.grad.in_backward)
            finally:
                self.end_range()
            records = [self._record_of(node) for node in graph.nodes]
            runner, kind = self._runner(graph)
            inputs = [value.data for value in graph.inputs]
            if kind == "kernels":
                results = self._run_kernels(runner, graph, inputs, records, thread)
            else:
                op_types = [node.op_type for node in graph.nodes]
                self.state.running = (thread, op_types, records, self.recording)
                start = self.now()
                try:
                    results = runner(inputs)
                finally:
                    self.state.running = None
                end = self.now()
                if isinstance(runner, CompiledSession):  # a split session's stages note their own runs
                    self.runs.setdefault(id(runner), []).append(
                        _Run(thread, start, end, op_types, records, self.recording)
                    )
                if self.recording:
                    self.events.append(FunctionEvent("onnxnn::run", "range", thread, start, end))
        finally:
            self.end_range()
        assign_results(graph.outputs, results)

    def _record_of(self, node) -> tuple:
        """``(record, recomputed)`` of a node about to run: a node a plan runs again (its value was not
        kept by the run that computed it first) is reported as ``"<op type> (recomputed)"``."""
        record = self.pending.pop(id(node), None)
        if record is not None:
            self.ran[id(node)] = record
            return record, False
        record = self.ran.get(id(node))
        if record is not None and record.op_type == node.op_type:
            return record, True
        return None, False

    def _runner(self, graph):
        name = MODE.executor
        kind = choose(graph) if name == "auto" else name
        try:
            return self._compiled(graph, kind), kind
        except (RuntimeError, NotImplementedError, TypeError):
            if name != "auto":
                raise
            other = "onnxruntime" if kind == "kernels" else "kernels"
            return self._compiled(graph, other), other

    def _compiled(self, graph, kind: str):
        if kind == "kernels":
            kernels = executor("kernels")
            misses = kernels.cache_info()["misses"]
            start = self.now()
            runner = kernels.compile(graph)
            if kernels.cache_info()["misses"] != misses and self.recording:
                self.events.append(FunctionEvent("onnxnn::compile", "range", threading.get_ident(), start, self.now()))
            return runner
        found = self.sessions.get(graph.key)
        if found is not None:
            return found
        device = graph.key[3]
        self.begin_range("onnxnn::compile")
        try:
            # onnxnn's own sessions' graphs (session_lowerings' forms, cut around compiled nodes), not the export's.
            runner = session_runner(
                graph,
                device,
                lambda kept: self._model(graph, kept),
                lambda model: self._profiled_session(model, device),
            )
            if isinstance(runner, SplitSession):
                runner.stages = [self._timed_stage(*stage) for stage in runner.stages]
                runner.beside = {}  # one stage at a time, so that each event's time is its own
        finally:
            self.end_range()
        self.sessions[graph.key] = runner
        return runner

    def _model(self, graph, kept: frozenset):
        self.begin_range("onnxnn::build_model")
        try:
            model = build_model(graph, lower=lowers_for(graph.key[3]), kept=kept)
            # The compiled nodes keep the names by which the cut finds them.
            _name_nodes(
                model,
                {compiled_node_name(node, position) for position, node in enumerate(graph.nodes) if id(node) in kept},
            )
            return model
        finally:
            self.end_range()

    def _profiled_session(self, model, device) -> CompiledSession:
        self.begin_range("onnxnn::create_session")
        try:
            prefix = os.path.join(self.directory, f"session_{len(self.profiled)}")
            session = session_for(model, device, profile_file_prefix=prefix)
        finally:
            self.end_range()
        self.profiled.append(session)
        self.part_indices[id(session)] = {
            int(found.group(1)) for node in model.graph.node if (found := _NODE_NAME.match(node.name))
        }
        return session

    def _timed_stage(self, run, slots, is_session, position):
        """A split session's stage that notes its run: a session's, mapped to onnxruntime's node
        events at the end; a compiled node's, as that node's event."""
        if is_session:

            def timed_session(feeds):
                start = self.now()
                results = run(feeds)
                thread, op_types, records, kept = self.state.running
                indices = self.part_indices[id(run)]
                self.runs.setdefault(id(run), []).append(
                    _Run(thread, start, self.now(), op_types, records, kept, indices)
                )
                return results

            return timed_session, slots, is_session, position

        def timed_node(feeds, threads):
            start = self.now()
            results = run(feeds, threads)
            thread, op_types, records, kept = self.state.running
            if kept:
                event = self._op_event(
                    op_types[position], records[position], "kernels", thread, start, self.now(), {"compiled": True}
                )
                self.events.append(event)
            return results

        return timed_node, slots, is_session, position

    def _run_kernels(self, runner, graph, inputs, records, thread) -> list:
        """Runs a kernels plan node by node (its ``trace`` loop), timing every node."""
        times: list = []
        now = self.now

        def timed(description, arguments, outputs) -> None:
            times.append(now())

        start = now()
        results = runner(inputs, trace=timed)
        end = now()
        if self.recording:
            self.events.append(FunctionEvent("onnxnn::run", "range", thread, start, end))
            before = start
            for node, record, finished in zip(graph.nodes, records, times):
                self.events.append(self._op_event(node.op_type, record, "kernels", thread, before, finished))
                before = finished
        return results

    # ------------------------------------------------------------ closing the window

    def finish(self) -> list:
        """Ends onnxruntime's profiling of every session, maps its node events back, and returns all events."""
        for session in self.profiled:
            runs = self.runs.get(id(session), [])
            try:
                path = session.session.end_profiling()
            except Exception:  # a session that failed to run profiles nothing: no node events
                continue
            try:
                with open(path) as file:
                    ort_events = json.load(file)
            except (OSError, ValueError):
                continue
            self._map_onnxruntime_events(ort_events, runs)
        shutil.rmtree(self.directory, ignore_errors=True)
        self.sessions.clear()
        self.profiled.clear()
        self.part_indices.clear()
        self.runs.clear()
        self.pending.clear()
        self.ran.clear()
        return self.events

    def _map_onnxruntime_events(self, ort_events: list, runs: list) -> None:
        model_runs = sorted((e for e in ort_events if e.get("name") == "model_run"), key=lambda e: e["ts"])
        nodes = sorted((e for e in ort_events if e.get("cat") == "Node"), key=lambda e: e["ts"])
        position = 0
        for model_run, run in zip(model_runs, runs):
            run_start, run_end = model_run["ts"], model_run["ts"] + model_run["dur"]
            seen: dict[int, FunctionEvent] = {}
            while position < len(nodes) and nodes[position]["ts"] < run_end:
                ort_node = nodes[position]
                position += 1
                if not run.kept or ort_node["ts"] < run_start or not ort_node["name"].endswith("_kernel_time"):
                    continue
                self._node_event(ort_node, run, run_start, seen)
            if run.kept:
                for index, noted in enumerate(run.records):
                    if index not in seen and (run.indices is None or index in run.indices):
                        # Fused into another node's kernel (or folded away): counted, with no time of its own.
                        op_type = run.op_types[index]
                        self.events.append(self._op_event(op_type, noted, "fused", run.thread, run.end_ns, run.end_ns))

    def _node_event(self, ort_node: dict, run: _Run, run_start: int, seen: dict[int, FunctionEvent]) -> None:
        args = ort_node.get("args", {})
        provider = args.get("provider", "")
        device = "CUDA" if provider.startswith("CUDA") and self.options.cuda else "CPU"
        # onnxruntime's microseconds since its session started, moved into this run's interval.
        start = run.start_ns + int(ort_node["ts"] - run_start) * 1000
        start = min(start, run.end_ns)
        end = min(start + int(ort_node["dur"]) * 1000, run.end_ns)
        details = {"onnxruntime_kernel": args.get("op_name", ""), "provider": provider}
        found = _NODE_NAME.search(ort_node["name"])
        index = int(found.group(1)) if found else -1
        kernel = args.get("op_name") or ort_node["name"]
        if not 0 <= index < len(run.records):
            self.events.append(
                FunctionEvent(kernel, "onnxruntime", run.thread, start, end, args=details, device_type=device)
            )
            return
        event = self._op_event(
            run.op_types[index], run.records[index], "onnxruntime", run.thread, start, end, details, device
        )
        named = seen.get(index)
        # A node onnxruntime runs as several kernels (Adam's Sub, Mul, ... of a node build_model
        # decomposed; the ReorderInput before a Conv on the blocked-channel layout): one event per
        # run carries the node's name, so that its count stays one per run, and the others are
        # named by their kernels, attributed like the node. The node's name goes to the kernel
        # of its own op type where there is one, wherever it comes in the run.
        if named is None:
            seen[index] = event
        elif kernel == run.op_types[index] and named.args.get("onnxruntime_kernel") != kernel:
            named.name = named.args.get("onnxruntime_kernel") or named.name
            seen[index] = event
        else:
            event.name = kernel
        self.events.append(event)


def _name_nodes(model, kept: frozenset | set = frozenset()) -> None:
    """Names every node ``p<plan index>.<part>:<op type>``, so onnxruntime's events map back, in place.

    Nodes named in ``kept`` (those a split session runs compiled) keep their names.

    ``build_model`` names a node ``<op type>_<plan index>``; the nodes a decomposition emits are
    known by their names or outputs (``node_<plan index>_...``); a rename (``Identity``) belongs
    to no node.
    """
    parts: dict = {}
    for onnx_node in model.graph.node:
        if onnx_node.name in kept:
            continue
        index = None
        if onnx_node.name:
            # A decomposition's ``fresh_name`` (``node_<plan index>_<stem>_<count>``) before
            # build_model's ``<op type>_<plan index>``: the count must not pass for the index.
            found = _PLAN_INDEX_OF_OUTPUT.match(onnx_node.name)
            tail = onnx_node.name.rsplit("_", 1)[-1]
            index = int(found.group(1)) if found else int(tail) if tail.isdigit() else None
        if index is None and onnx_node.output:
            found = _PLAN_INDEX_OF_OUTPUT.match(onnx_node.output[0])
            index = int(found.group(1)) if found else None
        if index is None:
            continue
        part = parts.get(index, 0)
        parts[index] = part + 1
        onnx_node.name = f"p{index}.{part}:{onnx_node.op_type}"
