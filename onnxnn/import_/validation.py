"""Checks a parsed model must pass before onnxnn builds anything from it.

onnx's checker validates structure; these cover what it lets through or reports badly:

- strings: protobuf parses ``string`` fields with invalid UTF-8 without complaint and hands them
  back as ``bytes`` (or raises ``UnicodeDecodeError`` on access, depending on the protobuf
  build), so a malformed name or attribute string would fail far from its cause;
- domains: every node's domain must be one onnxnn runs (the default domain, ``ai.onnx.ml``
  through onnxruntime, ``ai.onnx.preview.training``) or the node an op onnxnn has an importer
  for in its domain (onnxruntime's ``com.microsoft`` ops, ``contrib``), so an unknown one is
  refused at load time, naming the op, the domain and its opset, rather than at the first forward;
- shapes: onnx's strict shape inference (what ``check_model(full_check=True)`` runs) over the
  declared input shapes finds attributes that contradict their inputs (a Transpose ``perm`` out
  of range, a Concat ``axis`` beyond the rank), naming the node. It runs on the model as written,
  before opset conversion (a relabelled opset may widen type constraints inference checks), and
  errors raised inside the function bodies onnx defines some ops by are left to replay: onnx
  cannot infer some bodies whose attributes keep their defaults (MeanVarianceNormalization
  without ``axes``), and replay checks every node as it records it anyway.
"""

from __future__ import annotations

from typing import Iterator

import onnx
from google.protobuf.descriptor import FieldDescriptor

from ..errors import ModelLoadError
from ..ir.registry import importers
from .attributes import attribute_subgraphs

__all__ = ["check_strings", "adopt_onnxruntime_ops", "check_domains", "check_shapes", "RUNNABLE_DOMAINS", "ML_DOMAIN"]

ML_DOMAIN = "ai.onnx.ml"
# ONNX's own training ops (not onnxnn's custom-op domain, runtime.ops.training.TRAINING_DOMAIN).
PREVIEW_TRAINING_DOMAIN = "ai.onnx.preview.training"
RUNNABLE_DOMAINS = frozenset({"", "ai.onnx", ML_DOMAIN, PREVIEW_TRAINING_DOMAIN})

_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_REPEATED = FieldDescriptor.LABEL_REPEATED


def _is_repeated(descriptor) -> bool:
    # protobuf 6+ has is_repeated; older releases only the label.
    repeated = getattr(descriptor, "is_repeated", None)
    return repeated if repeated is not None else descriptor.label == _REPEATED


# Tensor payloads hold no string fields; skipping them keeps the walk proportional to the
# graph's structure, not its weights.
_PAYLOAD_FIELDS = frozenset(
    {"float_data", "int32_data", "string_data", "int64_data", "raw_data", "double_data", "uint64_data"}
)


def _bad_string(message, path: str) -> str | None:
    """The path of the first string field holding invalid UTF-8 under ``message``, or None."""
    stack = [(message, path)]
    while stack:
        current, where = stack.pop()
        try:
            fields = current.ListFields()
        except UnicodeDecodeError:
            return where
        for descriptor, value in fields:
            name = descriptor.name
            if name in _PAYLOAD_FIELDS:
                continue
            repeated = _is_repeated(descriptor)
            if descriptor.type == _STRING:
                for position, text in enumerate(value if repeated else (value,)):
                    if not isinstance(text, str):
                        return f"{where}.{name}[{position}]" if repeated else f"{where}.{name}"
            elif descriptor.type == _MESSAGE:
                if repeated:
                    stack.extend((item, f"{where}.{name}[{position}]") for position, item in enumerate(value))
                else:
                    stack.append((value, f"{where}.{name}"))
    return None


def check_strings(model: onnx.ModelProto, source: str) -> None:
    """Refuses a model with a string field (name, attribute string, doc string...) that is not UTF-8.

    Raises:
        ModelLoadError: naming the field, as a path such as ``graph.node[3].name``.
    """
    where = _bad_string(model, "model")
    if where is not None:
        raise ModelLoadError(f"{source}: the string field {where} is not valid UTF-8 (a corrupt or hostile file?)")


def _nodes(graph: onnx.GraphProto) -> Iterator[tuple[onnx.NodeProto, int]]:
    for index, node in enumerate(graph.node):
        yield node, index
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                yield from _nodes(subgraph)


# onnxruntime registers some contrib ops in the default domain, where ONNX defines them not at all
# or only from a later opset (op -> the first opset that does; None: none), and its transformer
# optimizer writes them there. onnxnn reads them as the com.microsoft ops of the same name.
_ONNXRUNTIME_DEFAULT_DOMAIN_OPS = {"SimplifiedLayerNormalization": None, "LayerNormalization": 17}
_CONTRIB_DOMAIN = "com.microsoft"


def adopt_onnxruntime_ops(model: onnx.ModelProto) -> None:
    """Moves onnxruntime's default-domain contrib ops (SimplifiedLayerNormalization, and
    LayerNormalization below opset 17) to com.microsoft, in place, so that onnx's checker and
    onnxnn's importers see ops they know."""
    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), None)
    moved = False
    for node, _ in _nodes(model.graph):
        if node.domain in ("", "ai.onnx") and node.op_type in _ONNXRUNTIME_DEFAULT_DOMAIN_OPS:
            since = _ONNXRUNTIME_DEFAULT_DOMAIN_OPS[node.op_type]
            if since is None or (opset is not None and opset < since):
                node.domain = _CONTRIB_DOMAIN
                moved = True
    if moved and all(entry.domain != _CONTRIB_DOMAIN for entry in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(_CONTRIB_DOMAIN, 1))


def check_domains(model: onnx.ModelProto, source: str) -> None:
    """Refuses nodes of a domain onnxnn cannot run, naming the op, the domain and the node.

    Raises:
        ModelLoadError: the first such node.
    """
    versions = {entry.domain: entry.version for entry in model.opset_import}
    for node, index in _nodes(model.graph):
        if node.domain not in RUNNABLE_DOMAINS and (node.domain, node.op_type) not in importers:
            name = f"'{node.name}'" if node.name else f"#{index}"
            other_domains = sorted({domain for domain, _ in importers.table if domain not in RUNNABLE_DOMAINS})
            raise ModelLoadError(
                f"{source}: onnxnn has no implementation for op_type '{node.op_type}' of domain '{node.domain}' "
                f"(opset {versions.get(node.domain, 'not imported')}), used by node {name}; onnxnn runs the "
                f"default domain, {sorted(d for d in RUNNABLE_DOMAINS if d and d != 'ai.onnx')} and some ops "
                f"of {other_domains} (onnxnn.import_.contrib)"
            )


def _without_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with large and sparse initializers turned into typed graph inputs.

    Inference needs the values of small constants (shapes, axes) but only the types of weights;
    leaving their bytes out keeps the check's cost independent of the model's size. Sparse
    initializers are typed sparse_tensor by inference, which no op accepts: onnxnn makes them
    dense, so they are checked as dense inputs.
    """
    graph = model.graph
    light = onnx.ModelProto(ir_version=model.ir_version, opset_import=model.opset_import, functions=model.functions)
    lean = light.graph
    lean.name = graph.name
    lean.node.extend(graph.node)
    lean.input.extend(graph.input)
    lean.output.extend(graph.output)
    lean.value_info.extend(graph.value_info)
    declared = {info.name for info in graph.input}
    for tensor in graph.initializer:
        if _count(tensor.dims) <= _SMALL:
            lean.initializer.append(tensor)
        elif tensor.name not in declared:
            lean.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    for sparse in graph.sparse_initializer:
        if sparse.values.name not in declared:
            lean.input.append(
                onnx.helper.make_tensor_value_info(sparse.values.name, sparse.values.data_type, list(sparse.dims))
            )
    return light


_SMALL = 64


def _count(dims) -> int:
    count = 1
    for size in dims:
        count *= size
    return count


def check_shapes(model: onnx.ModelProto, source: str) -> None:
    """Runs onnx's strict shape and type inference; its errors name the node and op.

    Raises:
        ModelLoadError: with onnx's message, which names the node and the op.
    """
    try:
        onnx.shape_inference.infer_shapes(_without_weights(model), check_type=True, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError, ValueError) as error:
        message = " ".join(str(error).split())
        if message.count("Inference error(s)") > 1:
            return  # an error inside a function body onnx expands (see the module docstring)
        raise ModelLoadError(f"{source}: onnx's shape inference rejects the model: {message}") from error
