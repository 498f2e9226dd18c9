"""Fold and Unfold: col2im and im2col as layers (PyTorch's ``torch.nn.Fold``/``Unfold``)."""

from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["Fold", "Unfold"]


class Fold(Module):
    """Combines an array of sliding local blocks into a tensor, summing overlapping values (col2im).

    Args:
        output_size: the spatial shape ``(H, W)`` of the output.
        kernel_size: the size of the blocks.
        dilation, padding, stride: as in :class:`Unfold`. Defaults: 1, 0, 1.

    Input ``(N, C * prod(kernel_size), L)`` or ``(C * prod(kernel_size), L)``; output ``(N, C, H, W)``.

    Example::

        >>> nn.Fold(output_size=(4, 5), kernel_size=(2, 2))(onnxnn.randn(1, 3 * 2 * 2, 12)).shape
        onnxnn.Size([1, 3, 4, 5])
    """

    __constants__ = ["output_size", "kernel_size", "dilation", "padding", "stride"]

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            "output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
            "stride={stride}".format(**self.__dict__)
        )


class Unfold(Module):
    """Extracts sliding local blocks from a batched input (im2col).

    Args:
        kernel_size: the size of the blocks.
        dilation: spacing between block elements. Default: 1.
        padding: implicit zero padding on both sides. Default: 0.
        stride: the step between blocks. Default: 1.

    Input ``(N, C, H, W)`` or ``(C, H, W)``; output ``(N, C * prod(kernel_size), L)``.

    Example::

        >>> nn.Unfold(kernel_size=(2, 3))(onnxnn.randn(2, 5, 3, 4)).shape
        onnxnn.Size([2, 30, 4])
    """

    __constants__ = ["kernel_size", "dilation", "padding", "stride"]

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return "kernel_size={kernel_size}, dilation={dilation}, padding={padding}, stride={stride}".format(
            **self.__dict__
        )
