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

The form reads the plan's sizes. Sessions shared across sizes (``fastpath.dynamic_shapes``: a loop
whose batch or sequence length varies) write another (``_blocked_at_any_size``) that reads them at
run time: the innermost run of reduced axes is merged into one axis of ``R`` elements, padded with
zeros to a multiple of ``b = ceil(sqrt(R))`` and summed in blocks of ``b``; the second ReduceSum adds
the ``R / b`` block sums and the other reduced axes. About twenty small shape nodes compute the
sizes, and the Pad copies the input, so it is written only where the sizes the graph is first built
for reach the thresholds below. Nodes whose axes are fed at run time keep the plain node. onnxnn's
kernels sum with numpy, pairwise along the innermost axis. Exports keep the plain node, as
``torch.onnx.export`` writes it.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.registry import session_lowerings, size_blind_session_lowerings

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


def _is_long(shape, axes: set) -> bool:
    """Whether a reduction over ``axes`` of ``shape`` adds more elements per output than onnxruntime
    keeps accurate (the thresholds above)."""
    runs = _runs(shape, axes)
    count = math.prod(extent for extent, reduced in runs if reduced)
    return count >= (CONTIGUOUS_THRESHOLD if runs and runs[-1][1] else STRIDED_THRESHOLD)


class _Emitter:
    """The nodes and int64 constants of one lowering, each output a fresh name."""

    def __init__(self, fresh_name):
        self.fresh_name = fresh_name
        self.nodes: list = []
        self.initializers: list = []

    def constant(self, stem: str, values, dtype=np.int64) -> str:
        name = self.fresh_name(stem)
        self.initializers.append(numpy_helper.from_array(np.array(values, dtype), name))
        return name

    def add(self, op_type: str, inputs: list, **attributes) -> str:
        output = self.fresh_name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=self.fresh_name(op_type), **attributes))
        return output

    def finish(self, output_name: str) -> tuple:
        self.nodes[-1].output[0] = output_name
        return self.nodes, self.initializers


@session_lowerings.register("ReduceSum", "ReduceMean")
def _blocked(node, input_names: list, output_names: list, fresh_name, embedded=None):
    x = node.inputs[0]
    summed_in = _SUMMED_IN.get(x.dtype)
    shape = x.shape
    if summed_in is None or not all(type(extent) is int for extent in shape):
        return None
    axes = reduced_axes(node, embedded)
    if axes is None or 0 in shape or not _is_long(shape, axes):
        return None
    runs = _runs(shape, axes)
    count = math.prod(extent for extent, reduced in runs if reduced)

    # The run to cut: the innermost one past which the runs inside reach sqrt(n) elements.
    target, inner = math.isqrt(count), 1
    cut = len(runs) - 1
    while not runs[cut][1] or inner * runs[cut][0] < target:
        if runs[cut][1]:
            inner *= runs[cut][0]
        cut -= 1
    extent = runs[cut][0]
    block, padded = _block(extent, inner, count)

    emitter = _Emitter(fresh_name)
    add, constant = emitter.add, emitter.constant
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
        current = add("Div", [current, constant("count", count, summed_in.numpy_dtype)])
    if summed_in is not x.dtype:
        current = add("Cast", [current], to=x.dtype.onnx_type)
    keepdims = node.attrs.get("keepdims", 1)
    result = [1 if axis in axes else extent for axis, extent in enumerate(shape) if keepdims or axis not in axes]
    if result != [run[0] for run in runs if not run[1]]:
        current = add("Reshape", [current, constant("shape", result)])
    return emitter.finish(output_names[0])


@size_blind_session_lowerings.register("ReduceSum", "ReduceMean")
def _blocked_at_any_size(node, input_names: list, output_names: list, fresh_name, embedded=None):
    """``_blocked`` for a graph shared across sizes: the blocks' sizes computed at run time (the module doc)."""
    x = node.inputs[0]
    summed_in = _SUMMED_IN.get(x.dtype)
    axes = reduced_axes(node, embedded)
    if summed_in is None or not axes:
        return None
    shape, rank = x.shape, len(x.shape)
    if all(type(extent) is int for extent in shape) and not _is_long(shape, axes):
        return None
    last = max(axes)
    first = last
    while first - 1 in axes:
        first -= 1
    emitter = _Emitter(fresh_name)
    add, constant = emitter.add, emitter.constant
    current = input_names[0]
    if summed_in is not x.dtype:
        current = add("Cast", [current], to=summed_in.onnx_type)
    one = constant("one", [1])
    head = [add("Shape", [current], end=first)] if first > 0 else []
    tail = [add("Shape", [current], start=last + 1)] if last + 1 < rank else []
    extent = add("ReduceProd", [add("Shape", [current], start=first, end=last + 1)], keepdims=1)
    root = add("Ceil", [add("Sqrt", [add("Cast", [extent], to=dtypes.float64.onnx_type)])])
    block = add("Max", [add("Cast", [root], to=dtypes.int64.onnx_type), one])
    blocks = add("Div", [add("Sub", [add("Add", [extent, block]), one]), block])
    padding = add("Sub", [add("Mul", [blocks, block]), extent])
    merged_rank = rank - (last - first)
    # allowzero: an empty axis is an extent of 0, not "copy the input's".
    current = add("Reshape", [current, add("Concat", [*head, extent, *tail], axis=0)], allowzero=1)
    before, after = (
        constant("pads_before", [0] * (merged_rank + first)),
        constant("pads_after", [0] * (merged_rank - first - 1)),
    )
    current = add("Pad", [current, add("Concat", [before, padding, after], axis=0)])
    current = add("Reshape", [current, add("Concat", [*head, blocks, block, *tail], axis=0)], allowzero=1)
    current = add("ReduceSum", [current, constant("block_axes", [first + 1])], keepdims=0)
    outer = sorted(axis for axis in axes if axis < first) + [first]
    current = add("ReduceSum", [current, constant("axes", outer)], keepdims=0)
    if node.op_type == "ReduceMean":
        reduced_extents = add("Gather", [add("Shape", [input_names[0]]), constant("reduced", sorted(axes))])
        count = add("Cast", [add("ReduceProd", [reduced_extents], keepdims=0)], to=summed_in.onnx_type)
        current = add("Div", [current, count])
    if summed_in is not x.dtype:
        current = add("Cast", [current], to=x.dtype.onnx_type)
    if node.attrs.get("keepdims", 1):
        current = add("Unsqueeze", [current, constant("kept_axes", sorted(axes))])
    return emitter.finish(output_names[0])
