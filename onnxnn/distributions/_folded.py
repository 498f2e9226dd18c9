"""``|X|`` for ``X`` centered on 0 in a symmetric family: what HalfNormal and HalfCauchy share."""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import zeros_like
from ..runtime.tensor import Tensor
from . import constraints
from .cauchy import Cauchy
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["FoldedAtZero"]


class FoldedAtZero(TransformedDistribution):
    """``Y = |X|`` for ``X = base_family(0, scale)``, symmetric about 0: ``Y``'s density is twice
    ``X``'s on ``[0, inf)``, its cdf ``2 F(y) - 1``, its entropy ``X``'s less ``log 2``.

    Subclasses name ``base_family`` (Normal or Cauchy) and give the moments.
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base_family: type[Normal] | type[Cauchy]
    base_dist: Normal | Cauchy

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        # The folded distribution validates scale itself (its message names it), so the base does not.
        base_dist = self.base_family(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.scale)

    def log_prob(self, value: Tensor) -> Tensor:
        """The base log-density doubled (both pre-images of ``|x|``), ``-inf`` below 0."""
        if self._validate_args:
            self._validate_sample(value)
        return self._folded_log_prob(value)

    def _folded_log_prob(self, value: Tensor) -> Tensor:
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
