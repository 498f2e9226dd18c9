"""Long ``ReduceSum`` and ``ReduceMean`` in onnxnn's sessions: summed in blocks, then the block sums.

onnxruntime's CPU ReduceSum and ReduceMean (1.31) add float32 elements one after another into a
few accumulators (one per SIMD lane over a contiguous run, one per output along a strided axis), so
the rounding error grows with the count reduced: a float32 sum of 10^7 values near 1000 came out
1.2% high (``var`` of them 143 for 0.999), 10^6 rows summed down a column 1.4e5 ulps off, 1000 rows
23 ulps (PyTorch, which sums in cascades: 1 to 3 ulps). onnxnn's CPU sessions write such a node as a
two-level reduction instead: each output's reduced elements, in the order they lie in memory, are
split into blocks of ``b``; one ReduceSum adds each block, a second the ``n / b`` block sums. Adding
``k`` numbers one after another errs by at most ``(k - 1) eps`` of the sum of magnitudes, so the
bound drops from ``(n - 1) eps`` to ``(b + n / b) eps``, ``b`` near ``sqrt(n)``: about 6300 eps at
10^7, where what the lanes actually lose is a few ulps (1 to 3 in ``tests/runtime/test_reduction_accuracy.py``).

The blocks come from a Reshape of the input, never a transpose: the axes' extents are merged into
runs of reduced and kept axes, the innermost reduced runs go to the first ReduceSum whole and one
run is cut in two (``[R] -> [R / b, b]``), its inner part read by the first ReduceSum, its outer
part and the outer runs by the second. The first reads every element once, as the plain node does;
the second reads ``1 / b`` of them. Where the run's extent has no divisor near the block size (a
prime count), a Pad with zeros makes one, at the price of a copy of the input. ReduceMean divides
the blocked sum by ``n``, as PyTorch's CPU mean does (``sum(...).div_(n)``); float16 and bfloat16,
which onnxruntime sums in float32, are summed (and divided) in float32 and rounded once.

Nodes reducing fewer elements per output than onnxruntime keeps accurate are left as they are: 4096
along the innermost axis (there its lanes split the run: at most 3 ulps measured), 256 otherwise.
Measured on one thread of a 2-core machine, a plain node's session against the lowered one's, the
form costs what the plain node does within noise along the innermost axes (10^7 float32 elements
1.07 against 1.07 ms, 10^6 0.067 against 0.060, 10^4 4.4 against 4.8 us) and less down a column
(10^5 x 8 rows 0.30 -> 0.10 ms, a batch norm's statistics over 32 x 64 x 56 x 56 1.3 -> 0.6 ms);
a middle axis between narrow ones costs more (16 x 2000 x 30 over the 2000: 0.059 -> 0.10 ms), a
padded length about 2.5x (10^7 + 19 elements: 1.08 -> 2.8 ms).

The form reads the plan's sizes, so sessions shared across sizes (``fastpath.dynamic_shapes``) keep
the plain node, as do nodes whose axes are fed at run time. onnxnn's kernels sum with numpy, pairwise
along the innermost axis. Exports keep the plain node, as ``torch.onnx.export`` writes it.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.registry import session_lowerings

__all__: list[str] = []

# The count reduced per output from which a node is blocked: along the innermost axis onnxruntime's
# lanes keep 4096 float32 values near 1000 within 3 ulps (8192: 5, 32768: 19); down a strided axis,
# where each output adds its elements one by one, 256 rows are within 10 ulps (1024: 21, 4096: 41).
CONTIGUOUS_THRESHOLD = 1 << 12
STRIDED_THRESHOLD = 1 << 8

# A divisor of the cut run is taken as the block size when neither level then adds more than this
# many times ``sqrt(n)`` elements; otherwise the run is padded to a multiple of ``sqrt(n)``.
_SLACK = 4

_SUMMED_IN = {dtypes.float32: dtypes.float32, dtypes.float16: dtypes.float32, dtypes.bfloat16: dtypes.float32}


def reduced_axes(node, is_constant) -> set | None:
    """The axes a Reduce node reduces (a set, empty for a no-op), or None where they are not a constant
    of the graph (``is_constant(position)`` says; None: never)."""
    rank = len(node.inputs[0].shape)
    axes: list | None = None
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        if is_constant is None or not is_constant(1):
            return None
        axes = np.asarray(node.inputs[1].data).reshape(-1).tolist()
    elif "axes" in node.attrs:
        axes = list(node.attrs["axes"])
    if not axes:
        return set() if node.attrs.get("noop_with_empty_axes", 0) else set(range(rank))
    return {axis + rank if axis < 0 else axis for axis in axes}


def _runs(shape, axes: set) -> list:
    """``[extent, reduced]`` of the maximal runs of reduced and of kept axes (extent-1 axes dropped)."""
    runs: list = []
    for axis, extent in enumerate(shape):
        if extent == 1:
            continue
        reduced = axis in axes
        if runs and runs[-1][1] == reduced:
            runs[-1][0] *= extent
        else:
            runs.append([extent, reduced])
    return runs


def _block(extent: int, inner: int, count: int) -> tuple[int, int]:
    """``(block, padded extent)``: the inner part of a run of ``extent`` whose outer part goes to the
    second level, given ``inner`` elements of the runs inside it and ``count`` reduced in all."""
    target = math.isqrt(count)
    best, best_cost = 0, count
    for low in range(1, math.isqrt(extent) + 1):
        if extent % low:
            continue
        for block in (low, extent // low):
            first = inner * block
            cost = max(first, count // first)
            if cost < best_cost or (cost == best_cost and block > best):
                best, best_cost = block, cost
    if best_cost <= _SLACK * target:
        return best, extent
    block = -(-target // inner)
    return block, -(-extent // block) * block


@session_lowerings.register("ReduceSum", "ReduceMean")
def _blocked(node, input_names: list, output_names: list, fresh_name, embedded=None):
    x = node.inputs[0]
    summed_in = _SUMMED_IN.get(x.dtype)
    shape = x.shape
    if summed_in is None or not all(type(extent) is int for extent in shape):
        return None
    axes = reduced_axes(node, embedded)
    if axes is None or 0 in shape:
        return None
    runs = _runs(shape, axes)
    count = math.prod(extent for extent, reduced in runs if reduced)
    threshold = CONTIGUOUS_THRESHOLD if runs and runs[-1][1] else STRIDED_THRESHOLD
    if count < threshold:
        return None

    # The run to cut: the innermost one past which the runs inside reach sqrt(n) elements.
    target, inner = math.isqrt(count), 1
    cut = len(runs) - 1
    while not runs[cut][1] or inner * runs[cut][0] < target:
        if runs[cut][1]:
            inner *= runs[cut][0]
        cut -= 1
    extent = runs[cut][0]
    block, padded = _block(extent, inner, count)

    nodes: list = []
    initializers: list = []

    def constant(stem: str, values) -> str:
        name = fresh_name(stem)
        initializers.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def add(op_type: str, inputs: list, **attributes) -> str:
        output = fresh_name(op_type.lower())
        nodes.append(helper.make_node(op_type, inputs, [output], name=fresh_name(op_type), **attributes))
        return output

    current = input_names[0]
    if summed_in is not x.dtype:
        current = add("Cast", [current], to=summed_in.onnx_type)
    if padded != extent:
        pads = [0] * (2 * len(runs))
        pads[len(runs) + cut] = padded - extent
        current = add("Reshape", [current, constant("runs", [run[0] for run in runs])])
        current = add("Pad", [current, constant("pads", pads)])
    split = [run[0] for run in runs[:cut]] + [padded // block, block] + [run[0] for run in runs[cut + 1 :]]
    current = add("Reshape", [current, constant("blocks", split)])
    first = [cut + 1] + [index + 1 for index in range(cut + 1, len(runs)) if runs[index][1]]
    second = [index for index in range(cut + 1) if runs[index][1]]
    current = add("ReduceSum", [current, constant("block_axes", first)], keepdims=0)
    current = add("ReduceSum", [current, constant("axes", second)], keepdims=0)
    if node.op_type == "ReduceMean":
        divisor = fresh_name("count")
        initializers.append(numpy_helper.from_array(np.array(count, summed_in.numpy_dtype), divisor))
        current = add("Div", [current, divisor])
    if summed_in is not x.dtype:
        current = add("Cast", [current], to=x.dtype.onnx_type)
    keepdims = node.attrs.get("keepdims", 1)
    result = [1 if axis in axes else extent for axis, extent in enumerate(shape) if keepdims or axis not in axes]
    if result != [run[0] for run in runs if not run[1]]:
        current = add("Reshape", [current, constant("shape", result)])
    nodes[-1].output[0] = output_names[0]
    return nodes, initializers
