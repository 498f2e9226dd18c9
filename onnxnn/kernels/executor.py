"""The kernels executor: runs a recorded plan op by op with onnxnn's own kernels.

``compile_plan(plan)`` resolves every node's kernel once and lays out the wiring: which slot of
a flat value list each input reads, which slots each node writes, after which node each
intermediate is dead (its slot is cleared so the array is freed as soon as possible), and what
dtype each result must have. Compiled plans are cached by the plan's structural key, the same key
the onnxruntime session cache uses, so a cache hit does no registry lookups and no analysis:
only the loop over the nodes.

float16 and bfloat16 nodes compute in float32 and round each result back to its recorded dtype
(as PyTorch's CPU kernels do), except the data-movement kernels, which run on them as they are.
On CUDA, CuPy has no bfloat16 arrays: bfloat16 values are held as float32 rounded to bfloat16
precision after every op, and converted at the boundary.

On numpy (without bfloat16 emulation) the runtime's fast path may attach a straight-line Python
function to a compiled plan (``runtime/fastpath/straight_line.py``), which ordinary calls then run
instead of the loop, with the same results: a small elementwise node then costs little more than
its numpy ufunc. The compiled plan records what that needs (``directs``, ``finished_steps``,
``finish``); the loop still serves debug runs, traces, CuPy, bfloat16 emulation and runs with the
fast path off.

Example::

    >>> from onnxnn.ir.plan import plan as _plan
    >>> x = onnxnn.randn(3)
    >>> plan = _plan([(x * 2 + 1)._value])
    >>> run_plan(plan)[0].shape
    (3,)
"""

from __future__ import annotations


import ml_dtypes
import numpy as np

from . import (  # noqa: F401  (registration)
    activation_gradients,
    conv,
    elementwise,
    indexing,
    linalg,
    loss,
    normalization,
    pooling,
    reduce,
    shape,
)
from . import binary_cross_entropy, crop, detection, quantize, recurrent, resize, spectral  # noqa: F401  (registration)
from . import compiled_updates, cuda_fusion
from ..ir.caches import WeightedCache, register_cache
from ..ir.device_arrays import to_cupy
from ..ir.dtypes import as_dtype
from ..ir.executors import register_executor
from ..ir.mode import MODE
from ..ir.plan import computed_values
from ..ir.registry import decompositions, session_lowerings
from ..ir.kernel_registry import kernels

__all__ = [
    "run_plan",
    "compile_plan",
    "compile_shared",
    "CompiledKernelPlan",
    "array_module",
    "cache_info",
    "clear_cache",
    "set_cache_size",
]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FLOAT32 = np.dtype(np.float32)
_LOW_PRECISION = frozenset({np.dtype(np.float16), _BFLOAT16})


def array_module(where="cpu"):
    """The array module for a device: numpy for CPU, CuPy for CUDA.

    Args:
        where: an ``onnxnn.device``, a device string ("cpu", "cuda", "cuda:0") or an array module.

    Raises:
        RuntimeError: CUDA was asked for and CuPy is not installed or sees no usable GPU.
    """
    if hasattr(where, "asarray") and hasattr(where, "ndarray"):
        return where
    kind = getattr(where, "type", None) or str(where).partition(":")[0]
    if kind == "cpu":
        return np
    if kind != "cuda":
        raise RuntimeError(f"onnxnn kernels executor: unknown device {where!r} (expected cpu or cuda)")
    try:
        import cupy  # deferred: CuPy is optional and heavy; only CUDA runs need it
    except ImportError:
        raise RuntimeError(
            "onnxnn kernels executor: running on CUDA needs CuPy, which is not installed (pip install cupy-cuda12x)"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy raises its own CUDARuntimeError when no driver is present
        raise RuntimeError(
            f"onnxnn kernels executor: CuPy is installed but found no usable CUDA GPU ({error})"
        ) from None
    if count == 0:
        raise RuntimeError("onnxnn kernels executor: CuPy is installed but found no CUDA GPU")
    return cupy


def _widened(kernel):
    """The kernel run on float32 copies of its float16/bfloat16 inputs."""

    def widened(xp, inputs, attrs):
        return kernel(
            xp, [x.astype(_FLOAT32) if x is not None and x.dtype in _LOW_PRECISION else x for x in inputs], attrs
        )

    widened.__name__ = getattr(kernel, "__name__", "kernel")
    return widened


def round_to_bfloat16(xp, x):
    """float32 values rounded to the nearest bfloat16 (ties to even), kept as float32 (CuPy's stand-in)."""
    bits = x.astype(_FLOAT32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    result = rounded.view(np.float32)
    return xp.where(xp.isnan(x), x, result)


class CompiledKernelPlan:
    """A plan resolved to kernel calls over a flat list of value slots; call it with the input arrays.

    Slot 0 always holds None (omitted optional inputs), then come the fed inputs in plan order,
    the plan's structural constants and the node outputs.
    """

    __slots__ = (
        "xp",
        "steps",
        "node_steps",
        "step_descriptions",
        "template",
        "input_count",
        "input_dtypes",
        "input_shapes",
        "output_slots",
        "output_shapes",
        "output_dtypes",
        "emulate_bfloat16",
        "descriptions",
        "slot_shapes",
        "cacheable",
        "straight_line",
        "dynamic_shapes",
        "directs",
        "finished_steps",
        "accelerable",
    )

    def __init__(
        self,
        plan,
        xp=np,
        *,
        emulate_bfloat16: bool | None = None,
        dynamic_shapes: bool = False,
        fuse_elementwise: bool | None = None,
    ):
        self.xp = xp
        # A plan compiled for every size of its inputs (``compile_shared``) knows only its values'
        # ranks: the generated code then proves nothing from sizes, and the caller checks result shapes.
        self.dynamic_shapes = dynamic_shapes
        # CuPy has no bfloat16 arrays; numpy can be asked to emulate too (that is how it is tested).
        self.emulate_bfloat16 = xp is not np if emulate_bfloat16 is None else emulate_bfloat16
        # Which node computes each value, as the plan's walk found it (see ``ir.plan.GraphPlan``).
        computed = computed_values(plan)
        produced = {}
        for node in plan.nodes:
            for value in node.inputs:
                if value is not None and id(value) in computed:
                    produced[computed[id(value)]] = value
        for value in plan.outputs:
            if id(value) in computed:
                produced[computed[id(value)]] = value

        template: list = [None]
        slot_of: dict = {}
        for value in plan.inputs:
            slot_of[id(value)] = len(template)
            template.append(None)
        self.input_count = len(plan.inputs)
        self.input_dtypes = [value.dtype.numpy_dtype for value in plan.inputs]
        self.input_shapes = [None if dynamic_shapes else tuple(value.shape) for value in plan.inputs]
        output_slot: dict = {}
        slot_shapes: dict = {}
        steps, descriptions, directs, finished_steps = [], [], [], set()
        # Elementwise chains fuse into generated kernels on CuPy (kernels/cuda_fusion.py); numpy runs
        # each node's ufuncs, whose passes over small arrays cost less than generated code's calls.
        fusing = hasattr(xp, "ElementwiseKernel") if fuse_elementwise is None else fuse_elementwise
        views: list = []
        for step_index, node in enumerate(plan.nodes):
            kernel = kernels.lookup(node.op_type, node.domain)
            first = node.inputs[0] if node.inputs else None
            if first is not None:
                kernels.check_dtype(node.op_type, node.domain, first.dtype.name)
            input_slots = []
            for value in node.inputs:
                if value is None:
                    input_slots.append(0)
                elif id(value) in computed:
                    input_slots.append(output_slot[computed[id(value)]])
                else:
                    slot = slot_of.get(id(value))
                    if slot is None:
                        slot = slot_of[id(value)] = len(template)
                        template.append(self._to_device(value.data))
                    input_slots.append(slot)
            outputs = []
            low_precision = any(
                value is not None and value.dtype.numpy_dtype in _LOW_PRECISION for value in node.inputs
            )
            for index in range(node.num_outputs):
                value = produced.get((step_index, index))
                if value is None:
                    continue  # an output nothing reads: computed by the kernel, never stored
                slot = output_slot[(step_index, index)] = len(template)
                template.append(None)
                dtype = value.dtype.numpy_dtype
                low_precision = low_precision or dtype in _LOW_PRECISION
                rounds = self.emulate_bfloat16 and dtype == _BFLOAT16
                outputs.append((index, slot, _FLOAT32 if rounds else dtype, rounds))
                slot_shapes[slot] = (None,) * len(value.shape) if dynamic_shapes else tuple(value.shape)
            direct = None
            if low_precision and (node.domain, node.op_type) not in kernels.native_low_precision:
                kernel = _widened(kernel)  # a direct form would skip the widening: never used here
            else:
                direct = self._direct_form(node, input_slots, outputs, template)
                if kernels.finished_results.get((node.domain, node.op_type)) is kernel:
                    finished_steps.add(step_index)  # its promise holds for the arrays the plan feeds it
            attrs = _as_serialized(node)
            attrs["_num_outputs"] = node.num_outputs
            attrs["_used_outputs"] = tuple(index for index, *_ in outputs)
            if self.emulate_bfloat16 and node.op_type == "Cast" and _is_bfloat16(attrs.get("to")):
                attrs["to"] = 1  # float32; the output rounding below makes it bfloat16-valued
            steps.append((kernel, attrs, tuple(input_slots), tuple(outputs), ()))
            descriptions.append(_describe(node, step_index))
            directs.append(direct)
            if fusing:
                views.append(_view(node, attrs, input_slots, outputs))
        # An export plan may list realized values among its outputs (an input returned as is).
        self.cacheable = True
        self.output_slots = []
        for value in plan.outputs:
            if id(value) in computed:
                self.output_slots.append(output_slot[computed[id(value)]])
                continue
            slot = slot_of.get(id(value))
            if slot is None:
                # Its data is embedded, which the structural key does not capture: never cache this plan.
                slot = slot_of[id(value)] = len(template)
                template.append(self._to_device(value.data))
                self.cacheable = False
            self.output_slots.append(slot)
        kept = set(self.output_slots)
        # (kernel, attrs, input slots, outputs, frees): mixed types, read positionally by the loops.
        # ``node_steps`` runs node by node (debug runs, traces); ``steps`` may hold fused groups.
        self.node_steps: list[tuple] = _with_frees(steps, kept)
        self.steps = self.node_steps
        self.step_descriptions = descriptions
        if fusing:
            groups = cuda_fusion.fusion_groups(views, kept)
            if groups:
                fused, self.step_descriptions = _fused(xp, steps, views, groups, descriptions, template, slot_shapes)
                self.steps = _with_frees(fused, kept)
        self.template = template
        self.descriptions = descriptions
        self.slot_shapes = slot_shapes
        self.output_shapes = [None if dynamic_shapes else tuple(value.shape) for value in plan.outputs]
        self.output_dtypes = [value.dtype.numpy_dtype for value in plan.outputs]
        self.directs = directs
        self.finished_steps = finished_steps
        # Whether straight-line code may stand in for the loop (set in ``straight_line``, by the fast path).
        self.accelerable = xp is np and not any(rounds for step in self.steps for *_, rounds in step[3])
        self.straight_line = None

    @staticmethod
    def finish(result, dtype: np.dtype, recorded_shape: tuple | None, position: int) -> np.ndarray:
        """An output as a C-contiguous array of the recorded dtype and shape (or a clear error)."""
        return _finished(result, dtype, recorded_shape, position)

    def _direct_form(self, node, input_slots: list, outputs: list, template: list):
        """The direct form the generated code may call for a node instead of its kernel, or None."""
        if node.num_outputs != 1:
            return None
        first = node.inputs[0] if node.inputs else None
        form = kernels.direct_form(node.op_type, node.domain, node.attrs, None if first is None else first.dtype.name)
        if form is not None and form.output_shape:
            if not outputs or self.dynamic_shapes:
                return None  # no recorded shape is kept for an output nothing reads
            if any(slot <= self.input_count or template[slot] is None for slot in input_slots[1:] if slot):
                return None  # the shape comes from a fed or computed input, whose data may change
        return form

    def _to_device(self, array):
        if type(array) is not np.ndarray and self.xp is not np:
            return to_cupy(array, self.xp)  # a GPU value's OrtValue or CuPy array, used where it lies
        if self.emulate_bfloat16 and array.dtype == _BFLOAT16:
            array = array.astype(_FLOAT32)
        return array if self.xp is np else self.xp.asarray(array)

    def __call__(self, inputs: list, *, debug: bool = False, trace=None) -> list:
        """Runs the plan on the input arrays (in plan order) and returns the output arrays.

        Args:
            inputs: one numpy array per ``plan.inputs`` entry, of its recorded dtype and shape (as
                realized values always are: onnxruntime sessions are fed the same arrays and
                reject others). The generated code relies on it to skip checks of results.
            debug: check every node's results against the recorded shapes as it runs.
            trace: called as ``trace(description, input_arrays, output_arrays)`` after every node.

        Returns:
            numpy arrays with the plan outputs' recorded shapes and dtypes.
        """
        if self.straight_line is not None and MODE.fast_path and not debug and trace is None:
            return self.straight_line.run(self, inputs)
        return self.run_loop(inputs, debug=debug, trace=trace)

    def run_loop(self, inputs: list, *, debug: bool = False, trace=None) -> list:
        """``__call__`` by the interpreted loop over the steps, whatever straight-line code the plan has."""
        xp = self.xp
        env = self.template[:]
        if xp is np and not self.emulate_bfloat16:
            env[1 : 1 + self.input_count] = inputs
        else:
            env[1 : 1 + self.input_count] = [self._to_device(array) for array in inputs]
        step = None
        try:
            with np.errstate(all="ignore"):
                if debug or trace is not None:
                    self._run_checked(env, trace)
                else:
                    array_type = xp.ndarray
                    for step in self.steps:
                        kernel, attrs, input_slots, outputs, frees = step
                        results = kernel(xp, [env[slot] for slot in input_slots], attrs)
                        for index, slot, dtype, rounds in outputs:
                            result = results[index]
                            if type(result) is not array_type:
                                result = xp.asarray(result)  # numpy reductions return scalars for 0-d results
                            if result.dtype != dtype:
                                result = result.astype(dtype)
                            if rounds:
                                result = round_to_bfloat16(xp, result)
                            env[slot] = result
                        for slot in frees:
                            env[slot] = None
        except Exception as error:
            if step is not None and hasattr(error, "add_note"):
                error.add_note(
                    f"while running {self.step_descriptions[self.steps.index(step)]} in the onnxnn kernels executor"
                )
            raise
        return [self._finish(env[slot], position) for position, slot in enumerate(self.output_slots)]

    def _run_checked(self, env: list, trace) -> None:
        """The debug loop: one node at a time (never a fused group), validating result count and shapes."""
        xp = self.xp
        for position, (kernel, attrs, input_slots, outputs, frees) in enumerate(self.node_steps):
            arguments = [env[slot] for slot in input_slots]
            try:
                results = kernel(xp, arguments, attrs)
            except Exception as error:
                if hasattr(error, "add_note"):
                    error.add_note(f"while running {self.descriptions[position]} in the onnxnn kernels executor")
                raise
            if len(results) < max((index + 1 for index, *_ in outputs), default=0):
                raise RuntimeError(
                    f"onnxnn kernels executor: the kernel of {self.descriptions[position]} "
                    f"returned {len(results)} outputs"
                )
            for index, slot, dtype, rounds in outputs:
                result = xp.asarray(results[index])
                if not _shape_matches(tuple(result.shape), self.slot_shapes[slot]):
                    raise RuntimeError(
                        f"onnxnn kernels executor: {self.descriptions[position]} output {index} has shape "
                        f"{list(result.shape)}, but the recorded graph expects {list(self.slot_shapes[slot])}"
                    )
                result = result.astype(dtype, copy=False)
                env[slot] = round_to_bfloat16(xp, result) if rounds else result
            if trace is not None:
                trace(self.descriptions[position], arguments, [env[slot] for _, slot, _, _ in outputs])
            for slot in frees:
                env[slot] = None

    def _finish(self, result, position: int):
        """An output as a C-contiguous array of the recorded dtype and shape: numpy's on the CPU, CuPy's
        on a GPU (read there by the next graph), numpy's for bfloat16, which CuPy lacks."""
        xp = self.xp
        dtype = self.output_dtypes[position]
        if xp is not np:
            if dtype != _BFLOAT16:
                return _finished(result, dtype, self.output_shapes[position], position, xp)
            result = xp.asnumpy(result)
        return _finished(result, dtype, self.output_shapes[position], position)

    def __repr__(self) -> str:
        module = self.xp.__name__
        return (
            f"CompiledKernelPlan({len(self.steps)} nodes, {self.input_count} inputs, "
            f"{len(self.output_slots)} outputs, on {module})"
        )


def _with_frees(steps: list, kept: set) -> list:
    """The steps with each one's frees: the computed slots it reads last, which no plan output keeps."""
    computed = {slot for step in steps for _, slot, _, _ in step[3]}
    last_reader: dict = {}
    for step_index, step in enumerate(steps):
        for slot in step[2]:
            if slot in computed and slot not in kept:
                last_reader[slot] = step_index
    frees: dict = {}
    for slot, step_index in last_reader.items():
        frees.setdefault(step_index, []).append(slot)
    return [(*step[:4], tuple(frees.get(step_index, ()))) for step_index, step in enumerate(steps)]


def _view(node, attrs: dict, input_slots: list, outputs: list) -> cuda_fusion.NodeView:
    """What the fusion pass reads of a step (``cuda_fusion.NodeView``)."""
    return cuda_fusion.NodeView(
        node.domain,
        node.op_type,
        attrs,
        tuple(input_slots),
        tuple(None if value is None else value.dtype.numpy_dtype for value in node.inputs),
        tuple(slot for _, slot, _, _ in outputs),
        tuple(dtype for _, _, dtype, _ in outputs),
    )


def _fused(cupy, steps: list, views: list, groups: list, descriptions: list, template: list, slot_shapes: dict):
    """The steps with each fused group run as one generated kernel where its root node ran, and the
    steps' descriptions. Size-one finite constants among a group's inputs are written as literals."""
    constants = {}
    for view in views:
        for slot, dtype in zip(view.input_slots, view.input_dtypes):
            data = template[slot] if slot else None
            if data is not None and slot not in constants and data.size == 1 and dtype in cuda_fusion.C_TYPES:
                value = cupy.asnumpy(data).reshape(-1)[0]
                if dtype.kind == "b" or np.isfinite(value):
                    constants[slot] = (value.item(), tuple(data.shape))
    root_of = {}
    for group in groups:
        for index in group:
            root_of[index] = group
    fused_steps, fused_descriptions = [], []
    for index, step in enumerate(steps):
        group = root_of.get(index)
        if group is None:
            fused_steps.append(step)
            fused_descriptions.append(descriptions[index])
        elif group[-1] == index:
            shape = slot_shapes[views[index].output_slots[0]]
            kernel, input_slots = cuda_fusion.fused_kernel(
                cupy, views, group, constants, None if None in shape else shape
            )
            fused_steps.append((kernel, {}, input_slots, step[3], ()))
            fused_descriptions.append(
                "fused elementwise kernel of " + ", ".join(descriptions[member] for member in group)
            )
    return fused_steps, fused_descriptions


def _finished(result, dtype: np.dtype, recorded_shape: tuple | None, position: int, xp=np) -> np.ndarray:
    """Output ``position`` as a C-contiguous array (``xp``'s: numpy or CuPy) of its recorded dtype and shape."""
    result = xp.asarray(result)
    if result.dtype != dtype:
        result = result.astype(dtype)
    if not result.flags.c_contiguous:
        result = xp.asarray(result, order="C")
    if recorded_shape is not None and result.shape != recorded_shape:
        raise RuntimeError(
            f"onnxnn kernels executor: output {position} has shape {list(result.shape)}, "
            f"but the recorded graph expects {list(recorded_shape)}"
        )
    return result


def _shape_matches(actual: tuple, recorded: tuple) -> bool:
    """Whether ``actual`` is ``recorded``, where a None size (a plan compiled for every size) matches any."""
    return len(actual) == len(recorded) and all(want is None or size == want for size, want in zip(actual, recorded))


def _as_serialized(node) -> dict:
    """The node's attributes as an ONNX model holds them: FLOAT attributes are 32-bit.

    onnxruntime reads ``epsilon=0.1`` as float32(0.1) even for float64 data; the kernels do too,
    so both executors compute the same function and "auto" may move a plan between them without
    results shifting (a finite-difference check would see the shift). Ops that sessions never run
    as written (those with a decomposition, like Momentum, or a session form, like a float64
    BatchNormalization with PyTorch's epsilon) keep their Python floats.
    """
    attrs = dict(node.attrs)
    if decompositions.get(node.op_type, node.domain) is not None or session_lowerings.get(node.op_type, node.domain):
        return attrs
    for name, value in attrs.items():
        if type(value) is float:
            attrs[name] = float(np.float32(value))
        elif type(value) in (list, tuple) and value and all(type(item) is float for item in value):
            attrs[name] = type(value)(float(np.float32(item)) for item in value)
    return attrs


def _is_bfloat16(value) -> bool:
    if value is None:
        return False
    return as_dtype(value).numpy_dtype == _BFLOAT16


def _describe(node, position: int) -> str:
    shapes = ", ".join("None" if value is None else f"{value.dtype.name}{list(value.shape)}" for value in node.inputs)
    return f"node {position} {node.op_type} (domain '{node.domain or 'ai.onnx'}') on ({shapes})"


def compile_plan(plan, xp=np) -> CompiledKernelPlan:
    """Resolves a plan's kernels and wiring (uncached; ``run_plan`` caches by ``plan.key``).

    Raises:
        NotImplementedError: a node's op has no kernel.
        TypeError: a kernel does not take the dtype of a node's input.
    """
    return CompiledKernelPlan(plan, array_module(xp))


def compile_shared(plan, xp=np) -> CompiledKernelPlan:
    """Compiles a plan for every size of its inputs (the executor's symbolic-size graphs) and counts
    it as a miss of the plan cache, which holds it under ``plan.key`` like any other.

    The compiled plan does not check its results' shapes: its caller knows each run's.

    Raises:
        NotImplementedError: a node's op has no kernel.
        TypeError: a kernel does not take the dtype of a node's input.
    """
    module = array_module(xp)
    _cache.misses += 1
    compiled = CompiledKernelPlan(plan, module, dynamic_shapes=True)
    _cache.plans.put((plan.key, module.__name__), compiled, len(plan.nodes))
    return compiled


# Compiled plans are bounded by count and by their nodes together (``ir.caches.WeightedCache``),
# least recently used evicted first: a compiled plan keeps per node its kernel, wiring and the
# description its errors name (~1-2 KB), so structures that never repeat (an LSTM unrolled over
# each new length) filled 512 entries with hundreds of megabytes. Ordinary models' plans are a few
# hundred nodes (resnet18's training step 401, a 6-layer transformer's 702, see plan_cache.NODE_BUDGET).
CAPACITY = 512
NODE_BUDGET = 1 << 15


class _PlanCache:
    def __init__(self, capacity: int = CAPACITY, budget: int = NODE_BUDGET):
        self.plans = WeightedCache(capacity, budget)
        self.hits = 0
        self.misses = 0

    @property
    def capacity(self) -> int:
        return self.plans.capacity

    def get(self, plan, xp) -> CompiledKernelPlan:
        key = (plan.key, xp.__name__)
        compiled = self.plans.get(key)
        if compiled is not None:
            self.hits += 1
            self.plans.move_to_end(key)
            if isinstance(compiled, _Unsupported):
                raise compiled.error_type(compiled.message)
            return compiled
        self.misses += 1
        try:
            compiled = CompiledKernelPlan(plan, xp)
        except (NotImplementedError, TypeError) as error:
            # Remembered, so a caller that falls back to onnxruntime pays for the analysis once.
            self.plans.put(key, _Unsupported(type(error), str(error)), 1)
            raise
        if not compiled.cacheable:
            return compiled
        self.plans.put(key, compiled, len(plan.nodes))
        return compiled


class _Unsupported:
    """A cache entry for a structure the kernels cannot run (a missing kernel, an unsupported dtype)."""

    __slots__ = ("error_type", "message")

    def __init__(self, error_type: type, message: str):
        self.error_type = error_type
        self.message = message


_cache = _PlanCache()


def cached_plan(plan, xp=np) -> CompiledKernelPlan:
    """The compiled plan for ``plan`` from the structural cache, compiling it on a miss.

    Raises:
        NotImplementedError: a node's op has no kernel (remembered: later calls raise at once).
        TypeError: a kernel does not take the dtype of a node's input (remembered likewise).
    """
    return _cache.get(plan, array_module(xp))


def run_plan(plan, xp=None, *, debug: bool = False, trace=None) -> list:
    """Computes a plan's outputs with onnxnn's kernels.

    Args:
        plan: the runtime's ``GraphPlan`` (``onnxnn.ir.plan.plan(values)``).
        xp: numpy, cupy, or a device ("cpu", "cuda"); by default the plan's device.
        debug: run op by op, checking every node's result shapes against the recorded graph.
        trace: called as ``trace(description, input_arrays, output_arrays)`` after every node.

    Returns:
        numpy arrays for ``plan.outputs``, with their recorded shapes and dtypes.

    Raises:
        NotImplementedError: a node's op has no kernel.
        TypeError: a kernel does not take the dtype of a node's input.
        RuntimeError: CUDA was asked for without CuPy or a GPU.
    """
    module = array_module(plan.key[3] if xp is None else xp)
    compiled = _cache.get(plan, module)
    return compiled([value.data for value in plan.inputs], debug=debug, trace=trace)


def cache_info() -> dict:
    """Counters of the compiled-plan cache: ``{"plans", "hits", "misses", "capacity", "nodes", "node_budget"}``.

    ``plans`` counts cached structures, including those remembered as unsupported; ``nodes`` the
    nodes of the cached plans together, kept within ``node_budget``.
    """
    plans = _cache.plans
    return {
        "plans": len(plans),
        "hits": _cache.hits,
        "misses": _cache.misses,
        "capacity": plans.capacity,
        "nodes": plans.total,
        "node_budget": plans.budget,
    }


def clear_cache() -> None:
    """Drops every compiled plan and resets the counters."""
    _cache.plans.clear()
    _cache.hits = _cache.misses = 0


def set_cache_size(capacity: int | None = None, node_budget: int | None = None) -> None:
    """Bounds the number of compiled plans kept and/or their nodes together (least recently used are dropped first)."""
    _cache.plans.bound(capacity, node_budget)


class KernelsExecutor:
    """The "kernels" executor: plans run by onnxnn's own kernels on the plan's device."""

    def compile(self, plan) -> CompiledKernelPlan:
        return _cache.get(plan, array_module(plan.key[3]))

    def compile_uncached(self, plan, device) -> CompiledKernelPlan:
        return CompiledKernelPlan(plan, array_module(device))

    def compile_shared(self, plan, dims, device) -> CompiledKernelPlan:
        return compile_shared(plan, array_module(device))

    def cache_info(self) -> dict:
        return cache_info()

    def clear_cache(self) -> None:
        clear_cache()

    def set_cache_size(self, capacity: int | None = None, node_budget: int | None = None) -> None:
        set_cache_size(capacity, node_budget)

    def runs_fused(self, plan) -> bool:
        """Whether this executor runs every node of ``plan`` inside generated elementwise kernels
        (``cuda_fusion``): on a GPU with CuPy, each node fusible into a group. Compiles the plan
        into the cache when its ops all have expressions."""
        if plan.key[3].type == "cpu" or not all(
            (node.domain, node.op_type) in cuda_fusion.EXPRESSIONS for node in plan.nodes
        ):
            return False
        try:
            compiled = _cache.get(plan, array_module(plan.key[3]))
        except (RuntimeError, NotImplementedError, TypeError):
            return False  # no CuPy or no GPU for it, or a dtype the kernels lack
        return all(isinstance(step[0], cuda_fusion.FusedElementwise) for step in compiled.steps)

    @property
    def updates_share_threads(self) -> bool:
        """Whether its optimizer updates run on all the intra-op threads (the compiled loops share large
        ones out, ``compiled_updates.THREADED_MIN_ELEMENTS``; the numpy formulas run on one)."""
        return compiled_updates.available()


KERNELS = KernelsExecutor()
register_executor("kernels", KERNELS)
register_cache("kernel plans", clear_cache)
