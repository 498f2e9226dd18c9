"""Indexing kernels: Gather, GatherElements, GatherND, ScatterND, ScatterElements (and the
deprecated Scatter), NonZero, Compress, OneHot.

Negative indices count from the end of their axis, as in ONNX. Scatters copy the data input and
write into the copy; their reductions (add, mul, max, min) accumulate duplicate indices with
unbuffered ``ufunc.at``, so every update counts.
"""

from __future__ import annotations

import numpy as np

from ._common import normalize_axis, to_scalar
from ..ir.kernel_registry import ALL_TYPES, NUMERIC, kernels
from ..ir.registry import compiled_forms
from . import compiled_pooling

__all__: list[str] = []


def _wrap(xp, indices, size):
    """Negative indices made non-negative (size may be an int or an array broadcasting to indices)."""
    indices = xp.asarray(indices).astype(np.int64, copy=False)
    return xp.where(indices < 0, indices + size, indices)


def _wrap_in_range(xp, indices, size, op_type: str):
    """``_wrap``, raising RuntimeError for indices outside ``[-size, size)``.

    onnxruntime raises RuntimeError for the same node, so one program fails the same way on every
    executor (numpy would raise IndexError instead, or let a ScatterND write wrap silently).
    """
    indices = xp.asarray(indices).astype(np.int64, copy=False)
    wrapped = xp.where(indices < 0, indices + size, indices)
    if wrapped.size and (bool((wrapped < 0).any()) or bool((wrapped >= size).any())):
        bad = indices[(wrapped < 0) | (wrapped >= size)].ravel()[0]
        limit = int(np.max(size))
        raise RuntimeError(f"{op_type}: index {int(bad)} is out of range for an axis of size {limit}")
    return wrapped


@kernels.register("Gather", types=ALL_TYPES, native_low_precision=True)
def gather(xp, inputs, attrs):
    data, indices = inputs
    axis = normalize_axis(attrs.get("axis", 0), data.ndim)
    return [xp.take(data, _wrap_in_range(xp, indices, data.shape[axis], "Gather"), axis=axis)]


@kernels.register("GatherElements", types=ALL_TYPES, native_low_precision=True)
def gather_elements(xp, inputs, attrs):
    data, indices = inputs
    axis = normalize_axis(attrs.get("axis", 0), data.ndim)
    # ONNX lets the indices be smaller than the data on the other axes: gather from that corner.
    corner = tuple(slice(None) if a == axis else slice(0, size) for a, size in enumerate(indices.shape))
    wrapped = _wrap_in_range(xp, indices, data.shape[axis], "GatherElements")
    return [xp.take_along_axis(data[corner], wrapped, axis=axis)]


def _nd_index(xp, data_shape, indices, batch_dims: int, op_type: str):
    """GatherND/ScatterND index tuple over data reshaped to (batch, ...), and the flat shapes."""
    depth = indices.shape[-1]
    batch = int(np.prod(data_shape[:batch_dims], dtype=np.int64))
    per_batch = int(np.prod(indices.shape[batch_dims:-1], dtype=np.int64))
    flat = indices.reshape(batch, per_batch, depth)
    sizes = xp.asarray(data_shape[batch_dims : batch_dims + depth], dtype=np.int64)
    flat = _wrap_in_range(xp, flat, sizes, op_type)
    index = (xp.arange(batch).reshape(batch, 1),) + tuple(flat[..., j] for j in range(depth))
    return index, batch, per_batch


@kernels.register("GatherND", types=ALL_TYPES, native_low_precision=True)
def gather_nd(xp, inputs, attrs):
    data, indices = inputs
    batch_dims = attrs.get("batch_dims", 0)
    depth = indices.shape[-1]
    index, batch, _ = _nd_index(xp, data.shape, indices, batch_dims, "GatherND")
    gathered = data.reshape((batch,) + data.shape[batch_dims:])[index]
    return [gathered.reshape(indices.shape[:-1] + data.shape[batch_dims + depth :])]


_REDUCTIONS = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


def _scatter(xp, out, index: tuple, updates, reduction: str):
    """out[index] = updates, or combined with ``reduction`` (every duplicate index counts)."""
    if reduction in ("none", "", None):
        out[index] = updates
        return out
    ufunc = getattr(xp, _REDUCTIONS[reduction])
    at = getattr(ufunc, "at", None)
    if at is not None:
        at(out, index, updates)
        return out
    import cupyx  # CuPy ufuncs have no .at; cupyx provides the scatter reductions it supports

    function = {"add": cupyx.scatter_add, "max": cupyx.scatter_max, "min": cupyx.scatter_min}.get(reduction)
    if function is None:
        raise TypeError(f"scatter reduction {reduction!r} is not available on CuPy arrays")
    function(out, index, updates)
    return out


@kernels.register("ScatterND", types=ALL_TYPES)
def scatter_nd(xp, inputs, attrs):
    data, indices, updates = inputs
    depth = indices.shape[-1]
    out = data.copy()
    index, _, per_batch = _nd_index(xp, data.shape, indices, 0, "ScatterND")
    flat_out = out.reshape((1,) + data.shape)
    flat_updates = updates.reshape((1, per_batch) + data.shape[depth:])
    _scatter(xp, flat_out, index, flat_updates, attrs.get("reduction", "none"))
    return [out]


def _elements_index(xp, indices, axis: int, size: int, op_type: str) -> tuple:
    """The full index tuple of ScatterElements: ``indices`` on ``axis``, positions elsewhere."""
    grids = []
    for a, extent in enumerate(indices.shape):
        if a == axis:
            grids.append(_wrap_in_range(xp, indices, size, op_type))
        else:
            shape = [1] * indices.ndim
            shape[a] = extent
            grids.append(xp.arange(extent).reshape(shape))
    return tuple(grids)


@kernels.register("ScatterElements", "Scatter", types=ALL_TYPES)
def scatter_elements(xp, inputs, attrs):
    data, indices, updates = inputs
    axis = normalize_axis(attrs.get("axis", 0), data.ndim)
    out = data.copy()
    index = _elements_index(xp, indices, axis, data.shape[axis], "ScatterElements")
    return [_scatter(xp, out, index, updates, attrs.get("reduction", "none"))]


@compiled_forms.register("ScatterElements")
def _compiled_scatter_add(node, threads: int):
    """onnxnn's sessions run a large float32 one-axis ScatterElements that adds (max pooling's gradient
    routing the output gradient to the Indices) as the compiled loop: the same sums, in the same order."""
    data, indices = node.inputs[:2]
    if indices.dtype.numpy_dtype != np.int64 or not compiled_pooling.eligible_scatter_add(
        data.shape, data.dtype.numpy_dtype, node.attrs
    ):
        return None
    return lambda arrays, threads: [compiled_pooling.scatter_add(*arrays)]


@kernels.register("NonZero", types=ALL_TYPES, native_low_precision=True)
def non_zero(xp, inputs, attrs):
    x = inputs[0]
    if x.ndim == 0:
        x = x.reshape(1)
    return [xp.stack(xp.nonzero(x)).astype(np.int64).reshape(x.ndim, -1)]


@kernels.register("Compress", types=ALL_TYPES, native_low_precision=True)
def compress(xp, inputs, attrs):
    x, condition = inputs
    axis = attrs.get("axis")
    if axis is None:
        return [xp.compress(condition, x.reshape(-1))]
    return [xp.compress(condition, x, axis=normalize_axis(axis, x.ndim))]


@kernels.register("OneHot", types=NUMERIC)
def one_hot(xp, inputs, attrs):
    indices, depth, values = inputs
    depth = int(to_scalar(depth))
    rank = indices.ndim + 1
    axis = normalize_axis(attrs.get("axis", -1), rank)
    indices = xp.asarray(indices)
    if indices.dtype.kind == "f":
        indices = xp.trunc(indices)
    wrapped = _wrap(xp, indices, depth)
    positions = xp.arange(depth).reshape([-1 if a == axis else 1 for a in range(rank)])
    hot = xp.expand_dims(wrapped, axis) == positions
    return [xp.where(hot, values[1], values[0])]
