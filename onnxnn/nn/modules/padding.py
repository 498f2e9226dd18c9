"""Padding layers: ConstantPad, ZeroPad, ReflectionPad, ReplicationPad and CircularPad in 1, 2 and 3 d.

Each stores ``padding`` as PyTorch does (a tuple of 2, 4 or 6 ints, from the last dimension
forward) and calls ``F.pad``; the 1/2/3d variants differ in the padding's length and, for the
non-constant modes, the input ranks they accept.
"""

from __future__ import annotations

from typing import Sequence

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = [
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
]


def _ntuple(padding, count: int) -> tuple:
    if isinstance(padding, (tuple, list)):
        if len(padding) != count:
            raise ValueError(f"padding must be an int or a tuple of {count} ints, got {tuple(padding)}")
        return tuple(padding)
    return (padding,) * count


class _PadNd(Module):
    """The shared part: ``padding`` of ``2 * spatial`` ints and the pad mode."""

    __constants__ = ["padding"]
    padding: Sequence[int]
    _mode = "constant"
    _spatial = 1

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._spatial)

    def _check_input_dim(self, input: Tensor) -> None:
        low = self._spatial + 1
        if input.dim() not in (low, low + 1):
            raise ValueError(f"expected {low}D or {low + 1}D input (got {input.dim()}D input)")

    def forward(self, input: Tensor) -> Tensor:
        if self._mode == "circular":  # PyTorch checks the rank only for circular padding
            self._check_input_dim(input)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    __constants__ = ["padding", "value"]
    value: float

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


def _doc(kind: str, spatial: int, extra: str = "") -> str:
    names = ["(left, right)", "(left, right, top, bottom)", "(left, right, top, bottom, front, back)"][spatial - 1]
    return (
        f"Pads the last {spatial} dimension(s) with {kind}.\n\n    Args:\n        padding: an int for every side, "
        f"or a {2 * spatial}-tuple {names}.{extra}\n"
    )


class ConstantPad1d(_ConstantPadNd):
    __doc__ = _doc("a constant", 1, "\n        value: the fill value.")
    _spatial = 1


class ConstantPad2d(_ConstantPadNd):
    __doc__ = _doc("a constant", 2, "\n        value: the fill value.")
    _spatial = 2


class ConstantPad3d(_ConstantPadNd):
    __doc__ = _doc("a constant", 3, "\n        value: the fill value.")
    _spatial = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    __doc__ = _doc("zeros", 1)
    _spatial = 1


class ZeroPad2d(_ZeroPadNd):
    __doc__ = _doc("zeros", 2)
    _spatial = 2


class ZeroPad3d(_ZeroPadNd):
    __doc__ = _doc("zeros", 3)
    _spatial = 3


class ReflectionPad1d(_PadNd):
    __doc__ = _doc("the reflection of the input (the edge not repeated)", 1)
    _mode, _spatial = "reflect", 1


class ReflectionPad2d(_PadNd):
    __doc__ = _doc("the reflection of the input (the edge not repeated)", 2)
    _mode, _spatial = "reflect", 2


class ReflectionPad3d(_PadNd):
    __doc__ = _doc("the reflection of the input (the edge not repeated)", 3)
    _mode, _spatial = "reflect", 3


class ReplicationPad1d(_PadNd):
    __doc__ = _doc("copies of the edge", 1)
    _mode, _spatial = "replicate", 1


class ReplicationPad2d(_PadNd):
    __doc__ = _doc("copies of the edge", 2)
    _mode, _spatial = "replicate", 2


class ReplicationPad3d(_PadNd):
    __doc__ = _doc("copies of the edge", 3)
    _mode, _spatial = "replicate", 3


class CircularPad1d(_PadNd):
    __doc__ = _doc("the other end of the input (wrapping around)", 1)
    _mode, _spatial = "circular", 1


class CircularPad2d(_PadNd):
    __doc__ = _doc("the other end of the input (wrapping around)", 2)
    _mode, _spatial = "circular", 2


class CircularPad3d(_PadNd):
    __doc__ = _doc("the other end of the input (wrapping around)", 3)
    _mode, _spatial = "circular", 3
