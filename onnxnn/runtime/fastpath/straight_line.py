"""Straight-line code for compiled kernel plans: one generated Python function per plan (fast path).

The interpreted loop of ``CompiledKernelPlan`` pays, for every node, for building the input list,
calling the kernel wrapper, unpacking its result list and checking each result: about 2.5 us a
node, several times the cost of numpy's own ufunc on a small array. For numpy plans the compiler
also writes the plan out as the source of one function, with a line per node, a local variable
per value, and every kernel, direct form, attribute dict, constant and dtype bound as a default
argument (a fast local lookup)::

    def run_plan(inputs, *, numpy=numpy, ..., add=add, relu=relu, dtype_float32=dtype_float32, finish=finish):
        input_0, input_1 = inputs
        # node 0 Add (domain 'ai.onnx') on (float32[3], float32[3])
        node_0 = add(input_0, input_1)
        # node 1 Relu (domain 'ai.onnx') on (float32[3])
        node_1 = relu(node_0)
        if node_1.dtype is not dtype_float32 and node_1.dtype != dtype_float32: node_1 = node_1.astype(dtype_float32)
        node_0 = None  # last read above
        # the outputs, as C-contiguous arrays of their recorded shapes
        if node_1.shape != (3,) or not node_1.flags.c_contiguous: node_1 = finish(node_1, dtype_float32, (3,), 0)
        return [node_1]

Nodes whose op declares a direct form for their attributes (``kernels.register_direct``) call it
on the arrays; the others call their kernel exactly as the loop does. The semantics are the loop's:
numpy scalars become 0-d arrays, results are cast to the recorded dtype, dead intermediates are
released after their last reader. Checks that hold for every input the plan can be fed are left
out: fed inputs have their recorded dtypes and shapes (realized values always do), so numpy says
before the run which dtype a ufunc returns (``ufunc.resolve_dtypes``, numpy >= 2), and a new array
of the inputs' broadcast shape with at most one dimension longer than 1 is C-contiguous in any
memory order. Kernels registered with ``finished_results`` (Momentum) get no checks at all. Fed
inputs may have any memory layout, so nothing relies on theirs.

An exception is traced back to its line, which names the node, so it carries the same "while
running node ..." note as in the loop, at no cost per node.

``accelerate(compiled)`` attaches the code to a plan of the kernels executor; the fast path calls
``accelerate_when_run_again(compiled)``, which does so at the plan's second run (a plan run once
is cheaper in the loop than written out). With the fast path off (``onnxnn.set_fast_path(False)``)
the plan runs its loop again, with bitwise the same results. After its second run,
``print(compiled.straight_line.source)`` shows the generated code; tracebacks show its lines.
"""

from __future__ import annotations

import itertools
import keyword
import linecache
import re
import weakref

import numpy as np

from ...ir.caches import register_cache

__all__ = [
    "StraightLinePlan",
    "accelerate",
    "accelerate_when_run_again",
    "generate",
    "ignore_float_errors",
    "restore_float_errors",
]

_file_numbers = itertools.count()


class StraightLinePlan:
    """The generated function of a compiled plan, its source, and the node of each source line."""

    __slots__ = ("function", "source", "filename", "line_steps", "__weakref__")

    def __init__(self, source: str, namespace: dict, line_steps: dict):
        self.source = source
        self.filename = f"<onnxnn kernels plan {next(_file_numbers)}>"
        self.line_steps = line_steps
        exec(compile(source, self.filename, "exec"), namespace)
        self.function = namespace["run_plan"]
        # Registered so tracebacks show the generated lines; dropped with the plan.
        lines = source.splitlines(keepends=True)
        linecache.cache[self.filename] = (len(source), None, lines, self.filename)
        weakref.finalize(self, linecache.cache.pop, self.filename, None)

    def run(self, compiled, inputs: list) -> list:
        """Runs the generated function for ``compiled``: the loop's results, without its per-node overhead."""
        if compiled.emulate_bfloat16:
            inputs = [compiled._to_device(array) for array in inputs]
        token = ignore_float_errors()
        try:
            results = self.function(inputs)
        except Exception as error:
            step = self.failing_step(error)
            if step is not None and hasattr(error, "add_note"):
                error.add_note(f"while running {compiled.descriptions[step]} in the onnxnn kernels executor")
            raise
        finally:
            restore_float_errors(token)
        return results

    def failing_step(self, error: BaseException) -> int | None:
        """The index of the step whose line raised ``error`` (None when no node's line did)."""
        code = self.function.__code__
        traceback = error.__traceback__
        step = None
        while traceback is not None:
            if traceback.tb_frame.f_code is code:
                step = self.line_steps.get(traceback.tb_lineno)
            traceback = traceback.tb_next
        return step


def accelerate(compiled) -> None:
    """Attaches straight-line code to a compiled kernel plan (numpy, no bfloat16 rounding), once."""
    if not isinstance(compiled.straight_line, StraightLinePlan) and compiled.accelerable:
        compiled.straight_line = generate(compiled, compiled.directs, compiled.finished_steps, compiled.finish)


def accelerate_when_run_again(compiled) -> None:
    """``accelerate`` at the plan's second run; its first runs the loop.

    Writing and compiling a plan's code costs about as much as a thousand nodes of the loop, and most
    structures a program meets run once (a shape seen once, a test's graph, a loop's first steps
    before its backward is traced): those never pay for code; a plan that runs again gets it.
    """
    if compiled.straight_line is None and compiled.accelerable:
        compiled.straight_line = _FIRST_RUN


class _FirstRun:
    """A plan's straight-line code before its first run: runs the loop, then asks for the code."""

    __slots__ = ()

    def run(self, compiled, inputs: list) -> list:
        # Set before the run, so a first run that raises counts too. Threads meeting a new plan at
        # once may both write its code: the same code, harmlessly.
        compiled.straight_line = _SECOND_RUN
        return compiled.run_loop(inputs)


class _SecondRun:
    """A plan's straight-line code before its second run: writes the code, then runs it."""

    __slots__ = ()

    def run(self, compiled, inputs: list) -> list:
        accelerate(compiled)
        return compiled.straight_line.run(compiled, inputs)


_FIRST_RUN, _SECOND_RUN = _FirstRun(), _SecondRun()


def generate(compiled, directs: list, finished_steps: set, finish) -> StraightLinePlan:
    """Writes and compiles the straight-line function of a compiled plan.

    Args:
        compiled: the CompiledKernelPlan (numpy, no bfloat16 rounding). Read: ``steps`` (per node
            ``(kernel, attrs, input_slots, outputs, frees)``, ``outputs`` holding
            ``(index, slot, dtype, rounds)`` per stored output), ``input_count``, ``template``
            (constants in their slots), ``input_dtypes``, ``input_shapes``, ``output_slots``,
            ``output_dtypes``, ``output_shapes``, ``slot_shapes`` and ``descriptions``.
        directs: per step, the DirectForm its node uses, or None to call the kernel.
        finished_steps: the steps whose kernel returns finished results (``kernels.register``'s
            ``finished_results``): C-contiguous arrays of the recorded dtypes and shapes.
        finish: ``finish(result, dtype, shape, position)``, the executor's conversion of a result to
            a C-contiguous array of the recorded output's dtype and shape (or its error).

    Returns:
        the StraightLinePlan; its ``function(inputs)`` returns the finished output arrays.
    """
    input_count = compiled.input_count
    writer = _Writer(compiled)
    for step_index, (_, _, _, outputs, _) in enumerate(compiled.steps):
        for index, slot, dtype, _ in outputs:
            writer.name_node_output(
                slot, f"node_{step_index}" if index == 0 else f"node_{step_index}_output_{index}", dtype
            )
    unpacked = ", ".join(writer.slot_name(slot) for slot in range(1, 1 + input_count))
    writer.emit(f"{unpacked}{',' if input_count == 1 else ''} = inputs" if input_count else "pass")
    for step_index, (step, direct) in enumerate(zip(compiled.steps, directs)):
        writer.emit(f"# {compiled.descriptions[step_index]}")
        if direct is not None:
            _write_direct_call(writer, step_index, step, direct)
        else:
            _write_kernel_call(writer, step_index, step, step_index in finished_steps)
        frees = step[4]
        if frees:
            writer.emit(f"{' = '.join(writer.slot_name(slot) for slot in frees)} = None  # last read above")
    _write_outputs(writer, compiled)
    writer.namespace["finish"] = finish
    bound = "".join(f", {name}={name}" for name in writer.namespace if name not in _FIXED)
    header = f"def run_plan(inputs, *, numpy=numpy, ndarray=ndarray, asarray=asarray{bound}):"
    source = "\n".join([header] + writer.lines) + "\n"
    # The header is line 1, so body line n (0-based) is source line n + 2.
    line_steps = {position + 2: step for position, step in enumerate(writer.line_steps) if step is not None}
    return StraightLinePlan(source, dict(writer.namespace), line_steps)


def _write_direct_call(writer: "_Writer", step_index: int, step: tuple, direct) -> None:
    """``node_3 = add(node_1, input_2)`` and the checks of its result."""
    _, _, input_slots, outputs, _ = step
    name = writer.bind(direct.function, _readable_name(direct.function))
    if direct.output_shape:
        call = f"{name}({writer.slot_name(input_slots[0])}, {writer.slot_shapes[outputs[0][1]]!r})"
    else:
        call = f"{name}({', '.join(writer.slot_name(slot) for slot in input_slots)})"
    if not outputs:
        writer.emit(call, step_index)  # nothing reads the result; the call still runs (and may raise)
        return
    ((_, slot, dtype, _),) = outputs
    target = writer.slot_name(slot)
    writer.emit(f"{target} = {call}", step_index)
    shape = writer.slot_shapes[slot]
    if shape == ():
        # numpy functions return scalars (not arrays) only for 0-d results.
        writer.emit(f"if type({target}) is not ndarray: {target} = asarray({target})", step_index)
    result_dtype, fresh_shape = _direct_result(direct, [writer.facts(slot) for slot in input_slots])
    if result_dtype is None or result_dtype != dtype:  # (np.dtype equals None when it is float64)
        _write_cast(writer, step_index, target, dtype)
    elif fresh_shape == shape and sum(dim > 1 for dim in shape) <= 1:
        # A new array whose dims are all 1 but at most one is C-contiguous in any memory order.
        writer.finished_slots.add(slot)


def _write_kernel_call(writer: "_Writer", step_index: int, step: tuple, finished: bool) -> None:
    """``results = kernel(numpy, [inputs], attributes)``, then each stored output and its checks
    (none for a kernel that returns finished results)."""
    kernel, attrs, input_slots, outputs, _ = step
    kernel_name = writer.bind(kernel, f"{_snake_case(getattr(kernel, '__name__', 'kernel'))}_kernel")
    attributes_name = writer.bind(attrs, f"attributes_{step_index}")
    arguments = ", ".join(writer.slot_name(slot) for slot in input_slots)
    call = f"{kernel_name}(numpy, [{arguments}], {attributes_name})"
    if not outputs:
        writer.emit(call, step_index)
        return
    writer.emit(f"results = {call}", step_index)
    for index, slot, dtype, _ in outputs:
        target = writer.slot_name(slot)
        writer.emit(f"{target} = results[{index}]", step_index)
        if finished:
            writer.finished_slots.add(slot)
            continue
        writer.emit(f"if type({target}) is not ndarray: {target} = asarray({target})", step_index)
        _write_cast(writer, step_index, target, dtype)


# numpy >= 2 chooses a ufunc's loop from its inputs' dtypes alone (NEP 50); older versions look at
# the values of 0-d arrays, so there no result dtype is known before the call.
_DTYPES_DECIDE_LOOPS = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def _direct_result(direct, input_facts: list) -> tuple:
    """What a direct form returns for arrays of these (dtype, shape) facts, as far as it is certain:
    ``(dtype or None, shape of a newly allocated result or None)``.

    A numpy ufunc's result dtype is its resolved loop's (given the input dtypes); an elementwise
    ufunc (no core dimensions) also returns a new array of the inputs' broadcast shape. A form
    called with the recorded output shape only reshapes its first input: same dtype, maybe a view.
    """
    if any(facts is None for facts in input_facts):
        return None, None
    sizes_known = all(shape is not None and None not in shape for _, shape in input_facts)
    dtypes = tuple(dtype for dtype, _ in input_facts)
    if direct.output_shape:
        return dtypes[0], None
    function = direct.function
    if (
        not _DTYPES_DECIDE_LOOPS
        or not isinstance(function, np.ufunc)
        or function.nout != 1
        or function.nin != len(dtypes)
    ):
        return None, None
    try:
        result_dtype = function.resolve_dtypes(dtypes + (None,))[-1]
    except (TypeError, ValueError):  # no loop for these dtypes: the call itself will say so
        return None, None
    if function.signature is not None or not sizes_known:
        return result_dtype, None
    try:
        return result_dtype, np.broadcast_shapes(*(shape for _, shape in input_facts))
    except ValueError:
        return result_dtype, None


def _write_cast(writer: "_Writer", step_index: int, target: str, dtype: np.dtype) -> None:
    # Builtin numpy dtypes are singletons, so the identity test settles the usual case.
    name = writer.bind(dtype, f"dtype_{dtype.name}")
    writer.emit(
        f"if {target}.dtype is not {name} and {target}.dtype != {name}: {target} = {target}.astype({name})", step_index
    )


def _write_outputs(writer: "_Writer", compiled) -> None:
    """The returned list: every output a C-contiguous array of its recorded shape and dtype."""
    writer.emit("# the outputs, as C-contiguous arrays of their recorded shapes")
    returned = []
    for position, slot in enumerate(compiled.output_slots):
        name = writer.slot_name(slot)
        dtype = compiled.output_dtypes[position]
        shape = compiled.output_shapes[position]
        finished = f"finish({name}, {writer.bind(dtype, f'dtype_{dtype.name}')}, {shape!r}, {position})"
        if slot in writer.finished_slots:
            returned.append(name)  # known at compile time to be a C-contiguous array of the recorded shape
        elif writer.is_node_output(slot) and shape is None:
            # Compiled for every size: the caller checks shapes; only the layout remains to fix.
            writer.emit(f"if not {name}.flags.c_contiguous: {name} = {finished}")
            returned.append(name)
        elif writer.is_node_output(slot):
            # A node's result already has the recorded dtype: only its layout and shape remain to check.
            writer.emit(f"if {name}.shape != {shape!r} or not {name}.flags.c_contiguous: {name} = {finished}")
            returned.append(name)
        else:
            returned.append(finished)  # a fed input or a constant returned as it is
    writer.emit(f"return [{', '.join(returned)}]")


_FIXED = {"numpy": np, "ndarray": np.ndarray, "asarray": np.asarray}


class _Writer:
    """The generated body's lines, the names of slots, and the objects the function binds."""

    def __init__(self, compiled):
        self.input_count = input_count = compiled.input_count
        self.template = compiled.template
        self.slot_shapes = compiled.slot_shapes
        self.input_dtypes = compiled.input_dtypes
        self.input_shapes = compiled.input_shapes
        self.slot_dtypes: dict = {}
        # Node outputs known to be C-contiguous arrays of their recorded dtype and shape when written.
        self.finished_slots: set = set()
        self.lines: list[str] = []
        self.line_steps: list = []  # per body line, the step it belongs to (None: none)
        self.namespace: dict = dict(_FIXED)
        self.names_by_id: dict = {}
        self.node_outputs: dict = {}
        # Names of fed inputs and node outputs are reserved, so no bound object can shadow them.
        self.taken = set(self.namespace) | {"inputs", "results", "run_plan", "finish", "None"}
        self.taken.update(f"input_{position}" for position in range(input_count))

    def emit(self, text: str, step_index: int | None = None) -> None:
        """Appends a body line; a line of a node's step maps errors raised there to that node."""
        self.lines.append("    " + text)
        self.line_steps.append(step_index)

    def name_node_output(self, slot: int, name: str, dtype: np.dtype) -> None:
        self.node_outputs[slot] = name
        self.slot_dtypes[slot] = dtype
        self.taken.add(name)

    def facts(self, slot: int) -> tuple | None:
        """The dtype and shape a slot's array has when the generated code reads it (None: unknown).

        Fed inputs have their recorded ones (the executor's contract), node outputs theirs (the
        code casts where it cannot prove the dtype), constants are the arrays themselves.
        """
        if slot == 0:
            return None
        if slot <= self.input_count:
            return self.input_dtypes[slot - 1], self.input_shapes[slot - 1]
        if slot in self.node_outputs:
            return self.slot_dtypes[slot], self.slot_shapes[slot]
        constant = self.template[slot]
        return (constant.dtype, constant.shape) if type(constant) is np.ndarray else None

    def is_node_output(self, slot: int) -> bool:
        return slot in self.node_outputs

    def slot_name(self, slot: int) -> str:
        if slot == 0:
            return "None"
        if slot <= self.input_count:
            return f"input_{slot - 1}"
        name = self.node_outputs.get(slot)
        if name is not None:
            return name
        return self.bind(self.template[slot], f"constant_{slot - self.input_count - 1}")

    def bind(self, value, preferred: str) -> str:
        """The name the generated function uses for ``value`` (one name per object)."""
        name = self.names_by_id.get(id(value))
        if name is not None:
            return name
        name = preferred
        number = 2
        while name in self.taken:
            name = f"{preferred}_{number}"
            number += 1
        self.taken.add(name)
        self.names_by_id[id(value)] = name
        self.namespace[name] = value
        return name


def _readable_name(function) -> str:
    name = getattr(function, "__name__", None)
    return _snake_case(name) if name and not name.startswith("<") else "direct"


def _snake_case(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    name = re.sub(r"\W+", "_", name).strip("_") or "function"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = "f_" + name
    return name


# ------------------------------------------------------------------ floating-point error state
# np.errstate(all="ignore") costs about 2 us a use, most of it building numpy's error-state object.
# numpy >= 2 keeps that object in a context variable: the ignoring variant of each state met is
# built once, and a run only sets and resets the variable. Older numpy falls back to np.errstate.

try:
    # A private numpy name that its stubs do not declare (the try falls back where it is missing).
    from numpy._core._ufunc_config import _extobj_contextvar as _error_state  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - numpy < 2
    _error_state = None

_ignoring_states: dict = {}
register_cache("ignoring float-error states", _ignoring_states.clear)


def ignore_float_errors():
    """Makes numpy ignore floating-point errors in this context; returns the token to restore with."""
    if _error_state is None:
        state = np.errstate(all="ignore")
        state.__enter__()
        return state
    current = _error_state.get()
    ignoring = _ignoring_states.get(current)
    if ignoring is None:
        with np.errstate(all="ignore"):
            ignoring = _error_state.get()
        if len(_ignoring_states) > 64:
            _ignoring_states.clear()
        _ignoring_states[current] = ignoring
    return _error_state.set(ignoring)


def restore_float_errors(token) -> None:
    """Restores the error state ``ignore_float_errors`` replaced."""
    if _error_state is None:
        token.__exit__(None, None, None)
    else:
        _error_state.reset(token)
