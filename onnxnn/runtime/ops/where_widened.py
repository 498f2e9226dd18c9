"""``Where`` over the dtypes onnxruntime has no kernel for, written as a ``Where`` of a wider dtype.

onnxruntime's CPU provider implements Where for neither bool nor int16, uint16 or uint64 values
(its kernel registry, checked against 1.31), so a bool ``masked_fill`` or ``x[mask] = True`` failed
when onnxruntime ran it, and so did a served export. Every Where is recorded as the standard op; a
model of one of those dtypes gets its values cast to a dtype that holds each of them exactly,
selected there, and cast back, in onnxnn's sessions and exported graphs alike. (uint64 goes
through int64: both Casts keep the bits, so the round trip is exact.) onnxnn's kernels select any
dtype and run the node as recorded.
"""

from __future__ import annotations

from ...ir import dtypes
from ...ir.registry import decompositions, value_blind_decompositions
from .training import node_emitter

__all__: list[str] = []

# The dtype each unsupported dtype is selected in.
_SELECTED_AS = {
    dtypes.bool: dtypes.uint8,
    dtypes.int16: dtypes.int32,
    dtypes.uint16: dtypes.int32,
    dtypes.uint64: dtypes.int64,
}


@decompositions.register("Where")
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    dtype = node.inputs[1].dtype
    wide = _SELECTED_AS.get(dtype)
    if wide is None:
        return None
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    condition, when_true, when_false = input_names
    selected = emit(
        "Where",
        condition,
        emit("Cast", when_true, to=wide.onnx_type),
        emit("Cast", when_false, to=wide.onnx_type),
    )
    emit("Cast", selected, output=output_names[0], to=dtype.onnx_type)
    return nodes, []


value_blind_decompositions.mark("Where")
