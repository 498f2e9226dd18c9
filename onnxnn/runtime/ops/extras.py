"""The rest of the parity batch: vander, pdist, renorm, frobenius_norm, unravel_index, range,
histogram, histogramdd, hash_tensor, nonzero_static, bernoulli, and torch's top-level spellings of shape helpers.

All recorded with existing ops except the documented data readers (histogram, histogramdd, hash_tensor, nonzero_static)
and bernoulli, whose samples come from onnxnn's seeded generator like every random value.
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ...ir import random as _random
from ..realization import host_data
from ..creation import _float_dtype, _make
from ...ir.evenly_spaced import linspace_edges
from ._common import Tensor, normalize_axes
from . import comparison as _c
from . import elementwise as _e
from . import division as _division
from . import reduce as _r
from .shape import stack
from .splitting import chunk, split
from .stats import (
    check_bin_count,
    cpp_number,
    empty_distances,
    linear_bin_positions,
    norm_of_differences,
    upper_bound,
)

__all__ = [
    "vander",
    "pdist",
    "renorm",
    "frobenius_norm",
    "unravel_index",
    "range",
    "histogram",
    "histogramdd",
    "hash_tensor",
    "nonzero_static",
    "bernoulli",
    "split_with_sizes",
    "unsafe_split",
    "unsafe_chunk",
    "unsafe_split_with_sizes",
    "unflatten",
    "is_same_size",
    "is_signed",
    "get_device",
    "adjoint",
    "matrix_transpose",
    "is_inference",
]


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """Columns of powers of the 1-D ``x``: ``x**(N-1), ..., x, 1`` (ascending when ``increasing``)."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    count = x.shape[0] if N is None else N
    if count < 0:
        raise RuntimeError("N must be non-negative.")
    powers = np.arange(count) if increasing else np.arange(count)[::-1]
    base = x if x.dtype.is_floating_point else x.to(dtypes.int64)
    columns = [base.new_ones(x.shape[0]) if p == 0 else (base if p == 1 else _e.pow(base, int(p))) for p in powers]
    if not columns:
        return Tensor._zeros((x.shape[0], 0), base.dtype, x.device)
    return stack(columns, 1)


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm distances between all pairs of rows ``i < j``, in row-major order of the pairs.

    Example::

        >>> onnxnn.pdist(onnxnn.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).tolist()
        [5.0, 1.0, 4.242640495300293]
    """
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if not p >= 0:  # NaN too
        raise RuntimeError("pdist only supports non-negative p values")
    rows, columns = input.shape
    first, second = np.triu_indices(rows, 1)
    if first.size == 0 or columns == 0:
        return empty_distances((first.size,), (input,), "PdistBackward0")

    def pick(positions):
        return input.index_select(0, Tensor._from_array(positions.astype(np.int64), dtypes.int64, input.device))

    return norm_of_differences(pick(first) - pick(second), p, "PdistBackward0")


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``."""
    axis = normalize_axes([dim], input.dim())[0]
    others = [d for d in builtins.range(input.dim()) if d != axis]
    norms = _r.norm(input, p, others, keepdim=True) if others else _e.abs(input)
    # PyTorch divides by norm + 1e-7, so a renormed slice ends just under maxnorm.
    factor = _e.where(_c.gt(norms, maxnorm), _division.div(maxnorm, _e.add(norms, 1e-7)), 1.0)
    return input * factor.to(input.dtype)


def frobenius_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return _r.norm(input, 2, dim, keepdim)


def unravel_index(indices, shape) -> tuple:
    """The coordinates in an array of ``shape`` of the flat ``indices``, one int64 tensor per dim."""
    if not isinstance(indices, Tensor):
        indices = Tensor._from_array(np.asarray(indices, dtype=np.int64), dtypes.int64)
    if indices.dtype.is_floating_point or indices.dtype is dtypes.bool:
        raise TypeError("expected 'indices' to be integer dtype, but got " + str(indices.dtype))
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = int(np.prod(shape)) if shape else 1
    data = host_data(indices._value)
    if data is not None and data.size and ((data < -total) | (data >= total)).any():
        raise RuntimeError("index is out of bounds for tensor of shape " + str(list(shape)))
    flat = _e.where(_c.lt(indices, 0), _e.add(indices, total), indices).to(dtypes.int64)
    result = []
    stride = total
    for size in shape:
        stride //= max(size, 1)
        result.append(_division.remainder(_division.div(flat, stride, rounding_mode="floor"), size))
    return tuple(result)


def range(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``torch.range``: from ``start`` to ``end`` inclusive, in the default float dtype."""
    if end is None:
        start, end = 0, start
    target = _float_dtype(dtype, "range")
    count = int(math.floor((end - start) / step)) + 1
    values = start + np.arange(max(count, 0), dtype=np.float64) * step
    return _make(values.astype(target.numpy_dtype), target, device, requires_grad)


HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])
HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])


# caffe2's names of dtypes, which histogramdd's dtype messages print.
_TYPE_META_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}


def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None, density: bool = False):
    """``(hist, bin_edges)`` of the flattened ``input`` (a named tuple, as PyTorch's). Reads the data.

    Args:
        input: float32 or float64 values.
        bins: the number of equal bins, or a 1-D tensor of edges (increasing) of ``input``'s dtype.
        range: ``(min, max)`` of the equal bins. Default: the data's range (``(0, 1)`` when empty).
        weight: one weight per element of ``input``, of its dtype. Default: 1 each.
        density: divide by the total and the bins' widths.

    Binned as PyTorch's CPU kernel: equal bins from PyTorch's ``linspace`` of the edges in the input's
    dtype, each value placed by ``(x - min) * bins / (max - min)`` and checked against the edges next
    to it; given edges by binary search. The last bin holds its right edge.

    Example::

        >>> onnxnn.histogram(onnxnn.tensor([0.1, 0.7, 0.9]), 2, range=(0.0, 1.0)).hist.tolist()
        [1.0, 2.0]
    """
    given_edges = isinstance(bins, Tensor)
    if given_edges:
        if bins.dim() != 1:
            raise RuntimeError(
                f"torch.histogramdd: bins tensor should have one dimension, but got {bins.dim()} dimensions "
                "in the bins tensor for dimension 0"
            )
        if bins.numel() == 0:
            raise RuntimeError(
                "torch.histogramdd: bins tensor should have at least 1 element, but got 0 elements in the "
                "bins tensor for dimension 0"
            )
        check_bin_count(bins.numel() - 1)
        if bins.dtype != input.dtype:
            raise RuntimeError(
                f"torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input "
                f"with dtype {_type_meta_name(input)} and bins for dimension 0 with dtype {_type_meta_name(bins)}"
            )
    else:
        check_bin_count(bins)
    if input.dtype not in (dtypes.float32, dtypes.float64):
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{dtypes.scalar_type_name(input.dtype)}'")
    data = np.asarray(input._realized_data()).reshape(-1)
    weights = _histogram_weights(input, weight)
    if given_edges:
        edges = np.asarray(bins._realized_data()).reshape(-1)
        inside = (data >= edges[0]) & (data <= edges[-1])  # False for NaN
        everywhere = np.zeros(data.shape, np.int64)
        positions = upper_bound(edges, np.where(inside, data, edges[0]), everywhere, everywhere + edges.size) - 1
        positions = np.where(inside, np.where(positions == edges.size - 1, edges.size - 2, positions), -1)
    else:
        low, high = _histogram_range(data, range)
        edges = linspace_edges(low, high, bins + 1, data.dtype)
        positions = linear_bin_positions(data, edges, bins, search=True)
    hist = np.zeros(edges.size - 1, data.dtype)
    kept = positions >= 0
    # One addition at a time in the input's dtype, as PyTorch's kernel accumulates.
    np.add.at(hist, positions[kept], data.dtype.type(1) if weights is None else weights[kept])
    if density:
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / hist.sum(dtype=data.dtype) / np.diff(edges)
    make = lambda array: Tensor._from_array(np.asarray(array, dtype=data.dtype), input.dtype, input.device)  # noqa: E731
    return HistogramResult(make(hist), make(edges))


def _type_meta_name(tensor: Tensor) -> str:
    return _TYPE_META_NAMES.get(tensor.dtype.name, tensor.dtype.name)


def _histogram_weights(input: Tensor, weight: Tensor | None):
    if weight is None:
        return None
    if weight.dtype != input.dtype:
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the "
            f"same dtype, but got input({_type_meta_name(input)}), and weight({_type_meta_name(weight)})"
        )
    if weight.numel() != input.numel():
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor "
            f"excluding its innermost dimension, but got input with shape [{input.numel()}, 1] and weight with "
            f"shape [{weight.numel()}]"
        )
    return np.asarray(weight._realized_data()).reshape(-1)


def _histogram_range(data: np.ndarray, range) -> tuple[float, float]:
    """PyTorch's outer edges: ``range``, else the data's (NaN propagating), else ``(0, 1)``; an empty
    range widened by 0.5 on each side, as numpy's."""
    if range is not None:
        if len(range) != 2:
            raise RuntimeError(
                f"histogramdd: for a 1-dimensional histogram range should have 2 elements, but got {len(range)}"
            )
        low, high = float(range[0]), float(range[1])
    elif data.size:
        low, high = float(data.min()), float(data.max())
    else:
        low, high = 0.0, 1.0
    if not (np.isfinite(low) and np.isfinite(high)):
        raise RuntimeError(
            f"torch.histogramdd: dimension 0's range [{cpp_number(low)}, {cpp_number(high)}] is not finite"
        )
    if low > high:
        raise RuntimeError(
            f"torch.histogramdd: min should not exceed max, but got min {cpp_number(low)} max "
            f"{cpp_number(high)} for dimension 0"
        )
    if low == high:
        low, high = low - 0.5, high + 0.5
    return low, high


def histogramdd(input: Tensor, bins=10, *, range=None, weight: Tensor | None = None, density: bool = False):
    """``(hist, bin_edges)`` of the rows of ``input`` (``(..., D)``: points in D dimensions), as numpy's
    histogramdd computes them. ``bins`` is one count, one count per dimension, or one edge tensor per
    dimension; ``range`` is ``[min_0, max_0, ..., min_D-1, max_D-1]``. Reads the data.
    """
    if input.dim() < 1:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 1 dimension, but got 0")
    dimensions = input.shape[-1]
    points = np.asarray(input._realized_data(), dtype=np.float64).reshape(-1, dimensions)
    if isinstance(bins, Tensor) or (not isinstance(bins, int) and len(bins) and isinstance(bins[0], Tensor)):
        edges = [np.asarray(edge._realized_data(), np.float64) for edge in bins]
    else:
        edges = bins
    if isinstance(edges, (list, tuple)) and len(edges) != dimensions:
        raise RuntimeError(
            f"torch.histogramdd: expected {dimensions} sequences of bin edges for each of the "
            f"{dimensions} dimensions of input but got {len(edges)}"
        )
    pairs = None if range is None else [(range[2 * axis], range[2 * axis + 1]) for axis in builtins.range(dimensions)]
    weights = None if weight is None else np.asarray(weight._realized_data(), np.float64).reshape(-1)
    hist, bin_edges = np.histogramdd(points, edges, range=pairs, weights=weights, density=density)
    make = lambda array: Tensor._from_array(array.astype(input.dtype.numpy_dtype), input.dtype, input.device)  # noqa: E731
    return HistogramddResult(make(hist), tuple(make(edge) for edge in bin_edges))


def hash_tensor(input: Tensor, dim=None, *, keepdim: bool = False, mode: int = 0) -> Tensor:
    """The xor of the elements' 64-bit patterns (``mode=0``, the only one) over ``dim`` (default: all),
    a ``uint64`` tensor: floats are widened to float64 and integers to 64 bits before their bits are
    read, as PyTorch does. Reads the data (ONNX has no op that reinterprets a float's bits).
    """
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    data = np.asarray(input._realized_data())
    if input.dtype.is_floating_point:
        wide = data.astype(np.float64)
    elif data.dtype.kind == "u" or data.dtype == np.bool_:
        wide = data.astype(np.uint64)
    else:
        wide = data.astype(np.int64)
    bits = wide.view(np.uint64)
    if dim is None:
        if data.size == 0:
            raise RuntimeError(
                "hash_tensor: Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        axes = tuple(builtins.range(data.ndim))
    else:
        axes = tuple(normalize_axes([dim] if isinstance(dim, int) else list(dim), data.ndim))
        for axis in axes:
            if data.ndim and data.shape[axis] == 0:
                raise IndexError(f"hash_tensor: Expected reduction dim {axis} to have non-zero size.")
    # numpy's stubs overload reduce on keepdims as a literal True or False, not a bool.
    hashed = np.bitwise_xor.reduce(bits, axis=axes, keepdims=keepdim) if data.ndim else bits  # type: ignore[call-overload]
    return Tensor._from_array(np.asarray(hashed, dtype=np.uint64), dtypes.uint64, input.device)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero`` cut or padded with ``fill_value`` to exactly ``size`` rows. Reads the data."""
    found = np.argwhere(np.asarray(input._realized_data())).astype(np.int64)[:size]
    padded = np.full((size, input.dim()), fill_value, dtype=np.int64)
    padded[: found.shape[0]] = found
    return Tensor._from_array(padded, dtypes.int64, input.device)


def bernoulli(input: Tensor, p: float | None = None, *, generator=None) -> Tensor:
    """Samples 1 with probability ``input`` (or ``p``) elementwise, from onnxnn's generator."""
    probabilities = np.asarray(input._realized_data(), dtype=np.float64) if p is None else p
    draws = _random.uniform(tuple(input.shape), np.float64, 0.0, 1.0, generator) < probabilities
    return Tensor._from_array(draws.astype(input.dtype.numpy_dtype), input.dtype, input.device)


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    return split(input, list(split_sizes), dim)


unsafe_split_with_sizes = split_with_sizes


def unsafe_split(input: Tensor, split_size, dim: int = 0) -> tuple:
    return split(input, split_size, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    return chunk(input, chunks, dim)


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    return input.unflatten(dim, sizes)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input: Tensor) -> bool:
    return input.is_signed()


def get_device(input: Tensor) -> int:
    return input.get_device()


def matrix_transpose(input: Tensor, name: str) -> Tensor:
    """``input`` with its last two dims swapped, as PyTorch's ``Tensor.mT``, ``mH`` and ``adjoint()``
    (real dtypes: no conjugation): a 0-d tensor is returned as it is, a 1-D one refused in the words
    of ``name``, the attribute's."""
    if input.dim() == 1:
        raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return input if input.dim() == 0 else input.transpose(-2, -1)


def adjoint(input: Tensor) -> Tensor:
    return matrix_transpose(input, "adjoint()")


def is_inference(input: Tensor) -> bool:
    """onnxnn has no inference tensors (inference_mode records like no_grad)."""
    return False
