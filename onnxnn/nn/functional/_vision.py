"""Resampling and shuffles: ``interpolate`` (and the ``upsample*`` aliases), ``pixel_shuffle``,
``pixel_unshuffle``, ``channel_shuffle``.

``interpolate`` records, for the interpolating modes, one ONNX ``Resize`` node (its gradient rule is
in ``runtime/ops/resample.py``) with the attributes that reproduce PyTorch's sampling: the linear
modes and ``bicubic`` (Keys' kernel with ``a = -0.75``) use ``half_pixel`` or ``align_corners`` (not
``pytorch_half_pixel``, whose special case for an output of length 1 PyTorch does not make; a
negative source coordinate reads the edge either way, as PyTorch's clamp does). A given
``scale_factor`` is passed as Resize's ``scales`` so the coordinate map uses it (not the rounded size
ratio), as PyTorch does unless ``recompute_scale_factor=True`` or ``align_corners=True`` (whose map
PyTorch takes from the rounded sizes, where Resize would use ``scale * size`` unrounded). A factor
whose float32 product could size an axis unlike PyTorch's ``floor(size * factor)`` in double (2.3:
``50 * 2.3f`` rounds to 115) is recorded as float64 scales, which sessions and exports write as a
float32 Resize sliced to that size computed in the graph (``runtime/ops/resample.py``), so every
size of a dynamic axis gets PyTorch's length; onnxruntime then samples with the factor rounded up to
float32 (coordinates off by about 1e-7 relative). ``nearest`` and ``nearest-exact`` are a
``Gather`` per axis of PyTorch's own source indices (``_nearest``): there a coordinate 1e-7 off is a
whole pixel after the floor (one Resize where every factor is a whole multiple, which is exact
there). ``area`` is adaptive average pooling, as in PyTorch.

``antialias=True`` records Resize's ``antialias`` filter, except with ``align_corners=True``: there
PyTorch centres each output's filter at ``s * (i + 0.5)`` with ``s = (in - 1) / (out - 1)``, which no
Resize coordinate mode expresses (its ``align_corners`` maps ``i`` to ``s * i``; onnxruntime and onnx's
reference then differ from PyTorch by O(1)), so the filter is applied as one ``MatMul`` per axis.

Of the integer dtypes only uint8 resamples (``nearest``, ``nearest-exact``, ``bilinear``, ``bicubic``), as in
PyTorch; its ``bilinear``/``bicubic`` are PyTorch's separable uint8 passes (width, then height), each
rounded and clamped to ``[0, 255]`` (``_uint8_separable``).

``grid_sample`` and ``affine_grid`` record one ``GridSample``/``AffineGrid`` node (opset 20); their rules
are in ``runtime/ops/sampling.py``. ``grid_sample`` first selects NaN, infinite and far coordinates to
points with PyTorch's result (``GridSample`` casts them to integers), and with nearest + reflection
samples the pixel centres PyTorch reads (it reflects, then rounds; ``GridSample`` rounds first).

The shuffles are a ``Reshape``, a ``Transpose`` and a ``Reshape``, so any number of leading batch
dimensions works and no rule beyond the existing ones is needed.
"""

from __future__ import annotations

from ...runtime.ops import resample as _resample

import math
from typing import Any, Sequence

import numpy as np

from ...ir import dtypes
from ...ir.graph import static_constant
from ...runtime.internal import constant_tensor
from ...runtime.ops._common import check_floating, int64_constant
from ...runtime.ops.elementwise import where
from ...runtime.ops.sampling import affine_base, pytorch_grid
from ...runtime.tensor import Tensor, apply_op
from ._pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

__all__ = [
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "grid_sample",
    "affine_grid",
    "pixel_shuffle",
    "pixel_unshuffle",
    "channel_shuffle",
    "native_channel_shuffle",
]

_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")
_RANK_OF_MODE = {"linear": 3, "bilinear": 4, "trilinear": 5}
# PyTorch's CPU kernels resample uint8 in these modes and no other integer (or bool) dtype in any
# mode; a refusal names the kernel, as PyTorch's NotImplementedError does ("area" pools, and refuses there).
_UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")
_KERNEL_OF_MODE = {
    "nearest": "upsample_nearest{spatial}d",
    "nearest-exact": "_upsample_nearest_exact{spatial}d",
    "linear": "upsample_linear1d",
    "bilinear": "upsample_bilinear2d",
    "bicubic": "upsample_bicubic2d",
    "trilinear": "upsample_trilinear3d",
}


# ---------------------------------------------------------------- interpolate


def interpolate(
    input: Tensor,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resamples the spatial dimensions of ``(N, C, d1, ..., dK)`` input (K = 1, 2 or 3).

    Args:
        input: the tensor to resample.
        size: the output spatial size (an int or one per spatial dimension).
        scale_factor: the multiplier of each spatial size (a float or one per spatial dimension).
        mode: ``'nearest'``, ``'nearest-exact'``, ``'linear'``, ``'bilinear'``, ``'bicubic'``,
            ``'trilinear'`` or ``'area'``. Default: ``'nearest'``.
        align_corners: for the interpolating modes, map the corner pixels' centres onto each other
            (``True``) or the corners' edges (``False``, the default).
        recompute_scale_factor: with ``scale_factor``, sample with the ratio of the rounded output size
            instead of ``scale_factor`` itself.
        antialias: low-pass filter when downsampling (``bilinear`` and ``bicubic`` on 4-D input), as
            ONNX Resize's ``antialias`` (opset 18) with ``exclude_outside`` does; with
            ``align_corners=True``, whose filter placement Resize cannot express, two ``MatMul``
            nodes with PyTorch's per-axis filter matrices. Default: ``False``.

    Example::

        >>> F.interpolate(onnxnn.ones(1, 1, 2, 2), scale_factor=2).shape
        onnxnn.Size([1, 1, 4, 4])
    """
    spatial = input.dim() - 2
    if mode not in _MODES or spatial not in (1, 2, 3):
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the modes: nearest | "
            f"linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got {mode})"
        )
    if antialias:
        if mode not in ("bilinear", "bicubic") or input.dim() != 4:
            raise ValueError(
                "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires "
                "a 4-D tensor as input"
            )
    if align_corners is not None and mode not in _INTERPOLATING:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear"
        )
    if align_corners is None:
        align_corners = False
    # Sizes are checked before the mode's rank, as PyTorch's (ValueError before NotImplementedError).
    output_size, scales = _output_geometry(input, size, scale_factor, recompute_scale_factor, spatial)
    if mode in _RANK_OF_MODE and input.dim() != _RANK_OF_MODE[mode]:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {_RANK_OF_MODE[mode]}D input")
    if mode == "bicubic" and input.dim() != 4:
        raise NotImplementedError(f"Got {input.dim()}D input, but bicubic mode needs 4D input")
    input_size = list(input.shape[-spatial:])
    if mode != "area" and min(input_size + list(output_size)) <= 0:  # area pools, to any size
        names = "DHW"[3 - spatial :]

        def listed(sizes) -> str:
            return ", ".join(f"{name}: {size}" for name, size in zip(names, sizes))

        raise RuntimeError(
            "Input and output sizes should be greater than 0, but got "
            f"input ({listed(input_size)}) output ({listed(output_size)})"
        )
    if input.numel() == 0 and 0 not in input_size:
        if mode != "area" and input.shape[1] == 0:  # PyTorch's upsampling kernels take only an empty batch
            raise RuntimeError(
                f"Non-empty {input.dim()}D data tensor expected but got a tensor with sizes {list(input.shape)}"
            )
        # An empty batch: nothing to sample, and Resize's size ratios would divide by the empty axis. A
        # Reshape keeps the result in the graph (its gradient is empty too).
        return input.reshape(tuple(input.shape[:2]) + tuple(output_size))
    if mode == "area":
        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[spatial - 1]
        return pool(input, output_size)
    if not input.dtype.is_floating_point and not (input.dtype is dtypes.uint8 and mode in _UINT8_MODES):
        check_floating(input, _KERNEL_OF_MODE[mode].format(spatial=spatial))
    if mode in ("nearest", "nearest-exact"):
        return _nearest(input, output_size, scales, mode)
    if input.dtype is dtypes.uint8:
        return _uint8_separable(input, output_size, scales, mode, align_corners, antialias)
    return _interpolated(input, output_size, scales, mode, align_corners, antialias)


def _uint8_separable(
    input: Tensor, output_size: list, scales: list | None, mode: str, align_corners: bool, antialias: bool
) -> Tensor:
    """uint8 ``bilinear``/``bicubic`` as PyTorch's separable uint8 kernels compute it: the width pass,
    then the height pass, each rounded to the nearest integer and clamped to ``[0, 255]``, so bicubic's
    overshoot is clipped between the passes too; an axis whose size stays is not resampled.

    The passes run in float32 where PyTorch's use fixed-point 16-bit weights: a value may differ by one.
    """
    result = input.to(dtypes.float32)
    sizes = list(input.shape[2:])
    for axis in (1, 0):  # width, then height
        if output_size[axis] == sizes[axis]:
            continue
        sizes[axis] = output_size[axis]
        pass_scales = None if scales is None else [scales[0] if axis == 0 else 1.0, scales[1] if axis == 1 else 1.0]
        result = _interpolated(result, list(sizes), pass_scales, mode, align_corners, antialias)
        result = (result + 0.5).floor().clamp(0.0, 255.0)
    return result.to(dtypes.uint8)


def _interpolated(
    input: Tensor, output_size: list, scales: list | None, mode: str, align_corners: bool, antialias: bool
) -> Tensor:
    """The interpolating modes on floating-point input: one ``Resize``, or the aligned antialiasing matrices."""
    if antialias and align_corners:
        return _antialiased_with_aligned_corners(input, output_size, mode)
    attrs: dict[str, Any] = {
        "mode": "cubic" if mode == "bicubic" else "linear",
        "coordinate_transformation_mode": "align_corners" if align_corners else "half_pixel",
    }
    if mode == "bicubic":
        attrs["cubic_coeff_a"] = -0.75
    if antialias:
        # PyTorch's antialiasing filter: the kernel stretched by 1 / scale when downsampling, taps
        # outside the input dropped and the weights renormalized, with a = -0.5 for the cubic.
        attrs.update(antialias=1, exclude_outside=1)
        if mode == "bicubic":
            attrs["cubic_coeff_a"] = -0.5
    empty_roi = static_constant([], dtypes.float32)
    if scales is not None and not align_corners:
        scales = [
            _sampling_scale(in_size, out_size, factor, mode)
            for in_size, out_size, factor in zip(input.shape[2:], output_size, scales)
        ]
        # float64 scales where float32 would size some length unlike PyTorch (resample's docstring).
        exact = all(_resample.float32_exact_scale(scale) for scale in scales)
        scale_input = static_constant([1.0, 1.0] + scales, dtypes.float32 if exact else dtypes.float64)
        inputs: tuple = (input, empty_roi, scale_input)
    else:
        inputs = (
            input,
            empty_roi,
            static_constant([], dtypes.float32),
            int64_constant(list(input.shape[:2]) + output_size),
        )
    backward = {
        "linear": "UpsampleLinear1D",
        "bilinear": "UpsampleBilinear2D",
        "bicubic": "UpsampleBicubic2D",
        "trilinear": "UpsampleTrilinear3D",
    }[mode]
    return _resample.resize(inputs[0], inputs[1:], attrs, backward + "Backward0")


def _sampling_scale(in_size: int, out_size: int, factor: float, mode: str) -> float:
    """``factor`` as Resize's scale of one axis: an axis whose size stays is copied (scale 1), as
    PyTorch's linear kernels do (not its bicubic)."""
    if out_size == in_size and mode != "bicubic":
        return 1.0
    return factor


def _nearest(input: Tensor, output_size: list, scales: list | None, mode: str) -> Tensor:
    """``nearest``/``nearest-exact``: one ``Resize`` for whole-multiple factors, else one ``Gather``
    per resampled axis of PyTorch's source indices.

    Its kernel computes them from ``1 / scale_factor`` (or ``in / out``) in float32 (in double for a
    float64 input, except in its 2-D kernel for small outputs), where Resize divides by
    ``float32(scale_factor)``: a floor of the two differs by a whole pixel where the product lands
    near an integer (length 8 at 0.6: PyTorch reads row 5 for output 3, Resize 4), but never for
    whole multiples, whose quotients are exact.
    """
    exact = mode == "nearest-exact"
    name = f"UpsampleNearest{'Exact' if exact else ''}{len(output_size)}DBackward0"
    if _integer_factors(input, output_size, scales):
        # Whole multiples (the common x2): Resize's quotients are PyTorch's indices exactly, in one
        # node where the Gathers would make a pass per axis.
        if exact:
            attrs = {
                "mode": "nearest",
                "coordinate_transformation_mode": "half_pixel",
                "nearest_mode": "round_prefer_ceil",
            }
        else:
            attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        empty = static_constant([], dtypes.float32)
        sizes = int64_constant(list(input.shape[:2]) + list(output_size))
        return _resample.resize(input, (empty, empty, sizes), attrs, name)
    # PyTorch's general kernel computes a float64 input's source indices in double; its 2-D kernel for
    # outputs of at most 128 rows and columns together (the channels-last one) computes them in float.
    double = input.dtype is dtypes.float64 and (len(output_size) != 2 or sum(output_size) > 128)
    result = input
    for position, out_size in enumerate(output_size):
        axis = 2 + position
        in_size = input.shape[axis]
        if out_size == in_size and len(output_size) == 2 and not exact:
            continue  # PyTorch's 2-D nearest kernel copies an axis whose size stays; its 1-D and 3-D scale it
        factor = None if scales is None else scales[position]
        index = _nearest_source_indices(in_size, out_size, factor, exact, double)
        if index != list(range(in_size)):  # not each index itself (an axis kept by size or factor 1)
            result = apply_op("Gather", (result, int64_constant(index)), {"axis": axis}, name)
    return result if result is not input else input.clone()


def _integer_factors(input: Tensor, output_size: list, scales: list | None) -> bool:
    """Whether every axis grows by a whole factor (the factor given, if one is)."""
    for position, out_size in enumerate(output_size):
        in_size = input.shape[2 + position]
        if in_size == 0 or out_size % in_size or (scales is not None and scales[position] != out_size // in_size):
            return False
    return True


def _nearest_source_indices(
    in_size: int, out_size: int, factor: float | None, exact: bool, double: bool = False
) -> list[int]:
    """PyTorch's ``nearest_idx``/``nearest_exact_idx`` for every output index of one axis.

    ``double``: the scale and ``i * scale`` in double (PyTorch's general kernel on float64), else in
    float; the product is rounded to float for ``floorf`` either way.
    """
    real = np.float64 if double else np.float32
    step = real(1.0 / factor) if factor is not None and factor > 0 else real(in_size) / real(out_size)
    positions = np.arange(out_size)
    if exact:  # (i + 0.5) * scale in double, then to float for floorf
        source = np.floor(((positions + 0.5) * np.float64(step)).astype(np.float32))
    else:  # i * scale in the scale's type, then to float for floorf
        source = np.floor((positions.astype(real) * step).astype(np.float32))
    return np.minimum(source.astype(np.int64), in_size - 1).tolist()


def _antialias_aligned_matrix(size_in: int, size_out: int, mode: str) -> np.ndarray:
    """PyTorch's ``(size_out, size_in)`` antialiasing matrix of one axis with ``align_corners=True``.

    PyTorch (``_upsample_bilinear2d_aa``/``_upsample_bicubic2d_aa``) takes the scale
    ``s = (in - 1) / (out - 1)`` (0 for one output) but centres output ``i``'s filter at
    ``s * (i + 0.5)`` in edge coordinates, as without aligned corners; the filter (triangle, or
    Keys' cubic with ``a = -0.5``) is stretched by ``s`` when ``s > 1``, cut to the input and
    renormalized. ONNX Resize's ``align_corners`` maps output ``i`` to ``s * i`` instead and stretches
    by ``in / out``, so this is recorded as a ``MatMul`` per axis with this matrix.
    """
    scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    support = (1.0 if mode == "bilinear" else 2.0) * max(scale, 1.0)
    stretch = 1.0 / scale if scale >= 1.0 else 1.0
    matrix = np.zeros((size_out, size_in))
    for index in range(size_out):
        centre = scale * (index + 0.5)
        # PyTorch truncates toward zero (an int64 cast) before clamping to the input.
        low, high = max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), size_in)
        distance = np.abs((np.arange(low, high) - centre + 0.5) * stretch)
        if mode == "bilinear":
            weights = np.clip(1.0 - distance, 0.0, None)
        else:
            a = -0.5
            weights = np.where(
                distance < 1,
                ((a + 2) * distance - (a + 3)) * distance * distance + 1,
                np.where(distance < 2, ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a, 0.0),
            )
        total = weights.sum()
        matrix[index, low:high] = weights / total if total != 0 else weights
    return matrix


def _antialiased_with_aligned_corners(input: Tensor, output_size: list[int], mode: str) -> Tensor:
    """``rows @ input @ columns``: two ``MatMul`` nodes with PyTorch's per-axis filter matrices."""
    numpy_dtype = input.dtype.numpy_dtype
    row_matrix = _antialias_aligned_matrix(input.shape[2], output_size[0], mode)
    column_matrix = _antialias_aligned_matrix(input.shape[3], output_size[1], mode).T
    rows = constant_tensor(np.asarray(row_matrix.astype(numpy_dtype), order="C"), input.dtype, input.device)
    columns = constant_tensor(np.asarray(column_matrix.astype(numpy_dtype), order="C"), input.dtype, input.device)
    return rows @ input @ columns


def _output_geometry(input: Tensor, size, scale_factor, recompute_scale_factor, spatial: int):
    """(output spatial sizes, Resize scales or None when sampling follows the sizes)."""
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    in_sizes = list(input.shape[2:])
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != spatial:
                raise ValueError(
                    f"Input and output must have the same number of spatial dimensions, but got input with spatial "
                    f"dimensions of {in_sizes} and output size of {size}. Please provide input tensor in (N, C, d1, "
                    f"d2, ...,dK) format and output size in (o1, o2, ...,oK) format."
                )
            sizes = [int(s) for s in size]
        else:
            sizes = [int(size)] * spatial
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        return sizes, None
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != spatial:
            raise ValueError(
                f"Input and scale_factor must have the same number of spatial dimensions, but got input with spatial "
                f"dimensions of {in_sizes} and scale_factor of shape {scale_factor}. Please provide input tensor in "
                f"(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format."
            )
        factors = [float(f) for f in scale_factor]
    else:
        factors = [float(scale_factor)] * spatial
    sizes = [int(math.floor(s * f)) for s, f in zip(in_sizes, factors)]
    if recompute_scale_factor:
        return sizes, None
    return sizes, factors


def upsample(
    input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None
) -> Tensor:
    """Deprecated alias of :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(..., mode='nearest')``."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- shuffles


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearranges ``(*, C r^2, H, W)`` into ``(*, C, H r, W r)``, r = ``upscale_factor``.

    Example::

        >>> F.pixel_shuffle(onnxnn.randn(1, 9, 4, 4), 3).shape
        onnxnn.Size([1, 1, 12, 12])
    """
    if input.dim() < 3:
        raise RuntimeError(
            f"pixel_shuffle expects input to have at least 3 dimensions, but got input with {input.dim()} dimension(s)"
        )
    r = int(upscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *batch, channels, height, width = input.shape
    if channels % (r * r):
        raise RuntimeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
            f"upscale_factor, but input.size(-3)={channels} is not divisible by {r * r}"
        )
    b = len(batch)
    grouped = input.reshape(*batch, channels // (r * r), r, r, height, width)
    # (..., C, r_h, r_w, H, W) -> (..., C, H, r_h, W, r_w)
    order = list(range(b)) + [b, b + 3, b + 1, b + 4, b + 2]
    return grouped.permute(*order).reshape(*batch, channels // (r * r), height * r, width * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """Rearranges ``(*, C, H r, W r)`` into ``(*, C r^2, H, W)``, r = ``downscale_factor``: the inverse of
    :func:`pixel_shuffle`."""
    if input.dim() < 3:
        raise RuntimeError(
            f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
            f"{input.dim()} dimension(s)"
        )
    r = int(downscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *batch, channels, height, width = input.shape
    if height % r:
        raise RuntimeError(
            f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
            f"input.size(-2)={height} is not divisible by {r}"
        )
    if width % r:
        raise RuntimeError(
            f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
            f"input.size(-1)={width} is not divisible by {r}"
        )
    b = len(batch)
    grouped = input.reshape(*batch, channels, height // r, r, width // r, r)
    # (..., C, H, r_h, W, r_w) -> (..., C, r_h, r_w, H, W)
    order = list(range(b)) + [b, b + 2, b + 4, b + 1, b + 3]
    return grouped.permute(*order).reshape(*batch, channels * r * r, height // r, width // r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Splits the channels of ``(N, C, *)`` into ``groups`` groups and interleaves them.

    Example::

        >>> F.channel_shuffle(onnxnn.arange(4.0).reshape(1, 4, 1), 2).flatten().tolist()
        [0.0, 2.0, 1.0, 3.0]
    """
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}")
    groups = int(groups)
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    batch, channels, *rest = input.shape
    if channels % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {channels} channels and {groups} groups."
        )
    grouped = input.reshape(batch, groups, channels // groups, *rest)
    return grouped.transpose(1, 2).reshape(batch, channels, *rest)


native_channel_shuffle = channel_shuffle


# ---------------------------------------------------------------- grid sampling

_GRID_MODES = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
_GRID_PADDINGS = ("zeros", "border", "reflection")


def grid_sample(
    input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: bool | None = None
) -> Tensor:
    """Samples ``input`` ``(N, C, H, W)`` (or ``(N, C, D, H, W)``) at the normalized ``grid`` locations.

    Args:
        input: the values to sample.
        grid: ``(N, H_out, W_out, 2)`` (or ``(N, D_out, H_out, W_out, 3)``) coordinates in ``[-1, 1]``,
            ``x`` first.
        mode: ``'bilinear'``, ``'nearest'`` or ``'bicubic'`` (4-D input only). Default: ``'bilinear'``.
        padding_mode: what locations outside the input read: ``'zeros'``, ``'border'`` or ``'reflection'``.
        align_corners: whether -1 and 1 are the corner pixels' centres (``True``) or edges. Default: ``False``.

    Records one ONNX ``GridSample`` (opset 20 names), differentiable w.r.t. ``input`` and ``grid`` in every mode.
    """
    if mode not in _GRID_MODES:
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{mode}'"
        )
    if padding_mode not in _GRID_PADDINGS:
        raise ValueError(
            f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
            f"'reflection', but got: '{padding_mode}'"
        )
    if input.dim() not in (4, 5):
        raise RuntimeError(
            f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
            f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    if grid.dim() != input.dim():
        raise RuntimeError(
            f"grid_sampler(): expected grid to have same number of dimensions as input, but got "
            f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    if grid.shape[0] != input.shape[0]:
        raise RuntimeError(
            f"grid_sampler(): expected grid and input to have same batch size, but got input with "
            f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    if grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but got "
            f"grid with sizes {list(grid.shape)}"
        )
    if mode == "bicubic" and input.dim() != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(
            f"\"grid_sampler_{input.dim() - 2}d_cpu\" not implemented for '{dtypes.scalar_type_name(input.dtype)}'"
        )
    for axis, size in enumerate(input.shape[2:]):
        if size == 0:
            raise RuntimeError(
                f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                f"{list(input.shape)} with dimension {axis + 2} being empty"
            )
    sizes = [int(size) for size in input.shape[2:]]
    onnx_mode, onnx_padding = _GRID_MODES[mode], padding_mode
    grid, flag = pytorch_grid(grid, onnx_mode, padding_mode, bool(align_corners), sizes)
    if onnx_mode == "nearest" and padding_mode == "reflection":
        onnx_padding = "border"  # the grid holds reflected pixel centres already
    attrs = {"mode": onnx_mode, "padding_mode": onnx_padding, "align_corners": int(bool(align_corners))}
    backward = "GridSampler2DBackward0" if input.dim() == 4 else "GridSampler3DBackward0"
    out = apply_op("GridSample", (input, grid), attrs, backward)
    if flag is not None:
        # (N, 1, *out): NaN where a point's coordinates are not all finite, else 0.
        flag = flag.sum(-1).unsqueeze(1)
        if len(sizes) == 2 and (onnx_mode == "cubic" or (onnx_mode == "linear" and padding_mode == "zeros")):
            out = out + flag  # PyTorch's 2-D kernel: NaN weights
        else:
            out = where(flag.isnan(), 0.0, out)  # PyTorch reads the padding
    return out


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """The sampling grid ``(N, H, W, 2)`` (or ``(N, D, H, W, 3)``) of the affine maps ``theta`` ``(N, 2, 3)``
    (or ``(N, 3, 4)``) for an output of ``size`` ``(N, C, H, W)`` (or ``(N, C, D, H, W)``); one ONNX
    ``AffineGrid`` (opset 20)."""
    size = [int(s) for s in size]
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) == 4:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError(
                f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got {list(theta.shape)}."
            )
    elif len(size) == 5:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError(
                f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got {list(theta.shape)}."
            )
    else:
        raise NotImplementedError(
            f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}."
        )
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"Expected theta and size to have the same batch size, got {theta.shape[0]} and {size[0]}")
    if align_corners and 1 in size[2:]:
        # PyTorch puts a unit-size axis at 0 where ONNX AffineGrid's linspace puts it at -1: the
        # same product, spelled as a MatMul against PyTorch's base coordinates.
        base = affine_base(size[2:], True)
        for axis, length in enumerate(size[2:]):
            if length == 1:
                base[:, len(size) - 3 - axis] = 0.0
        constant = constant_tensor(base.T.astype(theta.dtype.numpy_dtype), theta.dtype, theta.device)
        return (theta @ constant).transpose(1, 2).reshape(size[0], *size[2:], len(size) - 2)
    return apply_op(
        "AffineGrid",
        (theta, int64_constant(size)),
        {"align_corners": int(bool(align_corners))},
        "AffineGridGeneratorBackward0",
    )
