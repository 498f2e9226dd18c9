"""Reading and validating ONNX models: files, bytes or protos, external data, opset conversion.

Every check runs before anything is built, so a bad file raises a clear error and leaves nothing
half made (DESIGN principle 8). Loading never executes code from the file and never reads a file
outside the model's folder (``external_data``); every refusal is a :class:`ModelLoadError` naming
the file (or "the given bytes") and what is wrong.
"""

from __future__ import annotations

import os
from typing import Iterator

import onnx
from google.protobuf.message import DecodeError
from onnx import version_converter

from ..errors import ModelLoadError
from ..ir.plan import OPSET_VERSION
from ..ir.attributes import auto_pad_mode, graphs_within
from ..ir.model_building import names_read
from .attributes import attribute_subgraphs
from .external_data import load_external_data
from .validation import adopt_onnxruntime_ops, check_domains, check_shapes, check_strings

__all__ = ["load_model", "default_opset", "convert_opset", "DEFAULT_DOMAINS"]

# The default ONNX domain may be spelled either way.
DEFAULT_DOMAINS = ("", "ai.onnx")


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError, UnicodeDecodeError) as error:
        raise ModelLoadError(
            f"not a valid ONNX model: {source} could not be parsed as an ONNX ModelProto "
            f"(truncated or corrupt file?): {error}"
        ) from None
    # An empty or foreign protobuf may parse without error: a model has an IR version and a graph.
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelLoadError(
            f"not a valid ONNX model: {source} has no IR version or no graph "
            f"(ir_version={model.ir_version}); is it an ONNX file?"
        )
    return model


def _check(model: onnx.ModelProto, path: str | None, source: str) -> None:
    try:
        if path is not None and model.ByteSize() > 2**31 - 1:
            onnx.checker.check_model(path)  # protos over 2 GB can only be checked from their file
        else:
            onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, RuntimeError, ValueError, UnicodeDecodeError) as error:
        message = " ".join(str(error).split())
        raise ModelLoadError(f"{source}: the ONNX model fails onnx.checker.check_model: {message}") from None


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain (``ai.onnx``) opset version, or None when it imports none."""
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            return entry.version
    return None


def _signature(schema) -> tuple:
    """What a node can say to an op: input/output names and arity, attribute names, types, defaults."""
    attributes = tuple(
        sorted(
            (name, int(attribute.type), attribute.required, attribute.default_value.SerializeToString())
            for name, attribute in schema.attributes.items()
        )
    )
    inputs = tuple((formal.name, int(formal.option)) for formal in schema.inputs)
    outputs = tuple((formal.name, int(formal.option)) for formal in schema.outputs)
    return attributes, inputs, outputs, schema.min_input, schema.max_input, schema.min_output, schema.max_output


def _graph_op_types(graph: onnx.GraphProto) -> Iterator[str]:
    for node in graph.node:
        if node.domain in DEFAULT_DOMAINS:
            yield node.op_type
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                yield from _graph_op_types(subgraph)


def _changed_ops(model: onnx.ModelProto, source: int, target: int) -> list[str]:
    """Default-domain ops of the model whose signature differs between two opsets.

    Ops whose schema only widened its type constraints (opset 22 added bfloat16 to many ops)
    mean the same at both opsets; ops that do not exist at the target opset are left out (they
    run at their own opset).
    """
    changed = set()
    for op_type in set(_graph_op_types(model.graph)):
        try:
            old = onnx.defs.get_schema(op_type, source, "")
        except onnx.defs.SchemaError:
            changed.add(op_type)
            continue
        try:
            new = onnx.defs.get_schema(op_type, target, "")
        except onnx.defs.SchemaError:
            # An op newer than the target opset keeps its own opset: the importer replays its
            # ONNX function body, or runs it at that opset in onnxruntime.
            continue
        if old.since_version != new.since_version and _signature(old) != _signature(new):
            changed.add(op_type)
    return sorted(changed)


def _same_type(declared: onnx.TypeProto, converted: onnx.TypeProto) -> bool:
    """Whether ``converted`` keeps everything ``declared`` says (it may add inferred shapes)."""
    kind = declared.WhichOneof("value")
    if kind != converted.WhichOneof("value"):
        return False
    if kind == "tensor_type":
        old, new = declared.tensor_type, converted.tensor_type
        if old.elem_type != new.elem_type:
            return False
        if not old.HasField("shape"):
            return True
        if not new.HasField("shape") or len(old.shape.dim) != len(new.shape.dim):
            return False
        return all(
            not a.HasField("dim_value") or a.dim_value == b.dim_value for a, b in zip(old.shape.dim, new.shape.dim)
        )
    if kind in ("sequence_type", "optional_type"):
        return _same_type(getattr(declared, kind).elem_type, getattr(converted, kind).elem_type)
    return True


def _same_interface(original: onnx.ModelProto, converted: onnx.ModelProto) -> bool:
    pairs = list(zip(original.graph.input, converted.graph.input)) + list(
        zip(original.graph.output, converted.graph.output)
    )
    return (
        len(original.graph.input) == len(converted.graph.input)
        and len(original.graph.output) == len(converted.graph.output)
        and all(a.name == b.name and _same_type(a.type, b.type) for a, b in pairs)
    )


def _coerce_old_hardmax(graph: onnx.GraphProto) -> None:
    """Rewrites each Hardmax of opset < 13 as the 2-D op it was: Flatten at its axis, Hardmax along the
    flattened rows, Reshape back. Hardmax-1/11 took everything from ``axis`` on as one row; Hardmax-13
    works along ``axis`` alone, and onnx's version converter carries the node over unchanged (it
    adapts Softmax and LogSoftmax, not Hardmax), which would change what the model computes."""
    rewritten = []
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                _coerce_old_hardmax(subgraph)
        if node.op_type != "Hardmax" or node.domain not in DEFAULT_DOMAINS:
            rewritten.append(node)
            continue
        axis = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 1)
        source, result = node.input[0], node.output[0]
        rows, shape = f"{result}__hardmax_rows", f"{result}__hardmax_shape"
        rewritten += [
            onnx.helper.make_node("Flatten", [source], [rows + "_in"], name=f"{node.name}__flatten", axis=axis),
            onnx.helper.make_node("Hardmax", [rows + "_in"], [rows], name=node.name, axis=1),
            onnx.helper.make_node("Shape", [source], [shape], name=f"{node.name}__shape"),
            onnx.helper.make_node("Reshape", [rows, shape], [result], name=f"{node.name}__reshape"),
        ]
    del graph.node[:]
    graph.node.extend(rewritten)


def _with_old_hardmax_coerced(model: onnx.ModelProto, source: int) -> onnx.ModelProto:
    """``model``, or where it holds a Hardmax older than opset 13, a copy at opset 11 or more (whose
    Flatten takes a negative axis and Reshape a shape input) with those Hardmax nodes coerced."""
    if source >= 13 or "Hardmax" not in set(_graph_op_types(model.graph)):
        return model
    coerced = onnx.ModelProto()
    coerced.CopyFrom(model if source >= 11 else version_converter.convert_version(model, 11))
    _coerce_old_hardmax(coerced.graph)
    return coerced


def _old_training_batch_normalizations(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The BatchNormalization nodes of ``graph`` (and its subgraphs) with more than one output: before
    opset 14, the training form (outputs Y, running mean and variance, saved mean and variance)."""
    for each in graphs_within(graph):
        for node in each.node:
            if node.op_type == "BatchNormalization" and node.domain in DEFAULT_DOMAINS and len(node.output) > 1:
                yield node


def _without_unread_saved_batch_statistics(model: onnx.ModelProto, source: int) -> tuple[onnx.ModelProto, set]:
    """``model``, or where a BatchNormalization older than opset 14 has its saved mean and variance
    outputs (the training form torch.onnx.export writes at opset 13) and nothing reads them, a copy
    without them (onnx's 13 -> 14 adapter refuses them: BatchNormalization-14 has none); and the first
    output names of the old training-form nodes, which ``_in_training_mode`` marks once converted."""
    if source >= 14:
        return model, set()
    training = {node.output[0] for node in _old_training_batch_normalizations(model.graph)}
    if not any(len(node.output) > 3 for node in _old_training_batch_normalizations(model.graph)):
        return model, training
    trimmed = onnx.ModelProto()
    trimmed.CopyFrom(model)
    read = names_read(trimmed.graph.node) | {output.name for output in trimmed.graph.output}
    for node in _old_training_batch_normalizations(trimmed.graph):
        if len(node.output) > 3 and not read.intersection(node.output[3:]):
            del node.output[3:]
    return trimmed, training


def _in_training_mode(graph: onnx.GraphProto, training: set) -> None:
    """Gives the converted training-form BatchNormalization nodes (named by their first output)
    ``training_mode=1``, which onnx's adapter leaves at its default 0, the inference form."""
    for node in _old_training_batch_normalizations(graph):
        if node.output[0] in training and not any(attribute.name == "training_mode" for attribute in node.attribute):
            node.attribute.append(onnx.helper.make_attribute("training_mode", 1))


def convert_opset(model: onnx.ModelProto, target: int = OPSET_VERSION) -> onnx.ModelProto:
    """Converts the model's default-domain opset to ``target`` (onnxnn records opset 21).

    The semantics of many ops changed across opsets (Reduce* axes moved from an attribute to an
    input, Squeeze/Unsqueeze/Split likewise, Pad/Clip/Slice attributes became inputs), so the
    model is rewritten with ``onnx.version_converter``. Where the converter has no adapter, the
    opset is relabelled only if every op used means the same at both opsets.

    Raises:
        ModelLoadError: naming the opsets and the ops that changed, when neither works.
    """
    source = default_opset(model)
    if source is None or source == target:
        return model
    try:
        adapted, training = _without_unread_saved_batch_statistics(_with_old_hardmax_coerced(model, source), source)
        converted = version_converter.convert_version(adapted, target)
        _in_training_mode(converted.graph, training)
    except Exception as error:  # the converter raises plain RuntimeError/IndexError from C++
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        changed = _changed_ops(model, source, target)
        if changed:
            raise ModelLoadError(
                f"cannot convert the model from opset {source} to opset {target}, the opset "
                f"onnxnn runs: onnx.version_converter failed ({reason}) and the ops "
                f"{changed} differ between the two opsets"
            ) from None
        converted = onnx.ModelProto()
        converted.CopyFrom(model)
    if not _same_interface(model, converted):
        # onnx's Scan 8->9 adapter, for one, drops the batch axis of the graph's inputs.
        raise ModelLoadError(
            f"cannot convert the model from opset {source} to opset {target}, the opset onnxnn "
            "runs: onnx.version_converter changed the types or shapes of the graph's inputs or "
            "outputs, so the converted model would not mean the same"
        )
    for entry in converted.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            entry.version = target
    return converted


def _write_dilated_same_pads(graph: onnx.GraphProto, weights: dict) -> None:
    """Gives each Conv with ``auto_pad`` SAME and dilations at stride 1 its explicit pads, in place.

    onnxruntime's Conv refuses that combination ("Dilation not supported for AutoPadType::SAME_UPPER"),
    which ``torch.onnx.export`` writes for ``padding="same"`` with a dilation: the model ran only on
    onnxnn's kernels, and its re-export could not be served. At stride 1 the pads are the same for every
    input size: ``dilation * (kernel - 1)`` in all, the odd one at the end for SAME_UPPER (the
    beginning for SAME_LOWER), the kernel's size read from ``kernel_shape`` or the weight initializer.
    """
    for node in (node for each in graphs_within(graph) for node in each.node):
        if node.op_type != "Conv" or node.domain not in DEFAULT_DOMAINS:
            continue
        attrs = {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}
        mode = auto_pad_mode(attrs)
        kernel = attrs.get("kernel_shape") or weights.get(node.input[1] if len(node.input) > 1 else "", ())[2:]
        dilations = list(attrs.get("dilations") or [1] * len(kernel))
        if mode not in ("SAME_UPPER", "SAME_LOWER") or not kernel or all(d == 1 for d in dilations):
            continue
        if any(s != 1 for s in attrs.get("strides") or []) or len(dilations) != len(kernel):
            continue
        totals = [d * (k - 1) for d, k in zip(dilations, kernel)]
        small = [total // 2 for total in totals]
        large = [total - total // 2 for total in totals]
        pads = small + large if mode == "SAME_UPPER" else large + small
        kept = [attribute for attribute in node.attribute if attribute.name not in ("auto_pad", "pads")]
        del node.attribute[:]
        node.attribute.extend(kept + [onnx.helper.make_attribute("pads", pads)])


def model_source(path_or_model) -> str:
    """How messages name a model: its path quoted, "the given bytes" or "the given ModelProto"."""
    if isinstance(path_or_model, onnx.ModelProto):
        return "the given ModelProto"
    if isinstance(path_or_model, (bytes, bytearray, memoryview)):
        return "the given bytes"
    if isinstance(path_or_model, (str, os.PathLike)):
        return f"'{os.fspath(path_or_model)}'"
    return "the given model"


def load_model(path_or_model, base_dir: str | os.PathLike | None = None) -> tuple[onnx.ModelProto, int | None]:
    """Reads and validates a model; returns it and its original default opset.

    A model older than onnxnn's opset 21 is converted up to it (``convert_opset``); a newer one is
    returned as written, its nodes recorded at their own opsets (``import_.opsets``).

    Args:
        path_or_model: a path (``str`` / ``os.PathLike``), the serialized bytes, or an
            ``onnx.ModelProto`` (not modified).
        base_dir: the folder external tensor data is read from; defaults to the model file's
            folder, and is required for bytes or a proto whose tensors are stored externally.

    Raises:
        FileNotFoundError: the model file does not exist.
        ModelLoadError: anything wrong with the model (see :func:`onnxnn.import_.from_onnx`).
        TypeError: ``path_or_model`` is none of the accepted kinds.
    """
    path = None
    source = model_source(path_or_model)
    if isinstance(path_or_model, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(path_or_model)
        if model.ir_version <= 0 or not model.HasField("graph"):
            raise ModelLoadError("not a valid ONNX model: the ModelProto has no IR version or no graph")
    elif isinstance(path_or_model, (bytes, bytearray, memoryview)):
        model = _parse(bytes(path_or_model), source)
    elif isinstance(path_or_model, (str, os.PathLike)):
        path = os.fspath(path_or_model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"ONNX model file not found: '{path}'")
        with open(path, "rb") as handle:
            model = _parse(handle.read(), source)
        if base_dir is None:
            base_dir = os.path.dirname(os.path.abspath(path))
    else:
        raise TypeError(f"from_onnx() expects a path, bytes or an onnx.ModelProto, got {type(path_or_model).__name__}")
    check_strings(model, source)
    adopt_onnxruntime_ops(model)  # onnxruntime's contrib ops written in the default domain
    check_domains(model, source)
    load_external_data(model, None if base_dir is None else os.fspath(base_dir), source)
    _check(model, path, source)
    check_shapes(model, source)
    _write_dilated_same_pads(model.graph, {tensor.name: tuple(tensor.dims) for tensor in model.graph.initializer})
    original_opset = default_opset(model)
    if original_opset is not None and original_opset > OPSET_VERSION:
        # Imported as written: each node is recorded at the oldest opset that means the same
        # (``import_.opsets``), so nothing is converted down and nothing is lost.
        return model, original_opset
    try:
        converted = convert_opset(model)
    except ModelLoadError as error:
        raise ModelLoadError(f"{source}: {error}") from None
    return converted, original_opset
