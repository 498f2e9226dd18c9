"""Integer ``ReduceSum``, ``ReduceProd``, ``Pow``, ``ReduceMax`` and ``ReduceMin`` written for
onnxruntime: exact, wrapping on overflow as PyTorch's sums, products and powers do.

onnxruntime's CPU ReduceSum, ReduceProd and Pow (1.31) compute int32 and int64 values through double:
an int64 sum past 2**53 loses its last digits (two nanosecond timestamps, 1733130000123456789 +
1733130001987654321, came to ...168 for ...110; 2**60 + 1 and -2**60 among 10^5 zeros summed to 0),
and an overflow saturates at the dtype's limit where PyTorch wraps (int32 ``[2**31 - 1, 1]`` summed
to 2147483647 for -2**31, ``prod`` of int32 ``[2**16, 2**16 + 1]`` to 2147483647 for 65536,
``3 ** 41`` to INT64_MIN). It has none of the three for int8, uint8 and int16. Its CumSum adds
int32 and int64 exactly and wraps, and its Mul multiplies them exactly and wraps, so onnxnn writes
these nodes, in its sessions and exported graphs alike, as:

- ReduceSum: running sums along the reduced axes and the last of them, after a zero appended along
  each (one Pad: an empty axis then sums to 0). A full reduction (``x.sum()``) runs over the
  flattened input. Other integer types are summed in int64 and cast back, which wraps as a sum in
  that dtype does. A sum of narrow values cast to int64 (a count of booleans), which double holds
  exactly, keeps the plain node.
- ReduceProd: a Loop halving each line (even-indexed elements times odd-indexed ones), ``ceil(log2 n)``
  Mul steps.
- Pow: a Loop of square-and-multiply steps over the exponents' bits, with PyTorch's results for
  negative exponents.
- int64 ReduceMax and ReduceMin, which onnxruntime gets wrong on some rows: the element ArgMax or
  ArgMin picks.

Narrow dtypes are multiplied in int32 (``WIDE_DTYPE``) and cast back: the narrowing Cast keeps the
low bits, which are the narrow dtype's wrapped result. The forms read the reduced axes and dtypes but
no size: graphs shared across sizes take them too. A node whose axes are computed keeps the plain
node. onnxnn's kernels compute these nodes exactly with numpy.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...ir import dtypes
from ...ir.registry import decompositions, value_blind_decompositions
from .reduction_accuracy import reduced_axes
from .training import int64_initializers, node_emitter

__all__: list[str] = []

# Narrow integers (int8, uint8, int16) are computed in this dtype where onnxruntime lacks their ops
# (``integer_widened.py``): it holds each of their values, and the narrowing Cast keeps the low bits of
# its wrapped results, the narrow dtype's own.
WIDE_DTYPE = dtypes.int32

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


# Products of these dtypes are taken in WIDE_DTYPE (onnxruntime has no ReduceProd for them, nor a Pad
# for int16), which wraps modulo 2**32: the narrowing Cast keeps the low bits, the narrow product's.
_MULTIPLIED_WIDE = frozenset({dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16})


@decompositions.register("ReduceProd")
def _exact_integer_product(node, input_names: list, output_names: list, fresh_name):
    """An integer ReduceProd as halvings of each line: onnxruntime's ReduceProd goes through double.

    The reduced axes are moved last and flattened into one (its extent read at run time), a 1 is
    appended (an empty line's product), and a Loop multiplies the even-indexed elements of each line by
    the odd-indexed ones (a 1 padded on where the count is odd) until one element is left: ``ceil(log2 n)``
    Mul steps whose values wrap as PyTorch's products do, and a form that reads no size.
    """
    x = node.inputs[0]
    if x.dtype.is_floating_point or x.dtype is dtypes.bool:
        return None
    reduced = reduced_axes(node, lambda position: node.inputs[position].static is not None)
    if not reduced:
        return None  # computed axes, or a no-op
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    working = WIDE_DTYPE if x.dtype in _MULTIPLIED_WIDE else x.dtype
    one = fresh_name("one")
    initializers.append(numpy_helper.from_array(np.array(1, working.numpy_dtype), one))
    current = input_names[0]
    if working is not x.dtype:
        current = emit("Cast", current, to=working.onnx_type)
    lines = _reduced_lines(emit, current, len(x.shape), reduced, constant)
    pads = [0] * (2 * (len(x.shape) - len(reduced) + 1))
    pads[-1] = 1
    lines = emit("Pad", lines, constant(pads), one)
    body = _halving_body(working, len(pads) // 2, one, constant, fresh_name)
    product = emit("Loop", "", _longer_than_one(emit, lines, constant), lines, body=body)
    current = _restored(emit, product, reduced, node.attrs.get("keepdims", 1), constant)
    if working is not x.dtype:
        current = emit("Cast", current, to=x.dtype.onnx_type)
    nodes[-1].output[0] = output_names[0]
    return nodes, initializers


def _reduced_lines(emit, current: str, rank: int, reduced: set, constant) -> str:
    """``current`` with its reduced axes moved last and flattened into one: a line per kept index."""
    axes = sorted(reduced)
    kept = [axis for axis in range(rank) if axis not in reduced]
    if kept + axes != list(range(rank)):
        current = emit("Transpose", current, perm=kept + axes)
    # The flattened extent, multiplied from the reduced extents: a -1 cannot stand for it beside a
    # kept extent of zero. (allowzero: a zero extent is a size, not "the input's extent there".)
    extent = emit("Shape", current, start=len(kept), end=len(kept) + 1)
    for axis in range(len(kept) + 1, rank):
        extent = emit("Mul", extent, emit("Shape", current, start=axis, end=axis + 1))
    lines_shape = emit("Concat", emit("Shape", current, end=len(kept)), extent, axis=0) if kept else extent
    return emit("Reshape", current, lines_shape, allowzero=1)


def _restored(emit, reduced_lines: str, reduced: set, keepdims: int, constant) -> str:
    """Lines reduced to one element each (a last axis of 1) in the shape of the Reduce node's output."""
    if keepdims:
        return emit("Unsqueeze", emit("Squeeze", reduced_lines, constant([-1])), constant(sorted(reduced)))
    return emit("Squeeze", reduced_lines, constant([-1]))


@decompositions.register("ReduceMax", "ReduceMin")
def _exact_int64_extreme(node, input_names: list, output_names: list, fresh_name):
    """An int64 ReduceMax or ReduceMin as the element its ArgMax or ArgMin picks.

    onnxruntime 1.31's int64 ReduceMax and ReduceMin are wrong along a contiguous axis of 8 elements
    or more where values differ in the low 32 bits only: ``[0] * 7 + [2**32 - 1]`` has a maximum of
    0 there, and 6 in 10 random rows of values within a few 2**32 of each other came out wrong. Its
    ArgMax and ArgMin are right: the lines along the reduced axes (as for products) give their
    index, GatherElements the value.
    """
    x = node.inputs[0]
    if x.dtype is not dtypes.int64:
        return None
    reduced = reduced_axes(node, lambda position: node.inputs[position].static is not None)
    if not reduced:
        return None  # computed axes, or a no-op
    if any(size == 0 for size in x.shape):
        # No element to pick (onnxruntime's own node gives an empty reduction's identity), or no line to
        # pick from: its ArgMax and ArgMin keep a zero-size input's shape, which the Squeeze then refuses.
        return None
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    lines = _reduced_lines(emit, input_names[0], len(x.shape), reduced, constant)
    position = emit(_PICKED_BY[node.op_type], lines, axis=-1, keepdims=1)
    extreme = emit("GatherElements", lines, position, axis=-1)
    _restored(emit, extreme, reduced, node.attrs.get("keepdims", 1), constant)
    nodes[-1].output[0] = output_names[0]
    return nodes, initializers


_PICKED_BY = {"ReduceMax": "ArgMax", "ReduceMin": "ArgMin"}


def _longer_than_one(emit, lines: str, constant) -> str:
    """A scalar bool: whether the last axis of ``lines`` holds more than one element."""
    extent = emit("Shape", lines, start=-1)
    return emit("Squeeze", emit("Greater", extent, constant([1])))


def _halving_body(working, line_rank: int, one: str, constant, fresh_name):
    """The Loop body taking lines of ``line_rank`` dims to the products of their pairs, and whether to go on."""
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    iteration, going_on, lines = fresh_name("iteration"), fresh_name("going_on"), fresh_name("lines")
    last, step = constant([-1]), constant([2])
    evens = emit("Slice", lines, constant([0]), constant([_LAST]), last, step)
    odds = emit("Slice", lines, constant([1]), constant([_LAST]), last, step)
    unpaired = emit("Mod", emit("Shape", lines, start=-1), step)  # 1 where the count is odd
    pads = emit("Concat", constant([0] * (2 * line_rank - 1)), unpaired, axis=0)
    halved = emit("Mul", evens, emit("Pad", odds, pads, one))
    keep_going = _longer_than_one(emit, halved, constant)
    return helper.make_graph(
        nodes,
        fresh_name("halving"),
        [
            helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
            helper.make_tensor_value_info(going_on, TensorProto.BOOL, []),
            helper.make_tensor_value_info(lines, working.onnx_type, None),
        ],
        [
            helper.make_tensor_value_info(keep_going, TensorProto.BOOL, []),
            helper.make_tensor_value_info(halved, working.onnx_type, None),
        ],
    )


# Bases of these dtypes are raised in WIDE_DTYPE: onnxruntime has no Pow (nor ONNX a valid one) for them.
_POWERS_WIDE = frozenset({dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16})
_RAISED = _POWERS_WIDE | {dtypes.int32, dtypes.int64}
_EXPONENTS = _RAISED | {dtypes.uint32}  # (held exactly by int64, which the Loop shifts)


@decompositions.register("Pow")
def _exact_integer_power(node, input_names: list, output_names: list, fresh_name):
    """An integer Pow as square-and-multiply: onnxruntime's goes through double.

    Its integer Pow loses the last digits of int64 results past 2**53 and saturates an overflow
    (``3 ** 41`` to INT64_MIN where PyTorch wraps to -420491770248316829), and it has none for int8,
    uint8 and int16 (raised here in int32 and cast back: the low bits of a wrapped product are the
    narrow product's). A Loop multiplies ``base ** (2 ** k)`` in where bit k of the exponent is set,
    halving the exponents until none is left: as many steps as the largest exponent has bits, Mul
    wrapping as PyTorch's ``powi`` does. A negative exponent gives PyTorch's results: 1 for a base of
    1, +-1 for -1 (the exponent's parity), 0 otherwise; the Loop raises the base to the parity.
    """
    base, exponent = node.inputs[0], node.inputs[1]
    if base.dtype not in _RAISED or exponent.dtype not in _EXPONENTS:
        return None  # floats and bools; uint32 and uint64 bases, uint64 exponents (PyTorch has neither)
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    working = WIDE_DTYPE if base.dtype in _POWERS_WIDE else base.dtype

    def typed(value, dtype) -> str:
        name = fresh_name("constant")
        initializers.append(numpy_helper.from_array(np.array(value, dtype.numpy_dtype), name))
        return name

    one, zero, one64 = typed(1, working), typed(0, dtypes.int64), typed(1, dtypes.int64)
    base_value = input_names[0] if working is base.dtype else emit("Cast", input_names[0], to=working.onnx_type)
    exponents = emit("Cast", input_names[1], to=dtypes.int64.onnx_type)
    negative = emit("Less", exponents, zero)
    remaining = emit("Where", negative, emit("BitwiseAnd", exponents, one64), exponents)
    ones = emit("Where", emit("Less", remaining, zero), base_value, one)  # 1s of the result's (broadcast) shape
    body = _squaring_body(working, one, one64, typed, fresh_name)
    result = fresh_name("result")
    nodes.append(
        helper.make_node(
            "Loop",
            ["", _any_positive(emit, remaining, typed), ones, base_value, remaining],
            [result, fresh_name("square"), fresh_name("remaining")],
            name=fresh_name("Loop"),
            body=body,
        )
    )
    if exponent.dtype.is_signed:
        unit = emit("Equal", base_value, one)
        if working.is_signed:
            unit = emit("Or", unit, emit("Equal", base_value, typed(-1, working)))
        result = emit("Where", emit("And", negative, emit("Not", unit)), typed(0, working), result)
    if working is not base.dtype:
        result = emit("Cast", result, to=base.dtype.onnx_type)
    nodes[-1].output[0] = output_names[0]
    return nodes, initializers


def _any_positive(emit, values: str, typed) -> str:
    """A scalar bool: whether any of the int64 ``values`` is positive (none, for an empty tensor).

    The test is taken on float 0s and 1s: onnxruntime 1.31's int64 ReduceMax is wrong on some inputs
    of 8 elements or more (``[0] * 7 + [2**32 - 1]`` gives 0).
    """
    positive = emit("Cast", emit("Greater", values, typed(0, dtypes.int64)), to=dtypes.float32.onnx_type)
    flat = emit("Concat", emit("Reshape", positive, typed([-1], dtypes.int64)), typed([0], dtypes.float32), axis=0)
    return emit("Greater", emit("ReduceMax", flat, keepdims=0), typed(0, dtypes.float32))


def _squaring_body(working, one: str, one64: str, typed, fresh_name):
    """The Loop body of one square-and-multiply step: (result, square, remaining exponents) -> the next."""
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    iteration, going_on = fresh_name("iteration"), fresh_name("going_on")
    result, square, remaining = fresh_name("result"), fresh_name("square"), fresh_name("remaining")
    odd = emit("Equal", emit("BitwiseAnd", remaining, one64), one64)
    multiplied = emit("Mul", result, emit("Where", odd, square, one))
    squared = emit("Mul", square, square)
    halved = emit("Div", remaining, typed(2, dtypes.int64))  # non-negative: Div's truncation is a shift
    keep_going = _any_positive(emit, halved, typed)
    state = [(result, multiplied, working), (square, squared, working), (remaining, halved, dtypes.int64)]
    return helper.make_graph(
        nodes,
        fresh_name("squaring"),
        [
            helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
            helper.make_tensor_value_info(going_on, TensorProto.BOOL, []),
        ]
        + [helper.make_tensor_value_info(name, dtype.onnx_type, None) for name, _, dtype in state],
        [helper.make_tensor_value_info(keep_going, TensorProto.BOOL, [])]
        + [helper.make_tensor_value_info(name, dtype.onnx_type, None) for _, name, dtype in state],
    )


value_blind_decompositions.mark("Pow")  # it reads the dtypes, never an exponent's value
