"""Module -> ONNX: trace a module with the recording runtime and write the recorded graph.

Parameters and persistent buffers become initializers named exactly by their ``state_dict``
keys, so ``import_.from_onnx`` rebuilds the same module tree and ``load_state_dict`` works on
either side. Dynamic axes are found by tracing twice at two sizes: a structural constant (a
reshape target, an expand shape) that follows the size of a dynamic input axis is replaced by a
small subgraph reading that size from the input's ``Shape``, so ``x.view(x.size(0), -1)`` exports
as a graph that runs at any batch size.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import onnx
from onnx import helper

from ..ir.plan import IR_VERSION, build_model, plan as plan_of
from ..runtime.depth import unbounded_depth
from ..runtime.creation import as_tensor
from ..runtime.grad_mode import no_grad
from ..runtime.internal import realize_values, value_of
from ..runtime.sessions import newest_onnxruntime_opset
from ..runtime.tensor import Tensor
from .dynamic_shapes import make_shapes_dynamic, widen_unit_axes
from .opset_conversion import convert_opset

__all__ = ["to_onnx", "max_opset_version", "MIN_OPSET_VERSION"]

MIN_OPSET_VERSION = 17
_TWO_GIGABYTES = 2**31


def max_opset_version() -> int:
    """The newest default-domain opset the installed onnxruntime loads (found by trying, once)."""
    return newest_onnxruntime_opset()


def declared_opset(proto: onnx.ModelProto) -> int:
    return next(entry.version for entry in proto.opset_import if entry.domain in ("", "ai.onnx"))


class _Trace:
    """One traced call: the plan of its outputs and what each plan input is."""

    def __init__(self, plan, roles, output_structure, arg_values, arg_shapes, output_shapes):
        self.plan = plan
        self.roles = roles
        self.output_structure = output_structure
        self.arg_values = arg_values
        self.arg_shapes = arg_shapes
        self.output_shapes = output_shapes


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
    with no_grad(), unbounded_depth():
        outputs = model(*args)
    flat, structure = _flatten_outputs(outputs)
    plan = plan_of([value_of(tensor) for tensor in flat], include_shared=False)
    arg_ids = {id(value): name for value, name in zip(arg_values, input_names)}
    state_ids: dict = {}
    for key, tensor in state.items():
        state_ids.setdefault(id(value_of(tensor)), key)
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
    return _Trace(plan, roles, structure, arg_values, [v.shape for v in arg_values], [tensor.shape for tensor in flat])


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

    Args:
        model: the module to trace; it is called once (twice with ``dynamic_axes``) under no_grad.
        args: a tensor or tuple of tensors (or numpy arrays): the example inputs.
        f: optional path or binary file to write the model to.
        input_names, output_names: graph input and output names (default ``input_0``, ``output_0``...).
        dynamic_axes: ``{name: {axis: "symbol"}}`` or ``{name: [axis, ...]}``: axes that may change
            size; the exported graph computes every size-dependent shape from its inputs.
        opset_version: default-domain opset, from 17 to ``max_opset_version()``; by default the
            opset the recorded ops need: 21 (onnxnn's), or newer for a model imported at a newer
            opset whose nodes need it.
        training: export in training mode (dropout active, batch statistics); by default a
            module in training mode is exported as is, with a warning, as PyTorch does.
        external_data: True to always store weights as external data next to ``f``, an int to do
            it above that many bytes; models over 2 GB always use external data.

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
    is_module = hasattr(model, "state_dict") and hasattr(model, "train")
    previous_mode = getattr(model, "training", False)
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
    try:
        trace = _trace(model, args, input_names, state)
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
                lambda resized: _trace(model, resized, input_names, state),
            )
    finally:
        if is_module and training:
            model.train(previous_mode)
    recorded = declared_opset(proto)
    if opset is None:
        opset = recorded  # what the recorded ops need: onnxnn's opset, or an imported model's newer one
    if opset != recorded:
        proto = convert_opset(proto, opset)
        proto.ir_version = IR_VERSION
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

    ``serialized``: ``proto.SerializeToString()`` when the caller has it already.
    """
    size = len(serialized) if serialized is not None else proto.ByteSize()
    threshold = None
    if external_data is True:
        threshold = 0
    elif isinstance(external_data, int) and not isinstance(external_data, bool):
        threshold = external_data if size > external_data else None
    if size >= _TWO_GIGABYTES and threshold is None:
        threshold = 1024
    if threshold is None:
        data = serialized if serialized is not None else proto.SerializeToString()
        if hasattr(f, "write"):
            f.write(data)
        else:
            with open(f, "wb") as handle:
                handle.write(data)
        return
    if hasattr(f, "write"):
        raise ValueError("to_onnx: a model written with external data needs a path, not a file object")
    path = os.fspath(f)
    location = os.path.basename(path) + ".data"
    onnx.save_model(
        proto,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=max(threshold, 0),
    )
    # save_model moved the weights out of ``proto``; load them back so the caller's proto is whole.
    onnx.load_external_data_for_model(proto, os.path.dirname(os.path.abspath(path)))
