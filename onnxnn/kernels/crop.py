"""Cropping and folding kernels: CenterCropPad and Col2Im."""

from __future__ import annotations

import itertools

import numpy as np

from ._common import normalize_axis, spatial_attributes, to_list
from ..ir.kernel_registry import NUMERIC, kernels

__all__: list[str] = []


@kernels.register("CenterCropPad", types=NUMERIC, native_low_precision=True)
def center_crop_pad(xp, inputs, attrs):
    x = inputs[0]
    target = [int(size) for size in to_list(inputs[1])]
    axes = attrs.get("axes")
    axes = list(range(x.ndim)) if axes is None else [normalize_axis(a, x.ndim) for a in axes]
    crop = [slice(None)] * x.ndim
    place = [slice(None)] * x.ndim
    shape = list(x.shape)
    for axis, size in zip(axes, target):
        current = x.shape[axis]
        # The odd element of an uneven crop or pad goes at the end.
        if size < current:
            start = (current - size) // 2
            crop[axis] = slice(start, start + size)
        elif size > current:
            start = (size - current) // 2
            place[axis] = slice(start, start + current)
        shape[axis] = size
    cropped = x[tuple(crop)]
    if tuple(shape) == cropped.shape:
        return [cropped]
    result = xp.zeros(tuple(shape), dtype=x.dtype)
    result[tuple(place)] = cropped
    return [result]


@kernels.register("Col2Im", types=NUMERIC)
def col2im(xp, inputs, attrs):
    columns = inputs[0]
    image_shape = [int(size) for size in to_list(inputs[1])]
    block_shape = [int(size) for size in to_list(inputs[2])]
    spatial = len(image_shape)
    strides, dilations, pads = spatial_attributes(attrs, spatial)
    begins, ends = pads[:spatial], pads[spatial:]
    batch = columns.shape[0]
    block_size = int(np.prod(block_shape))
    channels = columns.shape[1] // block_size
    # How many block positions fit along each axis of the padded image.
    counts = [
        (image_shape[i] + begins[i] + ends[i] - ((block_shape[i] - 1) * dilations[i] + 1)) // strides[i] + 1
        for i in range(spatial)
    ]
    blocks = columns.reshape([batch, channels] + block_shape + counts)
    padded_shape = [image_shape[i] + begins[i] + ends[i] for i in range(spatial)]
    image = xp.zeros([batch, channels] + padded_shape, dtype=columns.dtype)
    # One strided scatter-add per kernel offset: the positions one offset writes never collide.
    for offset in itertools.product(*(range(size) for size in block_shape)):
        target = tuple(
            slice(offset[i] * dilations[i], offset[i] * dilations[i] + (counts[i] - 1) * strides[i] + 1, strides[i])
            for i in range(spatial)
        )
        image[(slice(None), slice(None)) + target] += blocks[(slice(None), slice(None)) + offset]
    crop = tuple(slice(begins[i], begins[i] + image_shape[i]) for i in range(spatial))
    return [image[(slice(None), slice(None)) + crop]]
