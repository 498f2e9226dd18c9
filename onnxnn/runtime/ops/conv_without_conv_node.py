"""Convolutions written without a ``Conv`` node: integer inputs, and inputs without channels.

onnxruntime and onnxnn's kernels have no integer Conv; PyTorch's CPU convolutions take int8, int16,
int32, int64 and uint8 and wrap as their GEMM does. An input without channels gives PyTorch's empty
output, where onnxruntime (1.31) never returns from a padded Conv without channels.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.dtypes import scalar_type_name
from ._common import Tensor, apply_op
from .columns import im2col
from .windows import window_geometry

__all__ = ["INTEGER_CONVOLUTION_DTYPES", "integer_convolution", "convolution_without_channels"]


# The integer dtypes PyTorch's CPU convolutions take (not bool).
INTEGER_CONVOLUTION_DTYPES = frozenset({dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8})


def integer_convolution(input: Tensor, weight: Tensor, bias, attrs) -> Tensor:
    """PyTorch's CPU convolution of integers, wrapping as its GEMM does: the weight as
    ``(group, M/group, C/group * taps)`` times the windows (im2col) as ``(group, C/group * taps, N * L)``,
    in int64, whose wrapped sums are the narrower dtypes' wrapped sums too once cast back. onnxruntime
    and onnxnn's kernels have no integer Conv."""
    geometry = window_geometry(input.shape[2:], weight.shape[2:], attrs)
    if input.dtype is not dtypes.int64 and any(d != 1 for d in geometry.dilations):
        # PyTorch's dilated CPU kernel takes int64 of the integers only.
        raise NotImplementedError(f"\"slow_conv_dilated<>\" not implemented for '{scalar_type_name(input.dtype)}'")
    group, batch, out_channels = int(attrs["group"]), input.shape[0], weight.shape[0]
    rank, positions = len(geometry.output), int(np.prod(geometry.output))
    window_elements = input.shape[1] // group * int(np.prod(geometry.kernel))
    columns = im2col(
        input.to(dtypes.int64),
        geometry.kernel,
        geometry.strides,
        geometry.pads_begin,
        geometry.pads_end,
        geometry.dilations,
        "ConvolutionBackward0",
    )  # (N, C * taps, L)
    # The batch joins the positions: onnxruntime's MatMul cannot broadcast a weight over an empty batch.
    columns = columns.reshape((batch, group, window_elements, positions)).permute([1, 2, 0, 3])
    columns = columns.reshape((group, window_elements, batch * positions))
    rows = weight.to(dtypes.int64).reshape((group, out_channels // group, window_elements))
    result = apply_op("MatMul", (rows, columns), None, "ConvolutionBackward0")  # (group, M/group, N * L)
    result = result.reshape((out_channels, batch, *geometry.output)).permute([1, 0, *range(2, 2 + rank)])
    if bias is not None:
        result = result + bias.to(dtypes.int64).reshape((1, out_channels) + (1,) * rank)
    return result.to(input.dtype)


def convolution_without_channels(input: Tensor, weight: Tensor, bias, attrs) -> Tensor:
    """PyTorch's convolution of an input without channels: ``(N, 0, *out)``, no output channels either,
    whatever the weight's count (its "Empty" backend scales the input by the weight's elements).

    No Conv is recorded: onnxruntime (1.31) never returns from a padded Conv without channels. The
    input, weight and bias take part through empty sums, so each gets a gradient (the bias's zeros)
    as in PyTorch.
    """
    rank = input.dim() - 2
    spatial = list(range(2, 2 + rank))
    output_spatial = window_geometry(input.shape[2:], weight.shape[2:], attrs).output
    result = input.sum(spatial, keepdim=True) + weight.sum([0, *spatial], keepdim=True)  # (N, 0, 1, ...)
    if bias is not None:
        result = result + bias.narrow(0, 0, 0).reshape((1, 0) + (1,) * rank)
    return result.expand((input.shape[0], 0, *output_spatial))
