"""Dropout layer."""
from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["Dropout"]


class _DropoutNd(Module):
    __constants__ = ["p", "inplace"]

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training, zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    In evaluation (``module.eval()``) it returns its input. Masks come from onnxnn's generator.

    Args:
        p: probability of an element being zeroed. Default: 0.5.
        inplace: rebind the input tensor to the result. Default: ``False``.

    Example::

        >>> m = nn.Dropout(p=0.2)
        >>> m(onnxnn.randn(20, 16)).shape
        onnxnn.Size([20, 16])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)
