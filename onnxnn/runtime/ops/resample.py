"""Resize: shape and gradient rules.

Resize is linear in its data input and separable: each resized axis is multiplied by a fixed
``(output, input)`` interpolation matrix that depends only on the axis geometry and the node's
attributes. The gradient along an axis is therefore the transposed matrix applied to the incoming
gradient: one ``MatMul`` per resized axis (between ``Transpose``s), whose own rules make the
gradient differentiable again.

The matrix is built here as Resize samples: the source coordinate of each output position and
nearest's rounding come from ``ir.resize_geometry`` (onnxruntime's arithmetic, shared with the
kernels executor); ``linear``/``cubic`` take taps around ``ceil(x) - 1`` (Keys' kernel with
``cubic_coeff_a``), stretched by ``1 / scale`` when antialiasing a downsample and renormalized, taps
outside dropped with ``exclude_outside``, indices clamped to the edges. ``runtime`` does not import
``kernels`` (DESIGN.md's layering), so the taps are written a second time here; the
finite-difference tests check them against both executors' forwards.

onnxruntime has no float64 Resize kernel (1.31), so ``resize`` records a float64 Resize in the same
terms: along each resized axis, each output is its taps (the matrix row's nonzero entries) gathered
and weighted, so only the taps of an output enter it, as in the kernel (a NaN or infinity elsewhere
in the row stays out).

Output sizes from ``scales``: onnxnn's rule (``_geometry``, the kernels') is ``floor(size * scale)``
in double; onnxruntime's is ``floor(float(size) * scale)`` in float32, one more where the float
product rounds up to a whole number (``50 * 2.3f``). onnxnn therefore records float32 scales only
where the two agree at every size (``float32_exact_scale``) and otherwise records the scales as a
float64 constant (PyTorch's ``scale_factor`` itself, from ``F.interpolate``), which the kernels and
rules read as they are; sessions and exports write such a node (``_decomposition``) as a float32
Resize with the scales rounded up, so onnxruntime's size is never short, sliced to
``Floor(Cast(Shape(x), double) * scales)`` computed in the graph: PyTorch's size at every size of a
dynamic axis. A Resize imported with float32 scales gets onnxruntime's size (``onnxruntime_scales``).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

from ...ir import dtypes
from ...ir.graph import static_constant
from ...ir.registry import decompositions, gradient_rules, shape_rules
from ...ir.resize_geometry import nearest_indices, source_coordinates
from ._common import Tensor, apply_op
from .elementwise import where
from .indexing import index_select
from .shape import _constant_list
from .training import int64_initializers, node_emitter

__all__ = ["resize", "float32_exact_scale", "onnxruntime_scales"]


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else value


def _geometry(shape, inputs, attrs):
    """(per-axis scale, per-axis output size, resized axes) of a Resize node, per the spec's size rules."""
    rank = len(shape)
    if len(inputs) == 2:  # Resize-10: (X, scales)
        scales, sizes = _constant_list(inputs[1]) or None, None
    else:
        scales = _constant_list(inputs[2]) or None if len(inputs) > 2 else None
        sizes = _constant_list(inputs[3]) or None if len(inputs) > 3 else None
    resized = _resized_axes(rank, attrs)
    policy = _text(attrs.get("keep_aspect_ratio_policy"), "stretch")
    full_scales, full_sizes = [1.0] * rank, list(shape)
    if sizes is not None:
        ratios = {axis: int(size) / shape[axis] if shape[axis] else 1.0 for axis, size in zip(resized, sizes)}
        if policy == "stretch":
            for axis, size in zip(resized, sizes):
                full_scales[axis], full_sizes[axis] = ratios[axis], int(size)
        else:
            scale = min(ratios.values()) if policy == "not_larger" else max(ratios.values())
            for axis in resized:
                full_scales[axis], full_sizes[axis] = scale, int(scale * shape[axis] + 0.5)
    elif scales is not None:
        for axis, scale in zip(resized, scales):
            full_scales[axis], full_sizes[axis] = float(scale), int(math.floor(float(scale) * shape[axis]))
    else:
        raise ValueError("Resize: one of scales or sizes must be given")
    return full_scales, full_sizes, resized


@shape_rules.register("Resize")
def _resize_shape(inputs, attrs):
    _, sizes, _ = _geometry(inputs[0].shape, inputs, attrs)
    return [(tuple(sizes), inputs[0].dtype)]


def _keys(distance: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def interpolation_matrix(input_size: int, scale: float, output_size: int, attrs) -> np.ndarray:
    """The ``(output_size, input_size)`` matrix Resize applies along one axis (float64)."""
    mode = _text(attrs.get("mode"), "nearest")
    transform = _text(attrs.get("coordinate_transformation_mode"), "half_pixel")
    if transform == "tf_crop_and_resize":
        raise NotImplementedError("gradient of Resize with coordinate_transformation_mode 'tf_crop_and_resize'")
    x, _ = source_coordinates(transform, output_size, input_size, scale, nearest=mode == "nearest")
    matrix = np.zeros((output_size, input_size))
    rows = np.arange(output_size)
    if mode == "nearest":
        index = nearest_indices(x, _text(attrs.get("nearest_mode"), "round_prefer_floor"))
        np.add.at(matrix, (rows, np.clip(index, 0, input_size - 1)), 1.0)
        return matrix
    antialias = bool(attrs.get("antialias", 0))
    support = 1.0 if mode == "linear" else 2.0
    stretch = min(scale, 1.0) if antialias else 1.0
    first = int(math.floor(-support / stretch) + 1)
    offsets = np.arange(first, 2 - first)
    left = np.ceil(x) - 1
    distance = (offsets[None, :] - (x - left)[:, None]) * stretch
    if mode == "linear":
        weights = np.clip(1 - np.abs(distance), 0, 1)
    else:
        weights = _keys(distance, float(attrs.get("cubic_coeff_a", -0.75)))
    if antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    indices = left.astype(np.int64)[:, None] + offsets[None, :]
    if attrs.get("exclude_outside", 0):
        weights = np.where((indices < 0) | (indices >= input_size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    np.add.at(
        matrix, (np.repeat(rows, len(offsets)), np.clip(indices, 0, input_size - 1).reshape(-1)), weights.reshape(-1)
    )
    return matrix


@gradient_rules.register("Resize")
def _resize_grad(ctx, g):
    attrs = ctx.attrs
    if _text(attrs.get("coordinate_transformation_mode"), "half_pixel") == "tf_crop_and_resize":
        raise NotImplementedError("gradient of Resize with coordinate_transformation_mode 'tf_crop_and_resize'")
    shape = ctx.input_shape(0)
    inputs = [ctx.input_value(i) for i in range(ctx.num_inputs)]
    scales, sizes, resized = _geometry(shape, inputs, attrs)
    rank = len(shape)
    for axis in resized:
        if sizes[axis] == shape[axis] and scales[axis] == 1.0:
            continue
        matrix = interpolation_matrix(shape[axis], scales[axis], sizes[axis], attrs)
        constant = Tensor._from_array(matrix.astype(g.dtype.numpy_dtype), g.dtype, g.device)
        order = [a for a in range(rank) if a != axis] + [axis]
        inverse = np.argsort(order).tolist()
        g = (g.permute(*order) @ constant).permute(*inverse)
    return (g,) + (None,) * (ctx.num_inputs - 1)


def _gathered_taps(x: Tensor, axis: int, matrix: np.ndarray) -> Tensor:
    """``x`` resampled along ``axis`` by ``matrix`` (``(output, input)``), tap slot by tap slot."""
    taps = [np.flatnonzero(row) for row in matrix]
    along = [1] * x.dim()
    along[axis] = matrix.shape[0]
    result = None
    for slot in range(max(1, max(len(row) for row in taps))):
        present = np.array([slot < len(row) for row in taps])
        indices = np.array([row[slot] if slot < len(row) else 0 for row in taps], dtype=np.int64)
        weights = np.array([matrix[i, index] if present[i] else 0.0 for i, index in enumerate(indices)])
        term = index_select(x, axis, Tensor._from_array(indices, dtypes.int64, x.device))
        if not np.all(weights == 1.0):
            term = term * Tensor._from_array(weights.reshape(along).astype(x.dtype.numpy_dtype), x.dtype, x.device)
        if not present.all():
            term = where(Tensor._from_array(present.reshape(along), dtypes.bool, x.device), term, 0.0)
        result = term if result is None else result + term
    assert result is not None  # at least one slot
    return result


def resize(input: Tensor, inputs: tuple, attrs: dict, name: str | None = None) -> Tensor:
    """ONNX ``Resize(input, *inputs)``: the node (``name``: its ``grad_fn``'s), or for float64 (no
    onnxruntime kernel) the same interpolation written as gathered and weighted taps along each
    resized axis.

    ``tf_crop_and_resize`` keeps the node (its ``roi`` picks the source window at run time).
    """
    transform = _text(attrs.get("coordinate_transformation_mode"), "half_pixel")
    if input.dtype is not dtypes.float64 or transform == "tf_crop_and_resize":
        return apply_op("Resize", (input,) + tuple(inputs), attrs, name)
    # The inputs may be Tensors (an imported node's) or constant Values (F.interpolate's).
    values = [item._value if isinstance(item, Tensor) else item for item in (input,) + tuple(inputs)]
    scales, sizes, resized = _geometry(tuple(input.shape), values, attrs)
    result = input
    for axis in resized:
        if sizes[axis] == input.shape[axis] and scales[axis] == 1.0:
            continue
        matrix = interpolation_matrix(input.shape[axis], scales[axis], sizes[axis], attrs)
        result = _gathered_taps(result, axis, matrix)
    return result


# ---------------------------------------------------------------- output sizes from scales


def float32_exact_scale(scale: float) -> bool:
    """Whether ``floor(size * scale)`` is the same in float32 (onnxruntime) and in double (onnxnn) at
    every size: ``scale`` is a float32 with at most 4 fractional bits, so ``size * scale`` is a
    multiple of 1/16 that float32 holds exactly below 2**20 (far beyond any resized axis)."""
    return float(np.float32(scale)) == scale and float(scale * 16).is_integer()


def onnxruntime_scales(shape, inputs: tuple, attrs) -> tuple:
    """``inputs`` (a Resize's after X) with float32 ``scales`` replaced, where onnxruntime's float32
    output size differs from onnxnn's double one, by float64 scales within a float32 ulp of them whose
    double size is onnxruntime's: an imported Resize then has the shape onnxruntime gives it."""
    slot = 1  # (roi, scales, sizes); Resize-10's (scales) is left as it is, its opset has no slicing form
    if len(inputs) <= slot or inputs[slot] is None:
        return tuple(inputs)
    scale_input = inputs[slot]
    value = scale_input._value if isinstance(scale_input, Tensor) else scale_input
    if value.dtype is not dtypes.float32:
        return tuple(inputs)
    scales = _constant_list(value)
    if not scales or (len(inputs) > slot + 1 and _constant_list_of(inputs[slot + 1])):
        return tuple(inputs)
    resized = _resized_axes(len(shape), attrs)
    adjusted = [float(scale) for scale in scales]
    for position, (axis, scale) in enumerate(zip(resized, scales)):
        size = shape[axis]
        wanted = math.floor(float(np.float32(size) * np.float32(scale)))  # onnxruntime's float32 product
        if wanted == math.floor(float(scale) * size):
            continue
        candidate = wanted / size  # wanted > 0 here: float32 rounds up only onto a positive whole number
        while math.floor(candidate * size) < wanted:
            candidate = math.nextafter(candidate, math.inf)
        adjusted[position] = candidate
    if adjusted == [float(scale) for scale in scales]:
        return tuple(inputs)
    replaced = static_constant(adjusted, dtypes.float64)
    return tuple(inputs[:slot]) + (replaced,) + tuple(inputs[slot + 1 :])


def _resized_axes(rank: int, attrs) -> list[int]:
    """The axes a Resize's scales are for: its ``axes`` attribute (opset 18), else every axis."""
    axes = attrs.get("axes")
    return list(range(rank)) if axes is None else [axis % rank for axis in axes]


def _constant_list_of(item) -> list:
    if item is None:
        return []
    return _constant_list(item._value if isinstance(item, Tensor) else item)


@decompositions.register("Resize")
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    """A Resize recorded with float64 scales (see the module's docstring): a float32 Resize whose
    scales are rounded up, then sliced to ``Floor(Cast(Shape(x), double) * scales)``."""
    slot = 2  # (X, roi, scales, sizes): onnxnn records float64 scales in no other form
    if len(node.inputs) <= slot or node.inputs[slot] is None or node.inputs[slot].dtype is not dtypes.float64:
        return None  # float32 scales (or sizes): the node as recorded
    scales = _constant_list(node.inputs[slot])
    rank = len(node.inputs[0].shape)
    resized = _resized_axes(rank, node.attrs)
    # The float32 scale at or above each: onnxruntime's float32 size is then at least onnxnn's (a
    # float32 product at or above a whole number rounds to at least it), and the coordinates move by
    # under an ulp of the scale.
    rounded = [float(np.float32(scale)) for scale in scales]
    rounded = [
        float(np.nextafter(np.float32(up), np.float32(np.inf))) if up < scale else up
        for up, scale in zip(rounded, scales)
    ]
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    float32_scales, float64_scales = fresh_name("scales"), fresh_name("scales")
    initializers.append(numpy_helper.from_array(np.array(rounded, np.float32), float32_scales))
    full = [1.0] * rank
    for axis, scale in zip(resized, scales):
        full[axis] = float(scale)
    initializers.append(numpy_helper.from_array(np.array(full, np.float64), float64_scales))
    resize_inputs = list(input_names)
    resize_inputs[slot] = float32_scales
    attributes = {name: value for name, value in node.attrs.items() if not name.startswith("_")}
    resized_output = emit("Resize", *resize_inputs, **attributes)
    sizes = emit(
        "Floor", emit("Mul", emit("Cast", emit("Shape", input_names[0]), to=onnx.TensorProto.DOUBLE), float64_scales)
    )
    ends = emit("Cast", sizes, to=onnx.TensorProto.INT64)
    emit("Slice", resized_output, constant([0] * rank), ends, output=output_names[0])
    return nodes, initializers
