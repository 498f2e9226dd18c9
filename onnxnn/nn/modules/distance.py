"""Distance layers: PairwiseDistance (TripletMarginWithDistanceLoss's default distance)."""
from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["PairwiseDistance"]


class PairwiseDistance(Module):
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension.

    Args:
        p: the norm degree. Default: ``2.0``.
        eps: added to the difference, so the norm's gradient stays finite. Default: ``1e-6``.
        keepdim: keep the reduced dimension. Default: ``False``.

    Example::

        >>> nn.PairwiseDistance()(onnxnn.randn(100, 128), onnxnn.randn(100, 128)).shape
        onnxnn.Size([100])
    """

    __constants__ = ["norm", "eps", "keepdim"]
    norm: float
    eps: float
    keepdim: bool

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
