"""Splitting a tensor into pieces along a dim: split, chunk, unbind, narrow (the Split and Slice
nodes' shape and gradient rules are in shape.py)."""

from __future__ import annotations

from ...ir import dtypes
from ...ir.graph import shared_attributes
from ._common import Tensor, apply_op, int64_constant, normalize_axes
from .shape import slice_axis, squeeze

__all__ = ["chunk", "narrow", "split", "unbind"]


def split(input: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Splits into chunks of a given size, or into the given list of sizes, along ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    axis = normalize_axes([dim], input.dim())[0]
    length = input.shape[axis]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={size}")
        if size == 0 and length:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {length}")
        if not length:
            sizes = [0]  # one empty piece, as PyTorch's
        else:
            sizes = [size] * (length // size) + ([length % size] if length % size else [])
    else:
        sizes = list(split_size_or_sections)
        if any(size < 0 for size in sizes):  # onnxruntime would refuse them only when the graph runs
            raise RuntimeError(
                f"split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={sizes}"
            )
        if sum(sizes) != length:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {length} (input tensor's "
                f"size at dimension {axis}), but got split_sizes={sizes}"
            )
    if len(sizes) == 1:
        return (input,)
    result = apply_op(
        "Split", (input, int64_constant(sizes)), shared_attributes((("axis", axis),)), "SplitWithSizesBackward0"
    )
    return result if isinstance(result, tuple) else (result,)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if input.dim() == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    length = input.shape[normalize_axes([dim], input.dim())[0]]
    if not length:
        return split(input, [0] * chunks, dim)  # as many empty pieces as asked, as PyTorch's
    return split(input, max(1, -(-length // chunks)), dim)


def unbind(input: Tensor, dim: int = 0) -> tuple:
    axis = normalize_axes([dim], input.dim())[0]
    if not input.shape[axis]:
        return ()
    return tuple(squeeze(part, axis) for part in split(input, 1, axis))


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """The ``length`` elements from ``start`` along ``dim`` (a negative start counts from the end)."""
    start = _narrow_start(start)
    if isinstance(start, float) or isinstance(length, (float, Tensor)):
        raise TypeError(f"narrow(): start and length must be ints, got {type(start).__name__}, {type(length).__name__}")
    if input.dim() == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    axis = normalize_axes([dim], input.dim())[0]
    size = input.shape[axis]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return slice_axis(input, axis, start, start + length, 1)


def _narrow_start(start):
    """``narrow``'s start: an int, or a 0-d integer tensor read as one, as PyTorch's."""
    if not isinstance(start, Tensor):
        return start
    if start.dim() or start.dtype.category != dtypes.int64.category:
        raise RuntimeError("start must be an 0-dim integral Tensor.")
    return int(start.item())
