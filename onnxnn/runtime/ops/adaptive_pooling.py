"""Adaptive average pooling: PyTorch's ``adaptive_avg_pool1d/2d/3d``.

Output position ``i`` of an axis of length ``n`` pooled to ``m`` averages
``[floor(i * n / m), ceil((i + 1) * n / m))``. Even tilings are ONNX's pools; uneven, overlapping
windows (and float64, which onnxruntime's pools lack) are sums of each axis's gathered windows.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ._common import Tensor, apply_op, int64_constant, with_closed_form_gradient
from .conv import batched
from .elementwise import where
from .gathered_pooling import adaptive_windows, refuse_pool_dtype
from .opmath import rounded, widened
from .pooling import require_nonempty_dims
from ..grad_mode import is_grad_enabled
from ..tensor import outside_autocast

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "empty_adaptive_pool"]


def _adaptive_window_sums(x: Tensor, axis: int, positions: np.ndarray, own: np.ndarray) -> Tensor:
    """Sums of ``x`` over the windows ``adaptive_windows`` gives for ``axis`` (``(out, longest)``
    positions and whether each is the window's own); that axis's size becomes ``out``.

    Each window's elements are gathered, and a window's padding is selected away, never multiplied
    by 0: a NaN or an infinity reaches only the windows that hold it, as in PyTorch (an averaging
    matrix spread it over the whole row: 0 * nan is nan).
    """
    gathered = apply_op("Gather", (x, int64_constant(positions)), {"axis": axis})
    if not own.all():
        trailing = (1,) * (x.dim() - axis - 1)
        mask = Tensor._from_array(own.reshape(own.shape + trailing), dtypes.bool, x.device)
        gathered = where(mask, gathered, Tensor._zeros((), x.dtype, x.device))
    return gathered.sum(axis + 1)


_ADAPTIVE_AVG_POOL_NAMES = {1: "adaptive_avg_pool1d", 2: "adaptive_avg_pool2d", 3: "adaptive_avg_pool3d"}


def _adaptive_avg_pool(input: Tensor, output_size, rank: int) -> Tensor:
    function = _ADAPTIVE_AVG_POOL_NAMES[rank]
    if input.dim() not in (rank + 1, rank + 2):
        raise RuntimeError(f"{function}(): Expected {rank + 1}D or {rank + 2}D tensor, but got {list(input.shape)}")
    refuse_pool_dtype(input.dtype, function)
    require_nonempty_dims(input, 1 if rank == 3 else input.dim() - rank, function)
    name = f"AdaptiveAvgPool{rank}DBackward0"
    sizes: list = [output_size] * rank if isinstance(output_size, int) or output_size is None else list(output_size)
    if len(sizes) != rank:
        raise RuntimeError(f"{function}: output_size must be {rank}")
    x, added_batch = batched(input, rank, function)
    spatial = list(x.shape[2:])
    sizes = [size if out is None else int(out) for size, out in zip(spatial, sizes)]
    if any(out < 0 for out in sizes):
        received = ", ".join(str(out) for out in sizes)
        raise RuntimeError(
            f"{function}: elements of output_size must be greater than or equal to 0 but received {{{received}}}"
        )
    empty = empty_adaptive_pool(input, sizes, "avg")
    if empty is not None:
        return empty
    # onnxruntime pools only float32/float16: float64 takes the matrix form, which it runs.
    poolable = input.dtype is not dtypes.float64
    if poolable and all(out == 1 for out in sizes):  # a classifier's global pooling
        result = apply_op("GlobalAveragePool", (x,), None, name)
    elif poolable and all(size % out == 0 for size, out in zip(spatial, sizes)):
        kernel = [size // out for size, out in zip(spatial, sizes)]
        result = apply_op("AveragePool", (x,), {"kernel_shape": kernel, "strides": kernel}, name)
    else:
        # Overlapping, uneven windows: the sums are separable (one axis after the other), then each
        # is divided by its window's size, as PyTorch divides a window's sum.
        result = widened(x)
        counts = np.ones(())
        for axis, (size, out) in enumerate(zip(spatial, sizes)):
            positions, own = adaptive_windows(size, out)
            result = _adaptive_window_sums(result, 2 + axis, positions, own)
            counts = np.multiply.outer(counts, own.sum(axis=1))
        divisor = Tensor._from_array(counts.astype(result.dtype.numpy_dtype), result.dtype, x.device)
        result = rounded(result / divisor, x.dtype)
    return result.squeeze(0) if added_batch else result


def empty_adaptive_pool(input: Tensor, sizes: list, kind: str, return_indices: bool = False):
    """The result of an adaptive pool (``kind`` "avg" or "max") with no element past its first dim (an
    output size of 0, or an average pool's empty channels), or None when it has elements there.

    PyTorch returns the empty result, but its backward kernels refuse an empty gradient there, so its
    gradient raises PyTorch's RuntimeError when a backward reaches it (the 1-d pools run the 2-d
    kernels on ``(..., 1, L)``, whose sizes the message shows).
    """
    rank = len(sizes)
    shape = tuple(input.shape[:-rank]) + tuple(sizes)
    seen = shape[:-1] + (1, shape[-1]) if rank == 1 else shape
    if 0 not in seen[1:]:
        return None
    message = (
        f"adaptive_{kind}_pool{max(rank, 2)}d_backward(): Expected grad_output to have non-zero size for "
        f"non-batch dimensions, but grad_output has sizes {list(seen)} with dimension {seen.index(0, 1)} being empty"
    )

    def refuse(G: Tensor) -> tuple:
        raise RuntimeError(message)

    result = Tensor._zeros(shape, input.dtype, input.device)
    if input._requires_grad and is_grad_enabled():
        name = f"Adaptive{kind.capitalize()}Pool{rank}DBackward0"
        result = with_closed_form_gradient(result, (input,), (), refuse, name)
    return (result, Tensor._zeros(shape, dtypes.int64, input.device)) if return_indices else result


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed length ``output_size`` with PyTorch's adaptive windows."""
    return _adaptive_avg_pool(input, output_size, 1)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed ``(H_out, W_out)`` (an int for both; None keeps that input size).

    Recorded as ``GlobalAveragePool`` for 1x1 outputs, ``AveragePool`` when the sizes divide
    evenly, and otherwise (or for float64) as sums of each axis's gathered windows (PyTorch's
    ``[floor(i * H / H_out), ceil((i + 1) * H / H_out))``), divided by the windows' sizes.

    Example::

        >>> adaptive_avg_pool2d(onnxnn.ones(2, 3, 7, 7), 1).shape
        onnxnn.Size([2, 3, 1, 1])
    """
    return _adaptive_avg_pool(input, output_size, 2)


@outside_autocast("adaptive_avg_pool3d")
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed ``(D_out, H_out, W_out)``; see :func:`adaptive_avg_pool2d`."""
    return _adaptive_avg_pool(input, output_size, 3)
