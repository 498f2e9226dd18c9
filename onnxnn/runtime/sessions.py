"""Compiled onnxruntime sessions: the default executor of recorded plans, and their cache.

A session is created once per plan structure (``SessionCache``) with onnxnn's options: one
intra-op thread for small graphs, bfloat16 exchanged as float32 at the boundary (the Python
binding cannot pass bfloat16 arrays), and float16/bfloat16 ops computed in float32 with each
result rounded back, as PyTorch and onnxnn's kernels compute them.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import helper

from ..ir.caches import WeightedCache, register_cache
from ..ir.device_arrays import execution_provider
from ..ir.dtypes import bfloat16
from ..ir.executors import register_executor
from ..ir.mode import MODE
from ..ir.plan import IR_VERSION, OPSET_VERSION, GraphPlan
from ..ir.model_building import build_model, work_estimate
from .device_sessions import DeviceBinder, run_bound
from .fastpath.cuda_graphs import graph_capture
from .output_views import move_reshapes_out
from .session_optimizers import disabled_optimizers
from .static_shapes import fold_static_shapes, has_static_inputs
from .split_sessions import SPINNING_MOST_SESSIONS, SPLIT_PART_KEY, SplitSession, session_runner

__all__ = [
    "CompiledSession",
    "DeviceSession",
    "session_for",
    "SessionCache",
    "create_session",
    "newest_onnxruntime_opset",
    "check_onnxruntime_opset",
    "SINGLE_THREAD_ELEMENTS",
]


@functools.lru_cache(maxsize=None)
def newest_onnxruntime_opset() -> int:
    """The newest default-domain opset the installed onnxruntime loads (found by trying, once)."""
    import onnxruntime  # deferred: importing onnxruntime costs ~0.3 s, paid only when a session is built

    newest = OPSET_VERSION
    for candidate in range(OPSET_VERSION + 1, onnx.defs.onnx_opset_version() + 1):
        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])],
            "probe",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", candidate)], ir_version=IR_VERSION)
        try:
            onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:
            break
        newest = candidate
    return newest


def _default_opset(model: onnx.ModelProto) -> int | None:
    return next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), None)


def check_onnxruntime_opset(model: onnx.ModelProto) -> None:
    """Raises a RuntimeError naming the opset ``model`` needs when the installed onnxruntime cannot load it.

    A graph is built at the newest opset its nodes were recorded at (``ir.model_building.plan_opset``): an
    imported node that means something only a newer opset defines needs that opset.
    """
    opset = _default_opset(model)
    # onnxnn's own opset loads by definition (the probe starts from it): only a newer one pays for
    # the probe, which builds a session per candidate opset (~50-90 ms on a process's first graph).
    if opset is None or opset <= OPSET_VERSION:
        return
    newest = newest_onnxruntime_opset()
    if opset <= newest:
        return
    newer = set()
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx"):
            try:
                if onnx.defs.get_schema(node.op_type, opset, "").since_version > newest:
                    newer.add(node.op_type)
            except onnx.defs.SchemaError:
                continue
    import onnxruntime  # deferred, as above (already imported by newest_onnxruntime_opset)

    needing = f" (for {sorted(newer)} as that opset defines them)" if newer else ""
    raise RuntimeError(
        f"this graph needs ONNX opset {opset}{needing}, but the installed onnxruntime "
        f"{onnxruntime.__version__} runs opsets up to {newest}: run it with onnxnn's kernels "
        f"(onnxnn.set_executor('kernels')) or install a newer onnxruntime"
    )


def _widen_bfloat16_io(model: onnx.ModelProto) -> tuple[list[int], list[int]]:
    """Makes bfloat16 graph inputs and outputs float32 at the session boundary, in place.

    onnxruntime's Python binding cannot exchange bfloat16 numpy arrays, so the session takes and
    returns float32 (exact for bfloat16 values) and casts inside the graph; the caller converts
    with ml_dtypes on the way in and out. Returns the positions of the widened inputs and outputs.
    """
    graph = model.graph
    bfloat16 = onnx.TensorProto.BFLOAT16
    widened_inputs, widened_outputs, casts_in, casts_out = [], [], [], []
    for position, graph_input in enumerate(graph.input):
        if graph_input.type.tensor_type.elem_type == bfloat16:
            widened_inputs.append(position)
            original = graph_input.name
            graph_input.name = original + "_as_float32"
            graph_input.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            casts_in.append(helper.make_node("Cast", [graph_input.name], [original], to=bfloat16))
    for position, graph_output in enumerate(graph.output):
        if graph_output.type.tensor_type.elem_type == bfloat16:
            widened_outputs.append(position)
            original = graph_output.name
            graph_output.name = original + "_as_float32"
            graph_output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            casts_out.append(helper.make_node("Cast", [original], [graph_output.name], to=onnx.TensorProto.FLOAT))
    if casts_in or casts_out:
        nodes = casts_in + list(graph.node) + casts_out
        del graph.node[:]
        graph.node.extend(nodes)
    return widened_inputs, widened_outputs


_BFLOAT16 = bfloat16.numpy_dtype
_LOW_PRECISION = frozenset({onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})
# Ops that read no element values: they keep their low-precision inputs (a Cast there would be waste).
_VALUE_BLIND_OPS = frozenset({"Cast", "Shape", "Size"})

# Set to False only to measure what per-op rounding costs (benchmarks/bench_float16.py).
ROUND_LOW_PRECISION_PER_OP = True


def _mentions_low_precision(model: onnx.ModelProto) -> bool:
    """Whether any graph value, initializer or node attribute of the model is float16 or bfloat16."""
    graph = model.graph
    for info in list(graph.input) + list(graph.output) + list(graph.value_info):
        if info.type.tensor_type.elem_type in _LOW_PRECISION:
            return True
    if any(initializer.data_type in _LOW_PRECISION for initializer in graph.initializer):
        return True
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name in ("to", "dtype") and attribute.i in _LOW_PRECISION:
                return True
            if attribute.HasField("t") and attribute.t.data_type in _LOW_PRECISION:
                return True
    return False


def _round_per_op(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rewrites every float16/bfloat16 node to compute in float32 and round its results back, in place.

    onnxruntime's CPU provider lacks float16 kernels for most ops and bfloat16 kernels for nearly
    all; for float16 it wraps such nodes in Casts itself and then removes each Cast pair between two
    of them as if float32 -> float16 -> float32 were lossless, so a chain of float16 ops ran wholly
    in float32 (``x.half() * 2`` did not overflow at 65504). Explicit Casts written here are kept:
    every intermediate rounds, and overflows, as PyTorch's CPU kernels and onnxnn's kernels make it
    (they also compute low-precision ops in float32 and round each result).
    """
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for info in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        types[info.name] = info.type.tensor_type.elem_type
    for initializer in inferred.graph.initializer:
        types[initializer.name] = initializer.data_type
    float32 = onnx.TensorProto.FLOAT
    rewritten = []
    widened_names: dict = {}
    for node in model.graph.node:
        # A node whose output types inference cannot tell (a custom domain) is left to onnxruntime:
        # widening its inputs could silently change the type of its outputs.
        if (
            node.op_type in _VALUE_BLIND_OPS
            or not any(types.get(name) in _LOW_PRECISION for name in node.input)
            or not all(types.get(name) for name in node.output)
        ):
            rewritten.append(node)
            continue
        widened = onnx.NodeProto()
        widened.CopyFrom(node)
        for position, name in enumerate(node.input):
            if types.get(name) in _LOW_PRECISION:
                if name not in widened_names:
                    widened_names[name] = f"{name}_widened_for_compute"
                    rewritten.append(helper.make_node("Cast", [name], [widened_names[name]], to=float32))
                widened.input[position] = widened_names[name]
        narrowing = []
        for position, name in enumerate(node.output):
            if types.get(name) in _LOW_PRECISION:
                widened.output[position] = f"{name}_wide"
                narrowing.append(helper.make_node("Cast", [widened.output[position]], [name], to=types[name]))
        rewritten.append(widened)
        rewritten.extend(narrowing)
    del model.graph.node[:]
    model.graph.node.extend(rewritten)
    return model


# Graphs whose node outputs hold fewer elements than this run on one thread: for them a thread
# pool costs more in wake-ups than it saves, and each of hundreds of cached sessions would keep
# its own pool of spinning threads.
SINGLE_THREAD_ELEMENTS = 1 << 16


def _work_estimate(model: onnx.ModelProto) -> int:
    """``ir.model_building.work_estimate`` of the model, or for one session of a cut plan, of the whole plan's: the
    parts' values between them have no recorded sizes, and the plan's work decides its threads."""
    cut = _cut_part(model)
    return work_estimate(model) if cut is None else cut[0]


def _cut_part(model) -> tuple[int, int] | None:
    """(the whole plan's work estimate, the cut's sessions) for a session of a cut plan, else None."""
    if isinstance(model, onnx.ModelProto):
        for entry in model.metadata_props:
            if entry.key == SPLIT_PART_KEY:
                work, sessions = entry.value.split()
                return int(work), int(sessions)
    return None


# onnxruntime's CPU memory arena shared by the sessions of cut plans (``_shared_cpu_arena``).
_CPU_ARENA: list = []


def _shared_cpu_arena(onnxruntime) -> bool:
    """Registers one CPU arena for the sessions of cut plans (once); returns whether it is in place.

    A plan cut around compiled nodes runs as several sessions (runtime/split_sessions.py). Each with
    an arena of its own, the buffers one session frees are not those the next one allocates, so
    every session's buffers have left the caches by the time it runs again: a small ResNet's training
    step with its normalization loops, one thread, took 0.93 of the one-session step's time with an
    arena per session and 0.88 with one shared. A plan that is one session keeps its own arena: its
    buffers are reused within its run, and the shared one made a small CNN's inference 5% slower.
    """
    if not _CPU_ARENA:
        try:
            memory = onnxruntime.OrtMemoryInfo(
                "Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxruntime.OrtMemType.DEFAULT
            )
            onnxruntime.create_and_register_allocator(memory, onnxruntime.OrtArenaCfg(0, -1, -1, -1))
        except (AttributeError, RuntimeError):  # a build without the API: an arena per session, as before
            _CPU_ARENA.append(False)
        else:
            _CPU_ARENA.append(True)
    return _CPU_ARENA[0]


def create_session(
    model: onnx.ModelProto | bytes,
    providers=("CPUExecutionProvider",),
    threads: int = 0,
    profile_file_prefix: str | None = None,
    quiet: bool = False,
):
    """An onnxruntime InferenceSession with onnxnn's options (``threads=0``: onnxruntime's default).

    ``profile_file_prefix``, when given, turns on onnxruntime's profiler for the session (used by
    ``onnxnn.profiler``): ``end_profiling()`` then writes its events to a JSON file with that prefix.
    ``quiet``: onnxruntime logs only fatal errors, for a session whose failure the caller expects
    and handles (a CUDA graph twin of a graph the CUDA provider cannot run whole).
    """
    import onnxruntime  # deferred: importing onnxruntime costs ~0.3 s, paid only when a session is built

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4 if quiet else 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = MODE.inter_op_threads
    on_cpu = list(providers) == ["CPUExecutionProvider"]
    cut = _cut_part(model) if on_cpu else None
    if cut is not None and _shared_cpu_arena(onnxruntime):
        options.add_session_config_entry("session.use_env_allocators", "1")
    if cut is not None and threads != 1 and cut[1] > SPINNING_MOST_SESSIONS:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    elif threads != 1:
        # Its pool spins within a run (many small ops wake it), never after it: each session has a pool
        # of its own, and one left spinning takes the cores from whatever runs next, another session
        # above all. Two models called in turn on two threads (an MLP's and a small ResNet's inference)
        # took 10.5 ms a round with their pools spinning after each run, 5.0 with this; one model
        # alone runs as fast as spinning throughout (benchmarks/bench_sessions_in_turn.py).
        options.add_session_config_entry("session.force_spinning_stop", "1")
    if MODE.flush_denormal:  # onnxnn.set_flush_denormal: the session's thread pool flushes too
        options.add_session_config_entry("session.set_denormal_as_zero", "1")
    if MODE.deterministic[0]:  # onnxnn.use_deterministic_algorithms
        options.use_deterministic_compute = True
    if profile_file_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_file_prefix
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return onnxruntime.InferenceSession(
        data,
        options,
        providers=list(providers),
        disabled_optimizers=disabled_optimizers(model, on_cpu=on_cpu),
    )


def _writes_its_inputs(model: onnx.ModelProto) -> bool:
    """onnxruntime's training-mode BatchNormalization updates the fed running mean/var arrays in place."""
    return any(
        node.op_type == "BatchNormalization" and any(a.name == "training_mode" and a.i for a in node.attribute)
        for node in model.graph.node
    )


def lowers_for(device) -> bool:
    """Whether onnxnn's sessions on ``device`` take ``session_lowerings``' forms: on the CPU, where they
    were measured (a CUDA provider's convolutions have no per-image GEMMs to save)."""
    return device.type == "cpu"


class CompiledSession:
    __slots__ = ("session", "input_names", "output_names", "run", "bfloat16_io", "copy_inputs", "output_views")

    def __init__(
        self, model: onnx.ModelProto, device, threads: int | None = None, profile_file_prefix: str | None = None
    ):
        """``threads``: intra-op threads (0: onnxruntime's default); by default from the graph's size.

        ``profile_file_prefix``: profile the session with onnxruntime's profiler (``create_session``).
        """
        widened = _widen_bfloat16_io(model)
        self.bfloat16_io = widened if widened[0] or widened[1] else None
        self.copy_inputs = _writes_its_inputs(model)
        on_cpu = device.type == "cpu"
        providers = ["CPUExecutionProvider"] if on_cpu else list(execution_provider(device))  # names or (name, options)
        if threads is None:
            threads = 1 if _work_estimate(model) < SINGLE_THREAD_ELEMENTS else MODE.intra_op_threads
        check_onnxruntime_opset(model)
        if ROUND_LOW_PRECISION_PER_OP and _mentions_low_precision(model):
            model = _round_per_op(model)
        # A reshaped output is a free numpy view on the host; a device's OrtValue has no such view.
        self.output_views = move_reshapes_out(model) if on_cpu else []
        if not on_cpu and has_static_inputs(model):
            model = fold_static_shapes(model)  # no shape arithmetic left to the CPU's provider
        try:
            self.session = create_session(model, providers, threads, profile_file_prefix)
        except Exception as error:
            ops = sorted({n.op_type for n in model.graph.node})
            raise RuntimeError(f"onnxruntime could not compile the recorded graph (ops {ops}): {error}") from None
        self.input_names = [i.name for i in model.graph.input]
        self.output_names = [o.name for o in model.graph.output]
        # The private binding skips per-call argument checks that the plan already guarantees.
        inner = getattr(self.session, "_sess", None)
        self.run = inner.run if inner is not None and hasattr(inner, "run") else self._public_run
        self._compiled(model, threads)

    def _compiled(self, model: onnx.ModelProto, threads: int) -> None:
        """Called with the model the session runs (as compiled) and its threads; subclasses keep them."""

    def _public_run(self, output_names, feeds, run_options):
        return self.session.run(output_names, feeds, run_options)

    def __call__(self, inputs: list) -> list:
        """Runs the session on the input arrays (in plan order) and returns the output arrays."""
        if self.copy_inputs:
            inputs = [np.array(array) for array in inputs]  # values are immutable: never let a kernel write them
        if self.bfloat16_io is not None:
            inputs = list(inputs)
            for position in self.bfloat16_io[0]:
                inputs[position] = inputs[position].astype(np.float32)
        try:
            results = self.run(self.output_names, dict(zip(self.input_names, inputs)), None)
        except Exception as error:
            raise RuntimeError(f"onnxruntime failed to run the recorded graph: {error}") from None
        if self.bfloat16_io is not None:
            for position in self.bfloat16_io[1]:
                results[position] = results[position].astype(_BFLOAT16)
        for position, shape in self.output_views:
            results[position] = results[position].reshape(shape)
        return results


class DeviceSession(CompiledSession):
    """A session on a GPU: its inputs and outputs stay in the device's memory (``device_sessions``)."""

    __slots__ = ("device", "binder", "model", "threads")

    def __init__(self, model: onnx.ModelProto, device, threads: int | None = None, profile_file_prefix=None):
        super().__init__(model, device, threads, profile_file_prefix)
        self.device = device
        graph = None
        if not self.copy_inputs and self.bfloat16_io is None and profile_file_prefix is None:
            graph = graph_capture(self.model, device, self.threads, create_session)
        self.binder = DeviceBinder(self.session, device, graph)

    def _compiled(self, model: onnx.ModelProto, threads: int) -> None:
        self.model = model  # (a CUDA graph of the same model is compiled from it: fastpath/cuda_graphs.py)
        self.threads = threads

    def __call__(self, inputs: list) -> list:
        return run_bound(self, inputs)


def session_for(
    model: onnx.ModelProto, device, threads: int | None = None, profile_file_prefix: str | None = None
) -> CompiledSession:
    """The session running ``model`` on ``device``: host arrays on the CPU, device arrays elsewhere."""
    kind = CompiledSession if device.type == "cpu" else DeviceSession
    return kind(model, device, threads, profile_file_prefix)


# Sessions are bounded by count and by the nodes of their graphs together (``ir.caches.WeightedCache``),
# least recently used evicted first: a session holds its optimized graph and kernels, ~5 KB a node,
# so structures that never repeat (an LSTM unrolled over each new length: 6.5 MB a session at 50
# steps) filled 512 entries with gigabytes. Ordinary models' step graphs are a few hundred nodes to
# a few thousand (resnet18's training step 401, a 12-layer transformer's 1,709; plan_cache.NODE_BUDGET).
CAPACITY = 512
NODE_BUDGET = 1 << 15


class SessionCache:
    def __init__(self, capacity: int = CAPACITY, budget: int = NODE_BUDGET):
        self.sessions = WeightedCache(capacity, budget)
        self.hits = 0
        self.misses = 0

    @property
    def capacity(self) -> int:
        return self.sessions.capacity

    def get(self, plan: GraphPlan) -> CompiledSession | SplitSession:
        compiled = self.sessions.get(plan.key)
        if compiled is not None:
            self.hits += 1
            self.sessions.move_to_end(plan.key)
            return compiled
        self.misses += 1
        device = plan.key[3]
        lower = lowers_for(device)
        compiled = session_runner(
            plan,
            device,
            lambda kept: build_model(plan, lower=lower, kept=kept),
            lambda model: session_for(model, device),
        )
        self.sessions.put(plan.key, compiled, len(plan.nodes))
        return compiled


def symbolic_inputs(model, dims) -> None:
    """Names the symbolic input dims (``input_{i}_dim_{axis}``) and leaves every output dim unknown, in
    place; the intermediates' shapes (``build_model``'s empty ones), those of one size, go."""
    del model.graph.value_info[:]
    graph_inputs = model.graph.input
    for position, axis in dims:
        dim = graph_inputs[position].type.tensor_type.shape.dim[axis]
        dim.Clear()
        dim.dim_param = f"input_{position}_dim_{axis}"
    for graph_output in model.graph.output:
        for dim in graph_output.type.tensor_type.shape.dim:
            dim.Clear()


class OnnxruntimeExecutor:
    """The "onnxruntime" executor: plans become ONNX models run by cached InferenceSessions."""

    def __init__(self):
        self.cache = SessionCache()

    def compile(self, plan: GraphPlan) -> CompiledSession | SplitSession:
        return self.cache.get(plan)

    def compile_uncached(self, plan: GraphPlan, device) -> CompiledSession:
        return session_for(build_model(plan, lower=lowers_for(device)), device)

    def compile_model(self, model: onnx.ModelProto, device) -> CompiledSession:
        """A session for an already built model (a plan with some inputs embedded as initializers)."""
        return session_for(model, device)

    def compile_shared(self, plan: GraphPlan, dims, device) -> CompiledSession | SplitSession:
        """A session for every size of the inputs' ``dims`` (``(input position, axis)`` pairs)."""
        # Only the lowerings that read no size: the others choose by the sizes of the plan, and this
        # graph serves other sizes (a Conv lowered for 2x2 images would run slower on 64x64 ones,
        # though exactly); those that give a node PyTorch's meaning (a max pool's NaN) hold at all.
        lower = "size_blind" if lowers_for(device) else False
        model = build_model(plan, lower=lower)
        # Threads as the static graph of this key would get (sizes are unknown once symbolic).
        threads = 1 if _work_estimate(model) < SINGLE_THREAD_ELEMENTS else MODE.intra_op_threads

        def symbolic(kept: frozenset) -> onnx.ModelProto:
            built = build_model(plan, lower=lower, kept=kept) if kept else model
            symbolic_inputs(built, dims)
            return built

        cache = self.cache
        cache.misses += 1
        # Cut as the static graphs of the family are, so that every size gets the same values.
        compiled = session_runner(plan, device, symbolic, lambda part: session_for(part, device, threads=threads))
        cache.sessions.put(plan.key, compiled, len(plan.nodes))
        return compiled

    def cache_info(self) -> dict:
        cache = self.cache
        sessions = cache.sessions
        return {
            "sessions": len(sessions),
            "hits": cache.hits,
            "misses": cache.misses,
            "capacity": sessions.capacity,
            "nodes": sessions.total,
            "node_budget": sessions.budget,
        }

    def clear_cache(self) -> None:
        self.cache.sessions.clear()
        self.cache.hits = self.cache.misses = 0

    def set_cache_size(self, capacity: int | None = None, node_budget: int | None = None) -> None:
        """Bounds the number of sessions kept and/or their graphs' nodes together (least recently used go first)."""
        self.cache.sessions.bound(capacity, node_budget)


ONNXRUNTIME = OnnxruntimeExecutor()
register_executor("onnxruntime", ONNXRUNTIME)
register_cache("onnxruntime sessions", ONNXRUNTIME.clear_cache)
