"""Pooling kernels: MaxPool (with Indices), AveragePool, LpPool, their Global* forms and MaxUnpool.

Windows are reduced straight from the strided view of the padded input (``sliding_windows``).
Output sizes follow ONNX (and PyTorch): floor or ceil mode, where ceil mode drops a last window
that would start in the end padding; the windows ceil mode adds past the end never count as
padding for ``count_include_pad``.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..ir.attributes import auto_pad_mode  # the shape rules read it the same way
from ._common import auto_pads, lowest, reduce_max, reduce_mean, reduce_sum, spatial_attributes
from .conv import pad_spatial, sliding_windows
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.registry import compiled_forms
from . import compiled_pooling

__all__: list[str] = []


def _pool_geometry(x, attrs):
    """(kernel, strides, dilations, begins, ends, output shape, extra end padding) of a pooling node."""
    spatial = x.ndim - 2
    kernel = list(attrs["kernel_shape"])
    strides, dilations, pads = spatial_attributes(attrs, spatial)
    auto_pad = auto_pad_mode(attrs)
    # onnxruntime sizes SAME padding of pooling for the undilated kernel (then slides the dilated
    # one); the shape rule follows it, and so do the kernels, so both executors agree.
    pads = auto_pads(auto_pad, x.shape[2:], kernel, strides, [1] * len(kernel), pads)
    begins, ends = pads[:spatial], pads[spatial:]
    ceil_mode = attrs.get("ceil_mode", 0)
    output_shape, extra = [], []
    for i in range(spatial):
        size = x.shape[2 + i]
        extent = (kernel[i] - 1) * dilations[i] + 1
        span = size + begins[i] + ends[i] - extent
        count = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
        if ceil_mode and (count - 1) * strides[i] >= size + begins[i]:
            count -= 1
        output_shape.append(count)
        extra.append(max((count - 1) * strides[i] + extent - (size + begins[i] + ends[i]), 0))
    return kernel, strides, dilations, begins, ends, output_shape, extra


def _fold_windows(xp, windows, spatial: int, combine):
    """Combines the window elements offset by offset: one vectorized pass over the output per
    kernel offset, much faster than reducing the small, strided kernel axes of the view."""
    kernel_shape = windows.shape[2 + spatial :]
    result = None
    for offset in itertools.product(*(range(size) for size in kernel_shape)):
        part = windows[(Ellipsis,) + offset]
        result = part.copy() if result is None else combine(result, part, out=result)
    return result


@kernels.register("MaxPool", types=FLOATING | {"int8", "uint8"})
def max_pool(xp, inputs, attrs):
    x = inputs[0]
    spatial = x.ndim - 2
    kernel, strides, dilations, begins, ends, output_shape, extra = _pool_geometry(x, attrs)
    padded = pad_spatial(xp, x, begins, [e + a for e, a in zip(ends, extra)], lowest(x.dtype))
    windows = sliding_windows(xp, padded, kernel, strides, dilations, output_shape)
    if 1 not in attrs.get("_used_outputs", (0, attrs.get("_num_outputs", 1) - 1)):
        return [_fold_windows(xp, windows, spatial, xp.maximum)]
    # The window's size, not -1: an empty batch has no size to infer it from.
    flat = windows.reshape(x.shape[:2] + tuple(output_shape) + (int(np.prod(kernel, dtype=np.int64)),))
    winner = xp.argmax(flat, axis=-1)
    values = xp.take_along_axis(flat, winner[..., None], axis=-1)[..., 0]
    if x.dtype.kind == "f" and xp.isnan(values).any():
        # argmax took a window's first NaN; PyTorch's kernels take its last (each NaN replaces the maximum).
        last_nan = flat.shape[-1] - 1 - xp.argmax(xp.isnan(flat)[..., ::-1], axis=-1)
        winner = xp.where(xp.isnan(values), last_nan, winner)
    if any(begins):
        # The padding holds the dtype's lowest value, so a window whose elements inside X all hold it
        # too (-inf, say, in a masked feature map) ties with its padding, and argmax picks the first
        # tap: padding, whose index lies outside X (and the gradient's scatter wraps it onto another
        # element). PyTorch and onnxruntime start each window at its first tap inside X; so do these.
        first_inside = xp.asarray(_first_taps_inside(kernel, strides, dilations, begins, output_shape))
        winner = xp.where(values == lowest(x.dtype), first_inside, winner)
    return [
        values,
        _max_pool_indices(
            xp, x.shape, winner, kernel, strides, dilations, begins, output_shape, attrs.get("storage_order", 0)
        ),
    ]


class _CompiledMaxPoolWithIndices:
    """A MaxPool node's run as the compiled loop: ``[Y, Indices]`` of the arrays' ``[X]``."""

    # Y has X's dtype, the Indices are int64 (what runtime/split_sessions.py tells later sessions).
    output_dtypes = (None, np.dtype(np.int64))

    def __init__(self, attrs: dict):
        self.attrs = attrs

    def __call__(self, arrays: list, threads: int) -> list:
        kernel, strides, dilations, begins, _, output_shape, _ = _pool_geometry(arrays[0], self.attrs)
        return compiled_pooling.max_pool_with_indices(arrays[0], kernel, strides, dilations, begins, output_shape)


@compiled_forms.register("MaxPool")
def _compiled_max_pool_with_indices(node, threads: int):
    """onnxnn's sessions run a large float32 2-d MaxPool with Indices (max pooling's gradient recomputes it)
    as the compiled loop, outside onnxruntime: the same values, several times faster."""
    x = node.inputs[0]
    if not compiled_pooling.eligible_max_pool(x.shape, x.dtype.numpy_dtype, node.attrs, node.num_outputs):
        return None
    return _CompiledMaxPoolWithIndices(node.attrs)


def _first_taps_inside(kernel, strides, dilations, begins, output_shape) -> np.ndarray:
    """The flat kernel offset (row-major over the kernel) of each window's first tap that lies at or
    after the start of X along every spatial axis, shaped like the output's spatial axes."""
    spatial = len(kernel)
    first = np.zeros(tuple(output_shape), dtype=np.int64)
    for i in range(spatial):
        starts = np.arange(output_shape[i], dtype=np.int64) * strides[i] - begins[i]
        # The taps before the first one at position 0 or later, capped for a window with none inside.
        taps = np.minimum(-(np.minimum(starts, 0) // dilations[i]), kernel[i] - 1)
        first = first * kernel[i] + taps.reshape([-1 if a == i else 1 for a in range(spatial)])
    return first


def _max_pool_indices(xp, shape, winner, kernel, strides, dilations, begins, output_shape, storage_order):
    """Flat indices into the unpadded input of each window's maximum (ONNX's Indices output)."""
    spatial = len(kernel)
    offsets = xp.unravel_index(winner, tuple(kernel))
    coordinates = []
    for i in range(spatial):
        positions = xp.arange(output_shape[i]).reshape([-1 if a == i else 1 for a in range(spatial)])
        coordinates.append(positions * strides[i] - begins[i] + offsets[i] * dilations[i])
    sizes = list(shape[2:])
    if storage_order:
        # Column-major over the spatial axes: the last spatial axis varies slowest.
        coordinates, sizes = coordinates[::-1], sizes[::-1]
    flat = xp.zeros(winner.shape, dtype=np.int64)
    for coordinate, size in zip(coordinates, sizes):
        flat = flat * size + coordinate
    plane = int(np.prod(shape[2:], dtype=np.int64))
    batch_channel = xp.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[:2] + (1,) * spatial)
    return flat + batch_channel * plane


def _window_counts(kernel, stride, dilation, begin, low, high, count):
    """How many elements of each window along one axis fall in [low, high) of the input axis."""
    positions = np.arange(count)[:, None] * stride - begin + np.arange(kernel)[None, :] * dilation
    return ((positions >= low) & (positions < high)).sum(axis=1)


@kernels.register("AveragePool", types=FLOATING)
def average_pool(xp, inputs, attrs):
    x = inputs[0]
    spatial = x.ndim - 2
    kernel, strides, dilations, begins, ends, output_shape, extra = _pool_geometry(x, attrs)
    padded = pad_spatial(xp, x, begins, [e + a for e, a in zip(ends, extra)], 0)
    windows = sliding_windows(xp, padded, kernel, strides, dilations, output_shape)
    sums = _fold_windows(xp, windows, spatial, xp.add)
    include_pad = attrs.get("count_include_pad", 0)
    # The divisor is a product of per-axis counts, since a window is a product of per-axis ranges.
    divisor = np.ones((), dtype=np.float64)
    for i in range(spatial):
        size = x.shape[2 + i]
        low, high = (-begins[i], size + ends[i]) if include_pad else (0, size)
        counts = _window_counts(kernel[i], strides[i], dilations[i], begins[i], low, high, output_shape[i])
        divisor = np.multiply.outer(divisor, counts)
    return [sums / xp.asarray(divisor.astype(x.dtype))]


@kernels.register("LpPool", types=FLOATING)
def lp_pool(xp, inputs, attrs):
    x = inputs[0]
    spatial = x.ndim - 2
    p = attrs.get("p", 2)
    kernel, strides, dilations, begins, ends, output_shape, extra = _pool_geometry(x, attrs)
    powered = xp.abs(x) ** p
    padded = pad_spatial(xp, powered, begins, [e + a for e, a in zip(ends, extra)], 0)
    windows = sliding_windows(xp, padded, kernel, strides, dilations, output_shape)
    return [_fold_windows(xp, windows, spatial, xp.add) ** (1.0 / p)]


def _spatial_axes(x) -> tuple:
    return tuple(range(2, x.ndim))


@kernels.register("GlobalAveragePool", types=FLOATING)
def global_average_pool(xp, inputs, attrs):
    x = inputs[0]
    return [reduce_mean(xp, x, _spatial_axes(x), True)]


@kernels.register("GlobalMaxPool", types=FLOATING)
def global_max_pool(xp, inputs, attrs):
    x = inputs[0]
    return [reduce_max(xp, x, _spatial_axes(x), True)]


@kernels.register("GlobalLpPool", types=FLOATING)
def global_lp_pool(xp, inputs, attrs):
    x = inputs[0]
    p = attrs.get("p", 2)
    return [reduce_sum(xp, xp.abs(x) ** p, _spatial_axes(x), True) ** (1.0 / p)]


@kernels.register("MaxUnpool", types=FLOATING)
def max_unpool(xp, inputs, attrs):
    x, indices = inputs[0], inputs[1]
    output_shape = inputs[2] if len(inputs) > 2 else None
    if output_shape is not None:
        shape = [int(v) for v in output_shape.reshape(-1).tolist()]
    else:
        spatial = x.ndim - 2
        kernel = list(attrs["kernel_shape"])
        strides, _, pads = spatial_attributes(attrs, spatial)
        shape = list(x.shape[:2]) + [
            (x.shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[spatial + i] for i in range(spatial)
        ]
    # Indices count over the whole output tensor, as MaxPool's Indices output does.
    result = xp.zeros(int(np.prod(shape)), dtype=x.dtype)
    result[indices.reshape(-1)] = x.reshape(-1)
    return [result.reshape(shape)]
