"""Converting an exported model to an older opset, around the gaps of onnx's version converter.

onnx's converter needs an adapter for every op whose schema changed between the two opsets, and
has none to take ``Pad`` below opset 18 (18 added the optional ``axes`` input, 19 the ``wrap``
mode) or ``Split`` below 18 (18 added ``num_outputs``). A ``Pad`` without ``axes`` and in another
mode means the same at opset 11 through 21, as a ``Split`` given its sizes means the same from 13,
so they are carried across unchanged: moved into a private domain for the conversion (the
converter leaves other domains alone) and moved back after it. So is ``ConstantOfShape`` (every
recurrent layer torch exports holds one), which has no adapter below opset 20: versions 20 and 21
only added element types, so a value of a type opset 9 has means the same from 9 on. Any other op
the converter has no adapter for is refused with a ValueError naming it and the opset.

Ops newer than the target opset are written as the ops they are defined by (``LOWERINGS``):
``Gelu`` (opset 20) as ``0.5 x (1 + erf(x / sqrt(2)))`` or its tanh form, ``Mish`` (18) as
``x tanh(softplus(x))``; the constants take ``x``'s type with CastLike. Any other op the target
opset lacks is refused with the opset it needs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .graph_editing import fresh_name, graphs_within

__all__ = ["convert_opset"]

_CARRIED_DOMAIN = "ai.onnxnn.unchanged_across_opsets"


def _split_since(node: onnx.NodeProto) -> int | None:
    given_sizes = len(node.input) > 1 and node.input[1]
    return 13 if given_sizes and not any(a.name == "num_outputs" for a in node.attribute) else None


def _pad_since(node: onnx.NodeProto) -> int | None:
    if len(node.input) > 3 and node.input[3]:
        return None  # axes: opset 18
    mode = next((attribute.s for attribute in node.attribute if attribute.name == "mode"), b"constant")
    return None if mode == b"wrap" else 11


# The element types ConstantOfShape's value could have at opset 9 (20 added bfloat16, 21 more).
_CONSTANT_OF_SHAPE_9_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.INT8,
        onnx.TensorProto.INT16,
        onnx.TensorProto.INT32,
        onnx.TensorProto.INT64,
        onnx.TensorProto.UINT8,
        onnx.TensorProto.UINT16,
        onnx.TensorProto.UINT32,
        onnx.TensorProto.UINT64,
        onnx.TensorProto.BOOL,
    }
)


def _constant_of_shape_since(node: onnx.NodeProto) -> int | None:
    value = next((attribute.t for attribute in node.attribute if attribute.name == "value"), None)
    return 9 if value is None or value.data_type in _CONSTANT_OF_SHAPE_9_TYPES else None


# op_type -> the oldest opset at which a node (of opset 21) means what it means now, or None.
_UNCHANGED_SINCE: dict[str, Callable[[onnx.NodeProto], int | None]] = {
    "Split": _split_since,
    "Pad": _pad_since,
    "ConstantOfShape": _constant_of_shape_since,
}


def _unchanged_since(node: onnx.NodeProto) -> int | None:
    """The oldest opset at which ``node`` (a node of opset 21) means what it means now, if known."""
    if node.domain not in ("", "ai.onnx"):
        return None
    since = _UNCHANGED_SINCE.get(node.op_type)
    return None if since is None else since(node)


def _carried(node: onnx.NodeProto, opset: int) -> bool:
    since = _unchanged_since(node)
    return since is not None and since <= opset


class _Writer:
    """Writes the nodes of one lowering, with names no other tensor of the model has."""

    def __init__(self, node: onnx.NodeProto, taken: set):
        self.node, self.taken = node, taken
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def name(self, base: str) -> str:
        return fresh_name(base, self.taken)

    def op(self, op_type: str, *inputs: str, output: str | None = None) -> str:
        result = output or self.name(f"{self.node.output[0]}_{op_type.lower()}")
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [result], name=self.name(f"{self.node.name}_{op_type}"))
        )
        return result

    def constant(self, value: float, like: str) -> str:
        """``value`` in ``like``'s type (written in float64, so a float64 model keeps every digit)."""
        name = self.name(f"{self.node.output[0]}_constant")
        self.initializers.append(numpy_helper.from_array(np.array(value, np.float64), name))
        return self.op("CastLike", name, like)


def _gelu(writer: _Writer) -> None:
    x, node = writer.node.input[0], writer.node
    approximate = next((a.s for a in node.attribute if a.name == "approximate"), b"none")
    if approximate == b"tanh":
        cube = writer.op("Mul", writer.op("Mul", x, x), x)
        inner = writer.op("Add", x, writer.op("Mul", writer.constant(0.044715, x), cube))
        squashed = writer.op("Tanh", writer.op("Mul", writer.constant(math.sqrt(2.0 / math.pi), x), inner))
    else:
        squashed = writer.op("Erf", writer.op("Mul", x, writer.constant(1.0 / math.sqrt(2.0), x)))
    half = writer.op("Mul", writer.constant(0.5, x), x)
    writer.op("Mul", half, writer.op("Add", writer.constant(1.0, x), squashed), output=node.output[0])


def _mish(writer: _Writer) -> None:
    x = writer.node.input[0]
    writer.op("Mul", x, writer.op("Tanh", writer.op("Softplus", x)), output=writer.node.output[0])


# op_type -> how to write it with older ops (where the target opset is older than the op).
LOWERINGS: dict[str, Callable[[_Writer], None]] = {"Gelu": _gelu, "Mish": _mish}


def _newer(node: onnx.NodeProto, opset: int) -> bool:
    """Whether ``node`` is a default-domain op that ``opset`` does not have."""
    return node.domain in ("", "ai.onnx") and _introduced(node.op_type) > opset


def _lower(proto: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``proto`` with every op newer than ``opset`` written as ``LOWERINGS`` says; an op it does not
    know is a ValueError naming the opset it needs."""
    newer = [node for graph in graphs_within(proto.graph) for node in graph.node if _newer(node, opset)]
    if not newer:
        return proto
    for node in newer:
        if node.op_type not in LOWERINGS:
            raise ValueError(
                f"to_onnx: the model uses {node.op_type}, which needs opset_version "
                f"{_introduced(node.op_type)} or newer (got {opset})"
            )
    lowered = onnx.ModelProto()
    lowered.CopyFrom(proto)
    taken = {
        name
        for graph in graphs_within(lowered.graph)
        for node in graph.node
        for name in (*node.input, *node.output, node.name)
    }
    for graph in graphs_within(lowered.graph):
        nodes = []
        for node in graph.node:
            if _newer(node, opset):  # each one has a lowering (checked above)
                writer = _Writer(node, taken)
                LOWERINGS[node.op_type](writer)
                nodes.extend(writer.nodes)
                graph.initializer.extend(writer.initializers)
            else:
                nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
    return lowered


def _introduced(op_type: str) -> int:
    """The opset that introduced a default-domain op (0 for one onnx does not know)."""
    if not _INTRODUCED:
        for schema in onnx.defs.get_all_schemas_with_history():
            if schema.domain == "":
                _INTRODUCED[schema.name] = min(schema.since_version, _INTRODUCED.get(schema.name, schema.since_version))
    return _INTRODUCED.get(op_type, 0)


_INTRODUCED: dict[str, int] = {}


# The converter's assertion for an op it has no adapter for (onnx 1.23): "No Adapter To Version $19
# for ConstantOfShape", or "No Adapter From Version ..." in the other direction.
_NO_ADAPTER = re.compile(r"No Adapter (?:To|From) Version \$?(\d+) for (\w+)")


def _converted(convert: Callable, proto: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``convert(proto, opset)``, an op without an adapter refused with a ValueError naming it."""
    try:
        return convert(proto, opset)
    except RuntimeError as error:
        missing = _NO_ADAPTER.search(str(error))
        if missing is None:
            raise
        raise ValueError(
            f"to_onnx: the model uses {missing.group(2)}, which onnx's version converter cannot write at "
            f"opset_version {opset} (it has no adapter to version {missing.group(1)}); export at the default "
            "opset_version instead"
        ) from None


def convert_opset(proto: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``proto`` converted to ``opset`` by onnx's converter, carrying across what it cannot adapt
    and writing ops newer than ``opset`` with older ones (``LOWERINGS``)."""
    from onnx import version_converter  # deferred: only a non-default opset needs the converter

    proto = _lower(proto, opset)
    if not any(_carried(node, opset) for graph in graphs_within(proto.graph) for node in graph.node):
        return _converted(version_converter.convert_version, proto, opset)
    shielded = onnx.ModelProto()
    shielded.CopyFrom(proto)
    for node in (node for graph in graphs_within(shielded.graph) for node in graph.node):
        if _carried(node, opset):
            node.domain = _CARRIED_DOMAIN
    shielded.opset_import.add(domain=_CARRIED_DOMAIN, version=1)
    converted = _converted(version_converter.convert_version, shielded, opset)
    for node in (node for graph in graphs_within(converted.graph) for node in graph.node):
        if node.domain == _CARRIED_DOMAIN:
            node.domain = ""
    kept = [entry for entry in converted.opset_import if entry.domain != _CARRIED_DOMAIN]
    del converted.opset_import[:]
    converted.opset_import.extend(kept)
    return converted
