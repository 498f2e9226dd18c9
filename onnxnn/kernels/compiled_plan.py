"""The kernels executor's compiled plan: a recorded plan resolved to kernel calls over value slots.

``CompiledKernelPlan(plan, xp)`` resolves every node's kernel once and lays out the wiring: which
slot of a flat value list each input reads, which slots each node writes, after which node each
intermediate is dead (its slot is cleared so the array is freed as soon as possible), and what
dtype each result must have. A call is then only the loop over the steps.

float16 and bfloat16 nodes compute in float32 and round each result back to its recorded dtype
(as PyTorch's CPU kernels do), except the data-movement kernels, which run on them as they are.
On CUDA, CuPy has no bfloat16 arrays: bfloat16 values are held as float32 rounded to bfloat16
precision after every op, and converted at the boundary. On CuPy, groups of elementwise nodes run
as one generated kernel each (``cuda_fusion.py``); debug runs and traces still go node by node.

On numpy (without bfloat16 emulation) the runtime's fast path may attach a straight-line Python
function to a compiled plan (``runtime/fastpath/straight_line.py``), which ordinary calls then run
instead of the loop, with the same results: a small elementwise node then costs little more than
its numpy ufunc. The compiled plan records what that needs (``directs``, ``finished_steps``,
``finish``); the loop still serves debug runs, traces, CuPy, bfloat16 emulation and runs with the
fast path off.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import cuda_fusion
from ..ir.device_arrays import to_cupy
from ..ir.dtypes import as_dtype
from ..ir.mode import MODE
from ..ir.plan import computed_values
from ..ir.registry import decompositions, session_lowerings
from ..ir.kernel_registry import kernels

__all__ = ["CompiledKernelPlan", "round_to_bfloat16"]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FLOAT32 = np.dtype(np.float32)
_LOW_PRECISION = frozenset({np.dtype(np.float16), _BFLOAT16})


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
    root_of = {}
    for group in groups:
        for index in group:
            root_of[index] = group
            view = views[index]
            for slot, dtype in zip(view.input_slots, view.input_dtypes):
                data = template[slot] if slot else None
                if data is None or slot in constants or data.size != 1 or dtype not in cuda_fusion.C_TYPES:
                    continue
                value = cupy.asnumpy(data).reshape(-1)[0]  # a copy to the host per constant, once
                if dtype.kind == "b" or np.isfinite(value):
                    constants[slot] = (value.item(), tuple(data.shape))
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
