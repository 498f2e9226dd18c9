"""The binary search of ``bucketize``/``searchsorted``, recorded as a fixed number of branch-free steps.

A comparison of every value with every boundary costs ``values x boundaries`` memory and time; a
search costs ``values x log2(boundaries)``. The boundary count ``m`` is static, so the search is
unrolled into ``m.bit_length()`` (= ``ceil(log2(m + 1))``) steps over int64 ``low``/``high`` tensors of
the values' shape, each step PyTorch's CPU loop (``cus_lower_bound``/``cus_upper_bound``) once::

    mid   = (low + high) // 2                          # Add, Div
    probe = sequence[..., mid]                         # Gather (1-D) / GatherElements (N-D)
    stay  = probe >= value     (> for right)           # GreaterOrEqual / Greater
    low   = min(where(stay, low, mid + 1), high)       # Add, Where, Min
    high  = where(stay, mid, high)                     # Where

PyTorch moves past a boundary unless ``boundary >= value`` (``>`` for ``right``): a NaN value compares
false everywhere and goes last. The same probes as PyTorch's loop (``mid = start + (end - start) / 2``
is ``(low + high) // 2`` for ``0 <= low <= high``) give PyTorch's results bit for bit even where the
comparison is not monotone along the sequence (NaN boundaries at its end), where a count of the
boundaries below the value would not.

A value's search may end before the last step (``low == high``); the later steps must leave it alone:
``mid`` is then ``low``, ``where(stay, mid, high)`` keeps ``high``, and ``min(..., high)`` keeps ``low``
from stepping past it. ``mid`` can then be ``m``: the sequence gets one more element (a copy of its
last) so that no step reads out of range, one Concat instead of a clamp per step. The first step's
``mid`` is the constant ``m // 2``: a slice, no gather. Sequence and values are cast once to the dtype
they compare in (that of the count's comparison, which PyTorch's promotion also gives).
"""

from __future__ import annotations

from functools import lru_cache

from ...ir import dtypes
from ._common import Tensor, apply_op, int64_constant
from .indexing import gather_within
from .shape import cat, slice_axis

__all__ = ["binary_search", "search_outcomes"]


def binary_search(sequence: Tensor, values: Tensor, right: bool) -> Tensor:
    """For each value, PyTorch's insertion index (int64) in the sorted innermost rows of ``sequence``.

    ``sequence`` is 1-D (``values`` of any shape) or has ``values``' leading dimensions (the caller
    checks them); its last dimension must be nonempty. ``right=False``: the first ``i`` with
    ``value <= sequence[i]``; ``right=True``: the first ``i`` with ``value < sequence[i]``.
    """
    m = sequence.shape[-1]
    if m == 0:
        raise ValueError("binary_search needs a nonempty sequence")
    sequence, values = _comparable(sequence.detach(), values.detach())  # an index: no gradient through it
    compare = "Greater" if right else "GreaterOrEqual"
    one_dimensional = sequence.dim() == 1
    mid = m // 2
    first = slice_axis(sequence, -1, mid, mid + 1)
    stay = apply_op(compare, (first.reshape(()) if one_dimensional else first, values))
    low = apply_op("Where", (stay, int64_constant(0), int64_constant(mid + 1)))
    high = apply_op("Where", (stay, int64_constant(mid), int64_constant(m)))
    if m.bit_length() > 1:
        padded = cat([sequence, slice_axis(sequence, -1, m - 1, m)], -1)
    for _ in range(m.bit_length() - 1):
        middle = apply_op("Div", (apply_op("Add", (low, high)), int64_constant(2)))
        if one_dimensional:
            probe = apply_op("Gather", (padded, middle), {"axis": 0})
        else:
            probe = gather_within(padded, -1, middle)
        stay = apply_op(compare, (probe, values))
        after = apply_op("Add", (middle, int64_constant(1)))
        low = apply_op("Min", (apply_op("Where", (stay, low, after)), high))
        high = apply_op("Where", (stay, middle, high))
    return low


def _comparable(sequence: Tensor, values: Tensor) -> tuple:
    """Both operands in the dtype every step compares them in, cast once: the promotion of two
    dimensioned tensors (as a comparison of the sequence with ``values.unsqueeze(-1)``, the count's form,
    whatever ``values``' rank), bools as uint8 (onnxruntime orders no bools; False < True holds)."""
    operand_dtype = dtypes.promote_types(sequence.dtype, values.dtype)
    if operand_dtype is dtypes.bool:
        operand_dtype = dtypes.uint8
    return tuple(t if t.dtype is operand_dtype else t.to(operand_dtype) for t in (sequence, values))


@lru_cache(maxsize=64)
def search_outcomes(m: int) -> tuple:
    """PyTorch's search result in ``m`` boundaries, finite ones sorted then ``nans`` NaNs, for a value that
    ``below`` boundaries go before, at ``below * (m + 1) + nans`` (0 where no sequence gives that pair).

    Such a sequence's comparisons are ``below - nans`` trues, falses up to the first NaN, then trues (a
    NaN boundary never ``>=`` a value): not monotone, so PyTorch's result is where its probes end, which
    a count alone does not tell. With this table a count of the boundaries below and one of the NaNs
    give it (``bucketize``'s form for small ``m``).
    """
    outcomes = [0] * (m + 1) ** 2
    for nans in range(m + 1):
        finite = m - nans
        for below in range(nans, m + 1):
            start, end = 0, m  # PyTorch's loop, moving past mid where the comparison says "before"
            while start < end:
                mid = (start + end) // 2
                if mid < below - nans or mid >= finite:
                    start = mid + 1
                else:
                    end = mid
            outcomes[below * (m + 1) + nans] = start
    return tuple(outcomes)
