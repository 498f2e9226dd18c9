"""``NegativeBinomial``: successes before ``total_count`` failures, as ``torch.distributions.NegativeBinomial``."""

from __future__ import annotations

from ..nn import functional as F
from ..runtime import ops as _ops
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._trials import TrialsWithSuccessProbability
from .gamma import Gamma
from .utils import lazy_property

__all__ = ["NegativeBinomial"]


class NegativeBinomial(TrialsWithSuccessProbability):
    """The number of successes of independent trials of success probability ``probs`` before
    ``total_count`` failures: ``k`` with probability ``C(k + r - 1, k) (1 - p)^r p^k``.

    ``total_count`` may be any nonnegative real (the pmf's gamma functions take it); draws are
    Poisson counts at a gamma-distributed rate (the gamma-Poisson mixture), so sampling reads the
    drawn rates (see :func:`onnxnn.poisson`).

    Args:
        total_count: number of failures to stop at; nonnegative (as a number or tensor).
        probs: success probability of each trial, in ``[0, 1)`` (give this or ``logits``, not both).
        logits: success log-odds.
        validate_args: whether to validate the arguments.

    Example::

        >>> NegativeBinomial(2, onnxnn.tensor([0.5])).log_prob(onnxnn.tensor([1.0]))  # log(2 / 8)
        tensor([-1.3863])
    """

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def expand(self, batch_shape, _instance=None) -> NegativeBinomial:
        return self._expanded(NegativeBinomial, batch_shape, _instance)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.logits.exp()

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / _ops.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self) -> Gamma:
        # The mixing distribution of the Poisson rate: shape r, scale p / (1 - p) = exp(logits).
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape=Size()) -> Tensor:
        with no_grad():
            rate = self._gamma.sample(sample_shape)
            return _ops.poisson(rate)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized = self.total_count * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        log_normalization = -(self.total_count + value).lgamma() + (1.0 + value).lgamma() + self.total_count.lgamma()
        # r = k = 0 is the certain count 0 (r = 0 stops at once): lgamma(0) terms there cancel to 0.
        return _ops.where(self.total_count + value == 0.0, log_unnormalized, log_unnormalized - log_normalization)
