"""Detection kernels: RoiAlign and DeformConv (2-D), bilinear sampling by gathers.

RoiAlign's sampling table comes from onnxnn/ir/roi_align.py (shared with its gradient rule): one
gather of every tap of every region, weighted, then summed (``avg``) or maximized (``max``).
DeformConv samples the input at the kernel taps moved by ``offset`` (bilinear, zero outside the
input, as ONNX's reference reads it through GridSample with ``align_corners=1``), scales them by
``mask`` and contracts the columns with the weights as Conv's im2col does:
``out[n, m] = sum(W[m, c, ki, kj] * mask * X[n, c](y, x)) + B[m]`` with
``y = -pad_top + i * stride + ki * dilation + offset_y`` (and likewise ``x``).
"""

from __future__ import annotations

import numpy as np

from ..ir.kernel_registry import FLOATING, kernels
from ..ir.deform_conv import deform_conv_base, deform_conv_geometry
from ..ir.roi_align import roi_align_attributes, roi_align_taps

__all__: list[str] = []


def _host(array) -> np.ndarray:
    return np.asarray(array.get() if hasattr(array, "get") else array)


@kernels.register("RoiAlign", types=FLOATING)
def roi_align(xp, inputs, attrs):
    x, rois, batch_indices = inputs[0], inputs[1], inputs[2]
    batch, channels, height, width = x.shape
    options = roi_align_attributes(attrs)
    out_h, out_w = options["output_height"], options["output_width"]
    taps = roi_align_taps(_host(rois), height, width, attrs)
    regions = taps.positions.shape[0]
    images = x.reshape(batch, channels, height * width)[xp.asarray(_host(batch_indices).astype(np.int64))]
    positions = xp.asarray(taps.positions[:, None, :])
    values = xp.take_along_axis(images, positions, axis=2) * xp.asarray(taps.weights[:, None, :].astype(x.dtype))
    values = values.reshape(regions, channels, out_h, out_w, taps.samples, 4)
    if options["mode"] == "avg":
        result = values.sum(axis=(4, 5)) / xp.asarray(taps.counts.astype(x.dtype)).reshape(-1, 1, 1, 1)
    else:
        per_sample = xp.where(xp.asarray(taps.valid[:, None]), values.max(axis=5), -np.inf)
        result = per_sample.max(axis=4)
        # A bin without samples (an empty region with sampling_ratio 0) reads zero, as the reference.
        result = xp.where(xp.asarray(taps.valid.any(axis=3)[:, None]), result, 0.0)
    return [xp.asarray(result.astype(x.dtype), order="C")]


@kernels.register("DeformConv", types=FLOATING)
def deform_conv(xp, inputs, attrs):
    x, w, offset = inputs[0], inputs[1], inputs[2]
    bias = inputs[3] if len(inputs) > 3 else None
    mask = inputs[4] if len(inputs) > 4 else None
    geometry = deform_conv_geometry(x.shape, w.shape, offset.shape, attrs)
    batch, channels, height, width = x.shape
    groups, offset_groups = geometry["group"], geometry["offset_group"]
    (kh, kw), (oh, ow) = geometry["kernel"], geometry["output"]
    base_y, base_x = (xp.asarray(base.astype(x.dtype)) for base in deform_conv_base(geometry))
    moved = offset.reshape(batch, offset_groups, kh, kw, 2, oh, ow)
    y = (base_y + moved[:, :, :, :, 0]).reshape(batch, offset_groups, 1, -1)  # (N, G_off, 1, taps)
    x_ = (base_x + moved[:, :, :, :, 1]).reshape(batch, offset_groups, 1, -1)
    images = x.reshape(batch, offset_groups, channels // offset_groups, height * width)
    top, left = xp.floor(y), xp.floor(x_)
    sampled = 0
    for row, row_weight in ((top, 1 - (y - top)), (top + 1, y - top)):
        for column, column_weight in ((left, 1 - (x_ - left)), (left + 1, x_ - left)):
            inside = (row >= 0) & (row <= height - 1) & (column >= 0) & (column <= width - 1)
            index = (xp.clip(row, 0, height - 1) * width + xp.clip(column, 0, width - 1)).astype(np.int64)
            index = xp.broadcast_to(index, images.shape[:3] + index.shape[3:])
            weight = xp.where(inside, row_weight * column_weight, 0)
            sampled = sampled + xp.take_along_axis(images, index, axis=3) * weight
    if mask is not None:
        sampled = sampled * mask.reshape(batch, offset_groups, 1, -1)
    columns = sampled.reshape(batch, groups, (channels // groups) * kh * kw, oh * ow)
    result = xp.matmul(w.reshape(groups, w.shape[0] // groups, -1), columns).reshape(batch, w.shape[0], oh, ow)
    if bias is not None:
        result = result + bias.reshape(1, -1, 1, 1)
    return [xp.asarray(result.astype(x.dtype), order="C")]
