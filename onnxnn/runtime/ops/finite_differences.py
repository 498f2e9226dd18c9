"""torch.gradient: central differences in the interior, one-sided first- or second-order ones at the edges.

The estimate is a weighted sum of three shifted slices of the input (``narrow``), so it records Slice,
Mul and Add nodes and is differentiable through the existing rules. Non-uniform coordinates give
per-position weights (numpy's formulas for unevenly spaced samples), computed with Tensor ops from
the coordinate tensors so they stay in the graph too.
"""

from __future__ import annotations

import numbers

from ...ir import dtypes
from ._common import Tensor
from .shape import cat

__all__ = ["gradient"]


def _dims(input: Tensor, dim) -> list[int]:
    if dim is None:
        return list(range(input.dim()))
    dims: list = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    rank = input.dim()
    for axis in dims:
        if not -rank <= axis < rank:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {axis})"
            )
    normalized = [axis % rank for axis in dims]
    if len(set(normalized)) != len(normalized):
        raise RuntimeError("torch.gradient expected each dimension to be unique")
    return normalized


def _spacings(spacing, count: int) -> list:
    """One entry per differentiated dim: a float (uniform step) or a 1-D coordinate Tensor."""
    if isinstance(spacing, (numbers.Number, Tensor)) and not (isinstance(spacing, Tensor) and spacing.dim() == 1):
        step = spacing.item() if isinstance(spacing, Tensor) else spacing
        # typeshed's numbers.Number declares no __float__; the numbers accepted here all have one.
        return [float(step)] * count  # type: ignore[arg-type]
    spacing = list(spacing)
    if len(spacing) != count:
        raise RuntimeError(
            f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
            f"arguments to have the same length, but got a spacing argument of length "
            f"{len(spacing)} and a dim argument of length {count}."
        )
    return [item if isinstance(item, Tensor) and item.dim() == 1 else float(item) for item in spacing]


def _along(weights: Tensor, rank: int, axis: int) -> Tensor:
    """1-D per-position ``weights`` shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    shape = [1] * rank
    shape[axis] = weights.shape[0]
    return weights.reshape(tuple(shape))


def _uniform(input: Tensor, axis: int, step: float, edge_order: int) -> Tensor:
    size = input.shape[axis]
    part = lambda start, length: input.narrow(axis, start, length)  # noqa: E731
    interior = (part(2, size - 2) - part(0, size - 2)) * (0.5 / step)
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) * (1.0 / step)
        last = (part(size - 1, 1) - part(size - 2, 1)) * (1.0 / step)
    else:
        first = (part(0, 1) * -3.0 + part(1, 1) * 4.0 - part(2, 1)) * (0.5 / step)
        last = (part(size - 1, 1) * 3.0 - part(size - 2, 1) * 4.0 + part(size - 3, 1)) * (0.5 / step)
    return cat([first, interior, last], axis)


def _coordinates(input: Tensor, axis: int, x: Tensor, edge_order: int) -> Tensor:
    size, rank = input.shape[axis], input.dim()
    if x.shape[0] != size:
        raise RuntimeError(
            f"torch.gradient expected each tensor to be on the same device and to have as many "
            f"coordinates as the dimension has elements ({size}), got {x.shape[0]}"
        )
    x = x.to(input.dtype)
    part = lambda start, length: input.narrow(axis, start, length)  # noqa: E731
    steps = x[1:] - x[:-1]
    h1, h2 = steps[:-1], steps[1:]
    a = -h2 / (h1 * (h1 + h2))
    b = (h2 - h1) / (h1 * h2)
    c = h1 / (h2 * (h1 + h2))
    interior = (
        part(0, size - 2) * _along(a, rank, axis)
        + part(1, size - 2) * _along(b, rank, axis)
        + part(2, size - 2) * _along(c, rank, axis)
    )
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / _along(steps[:1], rank, axis)
        last = (part(size - 1, 1) - part(size - 2, 1)) / _along(steps[-1:], rank, axis)
    else:
        d1, d2 = steps[0:1], steps[1:2]
        first = (
            part(0, 1) * _along(-(2.0 * d1 + d2) / (d1 * (d1 + d2)), rank, axis)
            + part(1, 1) * _along((d1 + d2) / (d1 * d2), rank, axis)
            + part(2, 1) * _along(-d1 / (d2 * (d1 + d2)), rank, axis)
        )
        d1, d2 = steps[-2:-1], steps[-1:]
        last = (
            part(size - 3, 1) * _along(d2 / (d1 * (d1 + d2)), rank, axis)
            + part(size - 2, 1) * _along(-(d2 + d1) / (d1 * d2), rank, axis)
            + part(size - 1, 1) * _along((2.0 * d2 + d1) / (d2 * (d1 + d2)), rank, axis)
        )
    return cat([first, interior, last], axis)


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple[Tensor, ...]:
    """Estimates the gradient of a function sampled at ``input`` along each of ``dim`` (default: every dim).

    Interior points use central differences, second-order accurate; the two edges one-sided
    differences of order ``edge_order`` (1 or 2). ``spacing`` is a scalar step, one step per dim,
    or one 1-D coordinate tensor per dim (unevenly spaced samples). Returns one tensor per dim.

    Example::

        >>> onnxnn.gradient(onnxnn.tensor([4.0, 1.0, 1.0, 16.0]), spacing=2.0)
        (tensor([-1.5000, -0.7500,  3.7500,  7.5000]),)
    """
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}.")
    dims = _dims(input, dim)
    steps = _spacings(spacing, len(dims))
    for axis in dims:
        if input.shape[axis] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    if not input.dtype.is_floating_point:
        input = input.to(dtypes.get_default_dtype())
    results = []
    for axis, step in zip(dims, steps):
        if isinstance(step, Tensor):
            results.append(_coordinates(input, axis, step, edge_order))
        else:
            results.append(_uniform(input, axis, step, edge_order))
    return tuple(results)
