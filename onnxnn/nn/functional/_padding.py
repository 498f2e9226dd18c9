"""``pad``: constant, reflect, replicate and circular padding of the trailing dimensions.

Constant padding is one ONNX ``Pad`` node (negative pads crop; its gradient rule pads by the negated
pads). Reflect and replicate pad their positive pads first (one ``Pad`` node, as ``pad_for_conv``)
and then crop the negative ones with ``Slice``: PyTorch's kernels index the original input
(``reflect(j - pad_left)``, ``clamp(j - pad_left, 0, W - 1)``), so with mixed signs, ``(2, -2)`` say,
the values reflected are those the crop removes. Circular crops first and then pads with
``Slice``/``Concat``, as PyTorch's ``_pad_circular`` copies from the cropped input.
"""

from __future__ import annotations

from typing import Sequence

from ...ir import dtypes
from ...runtime import ops as _ops
from ...runtime.ops._common import check_floating
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
    if mode == "circular":
        return _pad_circular(input, pad)
    _check_reflect_replicate(input, pad, mode)
    if input.dtype is dtypes.bool:  # PyTorch's reflection and replication kernels have no bool case
        check_floating(input, f"{'reflection' if mode == 'reflect' else 'replication'}_pad{spatial}d")
    positive = [max(p, 0) for p in pad]
    result = input
    if any(positive):
        if (mode, spatial) in _FLOAT32_UNDER_AUTOCAST:
            result = _FLOAT32_UNDER_AUTOCAST[mode, spatial](input, positive, mode)
        else:
            result = pad_for_conv(input, positive, mode)
    result = _crop(result, pad)
    # A new tensor even when nothing changes, as PyTorch returns: writing into it leaves the input alone.
    return _ops.clone(result) if result is input else result


def _crop(input: Tensor, pad: list[int]) -> Tensor:
    """``input`` without the elements its negative pads remove (``(begin, end)`` pairs, last dim first)."""
    result = input
    for i in range(len(pad) // 2):
        axis = input.dim() - 1 - i
        begin, end = max(-pad[2 * i], 0), max(-pad[2 * i + 1], 0)
        if begin or end:
            result = _ops.narrow(result, axis, begin, result.shape[axis] - begin - end)
    return result


def _check_reflect_replicate(input: Tensor, pad: list[int], mode: str) -> None:
    """PyTorch's checks of reflection_pad{1,2,3}d and replication_pad{1,2,3}d, on the original sizes."""
    spatial = len(pad) // 2
    axes = [input.dim() - 1 - i for i in range(spatial)]  # W, H, D
    sizes = [input.shape[axis] for axis in axes]
    if mode == "reflect":
        for i, (axis, size) in enumerate(zip(axes, sizes)):
            begin, end = pad[2 * i], pad[2 * i + 1]
            if begin >= size or end >= size:
                raise RuntimeError(
                    f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding input dimension, "
                    f"but got: padding ({begin}, {end}) at dimension {axis} of input {list(input.shape)}"
                )
    outputs = [size + pad[2 * i] + pad[2 * i + 1] for i, size in enumerate(sizes)]
    # PyTorch refuses only when every padded dimension ends up empty; its wording (spacing included).
    if all(output < 1 for output in outputs):
        if spatial == 1:
            sizes_text, outputs_text = f"W: {sizes[0]}", f"W: {outputs[0]}"
        elif spatial == 2:
            sizes_text = f"H: {sizes[1]}, W: {sizes[0]}" + (" " if mode == "replicate" else "")
            outputs_text = f"H: {outputs[1]} W: {outputs[0]}"
        else:
            sizes_text = f"D: {sizes[2]} H: {sizes[1]}, W: {sizes[0]}"
            outputs_text = f"D: {outputs[2]} H: {outputs[1]} W: {outputs[0]}"
        raise RuntimeError(f"input ({sizes_text}) is too small. Calculated output {outputs_text}")
    if any(output < 0 for output in outputs):
        shape = list(input.shape)
        for axis, output in zip(axes, outputs):
            shape[axis] = output
        negative = next(output for output in reversed(outputs) if output < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative}: {shape}")


def _pad_circular(input: Tensor, pad: list[int]) -> Tensor:
    """Circular padding of the input cropped by the negative pads (PyTorch wraps the cropped values)."""
    cropped = input
    for i in range(len(pad) // 2):
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
        return _ops.clone(cropped) if cropped is input else cropped
    return pad_for_conv(cropped, positive, "circular")


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
    for i in reversed(range(len(pad) // 2)):  # outermost padded dimension first, as PyTorch checks them
        axis = rank - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
        # PyTorch narrows the negative pads away one after the other (left, then right), so a crop
        # longer than what is left fails there even when positive padding would refill the dimension.
        size = input.shape[axis]
        left = max(-begins[axis], 0)
        if left > size or max(-ends[axis], 0) > size - left:
            raise RuntimeError(
                f"narrow(): length must be non-negative. (Padding ({begins[axis]}, {ends[axis]}) of dimension "
                f"{axis} crops more than its size {size}.)"
            )
    return pad_constant(input, begins + ends, value)
