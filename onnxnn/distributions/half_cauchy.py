"""``HalfCauchy``: the absolute value of a centered Cauchy variable, as ``torch.distributions.HalfCauchy``."""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import full, tensor, zeros_like
from ..runtime.tensor import Tensor
from . import constraints
from .cauchy import Cauchy
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["HalfCauchy"]


class HalfCauchy(TransformedDistribution):
    """``Y = |X|`` for ``X ~ Cauchy(0, scale)``.

    Args:
        scale: scale of the full Cauchy distribution; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> HalfCauchy(1.0).cdf(onnxnn.tensor(1.0))
        tensor(0.5000)
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base_dist: Cauchy

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        # The half-Cauchy validates scale itself (its message names it), so the base does not.
        base_dist = Cauchy(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> HalfCauchy:
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def log_prob(self, value: Tensor | float) -> Tensor:  # type: ignore[override]
        """The Cauchy log-density doubled (both pre-images of ``|x|``), ``-inf`` below 0.

        Without validation ``value`` may be a number, as in PyTorch (it becomes a tensor of the
        scale's dtype).
        """
        if self._validate_args:
            self._validate_sample(value)  # type: ignore[arg-type]
        scale = self.base_dist.scale
        if isinstance(value, Tensor):
            value = value.to(scale.dtype)
        else:
            value = tensor(value, dtype=scale.dtype, device=scale.device)
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
