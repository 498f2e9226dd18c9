"""Resampling kernels: Resize, GridSample and AffineGrid.

Resize is separable: each resized axis is interpolated on its own, by gathering a fixed number of
taps per output position (``xp.take`` with a precomputed ``(output, taps)`` index table) and
summing them with a matching weight table. The index and weight tables depend only on the axis
geometry, so they are built with numpy whatever the array module and are small.

The arithmetic follows the ONNX reference implementation (``onnx/reference/ops/op_resize.py``),
which generated the official test data: source coordinates per ``coordinate_transformation_mode``,
taps chosen around ``left = ceil(x) - 1`` with ``ratio = x - left`` in (0, 1], edge-clamped
indices, antialiasing by stretching the filter by ``1 / scale`` when downsampling.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._common import to_list
from ..ir.kernel_registry import FLOATING, NUMERIC, kernels
from ..ir.resize_geometry import nearest_indices, source_coordinates

__all__: list[str] = []


def _text(value, default: str) -> str:
    """A string attribute (stored as bytes or str) or its default."""
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else value


def _optional_list(array) -> list | None:
    """A structural input as a list, None when omitted or empty (ONNX's "not given")."""
    if array is None:
        return None
    values = to_list(array)
    return values or None


def _output_geometry(shape, scales, sizes, axes, policy):
    """(per-axis scale, per-axis output size) over all axes, per the Resize spec's size rules."""
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    if sizes is not None:
        full_sizes = list(shape)
        for axis, size in zip(axes, sizes):
            full_sizes[axis] = int(size)
        ratios = [full_sizes[a] / shape[a] for a in range(rank)]
        if policy == "stretch":
            return ratios, full_sizes
        if policy not in ("not_larger", "not_smaller"):
            raise ValueError(f"Resize: unknown keep_aspect_ratio_policy {policy!r}")
        chosen = [ratios[a] for a in axes]
        scale = min(chosen) if policy == "not_larger" else max(chosen)
        full_scales = [scale if a in axes else 1.0 for a in range(rank)]
        # Rounded half up, as the spec says.
        full_sizes = [int(scale * shape[a] + 0.5) if a in axes else shape[a] for a in range(rank)]
        return full_scales, full_sizes
    if scales is None:
        raise ValueError("Resize: one of scales or sizes must be given")
    full_scales = [1.0] * rank
    for axis, scale in zip(axes, scales):
        full_scales[axis] = float(scale)
    full_sizes = [int(math.floor(full_scales[a] * shape[a])) for a in range(rank)]
    return full_scales, full_sizes


def _nearest_taps(x, nearest_mode):
    """(indices, weights) of nearest-neighbour sampling: one tap of weight 1."""
    return nearest_indices(x, nearest_mode)[:, None], None


def _cubic_weight(distance, a):
    """Keys' cubic convolution kernel with parameter ``a`` at ``|distance|``."""
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _filter_taps(x, mode, scale, antialias, cubic_coeff_a):
    """(indices, weights) of linear or cubic interpolation, both shaped (output, taps).

    Taps sit at ``left + offset`` with ``left = ceil(x) - 1``; antialiasing (downsampling only)
    widens the filter's support by ``1 / scale`` and normalizes the weights.
    """
    support = 1.0 if mode == "linear" else 2.0
    stretch = min(scale, 1.0) if antialias else 1.0
    first = int(math.floor(-support / stretch) + 1)
    # Unstretched: 2 linear taps (offsets 0, 1) or 4 cubic taps (offsets -1 .. 2).
    offsets = np.arange(first, 2 - first)
    left = np.ceil(x) - 1
    ratio = x - left
    distance = (offsets[None, :] - ratio[:, None]) * stretch
    if mode == "linear":
        weights = np.clip(1 - np.abs(distance), 0, 1)
    else:
        weights = _cubic_weight(distance, cubic_coeff_a)
    if antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    indices = left.astype(np.int64)[:, None] + offsets[None, :]
    return indices, weights


def _resize_axis(xp, data, axis, indices, weights, input_size, outside, extrapolation_value):
    """Interpolates ``data`` along ``axis`` from the (output, taps) index and weight tables."""
    clamped = np.clip(indices, 0, input_size - 1)
    output_size, taps = clamped.shape
    if weights is None:
        result = xp.take(data, xp.asarray(clamped[:, 0]), axis=axis)
    else:
        gathered = xp.take(data, xp.asarray(clamped.reshape(-1)), axis=axis)
        gathered = gathered.reshape(data.shape[:axis] + (output_size, taps) + data.shape[axis + 1 :])
        shape = (1,) * axis + (output_size, taps) + (1,) * (data.ndim - axis - 1)
        result = (gathered * xp.asarray(weights.astype(data.dtype).reshape(shape))).sum(axis=axis + 1)
    if outside is not None and outside.any():
        mask = xp.asarray(outside.reshape((1,) * axis + (output_size,) + (1,) * (data.ndim - axis - 1)))
        result = xp.where(mask, xp.asarray(extrapolation_value, dtype=result.dtype), result)
    return result


@kernels.register("Resize", types=NUMERIC)
def resize(xp, inputs, attrs):
    x = inputs[0]
    if len(inputs) == 2:  # Resize-10: (X, scales)
        roi, scales, sizes = None, _optional_list(inputs[1]), None
    else:
        roi = inputs[1] if len(inputs) > 1 and inputs[1] is not None and inputs[1].size else None
        scales = _optional_list(inputs[2]) if len(inputs) > 2 else None
        sizes = _optional_list(inputs[3]) if len(inputs) > 3 else None
    mode = _text(attrs.get("mode"), "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"Resize: unknown mode {mode!r} (expected nearest, linear or cubic)")
    transform = _text(attrs.get("coordinate_transformation_mode"), "half_pixel")
    nearest_mode = _text(attrs.get("nearest_mode"), "round_prefer_floor")
    policy = _text(attrs.get("keep_aspect_ratio_policy"), "stretch")
    antialias = bool(attrs.get("antialias", 0)) and mode != "nearest"
    cubic_coeff_a = float(attrs.get("cubic_coeff_a", -0.75))
    exclude_outside = bool(attrs.get("exclude_outside", 0))
    extrapolation_value = float(attrs.get("extrapolation_value", 0.0))
    axes = attrs.get("axes")
    rank = x.ndim
    full_scales, full_sizes = _output_geometry(x.shape, scales, sizes, axes, policy)
    resized_axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    roi_begin, roi_end = [0.0] * rank, [1.0] * rank
    if roi is not None:
        # Kept as scalars of the roi's dtype: the spec's arithmetic on them (and so which side an
        # exact nearest tie falls) is in that precision.
        roi_values = np.asarray(roi.get() if hasattr(roi, "get") else roi).reshape(-1)
        count = len(resized_axes)
        for i, axis in enumerate(resized_axes):
            roi_begin[axis], roi_end[axis] = roi_values[i], roi_values[count + i]

    integer = x.dtype.kind in "iu"
    result = x if not integer or mode == "nearest" else x.astype(np.float64)
    for axis in resized_axes:
        size, scale = full_sizes[axis], full_scales[axis]
        trivial_roi = transform != "tf_crop_and_resize" or (
            math.isclose(float(roi_begin[axis]), 0.0) and math.isclose(float(roi_end[axis]), 1.0)
        )
        if size == x.shape[axis] and math.isclose(scale, 1.0) and trivial_roi:
            continue  # the identity along this axis
        if size == 0:
            result = xp.take(result, xp.zeros(0, dtype=np.int64), axis=axis)
            continue
        coordinates, outside = source_coordinates(
            transform, size, x.shape[axis], scale, roi_begin[axis], roi_end[axis], nearest=mode == "nearest"
        )
        if mode == "nearest":
            indices, weights = _nearest_taps(coordinates, nearest_mode)
        else:
            indices, weights = _filter_taps(coordinates, mode, scale, antialias, cubic_coeff_a)
            if exclude_outside:
                weights = np.where((indices < 0) | (indices >= x.shape[axis]), 0.0, weights)
                total = weights.sum(axis=1, keepdims=True)
                weights = weights / np.where(total == 0, 1.0, total)
        result = _resize_axis(xp, result, axis, indices, weights, x.shape[axis], outside, extrapolation_value)
    if integer and result.dtype != x.dtype:
        info = np.iinfo(x.dtype)
        result = xp.clip(xp.rint(result), info.min, info.max).astype(x.dtype)
    elif result is x:
        result = x.copy()
    return [result]


def _reflect(x, low: float, high: float):
    """Coordinates folded back into [low, high] by repeated reflection at the borders."""
    span = high - low
    if span <= 0:
        return np.zeros_like(x) + low
    below, above = low - x, x - high
    distance = np.where(x < low, below, np.where(x > high, above, 0.0))
    folds = np.trunc(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    from_below = np.where(even, low + rest, high - rest)
    from_above = np.where(even, high - rest, low + rest)
    return np.where(x < low, from_below, np.where(x > high, from_above, x))


_GRID_LIMIT = 2.0**52  # a source coordinate beyond it has no fraction left in float64


def _grid_taps(x, size: int, mode: str, padding_mode: str, align_corners: bool):
    """(indices, weights, valid) of one spatial axis of GridSample, each shaped (points, taps).

    ``x`` holds the unnormalized source coordinates (float). ``valid`` is False for taps that
    read the zero padding; their indices are clamped so the gather stays in bounds, and the value
    read there is then dropped by a select (never multiplied by 0: the pixel read may be NaN or inf).
    """
    low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
    if not np.all(np.abs(x) <= _GRID_LIMIT):
        # NaN, inf and coordinates too far for an int64 tap: a point far below the input (beyond it
        # every tap reads the padding or the low edge), the infinities far out on their side.
        x = np.clip(np.where(np.isnan(x), -_GRID_LIMIT, x), -_GRID_LIMIT, _GRID_LIMIT)
    if mode == "nearest":
        x = np.rint(x)  # ties to even, as PyTorch rounds (but before folding, as onnxruntime does)
    outside = (x < low) | (x > high)
    if padding_mode == "reflection":
        x = np.where(outside, _reflect(x, low, high), x)
    if padding_mode != "zeros" and mode != "cubic":
        # Clipped into [0, size - 1] as PyTorch does, so a linear tap past the edge has weight 0 and is
        # dropped below. Cubic clamps each tap instead (below), as PyTorch and onnxruntime do; onnx's
        # reference clamps the coordinate first, which differs within two pixels outside the edge.
        x = np.clip(x, 0, size - 1)
    if mode == "nearest":
        indices, weights = np.trunc(x)[:, None], np.ones((x.shape[0], 1), dtype=x.dtype)
    else:
        floor = np.floor(x)
        fraction = (x - floor)[:, None]
        if mode == "linear":
            offsets = np.arange(0, 2)
            weights = np.concatenate([1 - fraction, fraction], axis=1)
        else:
            offsets = np.arange(-1, 3)
            weights = _cubic_weight(offsets[None, :] - fraction, -0.75).astype(x.dtype)
        indices = floor[:, None] + offsets[None, :]
    if padding_mode == "reflection" and mode == "cubic":
        indices = np.trunc(_reflect(indices, low, high))
    indices = indices.astype(np.int64)
    # Zero padding reads 0 outside the input, and so does PyTorch's linear tap just past a clipped edge;
    # cubic's border and reflection fold every tap into it.
    if padding_mode == "zeros" or mode == "linear":
        valid = (indices >= 0) & (indices < size)
    else:
        valid = np.ones(indices.shape, bool)
    return np.clip(indices, 0, size - 1), weights, valid


@kernels.register("GridSample", types=FLOATING)
def grid_sample(xp, inputs, attrs):
    x, grid = inputs[0], inputs[1]
    mode = _text(attrs.get("mode"), "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)  # GridSample-16's names
    padding_mode = _text(attrs.get("padding_mode"), "zeros")
    align_corners = bool(attrs.get("align_corners", 0))
    batch, channels, *sizes = x.shape
    spatial = len(sizes)
    output_spatial = tuple(grid.shape[1:-1])
    # The coordinate tables are per point, so they are computed with numpy on the host.
    points = int(np.prod(output_spatial))  # not -1: an empty batch has no size to infer it from
    normalized = np.asarray(grid.get() if hasattr(grid, "get") else grid).reshape(batch, points, spatial)
    taps = []
    for axis, size in enumerate(sizes):
        # The grid's last axis lists coordinates innermost first: (x, y[, z]).
        n = normalized[:, :, spatial - 1 - axis].reshape(-1)
        if align_corners:
            source = (n + 1) / 2 * (size - 1)
        else:
            source = ((n + 1) * size - 1) / 2
        taps.append(_grid_taps(source.astype(normalized.dtype), size, mode, padding_mode, align_corners))
    flat = x.reshape(batch, channels, int(np.prod(sizes)))
    strides = [int(np.prod(sizes[axis + 1 :])) for axis in range(spatial)]
    batch_index = xp.arange(batch)[:, None, None]
    channel_index = xp.arange(channels)[None, :, None]
    result = xp.zeros((batch, channels, points), dtype=x.dtype)
    # One gather per combination of taps (at most 4 ** spatial), each over every point at once.
    for combination in itertools.product(*(range(t[0].shape[1]) for t in taps)):
        index = np.zeros(batch * points, dtype=np.int64)
        weight = np.ones(batch * points, dtype=np.float64)
        inside = np.ones(batch * points, dtype=bool)
        for axis, tap in enumerate(combination):
            indices, weights, valid = taps[axis]
            index += indices[:, tap] * strides[axis]
            weight *= weights[:, tap]
            inside &= valid[:, tap]
        values = flat[batch_index, channel_index, xp.asarray(index.reshape(batch, 1, points))]
        term = values * xp.asarray(weight.reshape(batch, 1, points).astype(x.dtype))
        if not inside.all():  # a tap in the zero padding reads 0, even where the clamped pixel is NaN
            term = xp.where(xp.asarray(inside.reshape(batch, 1, points)), term, xp.zeros((), dtype=x.dtype))
        result += term
    return [result.reshape((batch, channels) + output_spatial)]


@kernels.register("AffineGrid", types=FLOATING)
def affine_grid(xp, inputs, attrs):
    theta = inputs[0]
    batch, _, *sizes = [int(size) for size in to_list(inputs[1])]
    align_corners = bool(attrs.get("align_corners", 0))
    axes = []
    for size in sizes:
        if align_corners:
            axes.append(np.linspace(-1.0, 1.0, size))
        else:
            axes.append((2 * np.arange(size) + 1) / size - 1)
    # Homogeneous coordinates (x, y[, z], 1) of every output point, x varying fastest.
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(mesh[0].size)], axis=0)
    grid = xp.matmul(theta, xp.asarray(base.astype(theta.dtype)))  # (N, spatial, points)
    return [xp.asarray(grid.transpose(0, 2, 1), order="C").reshape([batch] + sizes + [len(sizes)])]
