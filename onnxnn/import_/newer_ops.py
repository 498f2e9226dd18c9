"""Importers of ops newer than opset 21 without an ONNX function body, written in opset-21 ops.

Recorded graphs cannot hold these ops, which would otherwise run eagerly in onnxruntime at their
own opset with no gradient through them (``EagerNode``).

CumProd: when its input needs a gradient it is replayed as ``ReduceProd`` over a triangular
selection (``y[j] = prod of x[i] for the i that window j covers``), whose gradient rule handles
zeros as PyTorch's ``cumprod`` does; that takes n^2 elements per row of length n along the axis.
Otherwise the product is taken at once in numpy, as for the other data-reading ops.

TensorScatter (a KV-cache write): one ``ScatterElements`` along the sequence axis, its indices
computed from ``write_indices`` with recorded ops, so nothing is read back.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import constant
from ..ir import dtypes
from ..ir.mode import MODE
from ..runtime.ops import where
from ..ir.registry import importers
from ..runtime.internal import tensor_of
from ..runtime.tensor import apply_op
from .importers import NodeCall, array_of, constant_tensor

__all__: list[str] = []


def _window(n: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """mask[j, i]: whether x[i] is a factor of y[j]."""
    i, j = np.arange(n)[None, :], np.arange(n)[:, None]
    if reverse:
        return i > j if exclusive else i >= j
    return i < j if exclusive else i <= j


@importers.register("CumProd")
def CumProd(call: NodeCall, x, axis, *, exclusive=0, reverse=0):
    rank = len(x.shape)
    position = int(array_of(axis).reshape(()))
    if not -rank <= position < rank:
        raise ValueError(f"CumProd node '{call.name}': axis {position} is out of range for rank {rank}")
    position %= rank
    if not (MODE.grad.enabled and x.requires_grad):
        data = array_of(x)
        moved = np.moveaxis(data, position, -1)
        if reverse:
            moved = moved[..., ::-1]
        if exclusive:
            moved = np.concatenate([np.ones_like(moved[..., :1]), moved[..., :-1]], axis=-1)
        result = np.cumprod(moved, axis=-1, dtype=data.dtype)
        if reverse:
            result = result[..., ::-1]
        return (constant_tensor(np.asarray(np.moveaxis(result, -1, position), order="C"), x.dtype),)
    n = x.shape[position]
    mask = tensor_of(constant(_window(n, bool(exclusive), bool(reverse)), dtypes.bool, x.device))
    moved = x.transpose(position, -1)
    factors = where(mask, moved.unsqueeze(-2), 1.0)  # [..., j, i]
    return (factors.prod(-1).transpose(position, -1),)


@importers.register("TensorScatter")
def TensorScatter(call: NodeCall, past_cache, update, write_indices=None, *, mode="linear", axis=-2):
    rank = len(past_cache.shape)
    if not -rank <= axis < rank or axis % rank == 0:
        raise ValueError(
            f"TensorScatter node '{call.name}': axis {axis} must name a non-batch axis of a rank-{rank} cache"
        )
    if mode not in ("linear", "circular"):
        raise ValueError(f"TensorScatter node '{call.name}': mode must be 'linear' or 'circular', got {mode!r}")
    axis %= rank
    length = update.shape[axis]
    along = [1] * rank
    along[axis] = length
    positions = tensor_of(constant(np.arange(length, dtype=np.int64).reshape(along), dtypes.int64, past_cache.device))
    if write_indices is not None:
        starts = write_indices.detach().to(dtypes.int64).reshape((past_cache.shape[0],) + (1,) * (rank - 1))
        positions = positions + starts
    if mode == "circular":
        size = tensor_of(constant(np.array(past_cache.shape[axis], dtype=np.int64), dtypes.int64, past_cache.device))
        positions = apply_op("Mod", (positions, size))
    positions = positions.expand(tuple(update.shape))
    return (apply_op("ScatterElements", (past_cache, positions, update), {"axis": axis}),)
