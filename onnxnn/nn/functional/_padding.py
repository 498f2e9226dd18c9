"""``pad``: constant, reflect, replicate and circular padding of the trailing dimensions.

Constant padding is one ONNX ``Pad`` node (negative pads crop; its gradient rule pads by the negated
pads). The other modes crop their negative pads with ``Slice`` first (PyTorch's result, checked for
all three modes) and then pad as ``pad_for_conv`` does: reflect and replicate as one ``Pad`` node,
circular as ``Slice``/``Concat``.
"""

from __future__ import annotations

from typing import Sequence

from ...runtime import ops as _ops
from ...runtime.ops.padding import pad_constant
from ...runtime.tensor import Tensor, outside_autocast
from ._conv import pad_for_conv

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Pads the trailing dimensions of ``input``.

    Args:
        input: the tensor to pad.
        pad: pairs ``(begin, end)`` starting from the last dimension and moving forward:
            ``(left, right)`` pads the last dimension, ``(left, right, top, bottom)`` the last two, ...
            Negative values crop.
        mode: ``'constant'``, ``'reflect'``, ``'replicate'`` or ``'circular'``. Default: ``'constant'``.
        value: the fill value of constant padding. Default: ``0``.

    The non-constant modes pad the last 1, 2 or 3 dimensions of a 2D-3D, 3D-4D or 4D-5D input, as
    PyTorch's do.

    Example::

        >>> F.pad(onnxnn.ones(1, 2), (1, 1)).tolist()
        [[0.0, 1.0, 1.0, 0.0]]
    """
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError(
            f"Padding length should be less than or equal to two times the input dimension but got "
            f"padding length {len(pad)} and input of dimension {input.dim()}"
        )
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode == "constant":
        return _pad_constant(input, pad, 0.0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    spatial = len(pad) // 2
    if not (spatial + 1 <= input.dim() <= spatial + 2) or spatial > 3:
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    batched = input.dim() == spatial + 2
    if mode in ("reflect", "replicate") and 0 in input.shape[1 if batched else 0 :]:
        raise RuntimeError(
            f"Expected {spatial + 1}D or {spatial + 2}D (batch mode) tensor with possibly 0 batch size and other "
            f"non-zero dimensions for input, but got: {list(input.shape)}"
        )
    cropped = input
    for i in range(spatial):
        axis = input.dim() - 1 - i
        begin, end = max(-pad[2 * i], 0), max(-pad[2 * i + 1], 0)
        if begin or end:
            size = cropped.shape[axis]
            if begin + end > size:
                raise RuntimeError(
                    f"The input size {size}, plus negative padding {-begin} and {-end} resulted in a "
                    f"negative output size, which is invalid. Check dimension {axis} of your input."
                )
            cropped = _ops.narrow(cropped, axis, begin, size - begin - end)
    positive = [max(p, 0) for p in pad]
    if not any(positive):
        # A new tensor even when nothing changes, as PyTorch returns: writing into it leaves the input alone.
        return _ops.clone(cropped) if cropped is input else cropped
    if (mode, spatial) in _FLOAT32_UNDER_AUTOCAST:
        return _FLOAT32_UNDER_AUTOCAST[mode, spatial](cropped, positive, mode)
    return pad_for_conv(cropped, positive, mode)


# PyTorch's CPU autocast lists reflection_pad1d/2d and replication_pad1d/2d/3d as float32 ops.
_FLOAT32_UNDER_AUTOCAST = {
    (mode, spatial): outside_autocast(f"{'reflection' if mode == 'reflect' else 'replication'}_pad{spatial}d")(
        pad_for_conv
    )
    for mode, spatial in (("reflect", 1), ("reflect", 2), ("replicate", 1), ("replicate", 2), ("replicate", 3))
}


def _pad_constant(input: Tensor, pad: list[int], value: float) -> Tensor:
    rank = input.dim()
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
        size = input.shape[axis] + begins[axis] + ends[axis]
        if size < 0:
            raise RuntimeError(
                f"The input size {input.shape[axis]}, plus negative padding {begins[axis]} and "
                f"{ends[axis]} resulted in a negative output size, which is invalid. Check "
                f"dimension {axis} of your input."
            )
    return pad_constant(input, begins + ends, value)
