"""Shape and data-movement kernels: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Expand, Tile,
Concat, Split, Slice, Pad, Shape, Size, ConstantOfShape, Constant, Range, EyeLike, Trilu,
DepthToSpace, SpaceToDepth, ReverseSequence.

These move data without arithmetic, so they run on float16/bfloat16 arrays as they are and may
return views of their inputs. Structural inputs (shapes, axes, bounds) are read as Python lists;
older opsets that carried them as attributes are accepted too.
"""

from __future__ import annotations

import numpy as np

from ._common import axes_argument, normalize_axis, numpy_dtype, to_list, to_scalar
from ..ir.kernel_registry import ALL_TYPES, kernels

__all__: list[str] = []


def _movement(*op_types: str):
    return kernels.register(*op_types, types=ALL_TYPES, native_low_precision=True)


@_movement("Reshape")
def reshape(xp, inputs, attrs):
    x = inputs[0]
    shape = to_list(inputs[1]) if len(inputs) > 1 else list(attrs["shape"])
    if not attrs.get("allowzero", 0):
        # A 0 copies the input's dimension at that position (unless allowzero asks for a real 0).
        shape = [x.shape[axis] if size == 0 else size for axis, size in enumerate(shape)]
    return [x.reshape(shape)]


@_movement("Flatten")
def flatten(xp, inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", 1)
    if axis < 0:
        axis += x.ndim
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis:], dtype=np.int64))
    return [x.reshape(outer, inner)]


@_movement("Transpose")
def transpose(xp, inputs, attrs):
    x = inputs[0]
    perm = attrs.get("perm")
    return [xp.transpose(x, list(perm) if perm is not None else None)]


@_movement("Squeeze")
def squeeze(xp, inputs, attrs):
    x = inputs[0]
    axes = axes_argument(inputs, attrs)
    if axes is None:
        return [x.reshape([size for size in x.shape if size != 1])]
    axes = {normalize_axis(axis, x.ndim) for axis in axes}
    return [x.reshape([size for axis, size in enumerate(x.shape) if axis not in axes])]


@_movement("Unsqueeze")
def unsqueeze(xp, inputs, attrs):
    x = inputs[0]
    axes = axes_argument(inputs, attrs) or []
    rank = x.ndim + len(axes)
    axes = {normalize_axis(axis, rank) for axis in axes}
    sizes = iter(x.shape)
    return [x.reshape([1 if axis in axes else next(sizes) for axis in range(rank)])]


def _reshape_to(x, shape: tuple):
    return x.reshape(shape)


# These ops only reshape their first input, so once the plan has recorded their output shape (from
# attributes and constant inputs) that shape is all the generated code needs.
for _op_type in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
    kernels.register_direct(_op_type, _reshape_to, output_shape=True)


@_movement("Expand")
def expand(xp, inputs, attrs):
    x = inputs[0]
    shape = np.broadcast_shapes(x.shape, tuple(to_list(inputs[1])))
    return [xp.broadcast_to(x, shape)]


kernels.register_direct("Expand", np.broadcast_to, output_shape=True)


@_movement("Tile")
def tile(xp, inputs, attrs):
    return [xp.tile(inputs[0], to_list(inputs[1]))]


@_movement("Concat")
def concat(xp, inputs, attrs):
    axis = normalize_axis(attrs["axis"], inputs[0].ndim)
    return [xp.concatenate(inputs, axis=axis)]


@_movement("Split")
def split(xp, inputs, attrs):
    x = inputs[0]
    axis = normalize_axis(attrs.get("axis", 0), x.ndim)
    size = x.shape[axis]
    count = attrs["_num_outputs"]
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = to_list(inputs[1])
    elif attrs.get("split"):
        sizes = list(attrs["split"])
    else:
        # num_outputs (opset 18) or the output count: equal chunks, the last one smaller if needed.
        count = attrs.get("num_outputs", count)
        chunk = -(-size // count)
        sizes = [chunk] * (count - 1) + [size - chunk * (count - 1)]
    results = []
    start = 0
    prefix = (slice(None),) * axis
    for length in sizes:
        results.append(x[prefix + (slice(start, start + length),)])
        start += length
    return results


def slice_bounds(size: int, start: int, end: int, step: int) -> slice:
    """ONNX Slice's clamping of one axis's bounds, as a Python slice."""
    if start < 0:
        start += size
    if end < 0:
        end += size
    if step > 0:
        start = min(max(start, 0), size)
        end = min(max(end, 0), size)
        return slice(start, end, step)
    start = min(max(start, 0), size - 1)
    end = min(max(end, -1), size - 1)
    # end == -1 means "through index 0"; a Python slice needs None for that.
    return slice(start, end if end >= 0 else None, step)


@_movement("Slice")
def slice_(xp, inputs, attrs):
    x = inputs[0]
    if len(inputs) > 1:
        starts, ends = to_list(inputs[1]), to_list(inputs[2])
        axes = to_list(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
        steps = to_list(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else None
    else:
        starts, ends, axes, steps = list(attrs["starts"]), list(attrs["ends"]), attrs.get("axes"), None
    if axes is None:
        axes = range(len(starts))
    if steps is None:
        steps = [1] * len(starts)
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = normalize_axis(axis, x.ndim)
        index[axis] = slice_bounds(x.shape[axis], start, end, step)
    return [x[tuple(index)]]


@_movement("Pad")
def pad(xp, inputs, attrs):
    x = inputs[0]
    mode = attrs.get("mode", "constant")
    if isinstance(mode, bytes):
        mode = mode.decode()
    pads = to_list(inputs[1]) if len(inputs) > 1 else list(attrs["pads"])
    value = attrs.get("value", 0)
    if len(inputs) > 2 and inputs[2] is not None and inputs[2].size:
        value = to_scalar(inputs[2])
    axes = to_list(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(x.ndim))
    widths = [[0, 0] for _ in range(x.ndim)]
    for position, axis in enumerate(axes):
        axis = normalize_axis(axis, x.ndim)
        widths[axis] = [pads[position], pads[position + len(axes)]]
    # Negative pads crop: apply them as a slice first, then pad with the positive parts.
    if any(w < 0 for pair in widths for w in pair):
        crop = tuple(slice(max(-begin, 0), x.shape[axis] - max(-end, 0)) for axis, (begin, end) in enumerate(widths))
        x = x[crop]
        widths = [[max(begin, 0), max(end, 0)] for begin, end in widths]
    if not any(w for pair in widths for w in pair):
        return [x]
    if mode == "constant":
        return [xp.pad(x, widths, mode="constant", constant_values=x.dtype.type(value))]
    if mode not in ("reflect", "edge", "wrap"):
        raise ValueError(f"Pad: unsupported mode {mode!r} (expected constant, reflect, edge or wrap)")
    return [xp.pad(x, widths, mode=mode)]


@_movement("Shape")
def shape(xp, inputs, attrs):
    dims = inputs[0].shape
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return [xp.asarray(dims[start:end], dtype=np.int64)]


@_movement("Size")
def size(xp, inputs, attrs):
    return [xp.asarray(inputs[0].size, dtype=np.int64)]


@_movement("ConstantOfShape")
def constant_of_shape(xp, inputs, attrs):
    value = attrs.get("value")
    if value is None:
        value = np.zeros(1, np.float32)
    value = np.asarray(value)
    return [xp.full(to_list(inputs[0]), value.reshape(-1)[0], dtype=value.dtype)]


@_movement("Constant")
def constant(xp, inputs, attrs):
    if "value" in attrs:
        return [xp.asarray(attrs["value"])]
    if "value_float" in attrs:
        return [xp.asarray(attrs["value_float"], dtype=np.float32)]
    if "value_floats" in attrs:
        return [xp.asarray(attrs["value_floats"], dtype=np.float32)]
    if "value_int" in attrs:
        return [xp.asarray(attrs["value_int"], dtype=np.int64)]
    if "value_ints" in attrs:
        return [xp.asarray(attrs["value_ints"], dtype=np.int64)]
    raise TypeError(
        f"Constant: unsupported attributes {sorted(attrs)} (string and sparse constants are not onnxnn tensors)"
    )


@kernels.register("Range", types=ALL_TYPES)
def range_(xp, inputs, attrs):
    start, limit, delta = (to_scalar(value) for value in inputs)
    dtype = inputs[0].dtype
    return [xp.arange(start, limit, delta, dtype=dtype)]


@_movement("EyeLike")
def eye_like(xp, inputs, attrs):
    x = inputs[0]
    dtype = numpy_dtype(attrs["dtype"]) if attrs.get("dtype") is not None else x.dtype
    return [xp.eye(x.shape[0], x.shape[1], k=attrs.get("k", 0), dtype=dtype)]


@_movement("Trilu")
def trilu(xp, inputs, attrs):
    x = inputs[0]
    k = int(to_scalar(inputs[1])) if len(inputs) > 1 and inputs[1] is not None else 0
    if attrs.get("upper", 1):
        return [xp.triu(x, k)]
    return [xp.tril(x, k)]


@_movement("DepthToSpace")
def depth_to_space(xp, inputs, attrs):
    x = inputs[0]
    block = attrs["blocksize"]
    batch, channels, height, width = x.shape
    depth = channels // (block * block)
    if attrs.get("mode", "DCR") == "CRD":
        blocks = x.reshape(batch, depth, block, block, height, width).transpose(0, 1, 4, 2, 5, 3)
    else:
        blocks = x.reshape(batch, block, block, depth, height, width).transpose(0, 3, 4, 1, 5, 2)
    return [blocks.reshape(batch, depth, height * block, width * block)]


@_movement("SpaceToDepth")
def space_to_depth(xp, inputs, attrs):
    x = inputs[0]
    block = attrs["blocksize"]
    batch, channels, height, width = x.shape
    blocks = x.reshape(batch, channels, height // block, block, width // block, block)
    if attrs.get("mode", "DCR") == "CRD":
        blocks = blocks.transpose(0, 1, 3, 5, 2, 4)
    else:
        blocks = blocks.transpose(0, 3, 5, 1, 2, 4)
    return [blocks.reshape(batch, channels * block * block, height // block, width // block)]


@_movement("ReverseSequence")
def reverse_sequence(xp, inputs, attrs):
    x, lengths = inputs[0], to_list(inputs[1])
    batch_axis, time_axis = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
    # Batch entry b reverses its first lengths[b] time steps; the rest stay in place.
    moved = xp.moveaxis(x, (batch_axis, time_axis), (0, 1)).copy()
    for entry, length in enumerate(lengths):
        moved[entry, :length] = moved[entry, :length][::-1].copy()
    return [xp.moveaxis(moved, (0, 1), (batch_axis, time_axis))]
