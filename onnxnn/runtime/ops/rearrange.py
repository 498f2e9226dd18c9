"""DepthToSpace, SpaceToDepth and CenterCropPad (ops of imported models): shape and gradient rules.

DepthToSpace and SpaceToDepth are a reshape, a fixed transpose and a reshape, so their gradient
undoes the three steps on the incoming gradient (reshape to the transposed blocks, the inverse
transpose, reshape to the input). CenterCropPad crops or zero-pads each listed axis about its
centre (an uneven odd element at the end); its gradient is one constant ``Pad`` whose pads undo
the crop (padding back) or the padding (negative pads crop it away).
"""

from __future__ import annotations

import numpy as np

from ...ir.registry import gradient_rules, shape_rules
from ._common import apply_op, int64_constant, normalize_axes
from .shape import _constant_list


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else value


def _blocks(op_type: str, shape, attrs):
    """(blocked shape, transpose permutation, output shape) of DepthToSpace / SpaceToDepth."""
    block = int(attrs["blocksize"])
    batch, channels, height, width = shape
    crd = _text(attrs.get("mode"), "DCR") == "CRD"
    if op_type == "DepthToSpace":
        depth = channels // (block * block)
        if crd:
            blocked, order = (batch, depth, block, block, height, width), (0, 1, 4, 2, 5, 3)
        else:
            blocked, order = (batch, block, block, depth, height, width), (0, 3, 4, 1, 5, 2)
        return blocked, order, (batch, depth, height * block, width * block)
    blocked = (batch, channels, height // block, block, width // block, block)
    order = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
    return blocked, order, (batch, channels * block * block, height // block, width // block)


def _shape_rule(op_type: str):
    def rule(inputs, attrs):
        _, _, output = _blocks(op_type, inputs[0].shape, attrs)
        return [(output, inputs[0].dtype)]

    return rule


def _gradient_rule(op_type: str):
    def rule(ctx, g):
        blocked, order, _ = _blocks(op_type, ctx.input_shape(0), ctx.attrs)
        transposed = tuple(blocked[axis] for axis in order)
        inverse = np.argsort(order).tolist()
        return (g.reshape(*transposed).permute(*inverse).reshape(*ctx.input_shape(0)),)

    return rule


for _op_type in ("DepthToSpace", "SpaceToDepth"):
    shape_rules.register(_op_type)(_shape_rule(_op_type))
    gradient_rules.register(_op_type)(_gradient_rule(_op_type))


def _crop_pad_axes(shape, inputs, attrs):
    target = [int(size) for size in _constant_list(inputs[1])]
    axes = attrs.get("axes")
    axes = list(range(len(shape))) if axes is None else normalize_axes(list(axes), len(shape))
    return dict(zip(axes, target))


@shape_rules.register("CenterCropPad")
def _center_crop_pad_shape(inputs, attrs):
    shape = list(inputs[0].shape)
    for axis, size in _crop_pad_axes(shape, inputs, attrs).items():
        shape[axis] = size
    return [(tuple(shape), inputs[0].dtype)]


@gradient_rules.register("CenterCropPad")
def _center_crop_pad_grad(ctx, g):
    shape = ctx.input_shape(0)
    begins, ends = [0] * len(shape), [0] * len(shape)
    for axis, size in _crop_pad_axes(shape, [ctx.input_value(0), ctx.input_value(1)], ctx.attrs).items():
        current = shape[axis]
        # The forward kept [start, start + size) (crop) or placed the input at [start, start + current) (pad).
        begin = (current - size) // 2 if size < current else -((size - current) // 2)
        begins[axis], ends[axis] = begin, (current - size) - begin
    grad = apply_op("Pad", (g, int64_constant(begins + ends)), {"mode": "constant"})
    return grad, None
