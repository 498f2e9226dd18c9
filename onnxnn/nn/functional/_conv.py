"""Convolutions: ``conv*d``, ``conv_transpose*d``, ``unfold``/``fold`` and the padding modes of the conv layers.

The convolutions themselves live in ``runtime/ops/conv.py`` (one ``Conv``/``ConvTranspose`` node
each, with their shape and gradient rules); this module re-exports them and adds what the layers
need around them.

``pad_for_conv`` pads the spatial axes in the non-zero modes of ``Conv*d(padding_mode=...)``:
reflect and replicate as one ONNX ``Pad`` node (modes ``reflect``/``edge``), circular as ``Slice``
and ``Concat`` (``Pad``'s ``wrap`` mode needs opset 19, above the lowest opset onnxnn exports).

``unfold`` and ``fold`` are ``runtime/ops/columns.py``'s ``im2col`` (a strided Slice per kernel tap) and
its adjoint ``col2im`` (ONNX ``Col2Im`` in float32, a scatter-add in the other dtypes).
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...runtime import ops as _ops
from ...runtime.ops.conv import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    expand_param,
)
from ...runtime.ops._common import check_floating
from ...runtime.ops.columns import col2im, im2col
from ...runtime.tensor import Tensor, outside_autocast

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "conv_tbc",
    "unfold",
    "fold",
    "pad_for_conv",
]

_PADDING_MODES = ("reflect", "replicate", "circular")
# ONNX Pad's wrap mode needs opset 19, above the lowest opset onnxnn exports: circular is Slice/Concat.
_ONNX_PAD_MODES = {"reflect": "reflect", "replicate": "edge"}


def pad_for_conv(input: Tensor, pad: list[int], mode: str) -> Tensor:
    """Pads the trailing axes of ``input`` as ``F.pad(input, pad, mode)`` does for reflect/replicate/circular.

    ``pad`` is in PyTorch's order: (last axis begin, last axis end, second-to-last begin, ...).
    """
    if mode not in _PADDING_MODES:
        raise ValueError(f"pad_for_conv: mode must be one of {_PADDING_MODES}, got '{mode}'")
    if len(pad) % 2 or len(pad) // 2 > input.dim():
        raise RuntimeError(
            f"Padding length must be divisible by 2 and at most twice the input's rank {input.dim()}, got {len(pad)}"
        )
    rank = input.dim()
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        begin, end = int(pad[2 * i]), int(pad[2 * i + 1])
        size = input.shape[axis]
        if mode == "reflect" and (begin >= size or end >= size):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input dimension, "
                f"but got: padding ({begin}, {end}) at dimension {axis} of input "
                f"{list(input.shape)}"
            )
        if mode == "circular" and (begin > size or end > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if begin < 0 or end < 0:
            raise RuntimeError(f"pad_for_conv: negative padding ({begin}, {end}) is not supported in mode '{mode}'")
        begins[axis], ends[axis] = begin, end
    if mode != "circular":
        return _ops.pad_mode(input, begins + ends, _ONNX_PAD_MODES[mode])
    result = input
    for axis in range(rank):
        begin, end = begins[axis], ends[axis]
        if begin or end:
            size = input.shape[axis]
            pieces = [_ops.narrow(result, axis, size - begin, begin)] if begin else []
            pieces.append(result)
            if end:
                pieces.append(_ops.narrow(result, axis, 0, end))
            result = _ops.cat(pieces, axis)
    return result


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-D convolution over time-major sequences: ``(T, B, C_in)`` -> ``(T_out, B, C_out)``.

    Args:
        input: ``(time, batch, in_channels)``.
        weight: ``(kernel width, in_channels, out_channels)``.
        bias: ``(out_channels)``.
        pad: time steps of zero padding on both sides. Default: 0.

    Recorded as :func:`conv1d` between transposes.
    """
    if input.dim() != 3:
        raise RuntimeError(f"Input must have 3 dims: time, batch, in_channel, got {input.dim()}")
    if weight.dim() != 3:
        raise RuntimeError(
            f"Weight tensor must have 3 dims: kernel_width, in_channels, out_channels, got {weight.dim()}"
        )
    if bias.dim() != 1:
        raise RuntimeError(f"Bias must be 1-D, got {bias.dim()} dims")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError(
            f"Input dim 2 (input channels) is not == dim 1 in the weight tensor: {input.shape[2]} vs {weight.shape[1]}"
        )
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError(
            f"Bias size must equal dim 2 in the weight tensor (output channels): {bias.shape[0]} vs {weight.shape[2]}"
        )
    output = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return output.permute(2, 0, 1)


# ---------------------------------------------------------------- unfold / fold


def _fold_arguments(function: str, kernel_size, dilation, padding, stride):
    values = []
    for name, value in (("kernel_size", kernel_size), ("dilation", dilation), ("padding", padding), ("stride", stride)):
        values.append(expand_param(value, 2, name, function))
    kernel, dilations, pads, strides = values
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{function}: expected kernel_size to be greater than zero, but got kernel_size={kernel}")
    if any(d <= 0 for d in dilations):
        raise RuntimeError(f"{function}: expected dilation to be greater than zero, but got dilation={dilations}")
    if any(p < 0 for p in pads):
        raise RuntimeError(f"{function}: expected padding to be non-negative, but got padding={pads}")
    if any(s <= 0 for s in strides):
        raise RuntimeError(f"{function}: expected stride to be greater than zero, but got stride={strides}")
    return kernel, dilations, pads, strides


def _check_block_dtype(input: Tensor, kernel: str) -> None:
    """PyTorch's im2col and col2im kernels take floating and bool tensors only (integers are refused)."""
    if input.dtype is not dtypes.bool:
        check_floating(input, kernel)


@outside_autocast()  # an exact copy in PyTorch (im2col, unlisted)
def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Extracts sliding local blocks (im2col): ``(N, C, H, W)`` -> ``(N, C * kH * kW, L)``.

    Recorded as a strided Slice of the padded image per kernel tap (``ops.columns.im2col``), in PyTorch's
    channel-major ordering ``(c, kh, kw)`` of the block dimension.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``.
        kernel_size, dilation, padding, stride: an int or a pair each.

    Returns:
        ``(N, C * prod(kernel_size), L)``, ``L`` the number of block positions.

    Example::

        >>> unfold(onnxnn.randn(1, 3, 5, 5), 2).shape
        onnxnn.Size([1, 12, 16])
    """
    kernel, dilations, pads, strides = _fold_arguments("im2col", kernel_size, dilation, padding, stride)
    if input.dim() not in (3, 4) or 0 in tuple(input.shape[-3:]):
        raise RuntimeError(
            f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
            f"dimensions for input, but got: {list(input.shape)}"
        )
    added_batch = input.dim() == 3
    x = input.unsqueeze(0) if added_batch else input
    blocks = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, k, d, p, s in zip(x.shape[2:], kernel, dilations, pads, strides)
    ]
    if any(b <= 0 for b in blocks):
        raise RuntimeError(
            f"Given input with spatial size ({x.shape[2]}, {x.shape[3]}), kernel_size=({kernel[0]}, "
            f"{kernel[1]}), dilation=({dilations[0]}, {dilations[1]}), padding=({pads[0]}, {pads[1]}), "
            f"calculated shape of the array of sliding blocks as ({blocks[0]}, {blocks[1]}), but its "
            f"components must be at least one."
        )
    _check_block_dtype(input, "im2col_out_cpu")
    result = im2col(x, kernel, strides, pads, pads, dilations)
    return result.squeeze(0) if added_batch else result


@outside_autocast()  # col2im, unlisted in PyTorch
def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Combines sliding local blocks into a tensor (col2im), summing overlapping values; the adjoint of :func:`unfold`.

    Recorded as a scatter-add of the columns into the padded image (``ops.columns.col2im``), then cropped.

    Args:
        input: ``(N, C * prod(kernel_size), L)`` or unbatched ``(C * prod(kernel_size), L)``.
        output_size: the spatial shape ``(H, W)`` of the result (an int for both).
        kernel_size, dilation, padding, stride: as in :func:`unfold`.

    Returns:
        ``(N, C, H, W)``.

    Example::

        >>> fold(onnxnn.ones(1, 12, 16), (5, 5), 2).shape
        onnxnn.Size([1, 3, 5, 5])
    """
    output = expand_param(output_size, 2, "output_size", "col2im")
    kernel, dilations, pads, strides = _fold_arguments("col2im", kernel_size, dilation, padding, stride)
    if input.dim() not in (2, 3) or 0 in input.shape[input.dim() - 2 :]:  # a 3-D batch may be empty
        raise RuntimeError(
            f"Expected 2D or 3D (batch mode) tensor with possibly 0 batch size and non-zero "
            f"dimensions for input, but got: {list(input.shape)}"
        )
    added_batch = input.dim() == 2
    x = input.unsqueeze(0) if added_batch else input
    taps = int(np.prod(kernel))
    if x.shape[1] % taps:
        raise RuntimeError(
            f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
            f"but got input.size(1)={x.shape[1]} and kernel_size=({kernel[0]}, {kernel[1]})"
        )
    blocks = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, d, p, s in zip(output, kernel, dilations, pads, strides)
    ]
    if blocks[0] < 1 or blocks[1] < 1 or blocks[0] * blocks[1] != x.shape[2]:
        raise RuntimeError(
            f"Given output_size=({output[0]}, {output[1]}), kernel_size=({kernel[0]}, {kernel[1]}), "
            f"dilation=({dilations[0]}, {dilations[1]}), padding=({pads[0]}, {pads[1]}), "
            f"stride=({strides[0]}, {strides[1]}), expected size of input's dimension 2 to match the "
            f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
            f"{blocks[0] * blocks[1]}, but got input.size(2)={x.shape[2]}."
        )
    _check_block_dtype(input, "col2im_out_cpu")
    result = col2im(x, output, kernel, strides, pads, pads, dilations)
    return result.squeeze(0) if added_batch else result
