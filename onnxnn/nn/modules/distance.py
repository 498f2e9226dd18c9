"""Distance layers: PairwiseDistance (TripletMarginWithDistanceLoss's default distance) and CosineSimilarity."""

from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["PairwiseDistance", "CosineSimilarity"]


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


class CosineSimilarity(Module):
    """The cosine similarity of ``x1`` and ``x2`` along ``dim``: ``x1 . x2 / (max(|x1|, eps) max(|x2|, eps))``.

    Args:
        dim: the dimension to reduce. Default: ``1``.
        eps: the floor of each norm, avoiding division by zero. Default: ``1e-8``.

    Example::

        >>> nn.CosineSimilarity(dim=1)(onnxnn.randn(100, 128), onnxnn.randn(100, 128)).shape
        onnxnn.Size([100])
    """

    __constants__ = ["dim", "eps"]
    dim: int
    eps: float

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
