"""Pad: constant, reflect and edge padding as one ONNX ``Pad`` node each, with their gradients.

The gradient of a padding is the sum, into each input element, of the output elements that copy
it. Per padded axis (a joint ``Pad`` is the composition of per-axis pads, so its adjoint is the
composition of per-axis adjoints): the centre of the output gradient is the input's own part;
the borders fold back onto the input, mirrored (reflect), summed into the edge element (edge)
or onto the other end (wrap), each added through a zero ``Pad`` placing it at its offset.
"""

from __future__ import annotations

import numpy as np

from ...ir.registry import gradient_rules, shape_rules
from ._common import Tensor, apply_op, int64_constant, normalize_axes
from .shape import _constant_list

__all__ = ["pad_constant", "pad_mode"]

_BIG = np.iinfo(np.int64).max


@shape_rules.register("Pad")
def _pad_shape(inputs, attrs):
    shape = list(inputs[0].shape)
    pads = _constant_list(inputs[1])
    axes = (
        normalize_axes(_constant_list(inputs[3]), len(shape))
        if len(inputs) > 3 and inputs[3] is not None
        else list(range(len(shape)))
    )
    for position, axis in enumerate(axes):
        shape[axis] += pads[position] + pads[position + len(axes)]
    return [(tuple(shape), inputs[0].dtype)]


@gradient_rules.register("Pad")
def _pad_grad(ctx, g):
    mode = ctx.attrs.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    shape = ctx.input_shape(0)
    pads = _constant_list(ctx.input_value(1))
    axes = (
        normalize_axes(_constant_list(ctx.input_value(3)), len(shape))
        if ctx.num_inputs > 3 and ctx.input_value(3) is not None
        else list(range(len(shape)))
    )
    nones = (None,) * (ctx.num_inputs - 1)
    if mode == "constant":
        # Padding by the negated pads crops what was added and zero-fills what negative pads cropped.
        cropped = apply_op(
            "Pad", (g, int64_constant([-pad for pad in pads]), None, int64_constant(axes)), {"mode": "constant"}
        )
        return (cropped,) + nones
    if mode not in _FOLD_BORDERS:
        raise NotImplementedError(f"gradient of Pad with mode '{mode}'")
    if any(pad < 0 for pad in pads):
        raise NotImplementedError(f"gradient of Pad with mode '{mode}' and negative pads {pads}")
    for position, axis in enumerate(axes):
        begin, end = pads[position], pads[position + len(axes)]
        if begin or end:
            g = _fold_axis(g, axis, shape[axis], begin, end, _FOLD_BORDERS[mode])
    return (g,) + nones


def _slice(x: Tensor, axis: int, start: int, end: int, step: int = 1) -> Tensor:
    return apply_op(
        "Slice", (x, int64_constant([start]), int64_constant([end]), int64_constant([axis]), int64_constant([step]))
    )


def _added_at(total: Tensor, piece: Tensor, axis: int, offset: int) -> Tensor:
    """``total`` plus ``piece`` placed along ``axis`` from ``offset`` (zero-padded to ``total``'s length)."""
    after = total.shape[axis] - offset - piece.shape[axis]
    if offset or after:
        pads = [0] * (2 * piece.dim())
        pads[axis], pads[piece.dim() + axis] = offset, after
        piece = apply_op("Pad", (piece, int64_constant(pads)), {"mode": "constant"})
    return total + piece


def _fold_axis(g: Tensor, axis: int, size: int, begin: int, end: int, fold) -> Tensor:
    """The adjoint of padding one axis of length ``size`` by ``(begin, end)``."""
    result = _slice(g, axis, begin, begin + size)
    if begin:
        piece, offset = fold(_slice(g, axis, 0, begin), axis, size, at_end=False)
        result = _added_at(result, piece, axis, offset)
    if end:
        piece, offset = fold(_slice(g, axis, begin + size, begin + size + end), axis, size, at_end=True)
        result = _added_at(result, piece, axis, offset)
    return result


def _fold_reflect(border: Tensor, axis: int, size: int, at_end: bool) -> tuple[Tensor, int]:
    # The begin border copies input positions width..1, the end border size-2..size-1-width.
    width = border.shape[axis]
    mirrored = _slice(border, axis, -1, -_BIG, -1)
    return mirrored, (size - 1 - width if at_end else 1)


def _fold_edge(border: Tensor, axis: int, size: int, at_end: bool) -> tuple[Tensor, int]:
    return border.sum(axis, keepdim=True), (size - 1 if at_end else 0)


def _fold_wrap(border: Tensor, axis: int, size: int, at_end: bool) -> tuple[Tensor, int]:
    # The begin border copies the last positions in order, the end border the first ones.
    return border, (0 if at_end else size - border.shape[axis])


_FOLD_BORDERS = {"reflect": _fold_reflect, "edge": _fold_edge, "wrap": _fold_wrap}


def pad_constant(input: Tensor, pads: list[int], value: float = 0.0) -> Tensor:
    """ONNX-ordered pads (all begins, then all ends) with a constant fill."""
    fill = Tensor._full((), value, input.dtype, input.device)
    return apply_op("Pad", (input, int64_constant(pads), fill), {"mode": "constant"}, "ConstantPadNdBackward0")


def pad_mode(input: Tensor, pads: list[int], mode: str) -> Tensor:
    """ONNX-ordered non-negative pads in ONNX ``Pad``'s ``mode`` ``"reflect"`` or ``"edge"``.

    (``"wrap"`` needs opset 19, above the lowest opset onnxnn exports to; circular padding is
    recorded as ``Slice``/``Concat`` instead.)
    """
    padded_axes = sum(1 for begin, end in zip(pads[: input.dim()], pads[input.dim() :]) if begin or end)
    family = {"reflect": "Reflection", "edge": "Replication"}[mode]
    return apply_op("Pad", (input, int64_constant(pads)), {"mode": mode}, f"{family}Pad{max(padded_axes, 1)}DBackward0")
