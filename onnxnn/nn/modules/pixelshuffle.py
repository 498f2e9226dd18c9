"""PixelShuffle and PixelUnshuffle: moving channels into space and back (sub-pixel convolution)."""

from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """Rearranges ``(*, C r^2, H, W)`` into ``(*, C, H r, W r)``.

    Args:
        upscale_factor: ``r``, the factor by which height and width grow.

    Example::

        >>> nn.PixelShuffle(3)(onnxnn.randn(1, 9, 4, 4)).shape
        onnxnn.Size([1, 1, 12, 12])
    """

    __constants__ = ["upscale_factor"]
    upscale_factor: int

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """Rearranges ``(*, C, H r, W r)`` into ``(*, C r^2, H, W)``, the inverse of :class:`PixelShuffle`.

    Args:
        downscale_factor: ``r``, the factor by which height and width shrink.

    Example::

        >>> nn.PixelUnshuffle(3)(onnxnn.randn(1, 1, 12, 12)).shape
        onnxnn.Size([1, 9, 4, 4])
    """

    __constants__ = ["downscale_factor"]
    downscale_factor: int

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
