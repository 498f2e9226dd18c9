"""``HalfNormal``: the absolute value of a centered normal variable, as ``torch.distributions.HalfNormal``."""

from __future__ import annotations

import math

from ..runtime.tensor import Tensor
from ._folded import FoldedAtZero
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(FoldedAtZero):
    """``Y = |X|`` for ``X ~ Normal(0, scale)``.

    Args:
        scale: scale of the full normal distribution; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> HalfNormal(1.0).log_prob(onnxnn.tensor(0.0))  # twice the standard normal density at 0
        tensor(-0.2258)
    """

    base_family = Normal
    base_dist: Normal

    def expand(self, batch_shape, _instance=None) -> HalfNormal:
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)
