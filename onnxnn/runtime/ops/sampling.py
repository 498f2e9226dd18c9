"""GridSample and AffineGrid: shape and gradient rules.

AffineGrid is linear in ``theta``: every output point is ``theta @ (x, y[, z], 1)`` for fixed
normalized base coordinates, so the gradient is the incoming gradient (points by spatial
components) times the base coordinates, one ``MatMul``.

GridSample's gradient is written with standard ops from the same sampling arithmetic as PyTorch's
``grid_sampler`` backward (and the kernels executor's forward): per spatial axis the source
coordinate ``src`` is the unnormalized grid value, folded by the padding mode (``border`` clips,
``reflection`` reflects then clips) with its derivative ``d src / d grid`` (the unnormalizing factor
times 0 or +-1); ``linear`` reads taps ``floor(src)`` and ``floor(src) + 1`` with weights ``1 - f`` and
``f``; ``nearest`` reads ``round(src)`` (halves to even). Taps outside the input read zero. Then

- ``grad_input`` scatters ``g * weight`` onto each tap's position (``ScatterElements`` add);
- ``grad_grid`` along an axis sums, over taps and channels, ``g * value * d weight / d src``.

Tap positions and weights are computed from the grid's values by graph ops (never numpy at rule
time), so a replayed backward on new data stays exact; ``floor``/``round`` read detached
coordinates, having zero derivative. ``cubic`` reads the 4 x 4 taps around ``floor(src)`` with Keys'
kernel (``a = -0.75``), folding each tap's index by the padding mode on its own, as PyTorch and
onnxruntime do (with ``border`` padding each tap is clamped, not the coordinate first as onnx's
reference does; the kernels executor follows PyTorch and onnxruntime).
"""

from __future__ import annotations

import itertools

import numpy as np

from ...ir import dtypes
from ...ir.registry import gradient_rules, shape_rules
from ._common import Tensor
from .elementwise import where
from .indexing import gather_within, scatter_add_within
from .shape import _constant_list, stack


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else value


# ---------------------------------------------------------------- AffineGrid


@shape_rules.register("AffineGrid")
def _affine_grid_shape(inputs, attrs):
    size = [int(s) for s in _constant_list(inputs[1])]
    return [(tuple([size[0]] + size[2:] + [len(size) - 2]), inputs[0].dtype)]


def affine_base(sizes: list[int], align_corners: bool) -> np.ndarray:
    """The homogeneous normalized coordinates ``(points, spatial + 1)``, x varying fastest."""
    axes = [np.linspace(-1.0, 1.0, size) if align_corners else (2 * np.arange(size) + 1) / size - 1 for size in sizes]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(mesh[0].size)], axis=1)


@gradient_rules.register("AffineGrid")
def _affine_grid_grad(ctx, g):
    size = [int(s) for s in _constant_list(ctx.input_value(1))]
    spatial = len(size) - 2
    base = affine_base(size[2:], bool(ctx.attrs.get("align_corners", 0)))
    constant = Tensor._from_array(base.astype(g.dtype.numpy_dtype), g.dtype, g.device)
    per_point = g.reshape(size[0], -1, spatial)  # (N, points, spatial)
    return per_point.transpose(1, 2) @ constant, None


# ---------------------------------------------------------------- GridSample


# Normalized coordinates beyond +-16 read only padding (or the edge) in every mode and size: the
# furthest bicubic tap reaches 2 pixels past the edge, and 16 maps at least 3 pixels beyond it.
_GRID_FAR = 16.0
# Reflection keeps coordinates up to 2 ** 30 (where float32 has no fraction left): onnxruntime's
# reflection counts folds in a C int, undefined beyond 2 ** 31.
_GRID_REFLECT_LIMIT = 2.0**30


def pytorch_grid(grid: Tensor, mode: str, padding_mode: str, align_corners: bool, sizes: list[int]):
    """``grid`` made safe for ``GridSample`` with PyTorch's results: (the grid, or None for a flag).

    ``GridSample`` casts coordinates to integers (undefined in onnxruntime for NaN, inf and
    ``|g| >= 2 ** 63``), so they are selected to values with PyTorch's result: with zero padding
    NaN, inf and far coordinates go to a far point (zeros); with border padding to the edge PyTorch's
    clip gives (NaN to the low edge in 2-D, whose kernel clamps NaN to 0, and to the high edge in 3-D,
    whose ``std::min(limit, std::max(nan, 0))`` gives the limit); with reflection likewise (PyTorch's
    reflection of NaN or inf is NaN, then clipped). The flag (``grid * 0``, NaN exactly at a non-finite
    coordinate) is returned where PyTorch's output there is not what the selected point reads: NaN
    for 2-D bilinear with zero padding and 2-D bicubic (NaN weights), 0 with zero padding at an axis
    of size 1 with ``align_corners``, where every finite coordinate maps to pixel 0. ``nearest`` with
    reflection rounds the reflected coordinate (PyTorch's order; ``GridSample`` rounds first), so its
    grid is replaced by the pixel centres PyTorch reads, sampled with border padding.
    """
    spatial = len(sizes)
    two_d = spatial == 2
    flag = None
    if (two_d and (mode == "cubic" or (mode == "linear" and padding_mode == "zeros"))) or (
        align_corners and 1 in sizes and padding_mode == "zeros"
    ):
        flag = grid * 0.0
    if padding_mode == "zeros":
        return where(grid.abs() <= _GRID_FAR, grid, _GRID_FAR), flag
    if padding_mode == "border":
        if two_d:
            return where(grid >= -_GRID_FAR, grid, -_GRID_FAR).clamp(max=_GRID_FAR), flag
        return where(grid <= _GRID_FAR, grid, _GRID_FAR).clamp(min=-_GRID_FAR), flag
    grid = where(grid.abs() <= _GRID_REFLECT_LIMIT, grid, -1.0 if two_d else 1.0)
    if mode != "nearest":
        return grid, flag
    columns = []
    for k, size in enumerate(sizes[::-1]):  # the grid lists x (the last axis) first
        n = grid[..., k]
        # PyTorch's grid_sampler_compute_source_index: unnormalize, reflect, clip; then round.
        if align_corners:
            src = _reflect_coordinates((n + 1) / 2 * (size - 1), 0, 2 * (size - 1))
        else:
            src = _reflect_coordinates(((n + 1) * size - 1) / 2, -1, 2 * size - 1)
        pixel = src.clamp(0, size - 1).round()
        # back to normalized coordinates: a pixel centre, far from a rounding tie
        if align_corners:
            columns.append(pixel * (2 / (size - 1)) - 1 if size > 1 else pixel - 1)
        else:
            columns.append((pixel * 2 + 1) / size - 1)
    return stack(columns, -1), flag


def _reflect_coordinates(src: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """PyTorch's ``reflect_coordinates``: ``src`` folded into ``[twice_low / 2, twice_high / 2]``."""
    if twice_low == twice_high:
        return src * 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (src - low).abs()
    flips = (distance / span).floor()
    extra = distance - flips * span  # fmod: both exact where the fold is
    odd = flips - (flips / 2).floor() * 2 == 1
    return where(odd, span - extra + low, extra + low)


@shape_rules.register("GridSample")
def _grid_sample_shape(inputs, attrs):
    x, grid = inputs[0], inputs[1]
    return [((x.shape[0], x.shape[1]) + tuple(grid.shape[1:-1]), x.dtype)]


def _reflect(src: Tensor, low2: int, high2: int) -> tuple[Tensor, Tensor]:
    """PyTorch's ``reflect_coordinates`` between ``low2 / 2`` and ``high2 / 2``, and its derivative's sign."""
    if low2 == high2:
        return src * 0.0, src * 0.0
    low, span = low2 / 2, (high2 - low2) / 2
    shifted = src - low
    distance = shifted.abs()
    flips = (distance.detach() / span).floor()
    extra = distance - flips * span
    even = (flips - (flips / 2).floor() * 2) == 0
    folded = where(even, extra + low, span - extra + low)
    sign = shifted.detach().sign()
    slope = sign * (even.to(src.dtype) * 2 - 1)
    return folded, slope


def _source(n: Tensor, size: int, padding_mode: str, align_corners: bool) -> tuple[Tensor, Tensor]:
    """The folded source coordinate of normalized ``n`` and ``d src / d n`` (per point)."""
    factor = (size - 1) / 2 if align_corners else size / 2
    src = (n + 1) * factor - (0.0 if align_corners else 0.5)
    slope = src.detach() * 0.0 + factor
    if padding_mode == "zeros":
        return src, slope
    if padding_mode == "reflection":
        src, sign = _reflect(src, 0, 2 * (size - 1)) if align_corners else _reflect(src, -1, 2 * size - 1)
        slope = slope * sign
    strictly_inside = (src.detach() > 0) & (src.detach() < size - 1)
    # The clamped coordinate carries a gradient strictly inside only, as ``slope`` does: a clamp would
    # pass it at the border itself, where PyTorch's second derivative is 0 (an identity affine_grid's
    # edge points, with align_corners).
    clamped = where(strictly_inside, src, src.detach().clamp(0, size - 1))
    return clamped, slope * strictly_inside.to(src.dtype)


def _keys(d: Tensor, a: float, far: bool) -> tuple[Tensor, Tensor]:
    """Keys' cubic kernel at distance ``d`` (in [0, 1], or [1, 2] when ``far``) and its derivative."""
    if far:
        return ((d * a - 5 * a) * d + 8 * a) * d - 4 * a, (d * (3 * a) - 10 * a) * d + 8 * a
    return (d * (a + 2) - (a + 3)) * d * d + 1, (d * (3 * (a + 2)) - 2 * (a + 3)) * d


def _cubic_taps(src: Tensor, size: int, padding_mode: str, align_corners: bool) -> list:
    """The 4 taps of bicubic sampling, each folded into the input on its own (as PyTorch's bicubic and
    onnxruntime's do): (index, weight, d weight / d src, index)."""
    base = src.detach().floor()
    t = src - base
    a = -0.75
    weights = [_keys(t + 1, a, True), _keys(t, a, False), _keys(1 - t, a, False), _keys(2 - t, a, True)]
    signs = [1.0, 1.0, -1.0, -1.0]  # d distance / d t per tap
    taps = []
    for offset, (weight, slope), sign in zip(range(-1, 3), weights, signs):
        index = base + float(offset)
        if padding_mode == "border":
            index = index.clamp(0, size - 1)
        elif padding_mode == "reflection":
            low2, high2 = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
            index = _reflect(index, low2, high2)[0].clamp(0, size - 1).floor()
        taps.append((index, weight, slope * sign, index))
    return taps


@gradient_rules.register("GridSample")
def _grid_sample_grad(ctx, g):
    mode = _text(ctx.attrs.get("mode"), "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding_mode = _text(ctx.attrs.get("padding_mode"), "zeros")
    align_corners = bool(ctx.attrs.get("align_corners", 0))
    x, grid = ctx.input(0), ctx.input(1)
    batch, channels, *sizes = x.shape
    spatial = len(sizes)
    points = int(np.prod(grid.shape[1:-1]))
    if 0 in x.shape or points == 0:  # nothing sampled: zero gradients (a scatter of no channels fails)
        grad_input = Tensor._zeros(tuple(x.shape), g.dtype, g.device) if ctx.needs_input_grad(0) else None
        grad_grid = Tensor._zeros(tuple(grid.shape), grid.dtype, grid.device) if ctx.needs_input_grad(1) else None
        return grad_input, grad_grid
    flat_grid = grid.reshape(batch, points, spatial)
    strides = [int(np.prod(sizes[axis + 1 :])) for axis in range(spatial)]
    taps = []  # per axis: [(index, weight, d weight / d src, valid)], each (N, points)
    slopes = []
    for axis, size in enumerate(sizes):
        n = flat_grid[:, :, spatial - 1 - axis]
        if mode == "cubic":
            src, slope = _source(n, size, "zeros", align_corners)
            slopes.append(slope)
            taps.append(_cubic_taps(src, size, padding_mode, align_corners))
            continue
        src, slope = _source(n, size, padding_mode, align_corners)
        slopes.append(slope)
        if mode == "nearest":
            index = src.detach().round()
            taps.append([(index, src * 0.0 + 1.0, src * 0.0, index)])
            continue
        left = src.detach().floor()
        fraction = src - left
        taps.append(
            [
                (left, 1.0 - fraction, fraction * 0.0 - 1.0, left),
                (left + 1.0, fraction, fraction * 0.0 + 1.0, left + 1.0),
            ]
        )
    g_flat = g.reshape(batch, channels, points)
    x_flat = x.reshape(batch, channels, int(np.prod(sizes)))  # not -1: an empty batch has no size to infer
    grad_x = Tensor._zeros(tuple(x_flat.shape), g.dtype, g.device)
    grad_src = [None] * spatial
    for combination in itertools.product(*taps):
        position, weight, valid = None, None, None
        for axis, (index, tap_weight, _, _) in enumerate(combination):
            inside = (index >= 0) & (index <= sizes[axis] - 1)
            valid = inside if valid is None else valid & inside
            term = index.clamp(0, sizes[axis] - 1) * strides[axis]
            position = term if position is None else position + term
            weight = tap_weight if weight is None else weight * tap_weight
        # Taps in the zero padding are dropped by selects, never multiplied by 0: the clamped pixel
        # they read may be NaN or inf.
        position = position.to(dtypes.int64).unsqueeze(1).expand(batch, channels, points)
        if ctx.needs_input_grad(0):
            grad_x = scatter_add_within(grad_x, 2, position, g_flat * where(valid, weight, 0.0).unsqueeze(1))
        if ctx.needs_input_grad(1) and mode != "nearest":
            # sum over channels of g * value, shared by every axis' derivative
            read = where(valid, (g_flat * gather_within(x_flat, 2, position)).sum(1), 0.0)
            for axis in range(spatial):
                partial = combination[axis][2]
                for other, (_, other_weight, _, _) in enumerate(combination):
                    if other != axis:
                        partial = partial * other_weight
                term = read * partial
                grad_src[axis] = term if grad_src[axis] is None else grad_src[axis] + term
    grad_input = grad_x.reshape(*x.shape) if ctx.needs_input_grad(0) else None
    grad_grid = None
    if ctx.needs_input_grad(1):
        if mode == "nearest":
            grad_grid = Tensor._zeros(tuple(grid.shape), grid.dtype, grid.device)
        else:
            components = [grad_src[spatial - 1 - k] * slopes[spatial - 1 - k] for k in range(spatial)]
            grad_grid = stack(components, -1).reshape(*grid.shape)
    return grad_input, grad_grid
