"""Convolution kernels: Conv (im2col + one batched BLAS matmul) and ConvTranspose (matmul + col2im).

``sliding_windows`` is a strided view (no copy) of every kernel window of a padded input, shaped
``(N, C, *output, *kernel)``; the pooling kernels reduce it directly. Conv reorders it into the
column matrix ``(N, group, C/group * prod(kernel), prod(output))`` (the one copy im2col needs) so
that ``weights @ columns`` lands in ``(N, M, *output)`` order with no transpose afterwards. Large
batches are processed in chunks to bound the column buffer. onnxnn's ``ConvWeightGradient``
(``ir/conv_weight_gradient.py``) is one batched matmul per kernel tap.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..ir.attributes import auto_pad_mode  # the shape rules read it the same way
from ..ir.conv_weight_gradient import OP_TYPE as WEIGHT_GRADIENT
from ..ir.conv_weight_gradient import tap_starts, weight_gradient_geometry
from ..ir.domains import ONNXNN_DOMAIN
from ._common import auto_pads, spatial_attributes
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.registry import compiled_forms
from . import compiled_convolutions

__all__ = ["sliding_windows", "pad_spatial", "output_size"]

# Upper bound on one im2col buffer; bigger batches are split into chunks of samples.
_COLUMN_BUFFER_BYTES = 256 * 1024 * 1024


def pad_spatial(xp, x, begins, ends, value=0):
    """Pads the spatial axes (2...) of an (N, C, ...) array with a constant."""
    if not any(begins) and not any(ends):
        return x
    widths = [(0, 0), (0, 0)] + [(b, e) for b, e in zip(begins, ends)]
    return xp.pad(x, widths, mode="constant", constant_values=value)


def output_size(size: int, kernel: int, stride: int, dilation: int, begin: int, end: int) -> int:
    """Number of window positions along one axis (floor mode)."""
    return (size + begin + end - ((kernel - 1) * dilation + 1)) // stride + 1


def sliding_windows(xp, padded, kernel_shape, strides, dilations, output_shape):
    """View ``(N, C, *output_shape, *kernel_shape)``: element (o, k) is ``padded[..., o*s + k*d]``."""
    spatial = len(kernel_shape)
    element_strides = padded.strides
    shape = tuple(padded.shape[:2]) + tuple(output_shape) + tuple(kernel_shape)
    strides = (
        tuple(element_strides[:2])
        + tuple(element_strides[2 + i] * strides[i] for i in range(spatial))
        + tuple(element_strides[2 + i] * dilations[i] for i in range(spatial))
    )
    return xp.lib.stride_tricks.as_strided(padded, shape=shape, strides=strides)


def _conv_geometry(x, w, attrs):
    spatial = x.ndim - 2
    kernel = list(attrs.get("kernel_shape") or w.shape[2:])
    strides, dilations, pads = spatial_attributes(attrs, spatial)
    auto_pad = auto_pad_mode(attrs)
    pads = auto_pads(auto_pad, x.shape[2:], kernel, strides, dilations, pads)
    return kernel, strides, dilations, pads[:spatial], pads[spatial:]


@kernels.register("Conv", types=FLOATING)
def conv(xp, inputs, attrs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    kernel, strides, dilations, begins, ends = _conv_geometry(x, w, attrs)
    group = attrs.get("group", 1)
    spatial = x.ndim - 2
    batch, channels = x.shape[:2]
    out_channels = w.shape[0]
    output_shape = [
        output_size(x.shape[2 + i], kernel[i], strides[i], dilations[i], begins[i], ends[i]) for i in range(spatial)
    ]
    padded = pad_spatial(xp, x, begins, ends)
    windows = sliding_windows(xp, padded, kernel, strides, dilations, output_shape)
    # (N, C, *out, *k) -> (N, C, *k, *out): rows of the column matrix are (channel, kernel offset).
    order = (0, 1) + tuple(range(2 + spatial, 2 + 2 * spatial)) + tuple(range(2, 2 + spatial))
    windows = windows.transpose(order)
    positions = int(np.prod(output_shape, dtype=np.int64))
    rows = (channels // group) * int(np.prod(kernel, dtype=np.int64))
    weights = w.reshape(group, out_channels // group, rows)
    out = xp.empty((batch, group, out_channels // group, positions), dtype=np.result_type(x.dtype, w.dtype))
    per_sample = max(rows * group * positions * x.dtype.itemsize, 1)
    chunk = max(1, _COLUMN_BUFFER_BYTES // per_sample)
    for start in range(0, batch, chunk):
        stop = min(start + chunk, batch)
        columns = windows[start:stop].reshape(stop - start, group, rows, positions)
        xp.matmul(weights, columns, out=out[start:stop])
    out = out.reshape((batch, out_channels) + tuple(output_shape))
    if bias is not None:
        out += bias.reshape((1, out_channels) + (1,) * spatial)
    return [out]


def _transpose_geometry(x, w, attrs):
    """Kernel, strides, dilations, output padding, pad begins and the output's spatial shape."""
    spatial = x.ndim - 2
    kernel = list(attrs.get("kernel_shape") or w.shape[2:])
    strides, dilations, pads = spatial_attributes(attrs, spatial)
    output_padding = list(attrs.get("output_padding") or [0] * spatial)
    auto_pad = auto_pad_mode(attrs)
    inputs = x.shape[2:]
    natural = [
        strides[i] * (inputs[i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(spatial)
    ]
    output_shape = attrs.get("output_shape")
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # onnxruntime (and the shape rule) never pad beyond the uncropped size: min(in * stride, full).
        output_shape = [min(inputs[i] * strides[i], natural[i]) for i in range(spatial)]
    if output_shape is not None:
        output_shape = list(output_shape)[-spatial:]
        begins = []
        for i in range(spatial):
            total = natural[i] - output_shape[i]
            begins.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
    else:
        begins = pads[:spatial]
        output_shape = [natural[i] - pads[i] - pads[spatial + i] for i in range(spatial)]
    return kernel, strides, dilations, begins, output_shape


@kernels.register("ConvTranspose", types=FLOATING)
def conv_transpose(xp, inputs, attrs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    kernel, strides, dilations, begins, output_shape = _transpose_geometry(x, w, attrs)
    group = attrs.get("group", 1)
    spatial = x.ndim - 2
    batch, channels = x.shape[:2]
    in_shape = x.shape[2:]
    group_out = w.shape[1]
    out_channels = group_out * group
    kernel_size = int(np.prod(kernel, dtype=np.int64))
    # columns[n, g, (m, k), p] = sum_c w[g, c, (m, k)] * x[n, g, c, p]: one batched matmul.
    weights = w.reshape(group, channels // group, group_out * kernel_size).transpose(0, 2, 1)
    # The positions counted, not -1: an empty batch has no size to infer it from.
    positions = int(np.prod(in_shape, dtype=np.int64))
    columns = xp.matmul(weights, x.reshape(batch, group, channels // group, positions))
    columns = columns.reshape((batch, out_channels) + tuple(kernel) + tuple(in_shape))
    # col2im: every kernel offset adds a strided block into the full (uncropped) output.
    full = [
        max((in_shape[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1, begins[i] + output_shape[i])
        for i in range(spatial)
    ]
    shift = [max(-b, 0) for b in begins]
    canvas = xp.zeros((batch, out_channels) + tuple(f + s for f, s in zip(full, shift)), dtype=columns.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
        target = tuple(
            slice(
                shift[i] + offset[i] * dilations[i],
                shift[i] + offset[i] * dilations[i] + (in_shape[i] - 1) * strides[i] + 1,
                strides[i],
            )
            for i in range(spatial)
        )
        canvas[(slice(None), slice(None)) + target] += columns[(slice(None), slice(None)) + offset]
    crop = tuple(slice(shift[i] + begins[i], shift[i] + begins[i] + output_shape[i]) for i in range(spatial))
    out = canvas[(slice(None), slice(None)) + crop]
    if bias is not None:
        out = out + bias.reshape((1, out_channels) + (1,) * spatial)
    return [out]


@kernels.register(WEIGHT_GRADIENT, domain=ONNXNN_DOMAIN, types=FLOATING)
def conv_weight_gradient(xp, inputs, attrs):
    """The compiled loop where it applies (compiled_convolutions.py), else one batched matmul per kernel
    tap: ``G`` as ``(group, M/group, N*L)`` with the tap's strided window of the padded, channels-last
    input as ``(group, N*L, C/group)``, as the op's decomposition (runtime/ops/conv_weight_gradient.py)
    writes them for one group."""
    x, g = inputs
    geometry = weight_gradient_geometry(x.shape, g.shape, attrs)
    if xp is np and compiled_convolutions.eligible(x.shape, g.shape, x.dtype, geometry.group):
        return [compiled_convolutions.weight_gradient(x, g, geometry)]
    group = geometry.group
    per_group, per_group_out = x.shape[1] // group, g.shape[1] // group
    channels_last = xp.moveaxis(x, 1, -1)
    if any(geometry.pads_begin) or any(geometry.pads_end):
        widths = [(0, 0), *zip(geometry.pads_begin, geometry.pads_end), (0, 0)]
        channels_last = xp.pad(channels_last, widths, mode="constant")
    gradient_rows = xp.moveaxis(g, 1, 0).reshape(group, per_group_out, -1)
    taps = tap_starts(geometry)
    result = xp.empty((group, per_group_out, per_group, len(taps)), dtype=x.dtype)
    for tap, starts in enumerate(taps):
        index = tuple(
            slice(start, start + (out - 1) * stride + 1, stride)
            for start, out, stride in zip(starts, g.shape[2:], geometry.strides)
        )
        window = channels_last[(slice(None),) + index + (slice(None),)].reshape(-1, group, per_group)
        result[..., tap] = xp.matmul(gradient_rows, xp.moveaxis(window, 1, 0))
    return [result.reshape((g.shape[1], per_group) + tuple(geometry.kernel))]


@compiled_forms.register(WEIGHT_GRADIENT, domain=ONNXNN_DOMAIN)
def _compiled_weight_gradient(node, threads: int):
    """onnxnn's sessions run an eligible weight gradient as the compiled loop, outside onnxruntime.

    The geometry, and whether the loop takes the arrays at all, are read from the arrays at each
    run: a graph shared across sizes (fastpath/dynamic_shapes.py) feeds other batch, image and
    channel counts than the node recorded, and a loop given channels it does not take (a grouped
    convolution that is no longer depthwise, more channels than its buffers hold) computes garbage
    or faults. Those runs take the kernel's general path.
    """
    x, g = node.inputs
    group = int(node.attrs.get("group", 1))
    if not compiled_convolutions.eligible(x.shape, g.shape, x.dtype.numpy_dtype, group):
        return None
    attrs = node.attrs

    def run(arrays, threads: int) -> list:
        x, g = arrays
        if not compiled_convolutions.eligible(x.shape, g.shape, x.dtype, group):
            return conv_weight_gradient(np, arrays, attrs)
        geometry = weight_gradient_geometry(x.shape, g.shape, attrs)
        return [compiled_convolutions.weight_gradient(x, g, geometry, threads)]

    return run
