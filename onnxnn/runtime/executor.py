"""Realization: run pending values through a cache of compiled onnxruntime sessions.

``realize(values)`` gathers the pending subgraph behind ``values`` and builds its canonical
structural key (op types, attributes, topology, input shapes and dtypes; never data). On a cache
hit, the only work is the key and the session run. On a miss the subgraph becomes an ONNX
``ModelProto`` and an ``InferenceSession``. Pending intermediates that something else still
references (a live Tensor, a saved value for backward, another pending node) are returned by the
same run, so nothing is computed twice.
"""
from __future__ import annotations

import sys
from collections import OrderedDict

import numpy as np
import onnx
from onnx import helper

from .device import CPU

__all__ = ["realize", "build_model", "cache_info", "clear_cache", "OPSET_VERSION", "IR_VERSION",
           "set_cache_size", "set_executor", "get_executor"]

# The opset and IR version of every graph onnxnn builds. onnx's default ir_version can be newer
# than what the installed onnxruntime reads, so both are pinned to values onnxruntime >= 1.20 accepts.
OPSET_VERSION = 21
IR_VERSION = 10


class _GraphPlan:
    """The canonical form of one pending subgraph: nodes in topological order and their wiring."""

    __slots__ = ("nodes", "inputs", "outputs", "key")

    def __init__(self, nodes, inputs, outputs, key):
        self.nodes = nodes        # list[Node], topological order
        self.inputs = inputs      # list[Value]: realized values fed to the graph
        self.outputs = outputs    # list[Value]: pending values the run computes
        self.key = key


def _externally_referenced(entries: list, skip: set) -> list:
    """Pending values used inside the plan that something outside the plan also references.

    ``entries`` holds ``[value, consumer_count]`` pairs. A reference count beyond the consumers
    inside the subgraph means a live Tensor, a value saved for backward or an unrelated pending
    node holds the value: computing it in this run saves a rerun later.
    """
    found = []
    baseline = _REFCOUNT_BASELINE
    for entry in entries:
        value = entry[0]
        if id(value) in skip:
            continue
        if sys.getrefcount(value) - baseline > entry[1]:
            found.append(value)
    return found


def _calibrate_refcount_baseline() -> int:
    """Measures how many references the scan above holds by itself on this Python version.

    Interpreters differ (newer ones borrow references for loop variables), so instead of a
    constant the scan is run on a probe whose value is referenced by one consumer only.
    """
    global _REFCOUNT_BASELINE

    class _Pending:
        __slots__ = ()

    consumer_inputs = (_Pending(),)
    entries = [[consumer_inputs[0], 1]]
    for baseline in range(8):
        _REFCOUNT_BASELINE = baseline
        if not _externally_referenced(entries, set()):
            return baseline
    raise RuntimeError("could not calibrate the reference-count baseline")


_REFCOUNT_BASELINE = 3
_calibrate_refcount_baseline()


def _plan(targets: list, include_shared: bool = True) -> _GraphPlan:
    """Walks the pending history of ``targets`` and builds its canonical plan and cache key.

    With ``include_shared`` (realization), pending intermediates referenced elsewhere become
    extra outputs; without it (export), the outputs are exactly ``targets``, which may also
    be realized values.

    This runs on every realization, cache hit or not, so it is written for speed: one walk to
    collect nodes and count consumers, one stable sort, one pass to build the key.
    """
    # One post-order depth-first walk: a topological order that depends only on the structure
    # (input order, target order), never on object addresses or on when values were realized;
    # each node's part of the key is built as the node is finished.
    order: list = []
    node_keys: list = []
    inputs: list = []
    input_position: dict = {}
    consumers: dict = {}
    done: set = set()
    for target in targets:
        if target.data is not None or id(target.node) in done:
            continue
        stack = [target.node]
        while stack:
            node = stack[-1]
            for value in node.inputs:
                if value is not None and value.data is None and id(value.node) not in done:
                    stack.append(value.node)
                    break
            else:
                stack.pop()
                if id(node) in done:
                    continue
                done.add(id(node))
                node.position = len(order)
                order.append(node)
                refs = []
                for value in node.inputs:
                    if value is None:
                        refs.append(None)
                    elif value.data is None:
                        refs.append((value.node.position, value.index))
                        entry = consumers.get(id(value))
                        if entry is None:
                            consumers[id(value)] = [value, 1]
                        else:
                            entry[1] += 1
                    elif value.static is not None:
                        refs.append(value.static)
                    else:
                        position = input_position.get(id(value))
                        if position is None:
                            position = input_position[id(value)] = len(inputs)
                            inputs.append(value)
                        refs.append(position)
                node_keys.append((node._signature or node.signature, tuple(refs)))

    outputs = list(targets)
    if include_shared:
        outputs += _externally_referenced(list(consumers.values()), {id(t) for t in targets})
    del consumers
    key = (
        tuple(node_keys),
        tuple([(v.shape, v.dtype) for v in inputs]),
        tuple([(v.node.position, v.index, v.shape) if v.data is None else None for v in outputs]),
        targets[0].device,
    )
    return _GraphPlan(order, inputs, outputs, key)


def _onnx_attribute_value(value):
    from .dtypes import dtype
    if isinstance(value, dtype):
        return value.onnx_type
    if isinstance(value, np.ndarray):
        return onnx.numpy_helper.from_array(value)
    return value


def build_model(plan: _GraphPlan, input_roles: list | None = None, output_names: list | None = None,
                opset_version: int = OPSET_VERSION, graph_name: str = "onnxnn") -> onnx.ModelProto:
    """Builds the ONNX model of a plan.

    Args:
        plan: the canonical subgraph (``_plan``).
        input_roles: per realized input of the plan, ``("input", name)`` for a graph input or
            ``("initializer", name)`` to embed its value; by default all are graph inputs
            ``input_0, input_1, ...``. Static constants (axes, shapes) are always initializers.
        output_names: names of the plan's outputs (default ``output_0, ...``).
        opset_version: the default-domain opset to declare.
    """
    names: dict = {}
    graph_inputs, initializers, onnx_nodes = [], [], []
    for position, value in enumerate(plan.inputs):
        role, name = input_roles[position] if input_roles else ("input", f"input_{position}")
        names[id(value)] = name
        if role == "input":
            graph_inputs.append(helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape))
        else:
            initializers.append(onnx.numpy_helper.from_array(value.data, name))
    # Pending outputs are named by the node that computes them: no Identity renames, which also
    # sidestep an onnxruntime optimizer bug (EliminateIdentity) on graphs with many outputs.
    output_names = output_names or [f"output_{position}" for position in range(len(plan.outputs))]
    produced: dict = {}
    renames = []
    for name, value in zip(output_names, plan.outputs):
        key = (value.node.position, value.index) if value.data is None else None
        if key is not None and key not in produced:
            produced[key] = name
        else:
            renames.append((name, value))

    def name_of(value) -> str:
        if value.data is None:
            key = (value.node.position, value.index)
            return produced.get(key) or f"node_{key[0]}_{key[1]}"
        name = names.get(id(value))
        if name is None:
            name = names[id(value)] = f"constant_{len(initializers)}"
            initializers.append(onnx.numpy_helper.from_array(value.data, name))
        return name

    domains = {""}
    for node_index, node in enumerate(plan.nodes):
        inputs = ["" if value is None else name_of(value) for value in node.inputs]
        outputs = [produced.get((node_index, i)) or f"node_{node_index}_{i}" for i in range(node.num_outputs)]
        attributes = {k: _onnx_attribute_value(v) for k, v in node.attrs.items()}
        onnx_nodes.append(helper.make_node(node.op_type, inputs, outputs, name=f"{node.op_type}_{node_index}",
                                           domain=node.domain or None, **attributes))
        domains.add(node.domain)
    identity_nodes = [helper.make_node("Identity", [name_of(value)], [name]) for name, value in renames]
    graph_outputs = [helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape)
                     for name, value in zip(output_names, plan.outputs)]
    graph = helper.make_graph(onnx_nodes + identity_nodes, graph_name, graph_inputs, graph_outputs, initializers)
    opsets = [helper.make_opsetid(domain, opset_version if domain == "" else 1) for domain in sorted(domains)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION, producer_name="onnxnn")


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


def _emulate_bfloat16(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rewrites every bfloat16 node to compute in float32 and round its results back to bfloat16.

    onnxruntime's CPU provider implements few ops for bfloat16. Rounding after every op gives the
    results PyTorch's CPU bfloat16 kernels give (they also compute in float32 per op).
    """
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for info in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        types[info.name] = info.type.tensor_type.elem_type
    for initializer in inferred.graph.initializer:
        types[initializer.name] = initializer.data_type
    bfloat16, float32 = onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT
    rewritten = []
    widened_names: dict = {}
    for node in model.graph.node:
        if node.op_type == "Cast" or not any(types.get(name) == bfloat16 for name in list(node.input) + list(node.output)):
            rewritten.append(node)
            continue
        widened = onnx.NodeProto()
        widened.CopyFrom(node)
        for position, name in enumerate(node.input):
            if types.get(name) == bfloat16:
                if name not in widened_names:
                    widened_names[name] = f"{name}_widened_for_compute"
                    rewritten.append(helper.make_node("Cast", [name], [widened_names[name]], to=float32))
                widened.input[position] = widened_names[name]
        narrowing = []
        for position, name in enumerate(node.output):
            if types.get(name) == bfloat16:
                widened.output[position] = f"{name}_wide"
                narrowing.append(helper.make_node("Cast", [widened.output[position]], [name], to=bfloat16))
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
    """Elements in the graph's inputs, outputs and initializers: a cheap proxy for its arithmetic."""
    total = 0
    for value_info in list(model.graph.input) + list(model.graph.output):
        size = 1
        for dim in value_info.type.tensor_type.shape.dim:
            size *= max(dim.dim_value, 1)
        total += size
    for initializer in model.graph.initializer:
        size = 1
        for dim in initializer.dims:
            size *= dim
        total += size
    return total


def create_session(model: onnx.ModelProto | bytes, providers=("CPUExecutionProvider",), threads: int = 0):
    """An onnxruntime InferenceSession with onnxnn's options (``threads=0``: onnxruntime's default)."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return onnxruntime.InferenceSession(data, options, providers=list(providers))


def _writes_its_inputs(model: onnx.ModelProto) -> bool:
    """onnxruntime's training-mode BatchNormalization updates the fed running mean/var arrays in place."""
    return any(node.op_type == "BatchNormalization" and any(a.name == "training_mode" and a.i for a in node.attribute)
               for node in model.graph.node)


class _CompiledSession:
    __slots__ = ("session", "input_names", "output_names", "run", "bfloat16_io", "copy_inputs")

    def __init__(self, model: onnx.ModelProto, device):
        widened = _widen_bfloat16_io(model)
        self.bfloat16_io = widened if widened[0] or widened[1] else None
        self.copy_inputs = _writes_its_inputs(model)
        providers = ["CPUExecutionProvider"]
        if device.type == "cuda":
            providers = [("CUDAExecutionProvider", {"device_id": device.index or 0}), "CPUExecutionProvider"]
        threads = 1 if _work_estimate(model) < SINGLE_THREAD_ELEMENTS else 0
        try:
            try:
                self.session = create_session(model, providers, threads)
            except Exception as error:
                if "bfloat16" not in str(error).lower() and "NOT_IMPLEMENTED" not in str(error):
                    raise
                model = _emulate_bfloat16(model)
                self.session = create_session(model, providers, threads)
        except Exception as error:
            ops = sorted({n.op_type for n in model.graph.node})
            raise RuntimeError(f"onnxruntime could not compile the recorded graph (ops {ops}): {error}") from None
        self.input_names = [i.name for i in model.graph.input]
        self.output_names = [o.name for o in model.graph.output]
        # The private binding skips per-call argument checks that the plan already guarantees.
        inner = getattr(self.session, "_sess", None)
        self.run = inner.run if inner is not None and hasattr(inner, "run") else self._public_run

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
            from .dtypes import bfloat16
            for position in self.bfloat16_io[1]:
                results[position] = results[position].astype(bfloat16.numpy_dtype)
        return results


class _SessionCache:
    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self.sessions: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, plan: _GraphPlan) -> _CompiledSession:
        compiled = self.sessions.get(plan.key)
        if compiled is not None:
            self.hits += 1
            self.sessions.move_to_end(plan.key)
            return compiled
        self.misses += 1
        compiled = _CompiledSession(build_model(plan), plan.key[3])
        self.sessions[plan.key] = compiled
        if len(self.sessions) > self.capacity:
            self.sessions.popitem(last=False)
        return compiled


_cache = _SessionCache()


def cache_info() -> dict:
    """Counters of the session cache: ``{"sessions", "hits", "misses", "capacity"}``."""
    return {"sessions": len(_cache.sessions), "hits": _cache.hits, "misses": _cache.misses,
            "capacity": _cache.capacity}


def clear_cache() -> None:
    """Drops every compiled session (general and specialized) and resets the counters."""
    _cache.sessions.clear()
    _specializations.clear()
    _stable_inputs.clear()
    _cache.hits = _cache.misses = 0


def set_cache_size(capacity: int) -> None:
    """Bounds the number of compiled sessions kept (least recently used are dropped first)."""
    _cache.capacity = capacity
    while len(_cache.sessions) > capacity:
        _cache.sessions.popitem(last=False)


# ---------------------------------------------------------------- executor selection
#
# "auto" runs a plan on onnxnn's own kernels when it is tiny (one or two small nodes: a session
# call costs more than their arithmetic) or when onnxruntime cannot compile it (ops or dtypes it
# lacks, e.g. float64 Erf or LeakyRelu), and on onnxruntime otherwise. Measured on the 2-core
# development machine (benchmarks/bench_executors.py): a kernels run costs about 5 us plus ~3 us
# per node on small arrays; an onnxruntime run about 15 us plus ~2 us per node, with faster
# kernels (threads, fusion) once arrays reach thousands of elements.
AUTO_KERNELS_MAX_NODES = 2
AUTO_KERNELS_MAX_ELEMENTS = 4096
EXECUTORS = ("auto", "onnxruntime", "kernels")


class _Selection:
    name = "auto"
    eager = False
    recording_only = 0


SELECTION = _Selection()
_auto_choices: dict = {}


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


def _elements(values) -> int:
    total = 0
    for value in values:
        size = 1
        for dim in value.shape:
            size *= dim
        total += size
    return total


def _kernels_runner(plan):
    from ..kernels.executor import array_module, cached_plan
    return cached_plan(plan, array_module(plan.key[3]))


def _runner(plan):
    """The compiled form of ``plan`` on the selected executor (auto decides once per structure)."""
    name = SELECTION.name
    if name == "onnxruntime":
        return _cache.get(plan)
    if name == "kernels":
        return _kernels_runner(plan)
    choice = _auto_choices.get(plan.key)
    if choice is None:
        choice = "onnxruntime"
        if (len(plan.nodes) <= AUTO_KERNELS_MAX_NODES
                and _elements(plan.inputs) + _elements(plan.outputs) <= AUTO_KERNELS_MAX_ELEMENTS):
            choice = "kernels"
        if len(_auto_choices) > 4 * _cache.capacity:
            _auto_choices.clear()
        _auto_choices[plan.key] = choice
    if choice == "kernels":
        try:
            return _kernels_runner(plan)
        except (NotImplementedError, TypeError):
            _auto_choices[plan.key] = "onnxruntime"
            return _cache.get(plan)
    try:
        return _cache.get(plan)
    except RuntimeError as error:
        # onnxruntime lacks a kernel for an op or dtype here: onnxnn's own kernels take the plan.
        try:
            runner = _kernels_runner(plan)
        except (NotImplementedError, TypeError):
            raise error from None
        _auto_choices[plan.key] = "kernels"
        return runner


# ---------------------------------------------------------------- inference specialization
#
# Parameters are data: a training step feeds them to the compiled graph like any input. When the
# same large inputs (the weights of a model serving requests) come back unchanged run after run,
# a second session is compiled with them embedded as initializers, so onnxruntime can fold
# constants, fuse BatchNormalization into convolutions and pre-pack weights. Values never change
# in place, so "the same Value object" means "the same data"; the specialization holds those
# objects, and any other input falls back to the general session at once.
SPECIALIZE_AFTER_RUNS = 3
SPECIALIZE_MIN_ELEMENTS = 4096
MAX_SPECIALIZATIONS = 16


class _Specialization:
    __slots__ = ("positions", "values", "rest", "session")

    def __init__(self, plan: _GraphPlan, positions: list[int]):
        self.positions = positions
        self.values = [plan.inputs[position] for position in positions]
        embedded = set(positions)
        self.rest = [i for i in range(len(plan.inputs)) if i not in embedded]
        roles = [("initializer", f"weight_{i}") if i in embedded else ("input", f"input_{i}")
                 for i in range(len(plan.inputs))]
        self.session = _CompiledSession(build_model(plan, roles), plan.key[3])

    def matches(self, inputs: list) -> bool:
        for position, value in zip(self.positions, self.values):
            if inputs[position] is not value:
                return False
        return True

    def __call__(self, inputs: list) -> list:
        return self.session([inputs[i] for i in self.rest])


_specializations: OrderedDict = OrderedDict()
_stable_inputs: dict = {}


def _watch_stable_inputs(plan: _GraphPlan) -> None:
    """Counts runs in which the inputs of a structure were the very same values.

    Structures with a large stable input (weights) get a specialized session after a few runs;
    every input that stayed the same is embedded then (BatchNormalization statistics too, so they
    fold into the convolutions), while per-call values (the batch, scalars) stay inputs.
    """
    seen = _stable_inputs.get(plan.key)
    if seen is None:
        if any(v.data.size >= SPECIALIZE_MIN_ELEMENTS for v in plan.inputs):
            if len(_stable_inputs) > 4 * MAX_SPECIALIZATIONS:
                _stable_inputs.clear()
            _stable_inputs[plan.key] = [1, list(plan.inputs)]
        return
    stable = [before if before is value else None for before, value in zip(seen[1], plan.inputs)]
    if not any(v is not None and v.data.size >= SPECIALIZE_MIN_ELEMENTS for v in stable):
        seen[0], seen[1] = 1, list(plan.inputs)
        return
    seen[0] += 1
    seen[1] = stable
    if seen[0] >= SPECIALIZE_AFTER_RUNS:
        del _stable_inputs[plan.key]
        try:
            _specializations[plan.key] = _Specialization(plan, [i for i, v in enumerate(stable) if v is not None])
        except RuntimeError:
            return  # onnxruntime could not compile it: the general session keeps serving
        if len(_specializations) > MAX_SPECIALIZATIONS:
            _specializations.popitem(last=False)


class recording_only:
    """Within this block explicit realizations are skipped: a whole step is recorded, not run.

    Used to export a training step as one graph; reading a pending value inside raises.
    """

    def __enter__(self) -> "recording_only":
        SELECTION.recording_only += 1
        return self

    def __exit__(self, *exc_info) -> None:
        SELECTION.recording_only -= 1


def realize(values) -> None:
    """Computes every pending value in ``values`` (and the pending values still referenced elsewhere)."""
    if SELECTION.recording_only:
        return
    targets = []
    seen = set()
    for value in values:
        if value.data is None and id(value) not in seen:
            seen.add(id(value))
            targets.append(value)
    if not targets:
        return
    plan = _plan(targets)
    inputs = [value.data for value in plan.inputs]
    specialized = _specializations.get(plan.key)
    if specialized is not None and specialized.matches(plan.inputs):
        results = specialized(inputs)
    else:
        results = _runner(plan)(inputs)
        if SELECTION.name != "kernels":
            _watch_stable_inputs(plan)
    for value, result in zip(plan.outputs, results):
        value.data = result
        value.node = None
