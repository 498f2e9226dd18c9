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
from ._common import Tensor, normalize_axes
from . import comparison as _c
from . import elementwise as _e
from . import division as _division
from . import reduce as _r
from .shape import chunk, split, stack
from .stats import norm_of_differences

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
    """The ``p``-norm distances between all pairs of rows ``i < j``, in row-major order of the pairs."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    rows = input.shape[0]
    first, second = np.triu_indices(rows, 1)

    def pick(positions):
        return input.index_select(0, Tensor._from_array(positions.astype(np.int64), dtypes.int64, input.device))

    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    return norm_of_differences(pick(first) - pick(second), p)


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


def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None, density: bool = False):
    """``(hist, bin_edges)`` as numpy's histogram computes them (a named tuple, as PyTorch's). Reads the data."""
    data = np.asarray(input._realized_data(), dtype=np.float64).reshape(-1)
    edges = np.asarray(bins._realized_data(), np.float64) if isinstance(bins, Tensor) else bins
    weights = None if weight is None else np.asarray(weight._realized_data(), np.float64).reshape(-1)
    hist, bin_edges = np.histogram(data, edges, range=range, weights=weights, density=density)
    make = lambda array: Tensor._from_array(array.astype(input.dtype.numpy_dtype), input.dtype, input.device)  # noqa: E731
    return HistogramResult(make(hist), make(bin_edges))


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


def adjoint(input: Tensor) -> Tensor:
    return input.transpose(-2, -1)


def is_inference(input: Tensor) -> bool:
    """onnxnn has no inference tensors (inference_mode records like no_grad)."""
    return False
