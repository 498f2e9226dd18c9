"""Module -> ONNX: trace a module with the recording runtime and write the recorded graph.

Parameters and persistent buffers become initializers named exactly by their ``state_dict``
keys, so ``import_.from_onnx`` rebuilds the same module tree and ``load_state_dict`` works on
either side. Dynamic axes are found by tracing again at other sizes (``dynamic_shapes``): a
structural constant (a reshape target, an expand shape) that follows the size of a dynamic input axis
is replaced by a small subgraph reading that size from the input's ``Shape``, so
``x.view(x.size(0), -1)`` exports as a graph that runs at any batch size. A trace that reads data
computed from the inputs (``x[x > 0]``, ``bool(x.sum() > 0)``), or a graph input that ends up read by
no node (packed sequence lengths), warns with a ``TracerWarning``: the graph holds what the example's
data decided. So does a random draw in the forward (``randn_like``, ``normal_``, ``multinomial``): its
values are written as constants, and every run of the file repeats them (dropout alone is written as
an ONNX ``Dropout`` node).
"""

from __future__ import annotations

import errno
import os
import traceback
import warnings

import numpy as np
import onnx
from onnx import helper
from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

from ..ir.mode import RecordingTrace, traced
from ..ir.plan import IR_VERSION, plan as plan_of
from ..ir.random import DrawWatcher
from ..ir.model_building import build_model
from ..runtime.depth import unbounded_depth
from ..runtime.creation import as_tensor
from ..runtime.grad_mode import no_grad
from ..ir.graph import constant
from ..runtime.internal import realize_values, rebind, restore_state, save_state, value_of
from ..runtime.sessions import newest_onnxruntime_opset
from ..runtime.tensor import Tensor
from .atomic_write import _naming, staging_folder, write_atomically
from .dynamic_shapes import make_shapes_dynamic, widen_unit_axes
from .graph_editing import name_constants_anonymously
from .onnxruntime_optimizer_guards import guard_against_onnxruntime_optimizers
from .opset_conversion import convert_opset
from .opset_types import opset_for_types

__all__ = ["to_onnx", "max_opset_version", "MIN_OPSET_VERSION", "TracerWarning"]

MIN_OPSET_VERSION = 17
_TWO_GIGABYTES = 2**31
# The fewest bytes of a tensor stored as external data (onnx's own default): onnxruntime cannot load a
# model whose structural constants (a Reduce's axes, a Reshape's shape) are external.
_SMALLEST_EXTERNAL_TENSOR = 1024


def max_opset_version() -> int:
    """The newest default-domain opset the installed onnxruntime loads (found by trying, once)."""
    return newest_onnxruntime_opset()


def declared_opset(proto: onnx.ModelProto) -> int:
    return next(entry.version for entry in proto.opset_import if entry.domain in ("", "ai.onnx"))


class TracerWarning(UserWarning):
    """The export's trace read tensor data (``torch.jit.TracerWarning``'s counterpart): what that data
    decided (a branch, a size, the positions a mask selects, packed sequence lengths) is written into
    the graph as constants, so the exported model may be wrong for other input data."""


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _DataReads(RecordingTrace, DrawWatcher):
    """A recording trace that keeps where the forward read tensor data: ``reads`` holds, for each
    read, how many nodes were recorded before it and the call outside onnxnn that made it; ``draws``
    the call outside onnxnn of each random draw (its values become constants of the graph)."""

    __slots__ = ("_read", "reads", "draws")

    def random_drawn(self) -> None:
        if not hasattr(self, "draws"):
            self.draws: list[str] = []
        self.draws.append(_caller_outside_onnxnn())

    @property  # type: ignore[override]  # a slot of RecordingTrace, watched here
    def read_data(self) -> bool:
        return self._read

    @read_data.setter
    def read_data(self, read: bool) -> None:
        if read:
            if not hasattr(self, "reads"):
                self.reads: list[tuple[int, str]] = []
            self.reads.append((len(self.records), _caller_outside_onnxnn()))
        self._read = read

    def baking_read(self, arg_values: list) -> str | None:
        """Where the forward read data computed from its arguments, if it did: such a value is
        computed while tracing, so the graph holds it as a constant (``x[x > 0]``'s positions,
        ``bool(x.sum() > 0)``). Reading an argument itself bakes nothing (``embedding`` checks its
        indices); what Python makes of it shows as a graph input read by no node."""
        derived = {id(value) for value in arg_values}
        for position, (node, outputs) in enumerate(self.records):
            if not any(value is not None and id(value) in derived for value in node.inputs):
                continue
            derived.update(id(value) for value in outputs if value is not None)
            if any(value is not None and value.data is not None for value in outputs):
                return next((where for count, where in getattr(self, "reads", []) if count > position), "inside onnxnn")
        return None


def _caller_outside_onnxnn() -> str:
    """``file:line (code), in onnxnn's function``: the innermost call from outside the package."""
    stack = traceback.extract_stack()
    for index in range(len(stack) - 1, 0, -1):
        if not os.path.abspath(stack[index].filename).startswith(_PACKAGE + os.sep):
            frame, called = stack[index], stack[index + 1] if index + 1 < len(stack) else None
            inside = f", in onnxnn's {called.name}" if called is not None else ""
            return f"{frame.filename}:{frame.lineno} ({(frame.line or '').strip()}){inside}"
    return "inside onnxnn"


class _Trace:
    """One traced call: the plan of its outputs, what each plan input is, and where the forward
    first read tensor data (None where it never did)."""

    def __init__(self, plan, roles, output_structure, arg_values, arg_shapes, output_shapes, data_read=None, draws=()):
        self.plan = plan
        self.roles = roles
        self.output_structure = output_structure
        self.arg_values = arg_values
        self.arg_shapes = arg_shapes
        self.output_shapes = output_shapes
        self.data_read = data_read
        self.draws = draws


def _flatten_outputs(outputs) -> tuple[list[Tensor], object]:
    if isinstance(outputs, Tensor):
        return [outputs], "tensor"
    if isinstance(outputs, (list, tuple)):
        flat, structure = [], []
        for item in outputs:
            inner, inner_structure = _flatten_outputs(item)
            flat.extend(inner)
            structure.append(inner_structure)
        return flat, (type(outputs).__name__, structure)
    if isinstance(outputs, dict):
        flat, structure = [], []
        for key, item in outputs.items():
            inner, inner_structure = _flatten_outputs(item)
            flat.extend(inner)
            structure.append((key, inner_structure))
        return flat, ("dict", structure)
    raise TypeError(
        f"to_onnx: model outputs must be tensors or (nested) tuples/lists/dicts of tensors, "
        f"got {type(outputs).__name__}"
    )


def _as_arguments(args) -> tuple:
    if isinstance(args, Tensor) or not isinstance(args, (tuple, list)):
        args = (args,)
    converted = []
    for index, arg in enumerate(args):
        if isinstance(arg, Tensor):
            converted.append(arg.detach())
        elif isinstance(arg, np.ndarray):
            converted.append(as_tensor(arg))
        else:
            raise TypeError(f"to_onnx: argument {index} must be a Tensor or numpy array, got {type(arg).__name__}")
    return tuple(converted)


def _trace(model, args: tuple, input_names: list[str], state: dict) -> _Trace:
    arg_values = [value_of(arg) for arg in args]
    realize_values(args)
    # Each state tensor's value as the forward starts: one the forward updates in place (a clamp_,
    # a running average) was read under this value, which keeps its name in the graph.
    state_ids: dict = {}
    for key, tensor in state.items():
        state_ids.setdefault(id(value_of(tensor)), key)
    reads = _DataReads()
    with no_grad(), unbounded_depth(), traced(reads):
        outputs = model(*args)
    flat, structure = _flatten_outputs(outputs)
    plan = plan_of([value_of(tensor) for tensor in flat], include_shared=False)
    arg_ids = {id(value): name for value, name in zip(arg_values, input_names)}
    # An output that is an input or a state tensor itself (nn.Identity, an eval Dropout, a same-shape
    # view) is computed by no node: it joins the plan's inputs, so that the graph passes the input
    # (or initializer) on by an Identity instead of holding the example's value as a constant.
    fed = set(map(id, plan.inputs))
    for tensor in flat:
        value = value_of(tensor)
        if value.data is not None and id(value) not in fed and (id(value) in arg_ids or id(value) in state_ids):
            plan.inputs.append(value)
            fed.add(id(value))
    roles, constants = [], 0
    # A re-exported model may hold state named like onnxnn's anonymous constants.
    taken = set(input_names) | set(state)
    for value in plan.inputs:
        if id(value) in arg_ids:
            roles.append(("input", arg_ids[id(value)]))
        elif id(value) in state_ids:
            roles.append(("initializer", state_ids[id(value)]))
        else:
            while f"onnxnn::constant_{constants}" in taken:
                constants += 1
            roles.append(("initializer", f"onnxnn::constant_{constants}"))
            constants += 1
    shapes = [value.shape for value in arg_values]
    data_read = reads.baking_read(arg_values)
    draws = tuple(dict.fromkeys(getattr(reads, "draws", ())))  # each call site once, in order
    return _Trace(plan, roles, structure, arg_values, shapes, [tensor.shape for tensor in flat], data_read, draws)


def _warn_of_data_reads(proto: onnx.ModelProto, trace: _Trace, input_names: list[str]) -> None:
    """Warns where the graph holds what the example's data decided (it would be silently wrong for
    other data): the forward read data while traced, or a graph input is read by no node; and where
    it holds random draws as constants."""
    if trace.data_read is not None:
        warnings.warn(
            f"to_onnx: the forward read tensor data while it was traced, at {trace.data_read}; what that "
            "data decided (a Python branch, a size, the positions a mask selects, packed sequence lengths) "
            "is written into the graph as constants, so the exported model may be wrong for other data",
            TracerWarning,
            stacklevel=3,
        )
    if trace.draws:
        warnings.warn(
            f"to_onnx: the forward drew random numbers while it was traced, at {'; '.join(trace.draws)}; the "
            "drawn values are written into the graph as constants, so every run of the exported model "
            "repeats them (only dropout is exported as a node that draws on each run)",
            TracerWarning,
            stacklevel=3,
        )
    read = {name for node in proto.graph.node for name in node.input}
    unread = [name for name in input_names if name not in read]
    if unread:
        warnings.warn(
            f"to_onnx: the graph input(s) {unread} are read by no node of the exported graph: the forward "
            "ignores them, or read their data while traced (packed sequence lengths, a Python branch), so "
            "the exported model gives the results of the example's values whatever is passed",
            TracerWarning,
            stacklevel=3,
        )


def _saved_tensors(model) -> list:
    """What a trace may change of ``model``: each parameter and buffer (non-persistent ones too),
    with the state to put back."""
    unique = {id(tensor): tensor for tensor in (*model.parameters(), *model.buffers())}
    return [(tensor, save_state(tensor)) for tensor in unique.values()]


def _check_dynamic_axes(dynamic_axes: dict, input_names: list[str], args: tuple) -> None:
    """Refuses a dynamic axis outside its input's rank (it would wrap to another axis)."""
    for name, arg in zip(input_names, args):
        axes = dynamic_axes.get(name)
        if axes is None:
            continue
        rank = len(arg.shape)
        for axis in axes if not isinstance(axes, dict) else axes.keys():
            if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -rank <= axis < rank:
                raise ValueError(
                    f"to_onnx: dynamic_axes gives axis {axis!r} of input '{name}', which has {rank} "
                    f"dimension(s) (shape {list(arg.shape)})"
                )


def _untie_copies(state: dict) -> None:
    """Gives each state tensor that shares its value with another tensor (``copy.deepcopy`` of a
    layer, ``p.copy_(q)``: one immutable value, two parameters) a value of its own, so the trace
    reads each by its own name. A tensor registered twice (tied weights) stays one. The trace's
    ``_restore`` puts the shared values back."""
    owners: dict = {}
    for tensor in state.values():
        value = value_of(tensor)
        if owners.setdefault(id(value), tensor) is not tensor:
            rebind(tensor, constant(value.data, value.dtype, value.device))


def _restore(saved: list) -> None:
    for tensor, before in saved:
        # The trace's writes were recorded, never read by the user: undone, versions included, so
        # a graph that saved a buffer before the export can still be differentiated after it.
        restore_state(tensor, before, rewind_version=True)


def _output_names(given, count: int) -> list[str]:
    if given is None:
        return [f"output_{index}" for index in range(count)]
    given = list(given)
    if len(given) < count:
        given += [f"output_{index}" for index in range(len(given), count)]
    return given[:count]


def _order_graph_inputs(model: onnx.ModelProto, trace: _Trace, input_names: list[str]) -> None:
    """Graph inputs in argument order, unused arguments included (the signature stays stable)."""
    existing = {graph_input.name: graph_input for graph_input in model.graph.input}
    ordered = []
    for name, value in zip(input_names, trace.arg_values):
        if name in existing:
            ordered.append(existing[name])
        else:
            ordered.append(helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape))
    del model.graph.input[:]
    model.graph.input.extend(ordered)


def _order_initializers(model: onnx.ModelProto, state_keys: list[str]) -> None:
    """Initializers in ``state_dict`` order, then the anonymous constants."""
    rank = {key: position for position, key in enumerate(state_keys)}
    # Sorted in place: re-adding removed tensors would copy every weight (seconds for VGG's 0.5 GB).
    model.graph.initializer.sort(key=lambda tensor: rank.get(tensor.name, len(rank)))


def to_onnx(
    model,
    args,
    f=None,
    *,
    input_names=None,
    output_names=None,
    dynamic_axes=None,
    opset_version: int | None = None,
    training: bool = False,
    external_data: bool | int | None = None,
) -> onnx.ModelProto:
    """Exports a Module (or any callable over tensors) to an ONNX model.

    The graph is written for plain onnxruntime to serve at its default optimization level: the few
    patterns its graph optimizers are known to change the meaning of (or crash on) are written as
    equal computations they leave alone (``onnxnn/export/onnxruntime_optimizer_guards.py``).

    Args:
        model: the module to trace; it is called once under no_grad (with ``dynamic_axes``, once
            more per dynamic axis name and once more at far sizes). Its parameters and buffers are
            left as they were, whether the export succeeds or raises: a forward in training mode
            updates BatchNorm's running statistics, and each trace's updates are undone.
        args: a tensor or tuple of tensors (or numpy arrays): the example inputs.
        f: optional path or binary file to write the model to. A path is replaced in one step:
            a write that fails part-way leaves the file there before, and raises an OSError naming it.
        input_names, output_names: graph input and output names (default ``input_0``, ``output_0``...).
        dynamic_axes: ``{name: {axis: "symbol"}}`` or ``{name: [axis, ...]}``: axes that may change
            size; the exported graph computes every size-dependent shape from its inputs. A size it
            cannot write as such a computation (a pad to a multiple of 8) raises a RuntimeError
            naming the op and the axis.
        opset_version: default-domain opset, from 17 to ``max_opset_version()``; by default the
            opset the recorded ops need: 21 (onnxnn's), or newer for a model imported at a newer
            opset whose nodes need it.
        training: export in training mode (dropout active, batch statistics); by default a
            module in training mode is exported as is, with a warning, as PyTorch does.
        external_data: True to always store weights (tensors of 1 KiB or more; smaller constants such
            as a Reduce's axes stay in the file, where onnxruntime's shape inference reads them) as
            external data next to ``f``, an int to do it above that many bytes; models over 2 GB
            always use external data.

    Returns:
        The ``onnx.ModelProto`` (checked with ``onnx.checker.check_model(full_check=True)``).

    Example::

        >>> model = nn.Sequential(nn.Linear(4, 2), nn.ReLU())
        >>> proto = onnxnn.export.to_onnx(model, onnxnn.randn(1, 4), "model.onnx",
        ...                               input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    """
    opset = None if opset_version is None else int(opset_version)
    if opset is not None and not MIN_OPSET_VERSION <= opset <= max_opset_version():
        raise ValueError(
            f"to_onnx: opset_version {opset} is not supported; choose one from {MIN_OPSET_VERSION} "
            f"to {max_opset_version()} (the newest the installed onnxruntime runs)"
        )
    args = _as_arguments(args)
    input_names = list(input_names) if input_names is not None else [f"input_{i}" for i in range(len(args))]
    if len(input_names) != len(args):
        raise ValueError(f"to_onnx: {len(input_names)} input_names given for {len(args)} inputs")
    if dynamic_axes:
        _check_dynamic_axes(dynamic_axes, input_names, args)
    is_module = hasattr(model, "state_dict") and hasattr(model, "train")
    previous_mode = getattr(model, "training", False)
    # ``train(True)`` sets every submodule's flag: each is put back (a frozen BatchNorm stays in eval).
    modes = [(module, module.training) for module in model.modules()] if is_module else []
    if is_module:
        if training:
            model.train(True)
        elif previous_mode:
            warnings.warn(
                "to_onnx: the model is in training mode; it is exported as is (dropout and batch "
                "statistics included). Call model.eval() first for an inference graph.",
                UserWarning,
                stacklevel=2,
            )
    if dynamic_axes:
        args = widen_unit_axes(args, input_names, dynamic_axes)
    state = model.state_dict(keep_vars=True) if is_module else {}
    realize_values(state.values())
    saved = _saved_tensors(model) if is_module else []

    # A training graph keeps copies apart (PyTorch deduplicates initializers in eval exports only).
    untie = is_module and model.training
    if untie and any(getattr(module, "padding_idx", None) is not None for module in model.modules()):
        warnings.warn(  # as torch.onnx.export warns: a Gather has no row it leaves without gradient
            "to_onnx: a training export of an embedding with padding_idx: ONNX has no way to keep the "
            "padding row out of training, so a model trained from the file updates it",
            UserWarning,
            stacklevel=2,
        )

    def trace_once(arguments: tuple) -> _Trace:
        try:
            if untie:
                _untie_copies(state)
            return _trace(model, arguments, input_names, state)
        finally:  # every trace starts from the model's own state, and the export leaves it so
            _restore(saved)

    try:
        trace = trace_once(args)
        names_out = _output_names(output_names, len(trace.plan.outputs))
        proto = build_model(trace.plan, trace.roles, names_out, graph_name=type(model).__name__)
        _order_graph_inputs(proto, trace, input_names)
        _order_initializers(proto, list(state))
        if dynamic_axes:
            make_shapes_dynamic(
                proto,
                model,
                args,
                input_names,
                names_out,
                dynamic_axes,
                trace,
                trace_once,
            )
        _warn_of_data_reads(proto, trace, input_names)  # after the dynamic sizes' Shape nodes: they read inputs
    finally:
        if is_module and training:
            for module, mode in modes:
                module.training = mode
    recorded = declared_opset(proto)
    inferable = proto.ByteSize() < _TWO_GIGABYTES  # shape inference reads a serialized model
    chosen = opset is not None
    if opset is None:
        # What the recorded ops need (onnxnn's opset, or an imported model's newer one), or the
        # first opset defining them for their element types (bfloat16 Conv: 22).
        opset = opset_for_types(proto, recorded, max_opset_version(), chosen=False) if inferable else recorded
    if opset != recorded:
        proto = convert_opset(proto, opset)
        # The IR version the declared opsets need (onnx's table: opset 23 needs IR 11, 24 needs 12),
        # never below onnxnn's own.
        proto.ir_version = max(IR_VERSION, helper.find_min_ir_version_for(list(proto.opset_import), True))
    if chosen and inferable:
        opset_for_types(proto, opset, max_opset_version(), chosen=True)  # refuses an opset too old for the types
    guard_against_onnxruntime_optimizers(proto)
    name_constants_anonymously(proto, [*state, *input_names])
    # Serialized once, for the checker and the file: a large model's bytes take a second each.
    serialized = proto.SerializeToString()
    onnx.checker.check_model(serialized if len(serialized) < _TWO_GIGABYTES else proto, full_check=True)
    if f is not None:
        write_model(proto, f, external_data, serialized)
    return proto


def write_model(
    proto: onnx.ModelProto, f, external_data: bool | int | None = None, serialized: bytes | None = None
) -> None:
    """Writes ``proto`` to a path or binary file, with external data as ``to_onnx`` documents.

    A path is replaced in one step (as ``onnxnn.save`` replaces a checkpoint): a write that fails
    part-way (a full disk) leaves the file there before intact, and raises an OSError naming it.
    With external data, both files are written in a hidden folder beside the target first, then
    moved over the ``.data`` file and the model file, in that order: a full disk fails the writes,
    before either rename, and leaves both files as they were. That folder is named
    ``.<name>.<pid>.<random>.tmp``; one that a killed write left behind is removed by the next write
    of the same path, never one a live writer still uses.

    ``serialized``: ``proto.SerializeToString()`` when the caller has it already.
    """
    size = len(serialized) if serialized is not None else proto.ByteSize()
    threshold = None
    if external_data is True:
        threshold = _SMALLEST_EXTERNAL_TENSOR
    elif isinstance(external_data, int) and not isinstance(external_data, bool):
        threshold = external_data if size > external_data else None
    if size >= _TWO_GIGABYTES and threshold is None:
        threshold = _SMALLEST_EXTERNAL_TENSOR
    if threshold is None:
        data = serialized if serialized is not None else proto.SerializeToString()
        if hasattr(f, "write"):
            f.write(data)
            return

        def write(handle) -> None:
            handle.write(data)

        write_atomically(_existing_parent(f), write)
        return
    if hasattr(f, "write"):
        raise ValueError("to_onnx: a model written with external data needs a path, not a file object")
    _write_with_external_data(proto, _existing_parent(f), max(threshold, 0))


def _existing_parent(f) -> str:
    """``f``'s path; a missing folder is open()'s FileNotFoundError, as ``torch.onnx.export`` raises."""
    path = os.fspath(f)
    if not os.path.isdir(os.path.dirname(os.path.realpath(path))):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return path


def _write_with_external_data(proto: onnx.ModelProto, path: str, threshold: int) -> None:
    target = os.path.realpath(path)  # through a symlink, as open() would
    directory, name = os.path.split(target)
    location = name + ".data"
    # Staged beside the target (one filesystem, so the renames are atomic); a process killed
    # while writing leaves this hidden folder, never a half-written model, and the next write of
    # the target removes it (``atomic_write.staging_folder``).
    with staging_folder(target) as staging:
        weights_in = staging
        try:
            staged_model, staged_data = os.path.join(staging, name), os.path.join(staging, location)
            onnx.save_model(
                proto,
                staged_model,
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=location,
                size_threshold=threshold,
            )
            staged = [file for file in (staged_data, staged_model) if os.path.exists(file)]
            for file in staged:
                with open(file, "rb") as handle:
                    os.fsync(handle.fileno())
            # The data first: the model file that refers to it only once it is complete in place.
            for file in staged:
                os.replace(file, os.path.join(directory, os.path.basename(file)))
                weights_in = directory
        except OSError as error:
            raise _naming(error, target) from error
        finally:
            _take_back_weights(proto, weights_in)


def _initializers(graph: onnx.GraphProto):
    """The initializers ``save_model`` moves to external data: the graph's and its subgraphs'."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _initializers(attribute.g)
            for subgraph in attribute.graphs:
                yield from _initializers(subgraph)


def _take_back_weights(proto: onnx.ModelProto, directory: str) -> None:
    """Undoes what ``save_model`` did to ``proto`` (it moves the weights out), so the caller's proto is
    whole: a weight written to ``directory`` is read back, one only marked to be written keeps its bytes."""
    for tensor in _initializers(proto.graph):
        if not uses_external_data(tensor):
            continue
        if tensor.HasField("raw_data"):
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.external_data[:]
        else:
            load_external_data_for_tensor(tensor, directory)
