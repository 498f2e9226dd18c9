"""Dropout layers: Dropout, Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout."""

from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


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


class Dropout1d(_DropoutNd):
    """In training, zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``, scaling the rest.

    Args:
        p: probability of a channel being zeroed. Default: 0.5.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """In training, zeroes whole channels of ``(N, C, H, W)`` with probability ``p``, scaling the rest.

    Args:
        p: probability of a channel being zeroed. Default: 0.5.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """In training, zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability ``p``.

    Args:
        p: probability of a channel being zeroed. Default: 0.5.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: keeps the input's mean and variance (see :func:`~onnxnn.nn.functional.alpha_dropout`).

    Args:
        p: probability of an element being dropped. Default: 0.5.
        inplace: accepted for PyTorch's signature; like PyTorch's, the module computes out of place.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels (dim 1).

    Args:
        p: probability of a channel being dropped. Default: 0.5.
        inplace: accepted for PyTorch's signature; like PyTorch's, the module computes out of place.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training)
