"""Pooling: max, average, adaptive, power-average (Lp) pooling and max unpooling.

``max_pool*d`` and ``avg_pool*d`` live in ``runtime/ops/pooling.py`` (one ONNX pooling node each, with
their shape and gradient rules), ``adaptive_avg_pool*d`` in ``runtime/ops/adaptive_pooling.py``; they
are re-exported here. The others
are decompositions into standard ops, so that they compute exactly what PyTorch computes and their
gradients come from existing rules:

- ``adaptive_max_pool*d``: a ``MaxPool`` when the windows tile the input evenly; otherwise every
  window's elements are gathered (``Gather`` with a constant index table, PyTorch's windows
  ``[floor(i * L / out), ceil((i + 1) * L / out))``, short windows padded by repeating their last
  element, which changes neither the maximum nor the first position holding it), ``ArgMax`` picks
  the first maximum in row-major order, or the window's last NaN, as PyTorch's kernel does
  (``runtime/ops/gathered_pooling.py``), and ``GatherElements`` reads the
  values at those positions, so the gradient goes to exactly that element.
- ``fractional_max_pool*d``: the same gather/ArgMax/GatherElements over windows that differ per
  ``(n, c)`` plane, placed by PyTorch's interval formula from the random samples.
- ``lp_pool*d``: PyTorch's own formula, ``(sign(s) * relu(|s|) * prod(kernel)) ** (1 / p)`` with
  ``s = avg_pool(x ** p)``. ONNX ``LpPool`` pools ``|x| ** p`` instead, which differs for odd ``p``
  and negative inputs, and scales ceil_mode's partial windows differently.
- ``max_unpool*d``: ``ScatterElements`` of the values into a zero plane at the per-plane indices.
"""

from __future__ import annotations

import math

import functools

import numpy as np

from ...ir import dtypes
from ...runtime import ops as _ops
from ...runtime.random_creation import rand
from ...runtime.internal import check_known_data, full_tensor
from ...runtime.ops.conv import batched, expand_param
from ...runtime.ops.adaptive_pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    empty_adaptive_pool,
)
from ...runtime.ops.gathered_pooling import adaptive_windows, max_over_windows, refuse_pool_dtype
from ...runtime.ops.pooling import (
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    require_nonempty_dims,
)
from ...runtime.tensor import Tensor, apply_op, outside_autocast
from ...ir.caches import register_cache

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "fractional_max_pool2d",
    "fractional_max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d_with_indices",
]

_MAX_POOLS = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}
_AVG_POOLS = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}


# ---------------------------------------------------------------- adaptive max pooling


@functools.lru_cache(maxsize=256)
def _window_table(spatial: tuple, sizes: tuple) -> np.ndarray:
    """``(prod(sizes), K)`` flat plane positions of every window, taps in row-major order (cached: read-only)."""
    table = np.zeros((1, 1), dtype=np.int64)
    for size, out in zip(spatial, sizes):
        # (out, k); a short window repeats its last position, which changes neither its maximum nor
        # where its first maximum or last NaN lies
        axis, _ = adaptive_windows(size, out)
        # table (O, K) x axis (out, k) -> (O, out, K, k): position * size + next coordinate
        table = table[:, None, :, None] * size + axis[None, :, None, :]
        table = table.reshape(table.shape[0] * table.shape[1], table.shape[2] * table.shape[3])
    table = table.astype(np.int64)
    table.flags.writeable = False
    return table


register_cache("pooling window tables", _window_table.cache_clear)


def _adaptive_max_pool(input: Tensor, output_size, return_indices: bool, rank: int):
    function = f"adaptive_max_pool{rank}d"
    if input.dim() not in (rank + 1, rank + 2):
        raise RuntimeError(f"{function}(): Expected {rank + 1}D or {rank + 2}D tensor, but got: {list(input.shape)}")
    refuse_pool_dtype(input.dtype, function)
    sizes: list = [output_size] * rank if isinstance(output_size, int) or output_size is None else list(output_size)
    if len(sizes) != rank:
        raise RuntimeError(f"{function}(): internal error: output_size.size() must be {rank}")
    require_nonempty_dims(input, 1, function)
    x, added_batch = batched(input, rank, function)
    spatial = list(x.shape[2:])
    sizes = [size if out is None else int(out) for size, out in zip(spatial, sizes)]
    if any(out < 0 for out in sizes):  # PyTorch's words: its empty result cannot take the size
        shape = list(input.shape[:-rank]) + ([1] if rank == 1 else []) + sizes
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {shape}")
    empty = empty_adaptive_pool(input, sizes, "max", return_indices)
    if empty is not None:
        return empty
    if x.shape[1] == 0:
        # An unbatched input without channels (a batched one was refused above), which PyTorch pools to
        # an empty result: the max pools below refuse empty channels (as PyTorch's do), so pool the
        # same no elements as an empty batch of one channel.
        pooled = _adaptive_max_pool(input.reshape((0, 1) + tuple(spatial)), sizes, return_indices, rank)
        empty_shape = (0,) + tuple(sizes)
        if return_indices:
            return tuple(part.reshape(empty_shape) for part in pooled)
        return pooled.reshape(empty_shape)
    if all(size % out == 0 for size, out in zip(spatial, sizes)):
        # Even tiling: PyTorch's windows are exactly MaxPool's with kernel = stride = size / out.
        kernel = [size // out for size, out in zip(spatial, sizes)]
        result = _MAX_POOLS[rank](x, kernel, kernel, return_indices=return_indices)
    else:
        result = max_over_windows(
            x, _window_table(tuple(spatial), tuple(sizes)), sizes, return_indices, f"AdaptiveMaxPool{rank}DBackward0"
        )
    if not added_batch:
        return result
    return (result[0].squeeze(0), result[1].squeeze(0)) if return_indices else result.squeeze(0)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of ``(N, C, L)`` or ``(C, L)`` to length ``output_size``; see :func:`adaptive_max_pool2d`."""
    return _adaptive_max_pool(input, output_size, return_indices, 1)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling to a fixed ``(H_out, W_out)`` with PyTorch's adaptive windows.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        output_size: an int for both sizes or a pair; None in the pair keeps that input size.
        return_indices: also return the position of each maximum, flattened per ``(n, c)`` plane.

    Example::

        >>> adaptive_max_pool2d(onnxnn.randn(1, 2, 7, 5), (3, 2)).shape
        onnxnn.Size([1, 2, 3, 2])
    """
    return _adaptive_max_pool(input, output_size, return_indices, 2)


@outside_autocast("adaptive_max_pool3d")
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of ``(N, C, D, H, W)`` to a fixed size; see :func:`adaptive_max_pool2d`."""
    return _adaptive_max_pool(input, output_size, return_indices, 3)


# ---------------------------------------------------------------- fractional max pooling


def _fractional_starts(samples: np.ndarray, size: int, out: int, kernel: int, dtype) -> np.ndarray:
    """PyTorch's pseudo-random window starts along one axis: ``(N, C)`` samples -> ``(N, C, out)``.

    ``start[i] = int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (size - k) / (out - 1)``,
    computed in the input's float type as PyTorch's kernel does; the last window ends at the edge.
    """
    starts = np.empty(samples.shape + (out,), dtype=np.int64)
    if out > 1:
        alpha = dtype.type(size - kernel) / dtype.type(out - 1)
        u = samples.astype(dtype)[..., None]
        steps = np.arange(out - 1, dtype=dtype)
        starts[..., :-1] = ((steps + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    starts[..., -1] = size - kernel
    return starts


def _check_samples_dtype(samples, input: Tensor, function: str) -> None:
    """PyTorch takes ``_random_samples`` only in the input's dtype: other samples would pick other
    windows than its kernel's, which computes the starts in that dtype."""
    if samples is None:
        return
    if not isinstance(samples, Tensor):
        raise TypeError(f"{function}(): argument 'random_samples' must be Tensor, not {type(samples).__name__}")
    if samples.dtype is not input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")


def _fractional_max_pool(
    input: Tensor, kernel_size, output_size, output_ratio, return_indices: bool, _random_samples, rank: int
):
    function = f"fractional_max_pool{rank}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{function} requires specifying either an output_size or an output_ratio")
    if input.dim() not in (rank + 1, rank + 2):
        raise RuntimeError(f"{function}(): Expected {rank + 1}D or {rank + 2}D tensor, but got: {list(input.shape)}")
    kernel = expand_param(kernel_size, rank, "kernel_size", function)
    spatial = list(input.shape[-rank:])
    if output_size is None:
        ratios = list(output_ratio) if isinstance(output_ratio, (tuple, list)) else [output_ratio] * rank
        if len(ratios) != rank:
            raise ValueError(f"{function} requires output_ratio to either be a single Int or tuple of Ints.")
        sizes = [int(size * ratio) for size, ratio in zip(spatial, ratios)]
    else:
        sizes = expand_param(output_size, rank, "output_size", function)
    names = {1: ["width"], 2: ["height", "width"], 3: ["time", "height", "width"]}[rank]
    for name, size, out, k in zip(names, spatial, sizes, kernel):
        # PyTorch's 3-d check is strict (the last window may not end at the edge); its 2-d one is not.
        if out + k - 1 > size or (rank == 3 and out + k - 1 == size):
            raise RuntimeError(f"{function}_out(): pool {name} {k} too large relative to input {name} {size}")
    _check_samples_dtype(_random_samples, input, function)
    x, added_batch = batched(input, rank, function)
    batch, channels = x.shape[0], x.shape[1]
    if _random_samples is None:
        samples = np.asarray(rand(batch, channels, rank, dtype=x.dtype).numpy(force=True), dtype=np.float64)
    else:
        shape = tuple(_random_samples.shape)
        if len(shape) != 3 or shape[2] != rank:
            raise RuntimeError(
                f"{function}(): expected _random_samples of shape [N, {channels}, {rank}], got {list(shape)}"
            )
        # As PyTorch: a larger batch of samples serves the first images (a module's fixed buffer).
        if shape[0] < batch:
            raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
        if shape[1] != channels:
            raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
        # The samples decide the windows, so they are read here (like nonzero's data-dependent shape).
        samples = np.asarray(_random_samples.numpy(force=True), dtype=np.float64)[:batch]
    compute = np.dtype(np.float64) if x.dtype is dtypes.float64 else np.dtype(np.float32)
    # PyTorch's samples per plane: 2-d (width, height), 3-d (time, height, width).
    sample_of_axis = {1: [0], 2: [1, 0], 3: [0, 1, 2]}[rank]
    table = np.zeros((batch, channels, 1, 1), dtype=np.int64)
    for axis, (size, out, k) in enumerate(zip(x.shape[2:], sizes, kernel)):
        starts = _fractional_starts(samples[..., sample_of_axis[axis]], size, out, k, compute)
        positions = starts[..., None] + np.arange(k)  # (N, C, out, k)
        table = table[:, :, :, None, :, None] * size + positions[:, :, None, :, None, :]
        table = table.reshape(batch, channels, table.shape[2] * table.shape[3], table.shape[4] * table.shape[5])
    result = max_over_windows(x, table, sizes, return_indices, f"FractionalMaxPool{rank}DBackward0")
    if not added_batch:
        return result
    return (result[0].squeeze(0), result[1].squeeze(0)) if return_indices else result.squeeze(0)


@outside_autocast("fractional_max_pool2d")
def fractional_max_pool2d(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """2-D fractional max pooling (Graham, 2014): ``kH x kW`` windows at pseudo-random steps.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        kernel_size: the window size (int or pair).
        output_size: the output ``(oH, oW)`` (an int for both), or
        output_ratio: the output size as a fraction of the input's, in (0, 1).
        return_indices: also return the position of each maximum, flattened per ``(n, c)`` plane.
        _random_samples: ``(N, C, 2)`` uniform samples choosing the steps (drawn when None).

    The windows are PyTorch's for the same samples; the samples are read when the call is
    recorded, since they decide which elements each window gathers.

    Example::

        >>> fractional_max_pool2d(onnxnn.randn(2, 3, 10, 9), 3, output_size=(5, 4)).shape
        onnxnn.Size([2, 3, 5, 4])
    """
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2)


@outside_autocast("fractional_max_pool3d")
def fractional_max_pool3d(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """3-D fractional max pooling over ``(N, C, T, H, W)``; see :func:`fractional_max_pool2d` (samples: N, C, 3)."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3)


# ---------------------------------------------------------------- power-average pooling


def _lp_pool(input: Tensor, norm_type: float, kernel_size, stride, ceil_mode: bool, rank: int) -> Tensor:
    kernel = expand_param(kernel_size, rank, "kernel_size", f"lp_pool{rank}d")
    if norm_type in (math.inf, -math.inf):  # the largest |x| of each window (PyTorch's), its negation for -inf
        sign = 1.0 if norm_type > 0 else -1.0
        return _MAX_POOLS[rank](input.abs() * sign, kernel, stride, 0, 1, ceil_mode) * sign
    pooled = _AVG_POOLS[rank](input.pow(norm_type), kernel, stride, 0, ceil_mode)
    scaled = (pooled.sign() * _ops.relu(pooled.abs())) * float(np.prod(kernel))
    return scaled.pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over ``(N, C, L)``: ``(sum over the window of x ** p) ** (1 / p)``.

    As PyTorch computes it: window sums come from an average pool of ``x ** norm_type`` (so odd
    ``p`` with negative inputs and ceil_mode's partial windows behave as in PyTorch).
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over ``(N, C, H, W)``; see :func:`lp_pool1d`.

    Example::

        >>> lp_pool2d(onnxnn.ones(1, 1, 4, 4), 2, 2)
        tensor([[[[2., 2.],
                  [2., 2.]]]])
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over ``(N, C, D, H, W)``; see :func:`lp_pool1d`."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


# ---------------------------------------------------------------- max unpooling


def _unpool_output_size(input: Tensor, kernel: list[int], strides: list[int], pads: list[int], output_size) -> list:
    rank = len(kernel)
    default = [(input.shape[input.dim() - rank + d] - 1) * strides[d] + kernel[d] - 2 * pads[d] for d in range(rank)]
    if output_size is None:
        return default
    output_size = [int(size) for size in output_size]
    if len(output_size) == rank + 2:
        output_size = output_size[2:]
    if len(output_size) != rank:
        raise ValueError(
            f"output_size should be a sequence containing {rank} or {rank + 2} elements, but it has a "
            f"length of '{len(output_size)}'"
        )
    for d in range(rank):
        low, high = default[d] - strides[d], default[d] + strides[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return output_size


def _max_unpool(input: Tensor, indices: Tensor, kernel_size, stride, padding, output_size, rank: int) -> Tensor:
    function = f"max_unpool{rank}d"
    kernel = expand_param(kernel_size, rank, "kernel_size", function)
    strides = kernel if stride is None else expand_param(stride, rank, "stride", function)
    pads = expand_param(padding, rank, "padding", function)
    if indices.dtype is not dtypes.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype.name}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
            f"but got indices tensor with shape: {list(indices.shape)}"
        )
    if input.dim() not in (rank + 1, rank + 2):
        raise RuntimeError(f"{function}(): Expected {rank + 1}D or {rank + 2}D tensor, but got {list(input.shape)}")
    sizes = _unpool_output_size(input, kernel, strides, pads, output_size)
    x, added_batch = batched(input, rank, function)
    i, _ = batched(indices, rank, function)
    batch, channels = x.shape[0], x.shape[1]
    plane = int(np.prod(sizes))
    # Indices already computed are checked here, pending ones by the executor.
    check_known_data(indices, functools.partial(_check_unpool_indices, plane, sizes))
    zeros = full_tensor((batch, channels, plane), 0, x.dtype, x.device)
    window_count = int(np.prod(x.shape[2:]))  # not -1: an empty batch leaves nothing to infer it from
    flat_x = x.reshape((batch, channels, window_count))
    flat_i = i.detach().reshape((batch, channels, window_count))
    result = apply_op("ScatterElements", (zeros, flat_i, flat_x), {"axis": 2}, f"MaxUnpool{rank}DBackward0")
    result = result.reshape((batch, channels) + tuple(sizes))
    return result.squeeze(0) if added_batch else result


@outside_autocast("max_unpool2d")  # PyTorch's runs through max_unpool2d, on its CPU float32 list
def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Partial inverse of :func:`max_pool1d`: values go to their indices in zeros; see :func:`max_unpool2d`."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


@outside_autocast("max_unpool2d")
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Partial inverse of :func:`max_pool2d`: every non-maximal position becomes zero.

    Args:
        input: ``(N, C, H_in, W_in)`` or ``(C, H_in, W_in)``, the pooled values.
        indices: the indices ``max_pool2d(..., return_indices=True)`` gave (per ``(n, c)`` plane).
        kernel_size, stride, padding: those of the pooling (stride defaults to ``kernel_size``).
        output_size: the unpooled spatial size (defaults to ``(H_in - 1) * stride - 2 * padding + kernel_size``).

    Example::

        >>> x = onnxnn.arange(16.0).reshape(1, 1, 4, 4)
        >>> pooled, indices = max_pool2d(x, 2, return_indices=True)
        >>> max_unpool2d(pooled, indices, 2).shape
        onnxnn.Size([1, 1, 4, 4])
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


@outside_autocast("max_unpool3d")
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Partial inverse of :func:`max_pool3d`; see :func:`max_unpool2d`."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)


# ---------------------------------------------------------------- the *_with_indices forms
# PyTorch's names for the max pools that always return (values, indices); return_indices is ignored.


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """:func:`max_pool1d` returning ``(values, indices)``."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_with_indices(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """:func:`max_pool2d` returning ``(values, indices)``."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool3d_with_indices(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """:func:`max_pool3d` returning ``(values, indices)``."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool1d` returning ``(values, indices)``."""
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool2d` returning ``(values, indices)``."""
    return adaptive_max_pool2d(input, output_size, return_indices=True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool3d` returning ``(values, indices)``."""
    return adaptive_max_pool3d(input, output_size, return_indices=True)


def fractional_max_pool2d_with_indices(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """:func:`fractional_max_pool2d` returning ``(values, indices)``."""
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
):
    """:func:`fractional_max_pool3d` returning ``(values, indices)``."""
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def _check_unpool_indices(plane: int, sizes, indices: np.ndarray) -> None:
    if indices.size and (indices.min() < 0 or indices.max() >= plane):
        bad = int(indices.max()) if indices.max() >= plane else int(indices.min())
        raise RuntimeError(
            f"Found an invalid max index: {bad} (output volumes are of size {'x'.join(str(s) for s in sizes)}"
        )
