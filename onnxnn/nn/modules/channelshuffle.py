"""ChannelShuffle: interleaving channel groups (ShuffleNet)."""

from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Splits the channels of ``(N, C, *)`` into ``groups`` groups and interleaves them.

    Args:
        groups: the number of groups; must divide ``C``.

    Example::

        >>> nn.ChannelShuffle(2)(onnxnn.randn(1, 4, 2, 2)).shape
        onnxnn.Size([1, 4, 2, 2])
    """

    __constants__ = ["groups"]
    groups: int

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
