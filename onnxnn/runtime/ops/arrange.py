"""Rearranging and writing by index: roll, rot90, the *stack and *split families, repeat_interleave,
movedim, meshgrid, Tensor.unfold, select, and index_add/index_copy/index_fill/masked_fill/masked_scatter.

Every function is a composition of Slice, Concat, Transpose, Reshape, Expand, Gather and
ScatterElements, whose gradient rules give the gradients. Index tables that depend only on shapes
are built at record time; those that depend on data (a tensor of repeats, a mask for
masked_scatter) read it, as PyTorch synchronizes with the device for them.
"""

from __future__ import annotations

import operator

import numpy as np

from ...ir import dtypes
from ._common import Tensor, _scalar_array, apply_op, broadcast_shapes, normalize_axes, with_zero_gradients
from .alpha_scaling import factor_in
from ..realization import host_data
from ..creation import check_number_fits
from .elementwise import where
from ..tensor import outside_autocast
from ..view_positions import is_integer_scalar
from .indexing import check_bounds
from .shape import cat, flip, slice_axis

__all__ = [
    "roll",
    "fliplr",
    "flipud",
    "rot90",
    "hstack",
    "vstack",
    "row_stack",
    "dstack",
    "column_stack",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "tensor_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "repeat_interleave",
    "movedim",
    "moveaxis",
    "swapaxes",
    "swapdims",
    "meshgrid",
    "unfold",
    "select",
    "ravel",
    "index_add",
    "index_copy",
    "index_fill",
    "masked_fill",
    "masked_scatter",
]


def _axis(input: Tensor, dim: int) -> int:
    return normalize_axes([dim], input.dim())[0]


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Rotates elements along ``dims`` by ``shifts`` (elements leaving one end come in at the other)."""
    shifts = [_shift(shift) for shift in (shifts if isinstance(shifts, (tuple, list)) else [shifts])]
    if not shifts:
        raise RuntimeError("`shifts` required")
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return roll(input.reshape(-1), shifts, 0).reshape(input.shape)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    result = input
    for shift, dim in zip(shifts, dims):
        axis = _axis(input, dim)
        size = input.shape[axis]
        if size == 0 or shift % size == 0:
            continue
        cut = size - shift % size
        result = cat([slice_axis(result, axis, cut, size), slice_axis(result, axis, 0, cut)], axis)
    return result


def _shift(shift) -> int:
    """A shift of ``roll`` as PyTorch's int arguments take one: an int (numpy's too, not a bool), or an
    integer or bool tensor of one element."""
    if isinstance(shift, Tensor):
        if shift.dtype.category == dtypes.float32.category or shift.numel() != 1:
            raise TypeError("roll(): argument 'shifts' (position 1) must be tuple of ints, not Tensor")
        return int(shift.item())
    if type(shift) is bool:
        raise TypeError("roll(): argument 'shifts' (position 1) must be tuple of ints, not bool")
    try:
        return operator.index(shift)
    except TypeError:
        raise TypeError(
            f"roll(): argument 'shifts' (position 1) must be tuple of ints, not {type(shift).__name__}"
        ) from None


def fliplr(input: Tensor) -> Tensor:
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


def flipud(input: Tensor) -> Tensor:
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, [0])


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotates by 90 degrees ``k`` times in the plane of ``dims``, from the first towards the second."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    first, second = normalize_axes(dims, input.dim())
    if first == second:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {first} and dim1 = {second}")
    k %= 4
    if k == 1:
        return flip(input, [second]).transpose(first, second)
    if k == 2:
        return flip(input, [first, second])
    if k == 3:
        return flip(input, [first]).transpose(first, second)
    return input.clone()


def atleast_1d(*tensors):
    result = tuple(t.reshape(1) if t.dim() == 0 else t for t in _tensor_list(tensors))
    return result[0] if len(result) == 1 else result


def atleast_2d(*tensors):
    result = tuple(
        t.reshape((1,) * (2 - t.dim()) + tuple(t.shape)) if t.dim() < 2 else t for t in _tensor_list(tensors)
    )
    return result[0] if len(result) == 1 else result


def atleast_3d(*tensors):
    def lift(t: Tensor) -> Tensor:
        if t.dim() == 0:
            return t.reshape(1, 1, 1)
        if t.dim() == 1:
            return t.reshape(1, t.shape[0], 1)
        if t.dim() == 2:
            return t.unsqueeze(2)
        return t

    result = tuple(lift(t) for t in _tensor_list(tensors))
    return result[0] if len(result) == 1 else result


def _tensor_list(tensors) -> list:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def _nonempty(tensors, function: str) -> list:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{function} expects a non-empty TensorList")
    return tensors


def hstack(tensors) -> Tensor:
    """Concatenation along dim 1 (dim 0 for 1-D tensors)."""
    tensors = [atleast_1d(t) for t in _nonempty(tensors, "hstack")]
    return cat(tensors, 0 if tensors[0].dim() == 1 else 1)


def vstack(tensors) -> Tensor:
    """Concatenation along dim 0 of the tensors made at least 2-D."""
    return cat([atleast_2d(t) for t in _nonempty(tensors, "vstack")], 0)


row_stack = vstack


def dstack(tensors) -> Tensor:
    """Concatenation along dim 2 of the tensors made at least 3-D."""
    return cat([atleast_3d(t) for t in _nonempty(tensors, "dstack")], 2)


def column_stack(tensors) -> Tensor:
    """1-D (and 0-d) tensors become columns, then everything is concatenated along dim 1."""
    columns = [t.reshape(t.numel(), 1) if t.dim() <= 1 else t for t in _nonempty(tensors, "column_stack")]
    return cat(columns, 1)


def tensor_split(
    input: Tensor,
    indices_or_sections=None,
    dim: int = 0,
    *,
    sections: int | None = None,
    indices=None,
    tensor_indices_or_sections=None,
) -> tuple:
    """Splits into ``n`` nearly equal parts (the first ``size % n`` one longer), or at the given indices.

    The second argument goes by any of the names of PyTorch's overloads: ``indices_or_sections``,
    ``sections`` (an int), ``indices`` (a sequence) or ``tensor_indices_or_sections`` (a tensor).
    """
    named = [value for value in (sections, indices, tensor_indices_or_sections) if value is not None]
    if len(named) + (indices_or_sections is not None) != 1:
        raise TypeError(
            "tensor_split() takes one of indices_or_sections, sections, indices or tensor_indices_or_sections"
        )
    if named:
        indices_or_sections = named[0]
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    if isinstance(indices_or_sections, Tensor):  # checked before dim, as PyTorch's
        indices_or_sections = _split_points(indices_or_sections)
    else:
        indices_or_sections = _checked_split_points(indices_or_sections)
    axis = _axis(input, dim)
    size = input.shape[axis]
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        base, extra = divmod(size, sections)
        bounds = [0]
        for part in range(sections):
            bounds.append(bounds[-1] + base + (1 if part < extra else 0))
    else:
        bounds = [0] + [min(max(int(i) + (size if int(i) < 0 else 0), 0), size) for i in indices_or_sections] + [size]
    return tuple(slice_axis(input, axis, start, max(start, end)) for start, end in zip(bounds[:-1], bounds[1:]))


def _checked_split_points(points):
    """An int of sections or a list of int indices, as PyTorch's overloads take them (numpy integers
    too): a float, a bool or a sequence holding one is a TypeError (``(1, 2.5)`` split at 2 before)."""
    if is_integer_scalar(points):
        return int(points)
    if isinstance(points, (list, tuple)) and all(is_integer_scalar(point) for point in points):
        return [int(point) for point in points]
    got = type(points).__name__
    if isinstance(points, (list, tuple)):
        got += " of [" + ", ".join(sorted({type(point).__name__ for point in points})) + "]"
    raise TypeError(
        f"tensor_split(): argument 'indices_or_sections' must be an int, a tuple of ints or a Tensor, not {got}"
    )


def _split_points(points: Tensor):
    """A tensor's sections (0-d) or indices (1-d) as Python ints: PyTorch takes only an int64 tensor
    (an int32 or float one is refused, not truncated), of at most one dim."""
    if points.dtype is not dtypes.int64:
        raise RuntimeError(
            "tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
            f"{dtypes.scalar_type_name(points.dtype)}"
        )
    if points.dim() > 1:
        raise RuntimeError(
            "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional "
            f"tensor, but got a tensor with {points.dim()} dims"
        )
    return points.tolist()


def _split_even(input: Tensor, sections, axis: int, name: str) -> tuple:
    if isinstance(sections, int) and input.shape[axis] % sections:
        raise RuntimeError(
            f"torch.{name} attempted to split along dimension {axis}, but the size of the dimension "
            f"{input.shape[axis]} is not divisible by the split_size {sections}!"
        )
    return tensor_split(input, sections, axis)


def hsplit(input: Tensor, sections) -> tuple:
    if input.dim() < 1:
        raise RuntimeError(
            "torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 dimensions!"
        )
    return _split_even(input, sections, 1 if input.dim() > 1 else 0, "hsplit")


def vsplit(input: Tensor, sections) -> tuple:
    if input.dim() < 2:
        raise RuntimeError(
            f"torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with {input.dim()} dimensions!"
        )
    return _split_even(input, sections, 0, "vsplit")


def dsplit(input: Tensor, sections) -> tuple:
    if input.dim() < 3:
        raise RuntimeError(
            f"torch.dsplit requires a tensor with at least 3 dimension, but got a tensor with {input.dim()} dimensions!"
        )
    return _split_even(input, sections, 2, "dsplit")


def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *, output_size: int | None = None) -> Tensor:
    """Repeats each element ``repeats`` times (an int, or one count per element along ``dim``).

    A tensor of counts is data: it is read at the call (PyTorch synchronizes for it too).
    ``repeat_interleave(counts)`` alone gives ``[0]*counts[0] + [1]*counts[1] + ...``.
    """
    if repeats is None:
        counts = np.asarray(input._realized_data(), dtype=np.int64).reshape(-1)
        return Tensor._from_array(np.repeat(np.arange(counts.size, dtype=np.int64), counts), dtypes.int64, input.device)
    if dim is None:
        input, axis = input.reshape(-1), 0
    else:
        axis = _axis(input, dim)
    if input.dim() == 0:
        input = input.reshape(1)
    size = input.shape[axis]
    if isinstance(repeats, Tensor):
        counts = np.asarray(repeats._realized_data(), dtype=np.int64).reshape(-1)
        if counts.size == 1:
            repeats = int(counts[0])
        elif counts.size != size:
            raise RuntimeError("repeats must have the same size as input along dim")
    if isinstance(repeats, int):
        if repeats < 0:
            raise RuntimeError("repeats can not be negative")
        widened = list(input.shape)
        widened.insert(axis + 1, repeats)
        merged = list(input.shape)
        merged[axis] = size * repeats
        return input.unsqueeze(axis + 1).expand(widened).reshape(merged)
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    table = np.repeat(np.arange(size, dtype=np.int64), counts)
    return input.index_select(axis, Tensor._from_array(table, dtypes.int64, input.device))


def movedim(input: Tensor, source, destination) -> Tensor:
    """Moves the dims ``source`` to the positions ``destination``; the others keep their order."""
    source = [source] if isinstance(source, int) else list(source)
    destination = [destination] if isinstance(destination, int) else list(destination)
    if len(source) != len(destination):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({source} dims) should contain the "
            f"same number of dims as destination ({destination} dims)"
        )
    # PyTorch wraps a scalar's dims as one axis's (0 and -1): movedim(0, 0) of a scalar is the scalar.
    rank = max(input.dim(), 1)
    source, destination = normalize_axes(source, rank), normalize_axes(destination, rank)
    if len(set(source)) != len(source) or len(set(destination)) != len(destination):
        raise RuntimeError("movedim: repeated dim in `source` or `destination`")
    if input.dim() == 0:
        return input.permute(())
    order = [axis for axis in range(input.dim()) if axis not in source]
    for target, axis in sorted(zip(destination, source)):
        order.insert(target, axis)
    return input.permute(order)


moveaxis = movedim


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """``transpose`` under numpy's names."""
    return input.transpose(axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``transpose`` under another name."""
    return input.transpose(dim0, dim1)


def meshgrid(*tensors, indexing: str = "ij") -> tuple:
    """Coordinate grids: output ``i`` varies along dim ``i`` (``"xy"`` swaps the first two dims)."""
    inputs = _tensor_list(tensors)
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    flat = [t.reshape(-1) for t in inputs]
    sizes = [t.shape[0] for t in flat]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for index, t in enumerate(flat):
        position = {0: 1, 1: 0}.get(index, index) if swap else index
        shape = [1] * len(flat)
        shape[position] = t.shape[0]
        grids.append(t.reshape(shape).expand(sizes))
    return tuple(grids)


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold``: the windows of ``size`` elements every ``step`` along ``dimension``, as a new last dim."""
    axis = _axis(input, dimension) if input.dim() else 0
    if input.dim() == 0:
        input = input.reshape(1)
    length = input.shape[axis]
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {axis} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (length - size) // step + 1
    table = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).astype(np.int64)
    windows = apply_op(
        "Gather", (input, Tensor._from_array(table, dtypes.int64, input.device)), {"axis": axis}, "UnfoldBackward0"
    )
    return movedim(windows, axis + 1, -1)


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The slice at ``index`` along ``dim``, without that dim."""
    axis = _axis(input, dim)
    size = input.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {axis}"
        )
    index %= size
    return slice_axis(input, axis, index, index + 1).squeeze(axis)


def ravel(input: Tensor) -> Tensor:
    return input.reshape(-1)


# Per function of ``_index_scatter``, the index dtypes PyTorch takes and its words for another
# (index_fill refuses all but int64 before it gets here, with an IndexError of its own).
_INDEX_DTYPES = {
    "index_copy": ((dtypes.int64,), "index_copy_(): Expected a long tensor for index, but got {}"),
    "index_add": ((dtypes.int64, dtypes.int32), "index_add_(): Expected dtype int32/int64 for index but got: {}"),
    "index_fill": ((dtypes.int64, dtypes.int32), "index_fill_(): Expected dtype int32/int64 for index but got: {}"),
}


def _check_index_dtype(index, function: str) -> None:
    """PyTorch's index dtypes and words for ``function`` (``_INDEX_DTYPES``)."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{function}(): argument 'index' must be Tensor, not {type(index).__name__}")
    taken, message = _INDEX_DTYPES[function]
    if index.dtype not in taken:
        raise RuntimeError(message.format(dtypes.scalar_type_name(index.dtype)))


def _index_scatter(input: Tensor, dim: int, index: Tensor, source: Tensor, reduction: str, function: str) -> Tensor:
    _check_index_dtype(index, function)
    if index.dim() > 1:
        raise IndexError(f"{function}(): Index is supposed to be a vector")
    if source.dtype is not input.dtype:  # PyTorch's words for each
        own, theirs = dtypes.scalar_type_name(input.dtype), dtypes.scalar_type_name(source.dtype)
        if function == "index_copy":
            raise RuntimeError(
                f"index_copy_(): self and source expected to have the same dtype, but got (self) {own} and "
                f"(source) {theirs}"
            )
        raise RuntimeError(f"{function}_(): self ({own}) and source ({theirs}) must have the same scalar type")
    axis = _axis(input, dim) if input.dim() else 0
    scalar = input.dim() == 0
    if scalar:
        input, source = input.reshape(1), source.reshape(1)
    count = index.numel()
    expected = list(input.shape)
    expected[axis] = count
    if source.dim() != input.dim() or list(source.shape) != expected:
        raise RuntimeError(
            f"{function}(): Source/destination tensor must have same slice shapes. Destination slice "
            f"shape: {list(input.shape)} at dimension {axis} and source slice shape: "
            f"{list(source.shape)} at dimension {axis}."
        )
    # PyTorch's own types and wording: index_copy's IndexError names itself, index_add's RuntimeError
    # does not; index_fill counts negative indices from the end.
    error = RuntimeError if function == "index_add" else IndexError
    prefix = "index_copy_" if function == "index_copy" else ""
    check_bounds(index, input.shape[axis], axis, negative=function == "index_fill", error=error, function=prefix)
    shape = [1] * input.dim()
    shape[axis] = count
    positions = index.to(dtypes.int64).reshape(shape).expand(expected)
    result = apply_op(
        "ScatterElements",
        (input, positions, source.to(input.dtype)),
        {"axis": axis, "reduction": reduction},
        "IndexAddBackward0" if reduction == "add" else "IndexCopyBackward0",
    )
    return result.reshape(()) if scalar else result


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """A copy of ``input`` with ``alpha * source`` added at positions ``index`` along ``dim`` (repeats accumulate)."""
    if (alpha != 1 or type(alpha) is not int) and isinstance(source, Tensor) and source.dtype is input.dtype:
        # alpha in input's dtype, as PyTorch converts it (no alpha_check: int alpha=0.5 is 0, a bool
        # input's alpha=2 is True), so the scaled source keeps the dtype _index_scatter requires.
        source = source * factor_in(alpha, input.dtype, checked=False)
    return _index_scatter(input, dim, index, source, "add", "index_add")


@outside_autocast("index_copy")  # on PyTorch's CPU promote list: self and source take the wider dtype
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` with the slices of ``source`` written at positions ``index`` along ``dim``."""
    return _index_scatter(input, dim, index, source, "none", "index_copy")


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy of ``input`` with ``value`` written in the slices at ``index`` along ``dim``."""
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.dim() > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    axis = _axis(input, dim) if input.dim() else 0
    # Checked here, not only in _index_scatter: the tensor-value path below scatters nothing into
    # a 0-d input, and its values are no longer known once reshaped.
    check_bounds(index, input.shape[axis] if input.dim() else 1, axis, negative=True, error=IndexError)
    shape = list(input.shape) or [1]
    shape[axis] = index.numel()
    _check_fill_value(value, input.dtype)
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.dim()} dimension(s)."
            )
        # The positions filled, then a selection: a repeated index fills its slice once, and the
        # value's gradient counts each filled element once (a scatter of the expanded value would
        # count a repeated slice again).
        if input.dim() == 0:  # its one element, filled by any index
            filled = Tensor._full((), index.numel() > 0, dtypes.bool, input.device)
        else:
            filled = index_fill(Tensor._full(tuple(input.shape), False, dtypes.bool, input.device), dim, index, True)
        return where(filled, value.to(input.dtype), input)
    source = Tensor._full(tuple(shape), _fill_number(value, input.dtype), input.dtype, input.device)
    return _index_scatter(input, dim, index, source.reshape(shape if input.dim() else ()), "none", "index_fill")


def _check_fill_value(value, target: dtypes.dtype) -> None:
    """PyTorch's overflow error for a fill value ``target`` cannot hold (a float16 ``masked_fill(mask, -1e9)``
    is refused, not written as -inf): a number, or a 0-d tensor whose value is known."""
    if isinstance(value, Tensor):
        data = host_data(value._value) if value.dim() == 0 else None
        if data is None or data.dtype.kind not in "fiu":
            return
        value = data.item()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        check_number_fits(value, target, floating=True)


def _fill_number(value, target: dtypes.dtype):
    """A fill number (checked by ``_check_fill_value``) as ``target`` holds it, as PyTorch converts it: a
    bool any nonzero, NaN included (0.5 is True); an integer truncated, wrapping (uint8 -1 is 255)."""
    if isinstance(value, Tensor) or target.is_floating_point:
        return value
    if target is dtypes.bool:
        return bool(value)
    return int(_scalar_array(int(value), target))


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``value`` where the (broadcast) boolean ``mask`` is true, ``input`` elsewhere."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool:
        raise RuntimeError(
            "masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{getattr(mask, 'dtype', type(mask).__name__)}"
        )
    _check_fill_value(value, input.dtype)
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.dim()} dimension(s)."
            )
        value = value.to(input.dtype)
    else:
        value = _fill_number(value, input.dtype)
    result = where(mask, value, input)
    return result if result.dtype is input.dtype else result.to(input.dtype)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` with the leading elements of ``source`` written, in order, where ``mask`` is true.

    ``input`` and ``mask`` broadcast together, as PyTorch's out-of-place form (the result takes their
    common shape). Which positions are written is data: the mask is read at the call.
    """
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool:
        raise RuntimeError("masked_scatter_ only supports boolean masks")
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    if shape != tuple(input.shape):
        input = input.expand(shape)
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "masked_scatter: expected self and source to have same dtypes but got "
            f"{dtypes.scalar_type_name(input.dtype)} and {dtypes.scalar_type_name(source.dtype)}"
        )
    positions = np.flatnonzero(np.broadcast_to(mask._realized_data(), shape)).astype(np.int64)
    if positions.size > source.numel():
        raise RuntimeError(
            "masked_scatter: expected source to have at least as many elements as ones in mask "
            f"({positions.size}), but got {source.numel()}"
        )
    flat = input.reshape(-1)
    if positions.size == 0:
        return with_zero_gradients(flat.reshape(shape), (source,), "MaskedScatterBackward0")
    values = slice_axis(source.reshape(-1), 0, 0, int(positions.size)).to(input.dtype)
    written = apply_op(
        "ScatterElements",
        (flat, Tensor._from_array(positions, dtypes.int64, input.device), values),
        {"axis": 0, "reduction": "none"},
        "MaskedScatterBackward0",
    )
    return written.reshape(shape)
