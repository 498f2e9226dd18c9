"""im2col and col2im: a batch's sliding windows as columns, and their sum back into an image.

``im2col`` is ``F.unfold`` and the columns of the integer convolutions and of some float64 weight
gradients; ``col2im``, its adjoint, is ``F.fold`` and ``Col2Im``'s gradient is ``im2col``.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...ir import dtypes
from ...ir.registry import gradient_rules
from ._common import Tensor, apply_op, int64_constant
from .shape import _constant_list
from .windows import per_axis, pooled_size

__all__ = ["im2col", "col2im"]


def im2col(x: Tensor, kernel, strides, pads_begin, pads_end, dilations, name: str = "Im2ColBackward0") -> Tensor:
    """``(N, C, *spatial)`` -> ``(N, C * prod(kernel), L)``: every window's elements, channel-major.

    One strided ``Slice`` of the zero-padded image per kernel tap (row-major over the kernel), stacked
    after the channels: the ordering ``(c, tap)`` of PyTorch's unfold and ONNX's Col2Im. Copies, so an
    inf or NaN stays in its own entries, where a convolution with one-hot kernels multiplied it by the
    zeros of every other tap (NaN across its windows).
    """
    kernel = [int(k) for k in kernel]
    batch, channels, rank = x.shape[0], x.shape[1], len(kernel)
    padded_shape = [size + begin + end for size, begin, end in zip(x.shape[2:], pads_begin, pads_end)]
    counts = [pooled_size(size, k, s, d, 0, 0) for size, k, d, s in zip(padded_shape, kernel, dilations, strides)]
    if any(pads_begin) or any(pads_end):
        fill = Tensor._full((), 0, x.dtype, x.device)
        pads = [0, 0, *pads_begin, 0, 0, *pads_end]
        x = apply_op("Pad", (x, int64_constant(pads), fill), {"mode": "constant"}, "ConstantPadNdBackward0")
    axes, steps = int64_constant(list(range(2, 2 + rank))), int64_constant([int(s) for s in strides])
    taps = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offset, dilations)]
        ends = [start + (count - 1) * s + 1 for start, count, s in zip(starts, counts, strides)]
        window = apply_op("Slice", (x, int64_constant(starts), int64_constant(ends), axes, steps), None, name)
        taps.append(window.unsqueeze(2))
    stacked = taps[0] if len(taps) == 1 else apply_op("Concat", tuple(taps), {"axis": 2}, name)
    return stacked.reshape((batch, channels * len(taps), int(np.prod(counts))))


def col2im(columns: Tensor, image, kernel, strides, pads_begin, pads_end, dilations) -> Tensor:
    """``(N, C * prod(kernel), L)`` -> ``(N, C, *image)``: :func:`im2col`'s adjoint, each column entry
    added into its image position (overlapping windows summed), then the padding cropped.

    float32 is ONNX's ``Col2Im``; the other dtypes, for which onnxruntime has no Col2Im, a scatter-add
    by the windows' positions (slower: 4-8x on onnxruntime). Both only add, so an inf or NaN stays
    where it lands (a transposed convolution with one-hot kernels spread NaN over its windows).
    """
    kernel, image = [int(k) for k in kernel], [int(size) for size in image]
    if columns.dtype is dtypes.float32:
        attrs = {"strides": list(strides), "dilations": list(dilations), "pads": list(pads_begin) + list(pads_end)}
        sizes = (int64_constant(image), int64_constant(kernel))
        return apply_op("Col2Im", (columns, *sizes), attrs, "Col2ImBackward0")
    batch = columns.shape[0]
    padded_shape = [size + begin + end for size, begin, end in zip(image, pads_begin, pads_end)]
    positions = _window_positions(padded_shape, kernel, strides, dilations)
    channels = columns.shape[1] // positions.shape[0]
    updates = columns.reshape((batch, channels, positions.size))
    table = Tensor._from_array(positions.reshape(-1), dtypes.int64, columns.device).expand(updates.shape)
    zeros = Tensor._zeros((batch, channels, int(np.prod(padded_shape))), columns.dtype, columns.device)
    summed = zeros.scatter_add(2, table, updates).reshape((batch, channels, *padded_shape))
    for axis, (begin, size) in enumerate(zip(pads_begin, image)):
        if begin or size != padded_shape[axis]:
            summed = summed.narrow(axis + 2, begin, size)
    return summed


def _window_positions(padded_shape, kernel, strides, dilations) -> np.ndarray:
    """``(prod(kernel), L)``: the flat position in the padded image of each kernel tap (row-major over
    the kernel) of each window (row-major over the window positions)."""
    positions = np.zeros((1, 1), dtype=np.int64)
    for size, k, d, s in zip(padded_shape, kernel, dilations, strides):
        count = pooled_size(size, k, s, d, 0, 0)
        along = np.arange(k, dtype=np.int64)[:, None] * d + np.arange(count, dtype=np.int64)[None, :] * s
        positions = (positions[:, None, :, None] * size + along[None, :, None, :]).reshape(
            positions.shape[0] * k, positions.shape[1] * count
        )
    return positions


@gradient_rules.register("Col2Im")
def _col2im_grad(ctx, g):
    block = [int(v) for v in _constant_list(ctx.input_value(2))]
    rank = len(block)
    strides = per_axis(ctx.attrs, "strides", rank, 1)
    dilations = per_axis(ctx.attrs, "dilations", rank, 1)
    pads = per_axis(ctx.attrs, "pads", 2 * rank, 0)
    # Col2Im adds each column entry into its image position: its adjoint reads them back (im2col).
    return im2col(g, block, strides, pads[:rank], pads[rank:], dilations, "Col2ImBackward0"), None, None
