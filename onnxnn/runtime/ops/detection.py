"""Gradient rules of RoiAlign and DeformConv: the forward recorded again as standard ops, differentiated.

Both ops sample their input bilinearly. Each rule records the node's forward once more with
``Gather``/``GatherElements``, elementwise weights and a reduction or ``MatMul`` (the sampling the
kernels compute, from the same geometry in onnxnn/ir/roi_align.py and onnxnn/ir/deform_conv.py)
on the node's inputs, and returns that graph's vector-Jacobian product (recomputation.py), as the
recurrent rules do.

- **RoiAlign** is differentiable in ``X`` only (``rois`` enter through the floor of sample
  coordinates and the lattice size; ``batch_indices`` are integers). Its sampling table is
  computed from the regions' values (``data_of``), so a backward through it reads data and is not
  replayed from a template.
- **DeformConv** is differentiable in ``X``, ``W``, ``offset``, ``B`` and ``mask``. Tap coordinates
  are ``base + offset``; the bilinear weights are ``1 - f``/``f`` of their fractional part, so the
  offsets' gradient flows through the weights while ``floor`` reads detached coordinates. The rule
  reads no data. Outputs' shapes come from ONNX shape inference, so neither op has a shape rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..realization import data_of
from ...ir import dtypes
from ...ir.deform_conv import deform_conv_base, deform_conv_geometry
from ...ir.registry import gradient_rules
from ...ir.roi_align import roi_align_attributes, roi_align_taps
from ._common import Tensor, apply_op
from .elementwise import where
from .indexing import gather_within
from .recomputation import gradient_by_recomputation

__all__: list[str] = []


def _constant(array: np.ndarray, like: Tensor) -> Tensor:
    return Tensor._from_array(np.asarray(array, order="C"), like.dtype, like.device)


def _index(array: np.ndarray, like: Tensor) -> Tensor:
    return Tensor._from_array(np.asarray(array, dtype=np.int64, order="C"), dtypes.int64, like.device)


# ---------------------------------------------------------------- RoiAlign


def _roi_align_recorded(x: Tensor, rois_value, batch_value, attrs: dict) -> Tensor:
    batch, channels, height, width = x.shape
    options = roi_align_attributes(attrs)
    out_h, out_w = options["output_height"], options["output_width"]
    taps = roi_align_taps(np.asarray(data_of(rois_value)), height, width, attrs)
    regions = taps.positions.shape[0]
    images = apply_op(
        "Gather",
        (x.reshape(batch, channels, height * width), _index(np.asarray(data_of(batch_value)).reshape(-1), x)),
        {"axis": 0},
    )
    positions = _index(taps.positions[:, None, :], x).expand(regions, channels, taps.positions.shape[1])
    values = images.gather(2, positions) * _constant(taps.weights[:, None, :].astype(x.dtype.numpy_dtype), x)
    values = values.reshape(regions, channels, out_h, out_w, taps.samples, 4)
    if options["mode"] == "avg":
        divisor = _constant((1.0 / taps.counts).reshape(-1, 1, 1, 1).astype(x.dtype.numpy_dtype), x)
        return values.sum((4, 5)) * divisor
    valid = Tensor._from_array(taps.valid[:, None], dtypes.bool, x.device)
    per_sample = where(valid, values.amax(5), float("-inf"))
    # any over an axis of the 4-d table is an array (numpy's stubs also allow a scalar).
    any_valid = Tensor._from_array(taps.valid.any(axis=3)[:, None], dtypes.bool, x.device)  # type: ignore[index]
    return where(any_valid, per_sample.amax(4), 0.0)


@gradient_rules.register("RoiAlign")
def _roi_align_grad(ctx, g):
    attrs = dict(ctx.attrs)
    rois, batch_indices = ctx.input_value(1), ctx.input_value(2)
    return gradient_by_recomputation(ctx, lambda x, *_: [_roi_align_recorded(x, rois, batch_indices, attrs)], (0,), [g])


# ---------------------------------------------------------------- DeformConv


def _deform_conv_recorded(x: Tensor, w: Tensor, offset: Tensor, bias, mask, attrs: dict) -> Tensor:
    geometry = deform_conv_geometry(tuple(x.shape), tuple(w.shape), tuple(offset.shape), attrs)
    batch, channels, height, width = x.shape
    groups, offset_groups = geometry["group"], geometry["offset_group"]
    (kh, kw), (oh, ow) = geometry["kernel"], geometry["output"]
    taps = kh * kw * oh * ow
    base_y, base_x = (_constant(base.astype(x.dtype.numpy_dtype), x) for base in deform_conv_base(geometry))
    moved = offset.reshape(batch, offset_groups, kh, kw, 2, oh, ow)
    y = (moved[:, :, :, :, 0] + base_y).reshape(batch, offset_groups, 1, taps)
    x_ = (moved[:, :, :, :, 1] + base_x).reshape(batch, offset_groups, 1, taps)
    images = x.reshape(batch, offset_groups, channels // offset_groups, height * width)
    top, left = y.detach().floor(), x_.detach().floor()
    fraction_y, fraction_x = y - top, x_ - left
    sampled: Any = None  # the sum of the four bilinear terms: a Tensor once the loops ran
    for row, row_weight in ((top, 1.0 - fraction_y), (top + 1.0, fraction_y)):
        for column, column_weight in ((left, 1.0 - fraction_x), (left + 1.0, fraction_x)):
            inside = (row >= 0) & (row <= height - 1) & (column >= 0) & (column <= width - 1)
            index = (row.clamp(0, height - 1) * width + column.clamp(0, width - 1)).to(dtypes.int64)
            index = index.expand(batch, offset_groups, channels // offset_groups, taps)
            term = gather_within(images, 3, index) * where(inside, row_weight * column_weight, 0.0)
            sampled = term if sampled is None else sampled + term
    if mask is not None:
        sampled = sampled * mask.reshape(batch, offset_groups, 1, taps)
    columns = sampled.reshape(batch, groups, (channels // groups) * kh * kw, oh * ow)
    out = (w.reshape(groups, w.shape[0] // groups, -1) @ columns).reshape(batch, w.shape[0], oh, ow)
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


@gradient_rules.register("DeformConv")
def _deform_conv_grad(ctx, g):
    attrs = dict(ctx.attrs)

    def forward(x, w, offset, bias=None, mask=None):
        return [_deform_conv_recorded(x, w, offset, bias, mask, attrs)]

    return gradient_by_recomputation(ctx, forward, (0, 1, 2, 3, 4), [g])
