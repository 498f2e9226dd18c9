"""Shape ops: Reshape, Transpose, Squeeze/Unsqueeze, Expand, Concat, Split, Slice, Flatten, Tile (Pad: padding.py;
split, chunk, unbind and narrow: splitting.py).

Structural arguments (target shapes, axes, bounds) enter as static constants, so compiled graphs
embed them and the shape rules read them at record time.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.graph import FrozenAttributes, shared_attributes
from ...ir.registry import gradient_rules, non_differentiable, shape_rules
from ._common import (
    Tensor,
    apply_op,
    broadcast_shapes,
    distinct_dims,
    int64_constant,
    normalize_axes,
    with_zero_gradients,
)
from ..realization import data_of
from ...ir.caches import register_cache


def _constant_list(value) -> list[int]:
    """The content of a shape-like input; data-dependent ones are realized first (principle 2)."""
    if value is None:
        return []
    if value.static is not None:
        # Static constants are immutable and shared: their lists are kept (a fresh copy returned).
        cached = _STATIC_LISTS.get(value.static)
        if cached is None:
            if len(_STATIC_LISTS) >= 4096:
                _STATIC_LISTS.clear()
            cached = _STATIC_LISTS[value.static] = value.data.reshape(-1).tolist()
        return list(cached)
    return data_of(value).reshape(-1).tolist()


_STATIC_LISTS: dict = {}
register_cache("static constants as lists", _STATIC_LISTS.clear)


def _numel(shape) -> int:
    result = 1
    for size in shape:
        result *= size
    return result


# ---------------------------------------------------------------- Reshape


def infer_shape(shape: list[int], numel: int, source: tuple, allowzero: int = 0) -> tuple:
    """Resolves 0 (copy, unless allowzero) and -1 (inferred) entries of a target shape."""
    shape = list(shape)
    if not allowzero:
        shape = [source[i] if size == 0 and i < len(source) else size for i, size in enumerate(shape)]
    unknown = [i for i, size in enumerate(shape) if size == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = _numel(size for size in shape if size != -1)
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[unknown[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


@shape_rules.register("Reshape")
def _reshape_shape(inputs, attrs):
    data = inputs[0]
    return [
        (infer_shape(_constant_list(inputs[1]), _numel(data.shape), data.shape, attrs.get("allowzero", 0)), data.dtype)
    ]


@gradient_rules.register("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape_grad(ctx, g):
    return (g.reshape(ctx.input_shape(0)),) + (None,) * (ctx.num_inputs - 1)


@shape_rules.register("Flatten")
def _flatten_shape(inputs, attrs):
    shape = inputs[0].shape
    axis = attrs.get("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    return [((_numel(shape[:axis]), _numel(shape[axis:])), inputs[0].dtype)]


# ---------------------------------------------------------------- Transpose


@shape_rules.register("Transpose")
def _transpose_shape(inputs, attrs):
    shape = inputs[0].shape
    perm = attrs.get("perm") or list(reversed(range(len(shape))))
    return [(tuple(shape[axis] for axis in perm), inputs[0].dtype)]


@gradient_rules.register("Transpose")
def _transpose_grad(ctx, g):
    perm = ctx.attrs.get("perm") or list(reversed(range(len(ctx.input_shape(0)))))
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return (apply_op("Transpose", (g,), {"perm": inverse}, "PermuteBackward0"),)


# ---------------------------------------------------------------- Squeeze / Unsqueeze


@shape_rules.register("Squeeze")
def _squeeze_shape(inputs, attrs):
    shape = inputs[0].shape
    if len(inputs) > 1 and inputs[1] is not None:
        axes = normalize_axes(_constant_list(inputs[1]), len(shape))
        for axis in axes:
            if shape[axis] != 1:
                raise RuntimeError(
                    f"Squeeze: cannot select an axis to squeeze out which has size not equal to "
                    f"one (axis {axis} of shape {list(shape)})"
                )
    else:
        axes = [axis for axis, size in enumerate(shape) if size == 1]
    return [(tuple(size for axis, size in enumerate(shape) if axis not in axes), inputs[0].dtype)]


@shape_rules.register("Unsqueeze")
def _unsqueeze_shape(inputs, attrs):
    shape = list(inputs[0].shape)
    axes = _constant_list(inputs[1])
    axes = sorted(normalize_axes(axes, len(shape) + len(axes)))
    for axis in axes:
        shape.insert(axis, 1)
    return [(tuple(shape), inputs[0].dtype)]


# ---------------------------------------------------------------- Expand, Tile


@shape_rules.register("Expand")
def _expand_shape(inputs, attrs):
    return [(broadcast_shapes(inputs[0].shape, tuple(_constant_list(inputs[1]))), inputs[0].dtype)]


@gradient_rules.register("Expand")
def _expand_grad(ctx, g):
    return g, None  # the driver sums the broadcast dims back to the input's shape


@shape_rules.register("Tile")
def _tile_shape(inputs, attrs):
    repeats = _constant_list(inputs[1])
    if inputs[1].dtype.category != 1 or len(repeats) != len(inputs[0].shape) or any(repeat < 0 for repeat in repeats):
        raise ValueError(
            f"Tile: repeats {repeats} ({inputs[1].dtype.name}) must hold one non-negative integer "
            f"per dim of the input of shape {list(inputs[0].shape)}"
        )
    return [(tuple(size * repeat for size, repeat in zip(inputs[0].shape, repeats)), inputs[0].dtype)]


@gradient_rules.register("Tile")
def _tile_grad(ctx, g):
    shape = ctx.input_shape(0)
    repeats = _constant_list(ctx.input_value(1))
    interleaved = []
    for size, repeat in zip(shape, repeats):
        interleaved += [repeat, size]
    summed = g.reshape(interleaved).sum(dim=list(range(0, 2 * len(shape), 2)))
    return summed, None


# ---------------------------------------------------------------- Concat, Split


@shape_rules.register("Concat")
def _concat_shape(inputs, attrs):
    first = inputs[0].shape
    axis = normalize_axes([attrs["axis"]], len(first))[0]
    total = 0
    for value in inputs:
        shape = value.shape
        if len(shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(shape, first)) if i != axis):
            raise RuntimeError(
                f"Sizes of tensors must match except in dimension {axis}. Expected size "
                f"{list(first)} but got size {list(shape)} for a tensor in the list."
            )
        total += shape[axis]
    return [(first[:axis] + (total,) + first[axis + 1 :], inputs[0].dtype)]


@gradient_rules.register("Concat")
def _concat_grad(ctx, g):
    axis = normalize_axes([ctx.attrs["axis"]], len(ctx.input_shape(0)))[0]
    sizes = [ctx.input_shape(i)[axis] for i in range(ctx.num_inputs)]
    if len(sizes) == 1:
        return (g,)
    pieces = apply_op(
        "Split", (g, int64_constant(sizes)), shared_attributes((("axis", axis),)), "SplitWithSizesBackward0"
    )
    return pieces if isinstance(pieces, tuple) else (pieces,)


@shape_rules.register("Split")
def _split_shape(inputs, attrs):
    shape = inputs[0].shape
    axis = normalize_axes([attrs.get("axis", 0)], len(shape))[0]
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = _constant_list(inputs[1])
    else:
        parts = attrs["num_outputs"]
        chunk = -(-shape[axis] // parts)
        sizes = [chunk] * (shape[axis] // chunk) + ([shape[axis] % chunk] if shape[axis] % chunk else [])
    return [(shape[:axis] + (size,) + shape[axis + 1 :], inputs[0].dtype) for size in sizes]


@gradient_rules.register("Split")
def _split_grad(ctx, *grads):
    return apply_op("Concat", grads, {"axis": ctx.attrs.get("axis", 0)}, "CatBackward0"), None


# ---------------------------------------------------------------- Slice


def slice_bounds(size: int, start: int, end: int, step: int) -> tuple[int, int, int]:
    """ONNX Slice's clamping of (start, end) for one axis; returns (start, end, count)."""
    if start < 0:
        start += size
    if end < 0:
        end += size
    if step > 0:
        start, end = min(max(start, 0), size), min(max(end, 0), size)
        count = max(0, -(-(end - start) // step))
    else:
        start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
        count = max(0, -(-(start - end) // -step))
    return start, end, count


def _slice_arguments(inputs) -> list[tuple[int, int, int, int]]:
    """(axis, start, end, step) per sliced axis."""
    rank = len(inputs[0].shape)
    starts = _constant_list(inputs[1])
    ends = _constant_list(inputs[2])
    axes = _constant_list(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
    steps = _constant_list(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    return [(axis, start, end, step) for axis, start, end, step in zip(normalize_axes(axes, rank), starts, ends, steps)]


@shape_rules.register("Slice")
def _slice_shape(inputs, attrs):
    shape = list(inputs[0].shape)
    for axis, start, end, step in _slice_arguments(inputs):
        if step == 0:
            raise ValueError("slice step cannot be zero")
        shape[axis] = slice_bounds(shape[axis], start, end, step)[2]
    return [(tuple(shape), inputs[0].dtype)]


@gradient_rules.register("Slice")
def _slice_grad(ctx, g):
    shape = ctx.input_shape(0)
    arguments = _slice_arguments(ctx.node.inputs)
    nones = (None,) * (ctx.num_inputs - 1)
    if all(step == 1 for _, _, _, step in arguments):
        pads = [0] * (2 * len(shape))
        for axis, start, end, step in arguments:
            begin, _, count = slice_bounds(shape[axis], start, end, step)
            pads[axis] = begin
            pads[len(shape) + axis] = shape[axis] - begin - count
        return (apply_op("Pad", (g, int64_constant(pads)), {"mode": "constant"}),) + nones
    for axis, start, end, step in arguments:
        begin, _, count = slice_bounds(shape[axis], start, end, step)
        indices = np.arange(count, dtype=np.int64) * step + begin
        g = scatter_add_along(g, axis, indices, shape[axis])
    return (g,) + nones


def scatter_add_along(g: Tensor, axis: int, indices: np.ndarray, size: int) -> Tensor:
    """The gradient of gathering ``indices`` along ``axis``: sums ``g`` into a zero tensor of length ``size``."""
    target_shape = g.shape[:axis] + (size,) + g.shape[axis + 1 :]
    index_shape = [1] * g.dim()
    index_shape[axis] = len(indices)
    index = Tensor._from_array(indices.reshape(index_shape), dtypes.int64, g.device).expand(g.shape)
    zeros = Tensor._zeros(target_shape, g.dtype, g.device)
    return apply_op("ScatterElements", (zeros, index, g), {"axis": axis, "reduction": "add"})


# ---------------------------------------------------------------- Shape (for imported graphs)


@shape_rules.register("Shape")
def _shape_shape(inputs, attrs):
    rank = len(inputs[0].shape)
    start = attrs.get("start", 0)
    end = attrs.get("end", rank)
    start, end = (start + rank if start < 0 else start), (end + rank if end < 0 else end)
    return [((max(0, min(end, rank) - max(start, 0)),), dtypes.int64)]


non_differentiable.mark("Shape")


# ---------------------------------------------------------------- tensor functions


_ALLOW_ZERO = FrozenAttributes(allowzero=1)


def reshape(input: Tensor, *shape) -> Tensor:
    """A tensor with the same data and the given shape (one entry may be -1)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(size) for size in shape)
    if shape == input._value.shape:
        return input
    infer_shape(list(shape), input.numel(), input._value.shape, allowzero=1)  # PyTorch's error first
    return apply_op("Reshape", (input, int64_constant(shape)), _ALLOW_ZERO, "ViewBackward0")


view = reshape


def view_dtype(input: Tensor, dtype) -> Tensor:
    """``input.view(dtype)``: the same bytes read as ``dtype`` (not a conversion: ``to`` converts).

    Between dtypes of different sizes the last dimension scales by the ratio of their sizes, as
    in PyTorch. ONNX's BitCast (opset 26, same sizes only) is newer than onnxnn's recorded graphs,
    so the bytes are reinterpreted on realized data, as an imported BitCast node runs
    (``import_.importers.EagerNode``): the result is a new constant, through which no gradient
    flows (PyTorch's carries none either).

    Raises:
        RuntimeError: the sizes differ and ``input`` is 0-d, or its last dimension's bytes do not
            divide into elements of ``dtype``.
    """
    target, source = dtypes.as_dtype(dtype), input._value.dtype
    if target is source:
        return input
    if target.itemsize != source.itemsize:
        names = f"{dtypes.scalar_type_name(source)} as {dtypes.scalar_type_name(target)} (different element sizes)"
        if not input._value.shape:
            raise RuntimeError(f"self.dim() cannot be 0 to view {names}")
        ratio = max(target.itemsize, source.itemsize) // min(target.itemsize, source.itemsize)
        if target.itemsize > source.itemsize and input._value.shape[-1] % ratio:
            raise RuntimeError(
                f"self.size(-1) must be divisible by {ratio} to view {names}, but got {input._value.shape[-1]}"
            )
    device = input._value.device
    array = np.asarray(data_of(input.detach().cpu()._value), order="C").view(target.numpy_dtype)
    return Tensor._from_array(array, target).to(device)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    # Both dims are checked first, as PyTorch does: a 0-d tensor takes only 0 and -1 (IndexError
    # otherwise, so nn.Flatten()'s default start_dim=1 fails on it) and becomes shape (1,).
    start, end = normalize_axes([start_dim, end_dim], input.dim())
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if input.dim() == 0:
        return input.reshape(1)
    shape = input.shape
    return reshape(input, shape[:start] + (_numel(shape[start : end + 1]),) + shape[end + 1 :])


def permute(input: Tensor, *dims) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    perm = normalize_axes(dims, input.dim())
    if sorted(perm) != list(range(input.dim())):
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {input.dim()} "
            f"is not equal to len(dims) = {len(dims)}"
        )
    if perm == list(range(input.dim())):
        return input
    return apply_op("Transpose", (input,), shared_attributes((("perm", tuple(perm)),)), "PermuteBackward0")


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    dim0, dim1 = normalize_axes([dim0, dim1], input.dim())
    if dim0 == dim1:
        return input  # also every transpose of a 0-d tensor
    perm = list(range(input.dim()))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return apply_op("Transpose", (input,), shared_attributes((("perm", tuple(perm)),)), "TransposeBackward0")


def t(input: Tensor) -> Tensor:
    if input.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.dim()}D")
    return input if input.dim() < 2 else transpose(input, 0, 1)


def squeeze(input: Tensor, dim=None) -> Tensor:
    if dim is None:
        axes = [axis for axis, size in enumerate(input.shape) if size == 1]
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        axes = [axis for axis in normalize_axes(dims, input.dim()) if input.dim() and input.shape[axis] == 1]
    if not axes:
        return input
    return apply_op("Squeeze", (input, int64_constant(axes)), None, "SqueezeBackward0")


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    axis = normalize_axes([dim], input.dim() + 1)[0]
    return apply_op("Unsqueeze", (input, int64_constant([axis])), None, "UnsqueezeBackward0")


def expand(input: Tensor, *sizes) -> Tensor:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    shape = input.shape
    if len(sizes) < len(shape):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(shape)})"
        )
    offset = len(sizes) - len(shape)
    target = []
    for axis, size in enumerate(sizes):
        own = shape[axis - offset] if axis >= offset else None
        if size == -1:
            if own is None:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            size = own
        elif own is not None and own != size and own != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({size}) must match the existing size ({own}) at "
                f"non-singleton dimension {axis}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                f"{list(shape)}"
            )
        target.append(int(size))
    target_shape = tuple(target)
    if target_shape == shape:
        return input
    return apply_op("Expand", (input, int64_constant(target_shape)), None, "ExpandBackward0")


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return expand(input, other.shape)


def broadcast_to(input: Tensor, shape) -> Tensor:
    return expand(input, tuple(shape))


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenates tensors along ``dim`` (promoting dtypes as PyTorch does)."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")  # PyTorch's type
    target = tensors[0].dtype
    for tensor in tensors[1:]:
        target = dtypes.promote_types(target, tensor.dtype)
    tensors = [tensor if tensor.dtype is target else tensor.to(target) for tensor in tensors]
    for position, tensor in enumerate(tensors):
        if tensor.dim() == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {position}) cannot be concatenated")
    # PyTorch skips 1-D empty tensors beside tensors of other ranks (``acc = tensor([])`` grown in a
    # loop by ``cat([acc, row])``); they still take part in the dtype promotion above, and take a
    # zero (empty) gradient. Beside other 1-D tensors they are concatenated.
    skipped = ()
    kept = [tensor for tensor in tensors if tensor.shape != (0,)]
    if kept and len(kept) < len(tensors) and kept[0].dim() != 1:
        skipped = tuple(tensor for tensor in tensors if tensor.shape == (0,))
        tensors = kept
    axis = normalize_axes([dim], tensors[0].dim())[0]
    if len(tensors) == 1:
        # A new tensor, as PyTorch's: an in-place change of the result must not reach the input.
        result = apply_op("Identity", (tensors[0],), None, "CatBackward0")
    else:
        result = apply_op("Concat", tuple(tensors), {"axis": axis}, "CatBackward0")
    return with_zero_gradients(result, skipped, "CatBackward0") if skipped else result


concat = concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    first = tensors[0].shape
    for index, tensor in enumerate(tensors):
        if tensor.shape != first:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                f"and {list(tensor.shape)} at entry {index}"
            )
    axis = normalize_axes([dim], len(first) + 1)[0]
    return cat([unsqueeze(tensor, axis) for tensor in tensors], axis)


def slice_axis(input: Tensor, dim: int, start: int, end: int, step: int = 1) -> Tensor:
    axis = normalize_axes([dim], input.dim())[0]
    return apply_op(
        "Slice",
        (input, int64_constant([start]), int64_constant([end]), int64_constant([axis]), int64_constant([step])),
        None,
        "SliceBackward0",
    )


def _check_dims_sequence(function: str, dims) -> None:
    """PyTorch's ``flip``/``tile`` functions take a sequence of dims, not one int (their methods do)."""
    if isinstance(dims, int):
        raise TypeError(f"{function}(): argument 'dims' (position 2) must be tuple of ints, not {type(dims).__name__}")


def tile(input: Tensor, dims) -> Tensor:
    _check_dims_sequence("tile", dims)
    dims = list(dims)
    if len(dims) < input.dim():
        dims = [1] * (input.dim() - len(dims)) + dims
    if len(dims) > input.dim():
        input = input.reshape((1,) * (len(dims) - input.dim()) + input.shape)
    return apply_op("Tile", (input, int64_constant(dims)), None, "RepeatBackward0")


def repeat(input: Tensor, *sizes) -> Tensor:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < input.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return tile(input, sizes)


def flip(input: Tensor, dims) -> Tensor:
    _check_dims_sequence("flip", dims)
    dims = list(dims)
    if input.dim() == 0:
        distinct_dims(normalize_axes(dims, 1))  # PyTorch wraps a scalar's dims as one axis's (0 and -1)
        return apply_op("Identity", (input,), None, "FlipBackward0")  # a new tensor, as PyTorch's
    axes = distinct_dims(normalize_axes(dims, input.dim()))
    big = np.iinfo(np.int64).max
    return apply_op(
        "Slice",
        (
            input,
            int64_constant([-1] * len(axes)),
            int64_constant([-big] * len(axes)),
            int64_constant(axes),
            int64_constant([-1] * len(axes)),
        ),
        None,
        "FlipBackward0",
    )
