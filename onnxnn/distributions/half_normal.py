"""``HalfNormal``: the absolute value of a centered normal variable, as ``torch.distributions.HalfNormal``."""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import zeros_like
from ..runtime.tensor import Tensor
from . import constraints
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["HalfNormal"]


class HalfNormal(TransformedDistribution):
    """``Y = |X|`` for ``X ~ Normal(0, scale)``.

    Args:
        scale: scale of the full normal distribution; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> HalfNormal(1.0).log_prob(onnxnn.tensor(0.0))  # twice the standard normal density at 0
        tensor(-0.2258)
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base_dist: Normal

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        # The half-normal validates scale itself (its message names it), so the base does not.
        base_dist = Normal(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> HalfNormal:
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value: Tensor) -> Tensor:
        """The normal's log-density doubled (both pre-images of ``|x|``), ``-inf`` below 0."""
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return _ops.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
