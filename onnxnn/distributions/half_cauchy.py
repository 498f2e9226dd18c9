"""``HalfCauchy``: the absolute value of a centered Cauchy variable, as ``torch.distributions.HalfCauchy``."""

from __future__ import annotations

import math

from ..runtime.creation import full, tensor
from ..runtime.tensor import Tensor
from ._folded import FoldedAtZero
from .cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(FoldedAtZero):
    """``Y = |X|`` for ``X ~ Cauchy(0, scale)``.

    Args:
        scale: scale of the full Cauchy distribution; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> HalfCauchy(1.0).cdf(onnxnn.tensor(1.0))
        tensor(0.5000)
    """

    base_family = Cauchy
    base_dist: Cauchy

    def expand(self, batch_shape, _instance=None) -> HalfCauchy:
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

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
        return self._folded_log_prob(value)
