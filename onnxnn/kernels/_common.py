"""Helpers shared by the kernel families: reading structural inputs, axes, dtypes, padding."""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import as_dtype

__all__ = [
    "to_list",
    "to_scalar",
    "normalize_axis",
    "numpy_dtype",
    "lowest",
    "highest",
    "axes_argument",
    "spatial_attributes",
    "auto_pads",
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_mean",
]


def to_list(array) -> list:
    """A structural input (axes, shape, pads, sizes) as a list of Python numbers."""
    if type(array) is np.ndarray:
        return array.ravel().tolist()
    return np.asarray(array.get() if hasattr(array, "get") else array).reshape(-1).tolist()


# numpy's ufunc.reduce skips the argument handling of np.sum/np.max (several microseconds a call,
# which is most of the cost of a small reduction); CuPy gets its own functions.


def reduce_sum(xp, x, axis=None, keepdims=False, dtype=None):
    if xp is np:
        if x.dtype in _WIDENED_SUMS and (dtype is None or dtype == x.dtype) and _sums_rows_in_order(x.shape, axis):
            # numpy sums pairwise along the innermost axis only: down an outer one it adds row after
            # row, and float32's error grows with the rows (0.9% for a million rows of values near
            # 1000). Accumulated in float64 and rounded once, as PyTorch's sums keep their digits.
            return np.add.reduce(x, axis=axis, dtype=np.float64, keepdims=keepdims).astype(x.dtype)
        return np.add.reduce(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return xp.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


_WIDENED_SUMS = frozenset({np.dtype(np.float32), np.dtype(np.float16)})
# Rows a sum may add one after another in float32 before its error passes a few ulps.
_ROWS_IN_ORDER_MAX = 64


def _sums_rows_in_order(shape: tuple, axis) -> bool:
    """Whether numpy's sum of ``shape`` over ``axis`` adds more than ``_ROWS_IN_ORDER_MAX`` rows one
    after another: the reduced elements along axes other than the innermost one."""
    rank = len(shape)
    if rank == 0:
        return False
    axes = range(rank) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    rows = 1
    for a in axes:
        a = a % rank
        if a != rank - 1:
            rows *= shape[a]
    return rows > _ROWS_IN_ORDER_MAX


def reduce_max(xp, x, axis=None, keepdims=False):
    if xp is np:
        return np.maximum.reduce(x, axis=axis, keepdims=keepdims)
    return xp.max(x, axis=axis, keepdims=keepdims)


def reduce_min(xp, x, axis=None, keepdims=False):
    if xp is np:
        return np.minimum.reduce(x, axis=axis, keepdims=keepdims)
    return xp.min(x, axis=axis, keepdims=keepdims)


def reduce_mean(xp, x, axis, keepdims=False):
    """Mean over ``axis`` (an int or a tuple), accumulated in x's dtype."""
    axes = (axis,) if isinstance(axis, int) else axis
    count = 1
    for a in axes:
        count *= x.shape[a]
    return reduce_sum(xp, x, axes, keepdims, x.dtype) / x.dtype.type(count)


def to_scalar(array):
    """A one-element input (a Range bound, TopK's k, CumSum's axis) as a Python number."""
    return to_list(array)[0]


def normalize_axis(axis: int, rank: int) -> int:
    """``axis`` in [0, rank); IndexError naming the axis and rank otherwise."""
    if not -rank <= axis < max(rank, 1):
        raise IndexError(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank if rank else 0


def numpy_dtype(value) -> np.dtype:
    """The numpy dtype of an onnxnn dtype, an ONNX element type or a numpy dtype."""
    return as_dtype(value).numpy_dtype


def lowest(dtype):
    """The identity of a max-reduction: -inf for floats, the type's minimum for integers, False for bool."""
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def highest(dtype):
    """The identity of a min-reduction: +inf for floats, the type's maximum for integers, True for bool."""
    if dtype.kind == "b":
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return np.inf


def axes_argument(inputs: list, attrs: dict, position: int = 1):
    """The axes of a reduction-like op: the ``axes`` input (opset 13/18+) or attribute (older opsets).

    Returns None when neither is given (or the input is empty), meaning "no axes specified".
    """
    if len(inputs) > position and inputs[position] is not None:
        axes: list | None = to_list(inputs[position])
        return axes if axes else None
    axes = attrs.get("axes")
    if axes is None:
        return None
    axes = list(axes)
    return axes if axes else None


def spatial_attributes(attrs: dict, spatial_rank: int) -> tuple:
    """(strides, dilations, pads) of a convolution or pooling node with ONNX's defaults filled in."""
    strides = list(attrs.get("strides") or [1] * spatial_rank)
    dilations = list(attrs.get("dilations") or [1] * spatial_rank)
    pads = list(attrs.get("pads") or [0] * (2 * spatial_rank))
    return strides, dilations, pads


def auto_pads(auto_pad: str, input_shape, kernel_shape, strides, dilations, pads) -> list:
    """Explicit [begin..., end...] pads for ``auto_pad`` SAME_UPPER / SAME_LOWER / VALID / NOTSET."""
    if auto_pad in ("", "NOTSET"):
        return pads
    rank = len(input_shape)
    if auto_pad == "VALID":
        return [0] * (2 * rank)
    begins, ends = [], []
    for size, kernel, stride, dilation in zip(input_shape, kernel_shape, strides, dilations):
        output = -(-size // stride)
        total = max((output - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
        small, large = total // 2, total - total // 2
        if auto_pad == "SAME_UPPER":
            begins.append(small)
            ends.append(large)
        else:
            begins.append(large)
            ends.append(small)
    return begins + ends
