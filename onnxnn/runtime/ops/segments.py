"""torch.segment_reduce: reductions over consecutive segments of one axis, their lengths given as data.

The lengths (or offsets) are read, like embedding_bag's offsets, and each segment becomes a Slice
and a reduction (ReduceSum, ReduceMax, ...), stacked; so values come from recorded ops with gradient
rules, on both executors, and export as those ops with the segment boundaries fixed.
"""

from __future__ import annotations

import numpy as np

from ._common import Tensor, normalize_axes
from .shape import stack

__all__ = ["segment_reduce"]

# reduction -> (reduce a segment along dim 0, value of an empty segment without ``initial``)
_REDUCTIONS = {
    "sum": (lambda part: part.sum(0), 0.0),
    "mean": (lambda part: part.sum(0), float("nan")),
    "max": (lambda part: part.amax(0), float("-inf")),
    "min": (lambda part: part.amin(0), float("inf")),
    "prod": (lambda part: part.prod(0), 1.0),
}
_COMBINE_INITIAL = {
    "sum": lambda value, initial: value + initial,
    "mean": lambda value, initial: value + initial,
    "max": lambda value, initial: value.clamp_min(initial),
    "min": lambda value, initial: value.clamp_max(initial),
    "prod": lambda value, initial: value * initial,
}


def _reduce_rows(data: Tensor, lengths: np.ndarray, reduce: str, initial) -> Tensor:
    """``data``'s dim 0 split by the 1-D ``lengths`` (or, for more dims, row by row): one reduction per segment."""
    if lengths.ndim > 1:
        return stack(
            [_reduce_rows(data.select(0, row), lengths[row], reduce, initial) for row in range(lengths.shape[0])], 0
        )
    reduce_segment, empty_value = _REDUCTIONS[reduce]
    results, start = [], 0
    for length in lengths.tolist():
        if length == 0:
            fill = empty_value if initial is None else initial
            results.append(Tensor._full(tuple(data.shape[1:]), fill, data.dtype, data.device))
            continue
        value = reduce_segment(data.narrow(0, start, length))
        if initial is not None:
            value = _COMBINE_INITIAL[reduce](value, initial)
        if reduce == "mean":
            value = value / length
        results.append(value)
        start += length
    return stack(results, 0)


def segment_reduce(
    data: Tensor,
    reduce: str,
    *,
    lengths: Tensor | None = None,
    indices: Tensor | None = None,
    offsets: Tensor | None = None,
    axis: int = 0,
    unsafe: bool = False,
    initial=None,
) -> Tensor:
    """Reduces consecutive segments of ``data`` along ``axis`` with ``reduce`` (sum, mean, max, min, prod).

    Segments are given by ``lengths`` (or ``offsets``, one more than segments), whose last dim runs
    along ``axis`` and whose leading dims match ``data``'s before it. An empty segment gives
    ``initial``, or 0 / nan / -inf / inf / 1; with ``initial`` every segment also includes it (mean
    divides ``initial + sum`` by the segment's length), as in PyTorch.

    Example::

        >>> data = onnxnn.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> onnxnn.segment_reduce(data, "max", lengths=onnxnn.tensor([2, 1]))
        tensor([[3., 4.],
                [5., 6.]])
    """
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if not data.dtype.is_floating_point:
        raise NotImplementedError(f"\"segment_reduce\" not implemented for '{data.dtype}'")
    if lengths is not None:
        counts = np.asarray(lengths._realized_data()).astype(np.int64)
    else:
        # Not None: one of lengths and offsets is given (checked above).
        bounds = np.asarray(offsets._realized_data()).astype(np.int64)  # type: ignore[union-attr]
        counts = np.diff(bounds, axis=-1)
    axis = normalize_axes([axis], data.dim())[0]
    if axis != counts.ndim - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of lengths but got {axis}.")
    if not unsafe:
        if (counts < 0).any():
            raise RuntimeError("segment_reduce(): lengths contains negative value!")
        if (counts.sum(-1) != data.shape[axis]).any():
            raise RuntimeError(
                "segment_reduce(): Expected all rows of lengths along axis to sum to "
                "data.size(lengths.dim()-1) when !unsafe."
            )
    return _reduce_rows(data, counts, reduce, initial)
