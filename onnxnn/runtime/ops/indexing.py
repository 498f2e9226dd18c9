"""Indexing: ``tensor[key]``, ``tensor[key] = value``, gather/scatter and nonzero, as standard ONNX nodes.

A key is first turned into a plan (``IndexPlan``) that depends only on the tensor's shape: one
Slice with static bounds (ints and slices), one Reshape (dropping the int dims, adding new axes),
then the advanced indices (integer tensors, lists, masks) applied with one Gather or GatherND.
Boolean masks have data-dependent result shapes, so they are realized and turned into integer
indices while planning (DESIGN principle 2), where PyTorch would synchronize with the device.

Semantics are PyTorch's: Python ints (and 0-d integer tensors) select before advanced indexing,
so ``x[0, :, [0, 1]]`` has shape ``(3, 2)`` for a ``(2, 3, 4)`` tensor where numpy gives ``(2, 3)``.
Everything else matches numpy's ``array[key]``, including how several advanced indices broadcast
together and that advanced indices separated by a slice put their dimensions first.

Assignment rebinds (DESIGN principle 5): ``x[key] = v`` scatters ``v`` into the flattened value of
``x`` at the flat positions the key selects, and assigns the result to ``x``.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.registry import gradient_rules, non_differentiable, shape_rules
from ._common import Tensor, apply_op, broadcast_shapes, int64_constant, normalize_axes
from ..creation import check_number_fits
from ..realization import data_of, host_data
from .index_plan import IndexPlan, as_int64, check_in_bounds, first_outside, sequence_as_tuple

__all__ = [
    "getitem",
    "setitem",
    "index_select",
    "gather",
    "take",
    "take_along_dim",
    "scatter",
    "scatter_add",
    "masked_select",
    "nonzero",
    "argwhere",
]

# ---------------------------------------------------------------- shape rules


def _rank_axis(attrs, rank: int) -> int:
    return normalize_axes([attrs.get("axis", 0)], rank)[0]


@shape_rules.register("Gather")
def _gather_shape(inputs, attrs):
    data, indices = inputs
    axis = _rank_axis(attrs, len(data.shape))
    if indices.static is not None and indices.data.size:
        # Structural indices (an imported model's constants) are checked here, where the
        # error can name the node; computed indices are checked by the executor running them.
        size, low, high = data.shape[axis], int(indices.data.min()), int(indices.data.max())
        if low < -size or high >= size:
            raise IndexError(
                f"Gather: index {high if high >= size else low} is out of range for axis {axis} of size {size}"
            )
    return [(data.shape[:axis] + tuple(indices.shape) + data.shape[axis + 1 :], data.dtype)]


@shape_rules.register("GatherElements")
def _gather_elements_shape(inputs, attrs):
    return [(tuple(inputs[1].shape), inputs[0].dtype)]


@shape_rules.register("GatherND")
def _gather_nd_shape(inputs, attrs):
    data, indices = inputs
    batch_dims = attrs.get("batch_dims", 0)
    depth = indices.shape[-1]
    return [(tuple(indices.shape[:-1]) + tuple(data.shape[batch_dims + depth :]), data.dtype)]


@shape_rules.register("ScatterND", "ScatterElements")
def _scatter_shape(inputs, attrs):
    return [(inputs[0].shape, inputs[0].dtype)]


@shape_rules.register("NonZero")
def _nonzero_shape(inputs, attrs):
    data = data_of(inputs[0])  # the count of nonzeros is data: realize it (principle 2)
    return [((len(data.shape), int(np.count_nonzero(data))), dtypes.int64)]


non_differentiable.mark("NonZero")


# ---------------------------------------------------------------- gradient rules


@gradient_rules.register("Gather")
def _gather_grad(ctx, g):
    shape = ctx.input_shape(0)
    axis = _rank_axis(ctx.attrs, len(shape))
    flat = as_int64(ctx.input(1)).reshape(-1)
    count = flat.shape[0]
    # Gather's indices may have any rank: flatten them, then it is a scatter-add along one axis.
    updates = g.reshape(shape[:axis] + (count,) + shape[axis + 1 :])
    index_shape = (1,) * axis + (count,) + (1,) * (len(shape) - axis - 1)
    index = flat.reshape(index_shape).expand(updates.shape)
    zeros = Tensor._zeros(shape, g.dtype, g.device)
    return apply_op(
        "ScatterElements", (zeros, index, updates), {"axis": axis, "reduction": "add"}, "IndexBackwardBackward0"
    ), None


@gradient_rules.register("GatherElements")
def _gather_elements_grad(ctx, g):
    shape = ctx.input_shape(0)
    zeros = Tensor._zeros(shape, g.dtype, g.device)
    attrs = {"axis": _rank_axis(ctx.attrs, len(shape)), "reduction": "add"}
    return apply_op("ScatterElements", (zeros, ctx.input(1), g), attrs, "ScatterAddBackward0"), None


@gradient_rules.register("GatherND")
def _gather_nd_grad(ctx, g):
    if ctx.attrs.get("batch_dims", 0):
        raise NotImplementedError("gradient of GatherND with batch_dims > 0")
    zeros = Tensor._zeros(ctx.input_shape(0), g.dtype, g.device)
    return apply_op("ScatterND", (zeros, ctx.input(1), g), {"reduction": "add"}, "IndexPutBackward0"), None


def _scatter_grad(ctx, g, gather_op: str, gather_attrs: dict):
    reduction = ctx.attrs.get("reduction", "none")
    indices = ctx.input(1)
    updates_grad = apply_op(gather_op, (g, indices), gather_attrs, "GatherBackward0")
    if reduction == "add":
        return g, None, updates_grad
    if reduction != "none":
        raise NotImplementedError(f"gradient of {ctx.node.op_type} with reduction '{reduction}'")
    # Overwritten positions get no gradient: scatter zeros over them.
    zeros = Tensor._zeros(ctx.input_shape(2), g.dtype, g.device)
    data_grad = apply_op(ctx.node.op_type, (g, indices, zeros), dict(ctx.attrs), "ScatterBackward0")
    return data_grad, None, updates_grad


@gradient_rules.register("ScatterND")
def _scatter_nd_grad(ctx, g):
    return _scatter_grad(ctx, g, "GatherND", {})


@gradient_rules.register("ScatterElements")
def _scatter_elements_grad(ctx, g):
    attrs = {"axis": _rank_axis(ctx.attrs, len(ctx.input_shape(0)))}
    reduction = ctx.attrs.get("reduction", "none")
    if reduction in ("max", "min"):
        return _scatter_extremum_grad(ctx, g, attrs)
    if reduction == "mul":
        return _scatter_product_grad(ctx, g, attrs)
    return _scatter_grad(ctx, g, "GatherElements", attrs)


def _scatter_add(shape, index: Tensor, updates: Tensor, attrs: dict, reduction: str = "add") -> Tensor:
    start = Tensor._full(shape, 0 if reduction == "add" else 1, updates.dtype, updates.device)
    return apply_op("ScatterElements", (start, index, updates), {**attrs, "reduction": reduction})


def _scatter_extremum_grad(ctx, g, attrs):
    """max/min: the gradient goes to every value equal to the result, split evenly among ties (PyTorch's
    scatter_reduce amax/amin backward)."""
    data, index, updates, out = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output()
    data_hit = (data == out).to(g.dtype)
    update_hit = (updates == apply_op("GatherElements", (out, index), attrs)).to(g.dtype)
    ties = data_hit + _scatter_add(tuple(data.shape), index, update_hit, attrs)
    share = g / (ties + (ties == 0).to(g.dtype))  # positions no value reached get no gradient anyway
    return share * data_hit, None, apply_op("GatherElements", (share, index), attrs) * update_hit


def _scatter_product_grad(ctx, g, attrs):
    """mul: each factor's gradient is the product of the other factors at its position (the data value
    and the updates scattered there), written without dividing by a zero factor: with ``z`` zero
    factors and ``p`` the product of the non-zero ones, it is ``p / f`` for ``f != 0`` when ``z = 0``,
    ``p`` for the zero factor when ``z = 1``, else 0."""
    data, index, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    shape = tuple(data.shape)
    zero_data, zero_updates = (data == 0).to(g.dtype), (updates == 0).to(g.dtype)
    zeros = zero_data + _scatter_add(shape, index, zero_updates, attrs)
    one = Tensor._full((), 1, g.dtype, g.device)
    nonzero = apply_op("Where", (data == 0, one, data)) * _scatter_add(
        shape, index, apply_op("Where", (updates == 0, one, updates)), attrs, "mul"
    )

    def others(factor, zero_factor, zero_count, product):
        safe = apply_op("Where", (factor == 0, one, factor))
        alone = (zero_count == 0).to(g.dtype) * product / safe
        return alone * (1 - zero_factor) + (zero_count == 1).to(g.dtype) * product * zero_factor

    data_grad = g * others(data, zero_data, zeros, nonzero)
    gather = lambda t: apply_op("GatherElements", (t, index), attrs)  # noqa: E731
    updates_grad = gather(g) * others(updates, zero_updates, gather(zeros), gather(nonzero))
    return data_grad, None, updates_grad


# ---------------------------------------------------------------- getitem / setitem


def getitem(input: Tensor, key) -> Tensor:
    """``input[key]`` with PyTorch's semantics: ints, slices, None, ``...``, bools, masks, index tensors.

    Example::

        >>> x = onnxnn.arange(12).reshape(3, 4)
        >>> x[1:, [0, 3]]
        tensor([[ 4,  7],
                [ 8, 11]])
    """
    return IndexPlan(tuple(input.shape), key).apply(input)


_UNSIGNED = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)


def _value_tensor(value, input: Tensor) -> Tensor:
    """An assigned value as a tensor of ``input``'s dtype and device."""
    if isinstance(value, Tensor):
        return value.to(input.device).to(input.dtype)
    if isinstance(value, (bool, np.bool_)):
        return Tensor._full((), value, input.dtype, input.device)
    if isinstance(value, (int, float, np.number)):
        # PyTorch's checked conversion: out of the dtype's range is refused, except the negatives an
        # unsigned dtype wraps (uint8 -1 is 255).
        check_number_fits(value, input.dtype, floating=True)
        if input.dtype in _UNSIGNED and value < 0:
            value = int(value) % (int(np.iinfo(input.dtype.numpy_dtype).max) + 1)
        return Tensor._full((), value, input.dtype, input.device)
    raise TypeError(f"can't assign a {type(value).__name__} to a {input.type()}")


def _broadcast_value(value: Tensor, shape: tuple) -> Tensor:
    """``value`` expanded to the indexed shape; leading size-1 dims beyond its rank are dropped first."""
    own = tuple(value.shape)
    trimmed = own
    while len(trimmed) > len(shape) and trimmed[0] == 1:
        trimmed = trimmed[1:]
    if len(trimmed) > len(shape) or any(a != b and a != 1 for a, b in zip(reversed(trimmed), reversed(shape))):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(own)} cannot be broadcast to indexing "
            f"result of shape {list(shape)}"
        )
    if trimmed != own:
        value = value.reshape(trimmed)
    return value.expand(shape)


def check_index_put_dtypes(destination: dtypes.dtype, source: dtypes.dtype) -> None:
    """PyTorch's advanced-index assignment takes a tensor only of the destination's dtype: a silent
    cast would round ``x[index] = float_tensor`` into an integer ``x``."""
    if source is not destination:
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{dtypes.scalar_type_name(destination)} for the destination and "
            f"{dtypes.scalar_type_name(source)} for the source."
        )


def _single_mask(key):
    """The mask of a key that is one boolean mask (Tensor, numpy array or list), else None."""
    if isinstance(key, Tensor):
        if key.dim() and (key.dtype is dtypes.bool or key.dtype is dtypes.uint8):
            return key.to(dtypes.bool)
        return None
    if isinstance(key, (np.ndarray, list)) and not sequence_as_tuple(key):
        array = np.asarray(key)
        if array.ndim and array.dtype == np.bool_:
            return Tensor._from_array(array, dtypes.bool)
    return None


def _masked_fill(input: Tensor, mask: Tensor, value: Tensor) -> None:
    """``input[mask] = value`` for a 0-d value: a Where over the mask, with no need to realize it."""
    shape = tuple(input.shape)
    if mask.dim() > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    for dim, size in enumerate(mask.shape):
        if size != shape[dim]:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {dim} does not match the shape of "
                f"the indexed tensor {list(shape)} at index {dim}"
            )
    mask = mask.to(input.device)
    if mask.dim() < len(shape):
        mask = mask.reshape(tuple(mask.shape) + (1,) * (len(shape) - mask.dim()))
    input._assign(apply_op("Where", (mask, value, input._alias()), None, "MaskedFillBackward0"))


def setitem(input: Tensor, key, value) -> None:
    """``input[key] = value``: rebinds ``input`` to a copy with the indexed elements replaced.

    ``value`` is a Python number or a tensor broadcastable to ``input[key].shape``; gradients flow
    to ``input``'s previous value (zero where overwritten) and to ``value``.

    Example::

        >>> x = onnxnn.zeros(2, 3)
        >>> x[:, [0, 2]] = onnxnn.tensor([1.0, 2.0])
        >>> x
        tensor([[1., 0., 2.],
                [1., 0., 2.]])
    """
    source_dtype = value.dtype if isinstance(value, Tensor) else input.dtype
    value = _value_tensor(value, input)
    mask = _single_mask(key)
    if mask is not None and value.dim() == 0:
        _masked_fill(input, mask, value)
        return
    shape = tuple(input.shape)
    plan = IndexPlan(shape, key)
    if plan.tensor_indexed and not (plan.single_mask and value.numel() == 1):
        check_index_put_dtypes(input.dtype, source_dtype)
    numel = input.numel()
    if plan.lazy:
        grid = Tensor._from_array(np.arange(numel, dtype=np.int64).reshape(shape), dtypes.int64, input.device)
        positions = plan.apply(grid)
        indexed_shape = tuple(positions.shape)
        positions = positions.reshape(-1)
    else:
        array = plan.apply_numpy(np.arange(numel, dtype=np.int64).reshape(shape))
        indexed_shape = array.shape
        positions = Tensor._from_array(np.asarray(array.reshape(-1), order="C"), dtypes.int64, input.device)
    updates = _broadcast_value(value, indexed_shape).reshape(-1)
    name = "IndexPutBackward0" if plan.advanced else "CopySlices"
    flat = input._alias().reshape(-1)
    scattered = apply_op("ScatterElements", (flat, positions, updates), {"axis": 0}, name)
    input._assign(apply_op("Reshape", (scattered, int64_constant(shape)), {"allowzero": 1}, name))


# ---------------------------------------------------------------- gather / scatter family


def _check_index_tensor(index, function: str) -> Tensor:
    """``index`` checked to be an int32 or int64 tensor, returned as it is: the callers check its bounds
    first and cast it to int64 (``as_int64``) after, as a pending cast hides the values."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{function}(): argument 'index' must be Tensor, not {type(index).__name__}")
    if index.dtype not in (dtypes.int64, dtypes.int32):  # PyTorch's CPU kernels take these two only
        raise RuntimeError(f"{function}(): Expected dtype int32/int64 for index")
    return index


def _first_outside(index: Tensor, low: int, high: int) -> int | None:
    """The first of ``index``'s values outside ``[low, high)`` where its values are already known
    (realized, in host memory), else None. Pending values are left to the executor: reading them
    here would run the graph at every call."""
    data = host_data(index._value)
    return None if data is None else first_outside(data, low, high)


def check_bounds(
    index: Tensor,
    size: int,
    dim: int,
    *,
    negative: bool = False,
    error: type[Exception] = RuntimeError,
    function: str = "",
) -> None:
    """Bounds of an index whose values are already known: ``[0, size)``, or ``[-size, size)`` where
    ``negative`` (``take_along_dim``, ``index_fill_``, ``index_put_``, which count negatives from the
    end as PyTorch's). Raises ``error`` (PyTorch's type for the op), its message prefixed with
    ``function`` where PyTorch names it. Pending values are left to onnxruntime, which takes
    negatives: PyTorch's gather and scatter do not, and an index of -1 meaning "none" (a padding
    label) would silently read the last entry.

    Called before an in-place op records its node: an index found out of range only when the
    graph runs would leave the target unreadable from then on."""
    data = host_data(index._value)
    if data is not None:
        check_in_bounds(data, size, dim, negative=negative, error=error, function=function)


def negatives_out_of_range(index: Tensor, size: int, keep=None) -> Tensor:
    """``index`` as it is where its values are known (``check_bounds`` checked them), else with its negative
    entries (but ``keep``) moved to ``size``, out of range.

    PyTorch refuses negative indices to gather, index_select, scatter and nll_loss's targets, where ONNX's
    ops count them from the end: a computed index of -1 (a label minus one) would silently read or write
    the last entry. Moved out of range, it fails the op's own bounds check when the graph runs.
    """
    if host_data(index._value) is not None:
        return index
    negative = index.lt(0)
    if keep is not None:
        negative = negative & index.ne(keep)
    return index.masked_fill(negative, size)


def check_flat_bounds(index: Tensor, numel: int) -> None:
    """``take``'s and ``put_``'s bounds: a known index in ``[-numel, numel)`` of the flattened
    tensor, PyTorch's IndexError otherwise."""
    outside = _first_outside(index, -numel, numel)
    if outside is not None:
        raise IndexError(f"out of range: tried to access index {outside} on a tensor of {numel} elements.")


class IndexOutOfRangeError(IndexError, RuntimeError):
    """``index_select``'s index out of range. PyTorch raises IndexError ("index out of range in self"),
    or RuntimeError where it picks another kernel (a contiguous input, a dim other than 0): an
    ``except`` of either type catches this one."""


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of ``input`` along ``dim`` at the positions in the 1-D ``index``.

    Example::

        >>> onnxnn.index_select(onnxnn.tensor([[1, 2], [3, 4], [5, 6]]), 0, onnxnn.tensor([2, 0]))
        tensor([[5, 6],
                [1, 2]])
    """
    index = _check_index_tensor(index, "index_select")
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    axis = normalize_axes([dim], input.dim())[0]
    size = input.shape[axis] if input.dim() else 1
    outside = _first_outside(index, 0, size)
    if outside is not None:
        raise IndexOutOfRangeError(f"index out of range in self: index {outside} is not in [0, {size}) (dim {axis})")
    index = as_int64(negatives_out_of_range(index, size))
    if input.dim() == 0:
        return apply_op("Gather", (input.reshape(1), index.reshape(-1)), {"axis": 0}, "IndexSelectBackward0").reshape(
            ()
        )
    return apply_op("Gather", (input, index.reshape(-1)), {"axis": axis}, "IndexSelectBackward0")


def _check_same_rank(input: Tensor, index: Tensor, axis: int, other: Tensor | None = None) -> None:
    if index.dim() != input.dim():
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for dim, size in enumerate(index.shape):
        if dim != axis and size > input.shape[dim]:
            raise RuntimeError(
                f"Size does not match at dimension {dim} expected index {list(index.shape)} to be "
                f"smaller than self {list(input.shape)} apart from dimension {axis}"
            )
        if other is not None and size > other.shape[dim]:
            raise RuntimeError(
                f"Size does not match at dimension {dim} expected index {list(index.shape)} to be "
                f"smaller than src {list(other.shape)}"
            )
    check_bounds(index, input.shape[axis], axis)


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` for ``dim=0`` (and likewise per dim); ONNX GatherElements.

    Example::

        >>> onnxnn.gather(onnxnn.tensor([[1, 2], [3, 4]]), 1, onnxnn.tensor([[0, 0], [1, 0]]))
        tensor([[1, 1],
                [4, 3]])
    """
    index = _check_index_tensor(index, "gather")
    axis = normalize_axes([dim], input.dim())[0]
    if min(input.dim(), index.dim()) == 0 and max(input.dim(), index.dim()) <= 1:
        # PyTorch takes a 0-d input or index as 1-D of one element (the result has index's shape); ONNX
        # wants rank 1. The bounds first: the reshaped index's values are pending.
        check_bounds(index, input.numel(), 0)
        return gather(input.reshape(-1), 0, index.reshape(-1)).reshape(tuple(index.shape))
    _check_same_rank(input, index, axis)
    return _gather_elements(input, axis, as_int64(negatives_out_of_range(index, input.shape[axis])))


def _gather_elements(input: Tensor, axis: int, index: Tensor) -> Tensor:
    return apply_op("GatherElements", (input, index), {"axis": axis}, "GatherBackward0")


def gather_within(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """``gather`` of positions onnxnn computed within range (a sampler's taps, a sort's order), without
    the guard ``negatives_out_of_range`` puts on indices a user computed."""
    return _gather_elements(input, normalize_axes([dim], input.dim())[0], as_int64(index))


def scatter_add_within(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``scatter_add`` at positions onnxnn computed within range, as ``gather_within``."""
    attributes = {"axis": normalize_axes([dim], input.dim())[0], "reduction": "add"}
    return apply_op("ScatterElements", (input, as_int64(index), src), attributes, "ScatterAddBackward0")


def _tensor_argument(index, function: str, argument: str) -> Tensor:
    """``index`` checked to be a Tensor (its dtype is the caller's to check), PyTorch's TypeError otherwise."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{function}(): argument '{argument}' (position 2) must be Tensor, not {type(index).__name__}")
    return index


def take(input: Tensor, index: Tensor) -> Tensor:
    """The elements of the flattened ``input`` at ``index``; the result has ``index``'s shape."""
    index = _tensor_argument(index, "take", "index")
    if index.dtype is not dtypes.int64:  # PyTorch's take has no int32 kernel, unlike gather
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {dtypes.scalar_type_name(index.dtype)}")
    check_flat_bounds(index, input.numel())
    return apply_op("Gather", (input.reshape(-1), as_int64(index)), {"axis": 0}, "TakeBackward0")


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``gather`` with ``input`` and ``indices`` broadcast against each other except along ``dim``."""
    indices = _tensor_argument(indices, "take_along_dim", "indices")
    if dim is None:
        # PyTorch's is input.view(-1).gather(0, indices.view(-1)): int32 indices, and no negative ones.
        # The bounds first: the reshaped index's values are pending.
        check_bounds(_check_index_tensor(indices, "gather"), input.numel(), 0)
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    if indices.dim() != input.dim():
        raise RuntimeError(
            f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
            f"but got {input.dim()} dimensions for input, and {indices.dim()} dimensions for indices"
        )
    if indices.dtype is not dtypes.int64:
        raise RuntimeError(
            f"torch.take_along_dim(): dtype of indices should be Long but got {dtypes.scalar_type_name(indices.dtype)}"
        )
    axis = normalize_axes([dim], input.dim())[0]
    check_bounds(indices, input.shape[axis], axis, negative=True)  # before the expand hides the values
    input_shape, index_shape = list(input.shape), list(indices.shape)
    input_shape[axis] = index_shape[axis] = 1
    common = list(broadcast_shapes(tuple(input_shape), tuple(index_shape)))
    input = input.expand(common[:axis] + [input.shape[axis]] + common[axis + 1 :])
    indices = as_int64(indices).expand(common[:axis] + [indices.shape[axis]] + common[axis + 1 :])
    return _gather_elements(input, axis, indices)


def scatter_source(input: Tensor, index: Tensor, axis: int, src: Tensor) -> Tensor:
    """A scatter's tensor ``src``, checked as PyTorch checks it (index no larger than it and ``input``
    away from ``axis``, ``input``'s dtype: no silent rounding of float64 values), cut to ``index``'s
    shape: PyTorch reads only its leading index-shaped block, and ONNX wants exactly that shape
    (Slice's gradient gives the rest of ``src`` zeros)."""
    _check_same_rank(input, index, axis, src)
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if tuple(src.shape) == tuple(index.shape):
        return src
    ends = int64_constant(list(index.shape))
    return apply_op("Slice", (src, int64_constant([0] * index.dim()), ends), None, "SliceBackward0")


def one_element_operands(index: Tensor, src):
    """A scatter into a 0-d tensor's ``index`` and ``src`` for one into its single element (rank 1,
    as ONNX wants), after PyTorch's checks of the index."""
    if index.dim() > 1:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    check_bounds(index, 1, 0)
    if isinstance(src, Tensor) and src.dim() == 0:
        src = src.reshape(1)
    return index.reshape(-1), src


def _scatter(input: Tensor, dim: int, index: Tensor, src, reduction: str, name: str) -> Tensor:
    # PyTorch names the op in its TypeError, but the whole family scatter() in its index dtype error.
    index = _check_index_tensor(_tensor_argument(index, name, "index"), "scatter")
    axis = normalize_axes([dim], input.dim())[0]
    if input.dim() == 0:  # PyTorch scatters into a 0-d tensor as into its one element; ONNX wants rank 1
        index, src = one_element_operands(index, src)
        return _scatter(input.reshape(1), 0, index, src, reduction, name).reshape(())
    if isinstance(src, Tensor):
        src = scatter_source(input, index, axis, src)
    else:
        _check_same_rank(input, index, axis)
        src = Tensor._full(tuple(index.shape), src, input.dtype, input.device)
    attrs = {"axis": axis, "reduction": reduction}
    backward = "ScatterAddBackward0" if reduction == "add" else "ScatterBackward0"
    index = as_int64(negatives_out_of_range(index, input.shape[axis]))
    return apply_op("ScatterElements", (input, index, src), attrs, backward)


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """A copy of ``input`` with ``src`` (a tensor or number) written at ``index`` along ``dim``.

    ``reduce`` may be ``"add"`` or ``"multiply"`` (accumulate instead of overwrite).
    """
    if src is None:
        src = value
    reductions = {None: "none", "add": "add", "multiply": "mul"}
    if reduce not in reductions:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    return _scatter(input, dim, index, src, reductions[reduce], "scatter")


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim`` (repeated indices accumulate)."""
    return _scatter(input, dim, index, src, "add", "scatter_add")


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where the (broadcast) boolean ``mask`` is true, as a 1-D tensor."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    return getitem(input.expand(shape), mask.expand(shape))


def nonzero(input: Tensor, *, as_tuple: bool = False):
    """The indices of the nonzero elements: an ``(N, input.dim())`` int64 tensor, or one 1-D tensor per dim.

    The count is data, so the input is realized (as PyTorch synchronizes with the device).
    """
    data = input._realized_data()
    if as_tuple:
        return tuple(
            Tensor._from_array(np.asarray(column, dtype=np.int64, order="C"), dtypes.int64, input.device)
            for column in np.nonzero(np.atleast_1d(data))
        )
    return Tensor._from_array(np.argwhere(data).astype(np.int64), dtypes.int64, input.device)


def argwhere(input: Tensor) -> Tensor:
    """``nonzero(input)``: the ``(N, input.dim())`` indices of the nonzero elements."""
    return nonzero(input)
