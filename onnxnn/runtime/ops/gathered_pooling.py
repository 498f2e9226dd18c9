"""Pooling over windows gathered by position, where ONNX's pools do not compute what PyTorch's do.

Integer pools (onnxruntime's MaxPool has no int64 kernel; PyTorch's average pools of int64 divide
window sums with truncation) and windows no pool attribute describes (PyTorch's uneven adaptive
windows, fractional pooling's pseudo-random ones) gather each window's elements with ``Gather`` and
reduce them: the maximum with its position (gradients route to it as a max pool's do), or sums.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ._common import Tensor, apply_op, int64_constant
from .division import div
from .elementwise import where
from .opmath import widened
from .reduce import argmax

__all__: list[str] = []

# The integer dtypes PyTorch's CPU max pools compute: max_pool2d and max_pool3d, and max_pool1d with
# indices (without them, max_pool1d refuses integers, as the adaptive pools do); its average pools
# compute int64 only (window sums divided with truncation, C++'s integer division).
INTEGER_MAX_POOLS = frozenset({dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64})
INTEGER_AVG_POOLS = frozenset({dtypes.int64})
# onnxruntime's MaxPool has kernels for int8 and uint8 of the integers (1.31). float64 holds every
# int16 and int32 exactly, in the same order with the same ties, so those pool as float64; int64
# values past 2^53 it does not hold, so int64 takes the windows gathered and compared as int64.
MAX_POOLED_AS_FLOAT64 = frozenset({dtypes.int16, dtypes.int32})


def refuse_pool_dtype(dtype, function: str, computed: frozenset = frozenset()) -> None:
    """PyTorch's NotImplementedError for a dtype its pooling kernel has no case for (floats always pool)."""
    if dtype.is_floating_point or dtype in computed:
        return
    raise NotImplementedError(f"\"{function}\" not implemented for '{dtypes.scalar_type_name(dtype)}'")


def _window_taps(spatial, output, kernel, strides, dilations, pads) -> tuple[np.ndarray, np.ndarray]:
    """``(O, K)`` flat plane positions of every window's taps (windows and taps in row-major order), and
    which of them lie inside the input rather than in the padding."""
    table = np.zeros((1, 1), dtype=np.int64)
    inside = np.ones((1, 1), dtype=bool)
    for size, out, k, s, d, p in zip(spatial, output, kernel, strides, dilations, pads):
        positions = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - p  # (out, k) along this axis
        windows, taps = table.shape[0] * out, table.shape[1] * k
        table = (table[:, None, :, None] * size + positions[None, :, None, :]).reshape(windows, taps)
        valid = (positions >= 0) & (positions < size)
        inside = (inside[:, None, :, None] & valid[None, :, None, :]).reshape(windows, taps)
    return table, inside


def max_over_windows(x: Tensor, table: np.ndarray, sizes: list[int], return_indices: bool, name: str):
    """The maximum of each window listed in ``table`` and its flat position in the ``(n, c)`` plane.

    ``table`` holds flat plane positions: ``(O, K)`` when every plane has the same windows, or
    ``(N, C, O, K)`` when they differ per plane; ``O = prod(sizes)`` windows of ``K`` taps each.
    A window's position is its last NaN's where it holds one, else its first maximum's: PyTorch's
    kernels take a tap when ``value > max || isnan(value)``, so later NaNs replace earlier ones.
    """
    batch, channels = x.shape[0], x.shape[1]
    planes = x.reshape((batch, channels, int(np.prod(x.shape[2:]))))
    positions = Tensor._from_array(np.ascontiguousarray(table, dtype=np.int64), dtypes.int64, x.device)
    windows_count, taps = table.shape[-2], table.shape[-1]
    if table.ndim == 2:
        windows = apply_op("Gather", (planes.detach(), positions), {"axis": 2})
        positions = positions.expand((batch, channels) + table.shape)
    else:
        windows = apply_op(
            "GatherElements", (planes.detach(), positions.reshape((batch, channels, -1))), {"axis": 2}
        ).reshape((batch, channels, windows_count, taps))
    first = argmax(windows, 3, keepdim=True)  # (N, C, O, 1): ArgMax keeps the first maximum
    if x.dtype.is_floating_point:
        first = _last_nan_where_any(windows, first)
    flat = apply_op("GatherElements", (positions, first), {"axis": 3}).reshape((batch, channels, windows_count))
    # Gathered in float32 for float16/bfloat16 input: the gradient scatters with reduction="add",
    # which onnxruntime's CPU provider lacks for those (the round trip through float32 is exact).
    source = widened(planes)
    values = apply_op("GatherElements", (source, flat), {"axis": 2}, name).to(x.dtype)
    shape = (batch, channels) + tuple(sizes)
    return (values.reshape(shape), flat.reshape(shape)) if return_indices else values.reshape(shape)


def _last_nan_where_any(windows: Tensor, first: Tensor) -> Tensor:
    """``first`` (each window's tap of its first maximum), or the window's last NaN tap where it has one."""
    nans = apply_op("IsNaN", (windows.detach(),)).to(dtypes.int32)
    last_nan = apply_op("ArgMax", (nans,), {"axis": 3, "keepdims": 1, "select_last_index": 1})
    any_nan = apply_op("ReduceMax", (nans, int64_constant([3])), {"keepdims": 1}).to(dtypes.bool)
    return where(any_nan, last_nan, first)


def int64_max_pool(x: Tensor, kernel, strides, pads, dilations, output, return_indices: bool):
    """Max pooling of int64 over gathered windows. A padding tap reads the window's first tap inside
    the input instead (every window has one): a repeat changes neither the maximum nor, coming
    before every later tap, the first position holding it (PyTorch's pick among ties)."""
    table, inside = _window_taps(x.shape[2:], output, kernel, strides, dilations, pads)
    first_inside = table[np.arange(table.shape[0]), inside.argmax(axis=1)]
    table = np.where(inside, table, first_inside[:, None])
    return max_over_windows(x, table, output, return_indices, "MaxPoolWithIndicesBackward0")


def int64_avg_pool(x: Tensor, kernel, strides, pads, output, count_include_pad: bool, divisor_override):
    """Average pooling of int64 as PyTorch computes it: int64 window sums (a padding tap reads a zero
    appended to each plane) divided with truncation by the window's divisor: ``divisor_override``, or
    the window's extent within the padded input (ceil_mode's last window is cut at the padding's end),
    or with ``count_include_pad=False`` the number of its taps inside the input."""
    spatial = x.shape[2:]
    table, inside = _window_taps(spatial, output, kernel, strides, [1] * len(kernel), pads)
    plane = int(np.prod(spatial))
    table = np.where(inside, table, plane)
    if divisor_override is not None:
        divisors = np.full(table.shape[0], int(divisor_override), dtype=np.int64)
    elif count_include_pad:
        divisors = np.ones((1,), dtype=np.int64)
        for size, out, k, s, p in zip(spatial, output, kernel, strides, pads):
            starts = np.arange(out) * s - p
            extents = np.minimum(starts + k, size + p) - starts
            divisors = (divisors[:, None] * extents[None, :]).reshape(-1)
    else:
        divisors = inside.sum(axis=1).astype(np.int64)
    batch, channels = x.shape[0], x.shape[1]
    planes = x.reshape((batch, channels, plane))
    padded = apply_op("Concat", (planes, Tensor._zeros((batch, channels, 1), x.dtype, x.device)), {"axis": 2})
    windows = apply_op("Gather", (padded, Tensor._from_array(table, dtypes.int64, x.device)), {"axis": 2})
    sums = windows.sum(3)
    averages = div(sums, Tensor._from_array(divisors, dtypes.int64, x.device), rounding_mode="trunc")
    return averages.reshape((batch, channels) + tuple(output))


def adaptive_windows(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive windows ``[floor(i * size / out), ceil((i + 1) * size / out))`` as ``(out,
    longest)`` positions, each window padded to the longest by repeating its last position, and
    whether each position is the window's own."""
    starts = np.array([(i * size) // out for i in range(out)])
    ends = np.array([-(-((i + 1) * size) // out) for i in range(out)])
    offsets = np.arange(int((ends - starts).max()))
    positions = np.minimum(starts[:, None] + offsets, ends[:, None] - 1)
    return positions.astype(np.int64), offsets < (ends - starts)[:, None]
