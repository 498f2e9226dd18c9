"""The float64 forms of Conv, ConvTranspose and AveragePool, which onnxruntime lacks.

onnxruntime's CPU provider has no double kernel for these three (1.31, checked with single-node
models), so a float64 ``conv2d``, ``conv_transpose2d``, ``avg_pool2d`` or ``lp_pool2d`` could not run
on the onnxruntime executor (nor the gradients of a float64 convolution, which are Conv and
ConvTranspose nodes again), "auto" sent every plan holding one to onnxnn's kernels, and an exported
float64 model holding one could not be served. onnxnn records the standard op (its kernels, and
sessions of the other dtypes, run it as it is) and, for float64 inputs only, writes it in sessions
and exports as ops onnxruntime runs in double: Slice, Pad, Concat, MatMul, Add and Div, with
Reshape, Transpose and shape arithmetic around them.

- **Conv** is im2col and one GEMM (per group): every kernel tap's strided window of the padded
  input (``conv_lowering.emit_window_columns``, the im2col its one-GEMM session form uses), rows
  ordered as the weight's ``(C, *kernel)``, times the weight as ``(M, C * taps)``.
- **ConvTranspose** is the Conv of the input spread ``stride`` apart (zeros between its elements)
  and padded by ``dilation * (k - 1) - pad`` (``+ output_padding`` at the end), with each group's
  weight transposed and flipped: the adjoint's formula, as onnxruntime's own lowering of a
  stride-1 ConvTranspose (conv_lowering) uses it.
- **AveragePool** is the sum of every tap's strided window of the zero-padded input, divided by
  the same sum over a plane of ones padded with ones (count_include_pad) or zeros: the divisor
  counts exactly the positions ONNX's divisor counts, ceil_mode's partial windows included. With
  ceil_mode the input is padded at the end by ``min(stride - 1, dilation * (k - 1) - pad_end)``:
  then the windows are those ceil_mode keeps, never one starting in the end padding.

Each output is a sum of the same terms as the op's (the transposed form adds zeros), so it is exact
to float64 rounding; an infinity or NaN in the input reaches only the outputs whose windows hold it
(windows are copied, never multiplied by a one-hot kernel). The nodes read no size but the rank:
windows end a fixed count before the padded input's end, and every reshape (and ``auto_pad``
``SAME_*``'s pads) takes its sizes from the shapes at run time, so a graph shared across sizes
(fastpath.dynamic_shapes) stays exact. Only ConvTranspose's ``output_shape`` (imported models),
whose crop depends on the input's size, is resolved for the sizes of the graph being built.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ...ir import dtypes
from ...ir.attributes import auto_pad_mode
from ...ir.registry import decompositions, value_blind_decompositions
from .conv_lowering import emit_window_columns
from .training import int64_initializers, node_emitter
from .windows import WindowGeometry, transpose_geometry, window_geometry

__all__: list[str] = []

OP_TYPES = ("Conv", "ConvTranspose", "AveragePool")

_END = int(np.iinfo(np.int64).max)


class _Writer:
    """The nodes and int64 constants of one expansion, with the shape arithmetic its reshapes use."""

    def __init__(self, fresh_name):
        self.nodes: list = []
        self.initializers: list = []
        self.emit = node_emitter(self.nodes, fresh_name)
        self.constant = int64_initializers(self.initializers, fresh_name)

    def dims(self, name: str, start: int, end: int | None = None) -> str:
        """``shape(name)[start:end]`` at run time, as an int64 vector."""
        if end is None:
            return self.emit("Shape", name, start=start)
        return self.emit("Shape", name, start=start, end=end)

    def reshape(self, name: str, *parts: str, output: str | None = None) -> str:
        """``name`` reshaped to the concatenated int64 vectors ``parts``, a zero meaning a zero (empty
        batches and channels keep their sizes; no -1 that a zero-size tensor would leave undefined)."""
        target = self.emit("Concat", *parts, axis=0)
        return self.emit("Reshape", name, target, allowzero=1, output=output)

    def result(self) -> tuple[list, list]:
        return self.nodes, self.initializers


_SAME_MODES = ("SAME_UPPER", "SAME_LOWER")


def _same_pads(writer: _Writer, x: str, geometry: WindowGeometry, attrs, pooling: bool) -> str:
    """``auto_pad`` ``SAME_*``'s pads ``[0, 0, *begin, 0, 0, *end]`` for the size of ``x`` at run time:
    ``ceil(in / stride)`` windows, the odd element at the end (UPPER) or the beginning (LOWER), a
    pooling window's extent undilated as onnxruntime sizes it (``windows.window_geometry``)."""
    emit, constant = writer.emit, writer.constant
    spatial, strides = writer.dims(x, 2), constant(geometry.strides)
    extents = [k if pooling else (k - 1) * d + 1 for k, d in zip(geometry.kernel, geometry.dilations)]
    windows = emit("Div", emit("Add", spatial, constant([s - 1 for s in geometry.strides])), strides)
    reach = emit("Add", emit("Mul", emit("Sub", windows, constant([1])), strides), constant(extents))
    total = emit("Max", emit("Sub", reach, spatial), constant([0] * len(extents)))
    small = emit("Div", total, constant([2]))
    large = emit("Sub", total, small)
    begin, end = (small, large) if auto_pad_mode(attrs) == "SAME_UPPER" else (large, small)
    zeros = constant([0, 0])
    return emit("Concat", zeros, begin, zeros, end, axis=0)


def _is_float64(node) -> bool:
    return node.inputs[0].dtype is dtypes.float64


def _window_sums_ends(writer: _Writer, geometry: WindowGeometry):
    """``window_ends`` for ``emit_window_columns`` and the tap slices: each window ends
    ``dilation * (k - 1) - start`` before the padded input's end, which leaves it exactly the
    positions of the windows that fit (``floor((padded - extent - 1) / stride) + 1``)."""
    extents = [(k - 1) * d for k, d in zip(geometry.kernel, geometry.dilations)]

    def window_ends(starts, begin: str) -> str:
        return writer.constant([start - extent or _END for start, extent in zip(starts, extents)])

    return window_ends


def _emit_conv(writer: _Writer, x: str, weight: str, bias: str, geometry: WindowGeometry, group: int, output: str):
    """``Conv(x, weight, bias)`` for the explicit ``geometry`` as im2col and a (grouped) MatMul."""
    emit, constant, rank = writer.emit, writer.constant, len(geometry.kernel)
    columns, first_window = emit_window_columns(
        emit, constant, x, geometry, _window_sums_ends(writer, geometry), constant(geometry.strides)
    )  # (C * taps, N * L), and the first window (C, N, *out)
    rows = emit("Flatten", weight, axis=1)  # (M, C/group * taps)
    if group == 1:
        product = emit("MatMul", rows, columns)  # (M, N * L)
    else:
        groups = constant([group])
        columns = writer.reshape(
            columns, groups, emit("Div", writer.dims(columns, 0, 1), groups), writer.dims(columns, 1, 2)
        )  # (group, C/group * taps, N * L)
        rows = writer.reshape(rows, groups, emit("Div", writer.dims(rows, 0, 1), groups), writer.dims(rows, 1, 2))
        product = emit("Flatten", emit("MatMul", rows, columns), axis=2)  # (M, N * L)
    if bias:
        product = emit("Add", product, emit("Unsqueeze", bias, constant([1])))
    by_image = writer.reshape(product, writer.dims(product, 0, 1), writer.dims(first_window, 1))  # (M, N, *out)
    emit("Transpose", by_image, perm=[1, 0, *range(2, 2 + rank)], output=output)


@decompositions.register("Conv")
def _conv(node, input_names: list, output_names: list, fresh_name):
    if not _is_float64(node):
        return None  # onnxruntime has float, float16 and bfloat16 kernels
    x, weight = node.inputs[0], node.inputs[1]
    geometry = window_geometry(x.shape[2:], weight.shape[2:], node.attrs)
    writer = _Writer(fresh_name)
    bias = input_names[2] if len(input_names) > 2 else ""
    group = int(node.attrs.get("group", 1))
    x_name = input_names[0]
    if auto_pad_mode(node.attrs) in _SAME_MODES:
        x_name = writer.emit("Pad", x_name, _same_pads(writer, x_name, geometry, node.attrs, pooling=False))
        geometry = geometry._replace(pads_begin=[0] * len(geometry.kernel), pads_end=[0] * len(geometry.kernel))
    _emit_conv(writer, x_name, input_names[1], bias, geometry, group, output_names[0])
    return writer.result()


def _spread(writer: _Writer, x: str, strides: list[int]) -> str:
    """``x`` with ``stride - 1`` zeros between its elements along each spatial axis: ``(N, C, *in)`` ->
    ``(N, C, *(stride * (in - 1) + 1))``. Each axis gets a new one after it, padded to ``stride``;
    merging the two and cutting the trailing zeros leaves the elements ``stride`` apart."""
    emit, constant, rank = writer.emit, writer.constant, len(strides)
    if all(s == 1 for s in strides):
        return x
    new_axes = [3 + 2 * i for i in range(rank)]
    expanded = emit("Unsqueeze", x, constant(new_axes))  # (N, C, in_1, 1, in_2, 1, ...)
    ends = [0, 0] + [amount for s in strides for amount in (0, s - 1)]
    padded = emit("Pad", expanded, constant([0] * len(ends) + ends))  # (N, C, in_1, s_1, ...)
    merged = writer.reshape(padded, writer.dims(x, 0, 2), emit("Mul", writer.dims(x, 2), constant(strides)))
    spatial = list(range(2, 2 + rank))
    return emit(
        "Slice", merged, constant([0] * rank), constant([1 - s if s > 1 else _END for s in strides]), constant(spatial)
    )


def _transposed_weight(writer: _Writer, weight: str, group: int, rank: int) -> str:
    """A ConvTranspose weight ``(C, M/group, *k)`` as the Conv weight of its adjoint: ``(M, C/group, *k)``,
    each group's input and output channels swapped, the kernel flipped along every spatial axis."""
    emit, constant = writer.emit, writer.constant
    spatial = list(range(2, 2 + rank))
    if group == 1:
        swapped = emit("Transpose", weight, perm=[1, 0, *spatial])
    else:
        groups = constant([group])
        per_group = emit("Div", writer.dims(weight, 0, 1), groups)  # C/group
        by_group = writer.reshape(weight, groups, per_group, writer.dims(weight, 1))  # (group, C/group, M/group, *k)
        transposed = emit("Transpose", by_group, perm=[0, 2, 1, *range(3, 3 + rank)])
        swapped = writer.reshape(
            transposed, emit("Mul", writer.dims(weight, 1, 2), groups), per_group, writer.dims(weight, 2)
        )
    return emit(
        "Slice", swapped, constant([-1] * rank), constant([-_END] * rank), constant(spatial), constant([-1] * rank)
    )


@decompositions.register("ConvTranspose")
def _conv_transpose(node, input_names: list, output_names: list, fresh_name):
    if not _is_float64(node):
        return None
    x, weight = node.inputs[0], node.inputs[1]
    kernel = [int(k) for k in weight.shape[2:]]
    rank = len(kernel)
    geometry = transpose_geometry(x.shape[2:], kernel, node.attrs)
    group = int(node.attrs.get("group", 1))
    # Full scatter length f = stride * (in - 1) + output_padding + extent + 1, cut to
    # [pads_begin, pads_begin + output): the Conv of the spread input, padded by extent - pads_begin
    # in front and extent - pads_end + output_padding behind, with the flipped kernel.
    full = [
        s * (size - 1) + p + (k - 1) * d + 1
        for size, k, s, d, p in zip(x.shape[2:], kernel, geometry.strides, geometry.dilations, geometry.output_padding)
    ]
    pads_end = [f - b - out for f, b, out in zip(full, geometry.pads_begin, geometry.output)]
    extents = [(k - 1) * d for k, d in zip(kernel, geometry.dilations)]
    before = [extent - b for extent, b in zip(extents, geometry.pads_begin)]
    after = [extent - e + p for extent, e, p in zip(extents, pads_end, geometry.output_padding)]
    writer = _Writer(fresh_name)
    emit, constant = writer.emit, writer.constant
    spread = _spread(writer, input_names[0], geometry.strides)
    if min(before) < 0 or min(after) < 0:  # padding beyond the kernel's reach: cut, the negative pads
        spatial = list(range(2, 2 + rank))
        starts = [max(-b, 0) for b in before]
        ends = [a if a < 0 else _END for a in after]
        spread = emit("Slice", spread, constant(starts), constant(ends), constant(spatial))
    conv_geometry = WindowGeometry(
        [], kernel, [1] * rank, list(geometry.dilations), [max(b, 0) for b in before], [max(a, 0) for a in after]
    )
    bias = input_names[2] if len(input_names) > 2 else ""
    flipped = _transposed_weight(writer, input_names[1], group, rank)
    _emit_conv(writer, spread, flipped, bias, conv_geometry, group, output_names[0])
    return writer.result()


def _window_sum(writer: _Writer, padded: str, geometry: WindowGeometry) -> str:
    """The sum of every kernel tap's strided window of ``padded`` (already padded), tap after tap."""
    emit, constant = writer.emit, writer.constant
    rank = len(geometry.kernel)
    window_ends = _window_sums_ends(writer, geometry)
    axes, steps = constant(list(range(2, 2 + rank))), constant(geometry.strides)
    total = ""
    for offsets in np.ndindex(*geometry.kernel):
        starts = [int(o) * d for o, d in zip(offsets, geometry.dilations)]
        begin = constant(starts)
        window = emit("Slice", padded, begin, window_ends(starts, begin), axes, steps)
        total = emit("Add", total, window) if total else window
    return total


@decompositions.register("AveragePool")
def _average_pool(node, input_names: list, output_names: list, fresh_name):
    if not _is_float64(node):
        return None
    x = node.inputs[0]
    ceil_mode = bool(node.attrs.get("ceil_mode", 0))
    geometry = window_geometry(x.shape[2:], node.attrs["kernel_shape"], node.attrs, ceil_mode, pooling=True)
    rank = len(geometry.kernel)
    writer = _Writer(fresh_name)
    emit, constant = writer.emit, writer.constant
    if auto_pad_mode(node.attrs) in _SAME_MODES:  # ceil_mode does not apply
        pads = counted_pads = _same_pads(writer, input_names[0], geometry, node.attrs, pooling=True)
        extra = [0] * rank
    else:
        # ceil_mode keeps a last partial window unless it would start in the end padding: the
        # windows that fit in the input padded by this much more at the end are exactly those
        # (windows.pooled_size).
        extra = [
            min(s - 1, (k - 1) * d - end) if ceil_mode else 0
            for k, s, d, end in zip(geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_end)
        ]
        ends = [end + more for end, more in zip(geometry.pads_end, extra)]
        pads = constant([0, 0, *geometry.pads_begin, 0, 0, *ends])
        counted_pads = constant([0, 0, *geometry.pads_begin, 0, 0, *geometry.pads_end])
    summed = geometry._replace(pads_begin=[0] * rank, pads_end=[0] * rank)
    sums = _window_sum(writer, emit("Pad", input_names[0], pads), summed)
    plane_shape = emit("Concat", constant([1, 1]), writer.dims(input_names[0], 2), axis=0)
    ones = emit("ConstantOfShape", plane_shape, value=helper.make_tensor("value", TensorProto.DOUBLE, [1], [1.0]))
    if node.attrs.get("count_include_pad", 0):
        # The padding counts in the divisor, ceil_mode's positions past it do not.
        one = helper.make_tensor(fresh_name("one"), TensorProto.DOUBLE, [], [1.0])
        writer.initializers.append(one)
        counted = emit("Pad", ones, counted_pads, one.name)
        if any(extra):
            counted = emit("Pad", counted, constant([0] * (2 + rank) + [0, 0, *extra]))
    else:
        counted = emit("Pad", ones, pads)
    emit("Div", sums, _window_sum(writer, counted, summed), output=output_names[0])
    return writer.result()


value_blind_decompositions.mark(*OP_TYPES)
