"""Integer ``ReduceSum`` written for onnxruntime: exact, wrapping on overflow as PyTorch's sums do.

onnxruntime's CPU ReduceSum (1.31) adds int32 and int64 values through double: an int64 sum past
2**53 loses its last digits (two nanosecond timestamps, 1733130000123456789 + 1733130001987654321,
came to ...168 for ...110; 2**60 + 1 and -2**60 among 10^5 zeros summed to 0), and an overflow
saturates at the dtype's limit where PyTorch wraps (int32 ``[2**31 - 1, 1]`` to 2147483647 for
-2**31). It has no ReduceSum at all for int8, uint8, int16 and the unsigned types. Its CumSum adds
int32 and int64 exactly and wraps, so onnxnn writes an integer ReduceSum, in its sessions and
exported graphs alike, as running sums along the reduced axes and the last of them, after a zero
appended along each (one Pad: an empty axis then sums to 0). A full reduction (``x.sum()``) runs
over the flattened input. Other integer types are summed in int64 and cast back, which wraps as a
sum in that dtype does. The form reads the reduced axes but no size: graphs shared across sizes
take it too. A node whose axes are computed keeps the plain node, as does a sum of narrow values cast
to int64 (a count of booleans), which double holds exactly. onnxnn's kernels sum integers exactly
with numpy.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir import dtypes
from ...ir.registry import decompositions
from .reduction_accuracy import reduced_axes
from .training import node_emitter

__all__: list[str] = []

# The dtypes onnxruntime's CumSum adds; the others are summed in int64.
_SUMMED_AS_IS = frozenset({dtypes.int32, dtypes.int64})
_LAST = np.iinfo(np.int64).max  # a Slice end past any extent


# Values of these dtypes, cast to int64, sum exactly in double: 2**16 times any count of elements that
# fits in memory stays below 2**53. A count of booleans (``count_nonzero``, ``bucketize``) is one.
_NARROW = frozenset({dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16})


def _counts_narrow_values(x) -> bool:
    """Whether ``x`` is an int64 Cast of a narrow dtype, which onnxruntime's plain node sums exactly."""
    producer = x.node
    return (
        x.dtype is dtypes.int64
        and producer is not None
        and producer.op_type == "Cast"
        and not producer.domain
        and producer.inputs[0].dtype in _NARROW
    )


@decompositions.register("ReduceSum")
def _exact_integer_sum(node, input_names: list, output_names: list, fresh_name):
    x = node.inputs[0]
    if x.dtype.is_floating_point or x.dtype is dtypes.bool or _counts_narrow_values(x):
        return None
    reduced = reduced_axes(node, lambda position: node.inputs[position].static is not None)
    if not reduced:
        return None  # computed axes, or a no-op
    axes = sorted(reduced)
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)

    def constant(values) -> str:
        name = fresh_name("constant")
        initializers.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    current = input_names[0]
    summed_in = x.dtype if x.dtype in _SUMMED_AS_IS else dtypes.int64
    if summed_in is not x.dtype:
        current = emit("Cast", current, to=summed_in.onnx_type)
    rank = len(x.shape)
    keepdims = node.attrs.get("keepdims", 1)
    if len(axes) == rank:
        current, axes, final_shape = emit("Reshape", current, constant([-1])), [0], [1] * rank if keepdims else []
    else:
        final_shape = None
    working_rank = 1 if final_shape is not None else rank
    pads = [0] * (2 * working_rank)
    for axis in axes:
        pads[working_rank + axis] = 1
    current = emit("Pad", current, constant(pads))
    for axis in axes:
        current = emit("CumSum", current, constant(axis))
    count = len(axes)
    current = emit("Slice", current, constant([-1] * count), constant([_LAST] * count), constant(axes))
    if final_shape is not None:
        current = emit("Reshape", current, constant(final_shape))
    elif not keepdims:
        current = emit("Squeeze", current, constant(axes))
    if summed_in is not x.dtype:
        current = emit("Cast", current, to=x.dtype.onnx_type)
    nodes[-1].output[0] = output_names[0]
    return nodes, initializers
