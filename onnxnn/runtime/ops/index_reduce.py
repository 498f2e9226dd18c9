"""``index_reduce``: PyTorch's reduction of ``source`` slices into ``input`` at a vector of indices.

It is ``scatter_reduce`` with the index vector broadcast along ``source``'s other dims, so it records
ONNX ScatterElements (reductions mul/max/min, and add for the mean's counts) and differentiates by
ScatterElements' gradient rule.
"""

from __future__ import annotations

from ...ir import dtypes
from ..realization import host_data
from ._common import Tensor, normalize_axes
from .scatter_ops import scatter_reduce

__all__ = ["index_reduce"]

_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(
    input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """Reduces ``source[..., i, ...]`` into ``input[..., index[i], ...]`` along ``dim``.

    Args:
        reduce: ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self: whether the values of ``input`` at the indexed positions take part.

    Example::

        >>> x = onnxnn.ones(3, 2)
        >>> x.index_reduce(0, onnxnn.tensor([0, 0]), onnxnn.tensor([[2.0, 3.0], [4.0, 5.0]]), "prod")
        tensor([[ 8., 15.],
                [ 1.,  1.],
                [ 1.,  1.]])
    """
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.dim() > 1:
        raise IndexError(
            f"index_reduce_(): Index is supposed to be a vector, but got dim: {index.dim()} with type: "
            f"{dtypes.scalar_type_name(index.dtype)} and size: "
            f"{list(index.shape)}"
        )
    if index.dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError(
            f"index_reduce_(): Expected dtype int32/int64 for index but got: {dtypes.scalar_type_name(index.dtype)}"
        )
    axis = normalize_axes([dim], input.dim())[0]
    count = index.numel()
    if source.dim() != input.dim() or source.shape[axis] != count:
        raise RuntimeError(
            f"index_reduce_(): Number of indices ({count}) should be equal to source.size(dim): "
            f"({source.shape[axis] if source.dim() > axis else 1}), for dim: {dim}"
        )
    data = host_data(index._value)
    if data is not None and count and ((data < 0) | (data >= input.shape[axis])).any():
        raise IndexError("index out of range in self")
    view = [1] * source.dim()
    view[axis] = count
    spread = index.to(dtypes.int64).reshape(view).expand(*source.shape)
    return scatter_reduce(input, axis, spread, source, reduce, include_self=include_self)
