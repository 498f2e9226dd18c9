"""A log-depth inclusive scan along one axis (Hillis-Steele), recorded as ordinary ops.

``inclusive_scan(lines, axis, identities, combine)`` runs ``ceil(log2(n))`` steps over a dim of size
n: at the step with shift s each line is shifted by s along ``axis`` (s identity elements padded at the
start, the first n kept) and combined with itself, ``combine(earlier, later)``, so position i then
holds the combination of positions ``i - 2s + 1 .. i``. That takes ``O(n log n)`` work and memory
of the input's size per step, where a masked prefix per position took ``O(n^2)``.

``combine`` must be associative (it need not commute: ``earlier`` is always the segment before
``later``). Its results associate as a balanced tree instead of left to right, so floating-point
results differ from a sequential scan's by a few ulps. Where ``combine`` passes earlier errors on
with weights summing to at most 1 (a sum's, a log-add-exp's), the error grows as the ``log2(n)``
roundings along a path of the tree instead of n; a product's does not shrink (every rounding scales
the whole product), its bound stays n roundings. Autograd differentiates the recorded ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._common import Tensor
from .padding import pad_constant
from .splitting import narrow

__all__ = ["inclusive_scan"]


def inclusive_scan(
    lines: Sequence[Tensor],
    axis: int,
    identities: Sequence,
    combine: Callable[[tuple[Tensor, ...], tuple[Tensor, ...]], tuple[Tensor, ...]],
) -> tuple[Tensor, ...]:
    """The inclusive scan of the tensors ``lines`` (one state of the scan, scanned together) along
    ``axis`` (non-negative); ``identities`` holds the identity element of each, used as padding.

    The tensors must have the same size along ``axis``; they may broadcast against each other in
    the other dims (``combine`` broadcasts them).
    """
    state = tuple(lines)
    size = state[0].shape[axis]
    if size <= 1:  # nothing to combine: new tensors all the same
        return tuple(line.clone() for line in state)
    shift = 1
    while shift < size:
        earlier = tuple(_shifted(line, axis, shift, identity) for line, identity in zip(state, identities))
        state = tuple(combine(earlier, state))
        shift *= 2
    return state


def _shifted(line: Tensor, axis: int, shift: int, identity) -> Tensor:
    """``line`` moved ``shift`` places forward along ``axis``: ``shift`` identities, then its first
    ``size - shift`` elements."""
    pads = [0] * (2 * line.dim())
    pads[axis] = shift
    return pad_constant(narrow(line, axis, 0, line.shape[axis] - shift), pads, identity)
