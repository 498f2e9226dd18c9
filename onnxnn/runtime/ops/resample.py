"""Resize: shape and gradient rules.

Resize is linear in its data input and separable: each resized axis is multiplied by a fixed
``(output, input)`` interpolation matrix that depends only on the axis geometry and the node's
attributes. The gradient along an axis is therefore the transposed matrix applied to the incoming
gradient: one ``MatMul`` per resized axis (between ``Transpose``s), whose own rules make the
gradient differentiable again. The matrix is the kernels executor's Resize applied to an identity
probe (one unit impulse per input position, resized along one axis), so the backward pass uses
exactly the forward's coordinate transformation, taps and edge handling for every mode.
"""
from __future__ import annotations

import numpy as np

from ...kernels import resize as _resize_kernel
from ..registry import gradient_rules, shape_rules
from ._common import Tensor
from .shape import _constant_list


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else value


def _geometry(shape, inputs, attrs):
    """(per-axis scale, per-axis output size, scales given, resized axes) of a Resize node."""
    if len(inputs) == 2:  # Resize-10: (X, scales)
        scales, sizes = _constant_list(inputs[1]) or None, None
    else:
        scales = _constant_list(inputs[2]) or None if len(inputs) > 2 else None
        sizes = _constant_list(inputs[3]) or None if len(inputs) > 3 else None
    axes = attrs.get("axes")
    policy = _text(attrs.get("keep_aspect_ratio_policy"), "stretch")
    full_scales, full_sizes = _resize_kernel._output_geometry(shape, scales, sizes, axes, policy)
    rank = len(shape)
    resized = list(range(rank)) if axes is None else [a % rank for a in axes]
    return full_scales, full_sizes, sizes is None, resized


@shape_rules.register("Resize")
def _resize_shape(inputs, attrs):
    _, sizes, _, _ = _geometry(inputs[0].shape, inputs, attrs)
    return [(tuple(sizes), inputs[0].dtype)]


def interpolation_matrix(input_size: int, scale: float, output_size: int, by_scale: bool, attrs) -> np.ndarray:
    """The ``(output_size, input_size)`` matrix Resize applies along one axis (float64)."""
    probe_attrs = {key: value for key, value in attrs.items() if key not in ("axes", "keep_aspect_ratio_policy")}
    probe_attrs["axes"] = [1]
    identity = np.eye(input_size, dtype=np.float64)
    if by_scale:
        inputs = [identity, None, np.array([scale], dtype=np.float32), None]
    else:
        inputs = [identity, None, None, np.array([output_size], dtype=np.int64)]
    (resized,) = _resize_kernel.resize(np, inputs, probe_attrs)
    return np.ascontiguousarray(resized.T)


@gradient_rules.register("Resize")
def _resize_grad(ctx, g):
    attrs = ctx.attrs
    if _text(attrs.get("coordinate_transformation_mode"), "half_pixel") == "tf_crop_and_resize":
        raise NotImplementedError("gradient of Resize with coordinate_transformation_mode 'tf_crop_and_resize'")
    if _text(attrs.get("keep_aspect_ratio_policy"), "stretch") != "stretch":
        raise NotImplementedError("gradient of Resize with a keep_aspect_ratio_policy other than 'stretch'")
    shape = ctx.input_shape(0)
    inputs = [ctx.input_value(i) for i in range(ctx.num_inputs)]
    scales, sizes, by_scale, resized = _geometry(shape, inputs, attrs)
    rank = len(shape)
    for axis in resized:
        if sizes[axis] == shape[axis] and scales[axis] == 1.0:
            continue
        matrix = interpolation_matrix(shape[axis], scales[axis], sizes[axis], by_scale, attrs)
        constant = Tensor._from_array(matrix.astype(g.dtype.numpy_dtype), g.dtype, g.device)
        order = [a for a in range(rank) if a != axis] + [axis]
        inverse = np.argsort(order).tolist()
        g = (g.permute(*order) @ constant).permute(*inverse)
    return (g,) + (None,) * (ctx.num_inputs - 1)
