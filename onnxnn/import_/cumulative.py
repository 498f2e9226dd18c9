"""CumProd for imported models: written in opset-21 ops when a gradient must flow through it.

CumProd was added after opset 21 without an ONNX function body, so recorded graphs cannot hold
it. When its input needs a gradient it is replayed as ``ReduceProd`` over a triangular selection
(``y[j] = prod of x[i] for the i that window j covers``), whose gradient rule handles zeros as
PyTorch's ``cumprod`` does; that takes n^2 elements per row of length n along the axis.
Otherwise the product is taken at once in numpy, as for the other data-reading ops.
"""
from __future__ import annotations

import numpy as np

from ..runtime.graph import constant
from ..runtime import dtypes
from ..runtime.grad_mode import STATE
from ..runtime.ops import where
from ..runtime.tensor import Tensor
from .ops import NodeCall, importer

__all__: list[str] = []


def _window(n: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """mask[j, i]: whether x[i] is a factor of y[j]."""
    i, j = np.arange(n)[None, :], np.arange(n)[:, None]
    if reverse:
        return i > j if exclusive else i >= j
    return i < j if exclusive else i <= j


@importer("CumProd")
def CumProd(call: NodeCall, x, axis, *, exclusive=0, reverse=0):
    rank = len(x.shape)
    position = int(np.asarray(axis.detach()._realized_data()).reshape(()))
    if not -rank <= position < rank:
        raise ValueError(f"CumProd node '{call.name}': axis {position} is out of range for rank {rank}")
    position %= rank
    if not (STATE.enabled and x.requires_grad):
        data = np.asarray(x.detach()._realized_data())
        moved = np.moveaxis(data, position, -1)
        if reverse:
            moved = moved[..., ::-1]
        if exclusive:
            moved = np.concatenate([np.ones_like(moved[..., :1]), moved[..., :-1]], axis=-1)
        result = np.cumprod(moved, axis=-1, dtype=data.dtype)
        if reverse:
            result = result[..., ::-1]
        return (Tensor._from_array(np.ascontiguousarray(np.moveaxis(result, -1, position)), x.dtype),)
    n = x.shape[position]
    mask = Tensor._from_value(constant(_window(n, bool(exclusive), bool(reverse)), dtypes.bool, x.device))
    moved = x.transpose(position, -1)
    factors = where(mask, moved.unsqueeze(-2), 1.0)  # [..., j, i]
    return (factors.prod(-1).transpose(position, -1),)
