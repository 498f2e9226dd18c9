"""The opset an imported node is recorded at: the oldest, from onnxnn's on, that means what the model's does.

A model written at a newer opset than onnxnn's (21) is imported as it is, not converted down:
onnx's version converter cannot bring every op down (a type or an attribute a newer opset added),
and nothing needs it to. Each default-domain node is recorded at the oldest opset, from 21 up to
the model's, whose schema of its op declares every attribute the node sets and allows the types
of its inputs. Past opset 21 schemas only ever added attributes with defaults that keep the old
meaning and allowed more types (``tests/import_/test_newer_opsets.py`` checks it for the
installed onnx), so that opset means the same as the model's. ``NEWLY_DEFINED`` lists the few
meanings a newer opset gave to nodes an older schema already admitted (Mod's fmod=0 on floats at
28). Most nodes land at 21 and mix with onnxnn's own ops in graphs onnxruntime runs; a node that
needs more (``BitShift`` of int32 at opset 28) is recorded at its opset
(``ir.graph.VersionedNode``), and a graph holding it is built at that opset.

Example::

    >>> recorded_opset("Add", 28, frozenset(), {}, [x, y])  # float32 inputs: Add means the same at 21
    >>> recorded_opset("BitShift", 28, frozenset({"direction"}), {"direction": "LEFT"}, [a, b])  # int32: 28
    28
"""

from __future__ import annotations

import functools

import onnx

from ..ir.plan import OPSET_VERSION
from ..runtime.tensor import Tensor

__all__ = ["recorded_opset", "attribute_opset"]


_FLOATING = frozenset(
    {onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE}
)


def _floor_mod_of_floats(attrs: dict, input_types: tuple) -> bool:
    return not attrs.get("fmod", 0) and bool(input_types) and input_types[0] in _FLOATING


# Meanings a newer opset gave to nodes whose types and attributes an older schema already allowed,
# which schemas cannot tell: ``{op_type: (opset, applies(attrs, input_types))}``. Opset 28 defined
# Mod with fmod=0 for floating-point inputs (A - floor(A / B) * B); before, fmod=0 took integers only.
NEWLY_DEFINED = {"Mod": (28, _floor_mod_of_floats)}


def recorded_opset(
    op_type: str, model_opset: int, attribute_names: frozenset, attrs: dict, arguments: list
) -> int | None:
    """The opset a default-domain node of a ``model_opset`` model is recorded at; None for onnxnn's own.

    Args:
        op_type: the node's op.
        model_opset: the model's default-domain opset (above onnxnn's).
        attribute_names: the attributes the node sets (``frozenset(attrs)``, kept by the caller).
        attrs: the attributes' values.
        arguments: its inputs (Tensors; None for omitted ones; lists for sequences, whose element
            types no opset past 21 changed).
    """
    input_types = tuple(argument.dtype.onnx_type if isinstance(argument, Tensor) else None for argument in arguments)
    opset = _oldest_opset(op_type, model_opset, attribute_names, input_types)
    newly_defined = NEWLY_DEFINED.get(op_type)
    if newly_defined is not None and newly_defined[0] <= model_opset and newly_defined[1](attrs, input_types):
        opset = max(opset or OPSET_VERSION, newly_defined[0])
    return opset


def attribute_opset(op_type: str, model_opset: int, attribute_names) -> int:
    """The oldest opset, from onnxnn's up to ``model_opset``, whose schema of ``op_type`` declares every
    attribute in ``attribute_names`` (``model_opset`` when none does)."""
    return _oldest_opset(op_type, model_opset, frozenset(attribute_names), ()) or OPSET_VERSION


def _type_name(onnx_type: int) -> str:
    return f"tensor({onnx.TensorProto.DataType.Name(onnx_type).lower()})"


def _accepts(schema, attribute_names: frozenset, input_types: tuple) -> bool:
    """Whether ``schema`` declares every attribute and allows every input type of the node."""
    if not attribute_names <= set(schema.attributes):
        return False
    formals = schema.inputs
    if len(input_types) > len(formals) and (not formals or formals[-1].option != formals[-1].option.Variadic):
        return False
    allowed = {constraint.type_param_str: set(constraint.allowed_type_strs) for constraint in schema.type_constraints}
    for position, onnx_type in enumerate(input_types):
        if onnx_type is None:
            continue
        type_str = formals[min(position, len(formals) - 1)].type_str
        if _type_name(onnx_type) not in allowed.get(type_str, {type_str}):
            return False
    return True


@functools.lru_cache(maxsize=4096)
def _oldest_opset(op_type: str, model_opset: int, attribute_names: frozenset, input_types: tuple) -> int | None:
    since = None
    for opset in range(OPSET_VERSION, model_opset + 1):
        try:
            schema = onnx.defs.get_schema(op_type, opset, "")
        except onnx.defs.SchemaError:
            continue  # an op added after onnxnn's opset
        if schema.since_version == since:
            continue  # the same schema as the opset before
        since = schema.since_version
        if _accepts(schema, attribute_names, input_types):
            return None if opset == OPSET_VERSION else opset
    # Nothing accepts the node: its own opset's shape inference (or kernel) says what is wrong.
    return model_opset
