"""Searching and counting along tensors: bucketize/searchsorted, isin, diff, aminmax, count_nonzero.

Recorded as ONNX ops, so they export and work on pending values: a sorted search is a count of the
boundaries below each value for short sequences, an unrolled binary search (``binary_search.py``)
for long ones.
"""

from __future__ import annotations

from collections import namedtuple

from ...ir import dtypes
from ._common import Tensor, apply_op, int64_constant, normalize_axes
from . import comparison as _c
from . import elementwise as _e
from . import reduce as _r
from .binary_search import binary_search, search_outcomes
from .indexing import gather_within
from .shape import cat, slice_axis
from ..realization import host_data

__all__ = ["diff", "count_nonzero", "aminmax", "bucketize", "searchsorted", "isin"]

AminmaxResult = namedtuple("aminmax", ["min", "max"])


def diff(
    input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None
) -> Tensor:
    """``n``-th forward differences along ``dim`` (bool inputs: ``!=`` of neighbours)."""
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    axis = normalize_axes([dim], input.dim())[0]
    for extra in (prepend, append):
        if extra is not None:
            _check_diff_extension(input, extra, axis)
    if n == 0:  # no differences: the input itself, prepend and append unused (PyTorch's, numpy's)
        return input
    parts = [t for t in (prepend, input, append) if t is not None]
    result = cat(parts, axis) if len(parts) > 1 else input
    for _ in range(n):
        size = result.shape[axis]
        if size == 0:
            break
        later, earlier = slice_axis(result, axis, 1, size), slice_axis(result, axis, 0, size - 1)
        result = _c.ne(later, earlier) if result.dtype is dtypes.bool else _e.sub(later, earlier)
    return result


def _check_diff_extension(input: Tensor, extra: Tensor, axis: int) -> None:
    """PyTorch's checks of diff's ``prepend``/``append``: the input's rank, its sizes but along ``dim``."""
    if extra.dim() != input.dim():
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    for index, (size, extra_size) in enumerate(zip(input.shape, extra.shape)):
        if index != axis and size != extra_size:
            raise RuntimeError(
                "diff expects the shape of tensor to prepend or append to match that of input except along the "
                f"differencing dimension; input.size({index}) = {size}, but got tensor.size({index}) = {extra_size}"
            )


def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """The number of nonzero elements (over ``dim``), as int64."""
    return _r.sum(_c.ne(input, 0).to(dtypes.int64), dim)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> AminmaxResult:
    """``(amin, amax)`` over ``dim`` (all elements when None)."""
    if dim is None and input.numel() == 0:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    if dim is not None and input.dim() and input.shape[normalize_axes([dim], input.dim())[0]] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {dim} to have non-zero size.")
    dims = () if dim is None else dim
    return AminmaxResult(_r.amin(input, dims, keepdim), _r.amax(input, dims, keepdim))


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """For each value, the index of the bucket of the sorted 1-D ``boundaries`` it falls into.

    ``right=False``: the first ``i`` with ``value <= boundaries[i]``; ``right=True``: ``value < boundaries[i]``.
    Recorded as ONNX ops (``_search``: a binary search unrolled into ``ceil(log2(m + 1))`` steps, or for
    few boundaries a count of those below the value), so it exports and works on pending values. A NaN
    value goes after every boundary, and NaN boundaries sorted last give PyTorch's results, as its search.
    """
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    if not isinstance(input, Tensor):
        input = Tensor._full((), input, boundaries.dtype, boundaries.device)
    result = _search(boundaries, input, right)
    return result.to(dtypes.int32) if out_int32 else result


_COUNT_BELOW_UP_TO = 16


def _search(sequence: Tensor, values: Tensor, right: bool) -> Tensor:
    """PyTorch's insertion indices (int64) of ``values`` in the sorted innermost rows of ``sequence``
    (1-D, or with ``values``' leading dimensions).

    A binary search (``binary_search``: values x log2(m) work, ~8 nodes a step) beyond
    ``_COUNT_BELOW_UP_TO`` boundaries; up to it, a count of the boundaries below each value (values x m
    work in ~5 nodes, ~10 for a float sequence's NaN correction). Measured (float32, both executors): the
    count (float boundaries) costs 0.09-0.14 ms for up to 1e3 values where the search's nodes cost
    0.11-0.28 ms (m 2..16); at 1e5 values it stays ahead up to m = 16 (kernels: 3.4 ms against 5.4 ms,
    onnxruntime 2.3 against 2.6) and at m = 32 the two trade places; from m = 64 the search wins at
    1e4 values and more.
    """
    m = sequence.shape[-1]
    if m > _COUNT_BELOW_UP_TO:
        return binary_search(sequence, values, right)
    boundaries = sequence if sequence.dim() == 1 else sequence.unsqueeze(-2)
    below = _r.sum(_below(boundaries, values.unsqueeze(-1), right).to(dtypes.int64), -1)
    if m == 0 or not sequence.dtype.is_floating_point:
        return below  # no NaN boundaries: the comparisons are monotone, the count is the search's result
    # NaN boundaries (sorted last) make the comparisons non-monotone: PyTorch's result from the two counts.
    nans = _r.sum(_c.ne(sequence, sequence).to(dtypes.int64), -1, keepdim=sequence.dim() > 1)
    index = apply_op("Add", (apply_op("Mul", (below, int64_constant(m + 1))), nans))
    return apply_op("Gather", (int64_constant(search_outcomes(m)), index), {"axis": 0})


def _below(boundaries: Tensor, values: Tensor, right: bool) -> Tensor:
    """Whether each boundary goes before each value: PyTorch's binary search moves past a boundary
    unless ``boundary >= value`` (``>`` for ``right``), so a NaN value, comparing false, goes last."""
    return _c.logical_not((_c.gt if right else _c.ge)(boundaries, values))


def searchsorted(
    sorted_sequence: Tensor,
    values,
    *,
    out_int32: bool = False,
    right: bool = False,
    side=None,
    sorter: Tensor | None = None,
) -> Tensor:
    """Indices at which ``values`` would be inserted to keep each innermost row of ``sorted_sequence`` sorted.

    Example::

        >>> onnxnn.searchsorted(onnxnn.tensor([1.0, 3.0, 5.0]), onnxnn.tensor([3.0, 4.0]), right=True).tolist()
        [2, 2]
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if side == "left" and right:
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
            )
        right = side == "right"
    if sorter is not None:
        _check_sorter(sorter, sorted_sequence)
        sorted_sequence = gather_within(sorted_sequence, -1, sorter)
    if sorted_sequence.dim() == 1:
        return bucketize(values, sorted_sequence, out_int32=out_int32, right=right)
    if (
        not isinstance(values, Tensor)
        or values.dim() != sorted_sequence.dim()
        or tuple(values.shape[:-1]) != tuple(sorted_sequence.shape[:-1])
    ):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
            "of boundaries tensor and input value tensor must match"
        )
    result = _search(sorted_sequence, values, right)
    return result.to(dtypes.int32) if out_int32 else result


def _check_sorter(sorter: Tensor, sorted_sequence: Tensor) -> None:
    """PyTorch's checks of searchsorted's ``sorter``: int64, the sequence's shape, positions in its rows (those
    when the sorter's data is at hand, as PyTorch's CPU kernel reads it)."""
    if sorter.dtype != dtypes.int64:
        raise RuntimeError(
            "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype "
            + dtypes.scalar_type_name(sorter.dtype)
        )
    if tuple(sorter.shape) != tuple(sorted_sequence.shape):
        raise RuntimeError(
            f"torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor "
            f"{list(sorted_sequence.shape)}and got sorter tensor {list(sorter.shape)}"
        )
    data = host_data(sorter._value)
    if data is not None and data.size and (data.min() < 0 or data.max() >= sorted_sequence.shape[-1]):
        raise RuntimeError("torch.searchsorted(): sorter index out of range")


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` is in ``test_elements`` (compared all against all)."""
    if _e._is_bool(elements) or _e._is_bool(test_elements):  # PyTorch's isin takes no bools, tensor or number
        raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    if not isinstance(elements, Tensor):
        elements = Tensor._full((), elements, test_elements.dtype, test_elements.device)
    if not isinstance(test_elements, Tensor):
        test_elements = Tensor._full((1,), test_elements, elements.dtype, elements.device)
    pairs = _c.eq(elements.unsqueeze(-1), test_elements.reshape(-1))
    found = _r.any(pairs, -1)
    return _c.logical_not(found) if invert else found
