"""Out-of-place writes of PyTorch's API: index_put, put, scatter_reduce, select_scatter,
slice_scatter, diagonal_scatter and fill_diagonal.

Each is one ScatterElements/ScatterND node (or indexing assignment on a copy), so gradients come
from those ops' rules: written positions pass no gradient to the input, the written values get
the gradient of where they landed (max/min: split evenly among the values equal to the result).
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ._common import Tensor, apply_op, broadcast_shapes, normalize_axes
from . import comparison as _c
from . import elementwise as _e
from . import division as _division
from .index_plan import as_int64, check_index_dtype
from .indexing import (
    _check_index_tensor,
    check_bounds,
    check_flat_bounds,
    check_index_put_dtypes,
    one_element_operands,
    scatter_source,
    setitem,
)
from .matrix import _diagonal_positions
from .shape import cat

__all__ = ["index_put", "put", "scatter_reduce", "select_scatter", "slice_scatter", "diagonal_scatter", "fill_diagonal"]


def _wrapped(index: Tensor, size: int) -> Tensor:
    """``index`` in ``[0, size)``, a negative one counted from the end (known values are checked to
    lie in ``[-size, size)`` first)."""
    index = as_int64(index)
    return _e.where(_c.lt(index, 0), _e.add(index, size), index)


def _index_tensors(indices) -> tuple:
    """``index_put``'s indices checked as PyTorch's: a tuple or list of index tensors (a None, a list,
    or a float tensor among them is refused; one bare tensor would be iterated into 0-d indices)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(
            f"index_put_(): argument 'indices' (position 1) must be tuple of Tensors, not {type(indices).__name__}"
        )
    for position, index in enumerate(indices):
        if not isinstance(index, Tensor):
            raise TypeError(f"expected Tensor as element {position} in argument 0, but got {type(index).__name__}")
        check_index_dtype(index)
    if not indices:
        raise RuntimeError("index_put_(): expected at least one index tensor")
    return tuple(indices)


def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``input[indices] = values`` (``+=`` with repeats summed when ``accumulate``)."""
    indices = _index_tensors(indices)
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put_(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    if accumulate:  # without accumulate, setitem checks (masks excepted)
        check_index_put_dtypes(input.dtype, values.dtype)
    if not accumulate or any(index.dtype in (dtypes.bool, dtypes.uint8) for index in indices):  # masks
        result = input.clone()
        if accumulate:
            setitem(result, indices, result[indices] + values)
        else:
            setitem(result, indices, values)
        return result
    if len(indices) > input.dim():
        raise IndexError(f"too many indices for tensor of dimension {input.dim()} (got {len(indices)})")
    for axis, index in enumerate(indices):  # before recording: a bad index would fail only when run
        check_bounds(index, input.shape[axis], axis, negative=True, error=IndexError)
    shape = broadcast_shapes(*[tuple(index.shape) for index in indices])
    columns = [_wrapped(index, input.shape[axis]).expand(shape).unsqueeze(-1) for axis, index in enumerate(indices)]
    table = cat(columns, -1) if len(columns) > 1 else columns[0]
    updates = values.to(input.dtype).expand(tuple(shape) + tuple(input.shape[len(indices) :]))
    return apply_op("ScatterND", (input, table, updates), {"reduction": "add"}, "IndexPutBackward0")


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``source`` written at the flat positions ``index``."""
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int64:
        got = dtypes.scalar_type_name(index.dtype) if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {got}")
    if index.numel() != source.numel():
        raise RuntimeError(
            f"put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source.numel()}, index.numel() = {index.numel()}"
        )
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{dtypes.scalar_type_name(input.dtype)} and source.dtype = {dtypes.scalar_type_name(source.dtype)}"
        )
    if input.numel() == 0 and index.numel():
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    check_flat_bounds(index, input.numel())
    flat = input.reshape(-1)
    positions = _wrapped(index.reshape(-1), max(flat.shape[0], 1))
    written = apply_op(
        "ScatterElements",
        (flat, positions, source.reshape(-1).to(input.dtype)),
        {"axis": 0, "reduction": "add" if accumulate else "none"},
        "PutBackward0",
    )
    return written.reshape(input.shape)


_IDENTITIES = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "amax": -np.inf, "amin": np.inf}
_ONNX_REDUCTIONS = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}


def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """Reduces ``src`` into ``input`` at ``index`` along ``dim`` with sum, prod, mean, amax or amin."""
    if reduce not in _IDENTITIES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if input.dtype is dtypes.bool and reduce == "mean":
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    if input.dtype is dtypes.bool and reduce in ("amax", "amin"):
        # onnxruntime's ScatterElements has no bool max or min: reduced as 0s and 1s.
        widened = src.to(dtypes.uint8) if isinstance(src, Tensor) else src
        reduced = scatter_reduce(input.to(dtypes.uint8), dim, index, widened, reduce, include_self=include_self)
        return reduced.to(dtypes.bool)
    index = _check_index_tensor(index, "scatter")  # PyTorch's name for the whole family
    axis = normalize_axes([dim], input.dim())[0]
    if input.dim() == 0:  # PyTorch reduces into a 0-d tensor as into its one element; ONNX wants rank 1
        index, src = one_element_operands(index, src)
        return scatter_reduce(input.reshape(1), 0, index, src, reduce, include_self=include_self).reshape(())
    src = scatter_source(input, index, axis, src)  # checks the bounds of a known index before the cast
    index = as_int64(index)
    base = input
    if not include_self:
        identity = _IDENTITIES[reduce]
        if input.dtype is dtypes.bool:  # False and True are bool's lowest and highest
            identity = identity > 0
        elif not input.dtype.is_floating_point and np.isinf(identity):
            info = np.iinfo(input.dtype.numpy_dtype)
            identity = info.min if identity < 0 else info.max
        fill = Tensor._full(tuple(index.shape), identity, input.dtype, input.device)
        base = apply_op(
            "ScatterElements", (input, index, fill), {"axis": axis, "reduction": "none"}, "ScatterBackward0"
        )
    result = apply_op(
        "ScatterElements",
        (base, index, src),
        {"axis": axis, "reduction": _ONNX_REDUCTIONS[reduce]},
        "ScatterReduceBackward0",
    )
    if reduce in ("amax", "amin") and input.dtype.is_floating_point:
        return _with_nans(result, base, index, src, axis)
    if reduce != "mean":
        return result
    ones = Tensor._full(tuple(index.shape), 1, input.dtype, input.device)
    start = Tensor._full(tuple(input.shape), 1 if include_self else 0, input.dtype, input.device)
    counts = apply_op("ScatterElements", (start, index, ones), {"axis": axis, "reduction": "add"})
    counts = _e.where(_c.eq(counts, 0), 1, counts)
    if input.dtype.is_floating_point:
        return _division.div(result, counts)
    return _division.div(result, counts, rounding_mode="floor")


def _with_nans(result: Tensor, base: Tensor, index: Tensor, src: Tensor, axis: int) -> Tensor:
    """``result`` (a max or min scatter) with NaN wherever a NaN took part, as PyTorch's amax and amin
    propagate it: onnxruntime's ScatterElements max/min drops NaN, both the update's and the data's
    (a NaN among the values reduced into an element is then silently replaced by the others' max)."""
    nans = _c.isnan(base).to(base.dtype)
    nans = apply_op("ScatterElements", (nans, index, _c.isnan(src).to(base.dtype)), {"axis": axis, "reduction": "add"})
    return _e.where(_c.gt(nans, 0), float("nan"), result)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of ``input`` with ``src`` written at ``index`` along ``dim``."""
    axis = normalize_axes([dim], input.dim())[0]
    result = input.clone()
    setitem(result, (slice(None),) * axis + (index,), src)
    return result


def slice_scatter(
    input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> Tensor:
    """A copy of ``input`` with ``src`` written into the slice ``start:end:step`` of ``dim``."""
    axis = normalize_axes([dim], input.dim())[0]
    result = input.clone()
    setitem(result, (slice(None),) * axis + (slice(start, end, step),), src)
    return result


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of ``input`` with ``src`` written on the ``offset`` diagonal of the (dim1, dim2) planes."""
    axis1, axis2 = normalize_axes([dim1, dim2], input.dim())
    rest = [axis for axis in range(input.dim()) if axis not in (axis1, axis2)]
    order = rest + [axis1, axis2]
    moved = input.permute(order)
    rows, cols = input.shape[axis1], input.shape[axis2]
    flat = moved.reshape(tuple(moved.shape[:-2]) + (rows * cols,))
    positions = _diagonal_positions(rows, cols, offset)
    if tuple(src.shape) != tuple(flat.shape[:-1]) + (positions.size,):
        raise RuntimeError(
            f"diagonal_scatter: src has shape {list(src.shape)}, expected "
            f"{list(flat.shape[:-1]) + [int(positions.size)]}"
        )
    table = Tensor._from_array(np.broadcast_to(positions, tuple(src.shape)).copy(), dtypes.int64, input.device)
    written = apply_op(
        "ScatterElements", (flat, table, src.to(input.dtype)), {"axis": flat.dim() - 1}, "DiagonalScatterBackward0"
    )
    inverse = list(np.argsort(order))
    return written.reshape(moved.shape).permute(inverse)


def fill_diagonal(input: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """``Tensor.fill_diagonal_``'s value: ``fill_value`` on the main diagonal (numpy's fill_diagonal rule)."""
    if input.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.dim() > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(tuple(input.shape), dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return _e.where(Tensor._from_array(mask, dtypes.bool, input.device), fill_value, input).to(input.dtype)
