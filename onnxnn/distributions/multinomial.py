"""``Multinomial``: category counts of ``total_count`` draws, as ``torch.distributions.Multinomial``."""

from __future__ import annotations

import math

from ..nn import functional as F
from ..runtime import ops as _ops
from ..runtime.creation import tensor
from ..runtime.tensor import Size, Tensor
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import _as_size, broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """Vectors of counts over ``K = probs.size(-1)`` categories from ``total_count`` independent
    :class:`Categorical` draws.

    ``probs`` (non-negative, finite, with a non-zero sum) and ``logits`` (unnormalized
    log-probabilities) are normalized over their last dimension as :class:`Categorical` does; the
    leading dimensions are the batch. ``sample`` draws with the one ``total_count``; ``log_prob``
    takes the count from each value's sum, so it scores any total (``total_count`` may then be left
    at its default).

    Args:
        total_count: number of trials, a Python int.
        probs: event probabilities (give this or ``logits``, not both).
        logits: event log-probabilities (unnormalized).
        validate_args: whether to validate the arguments.

    Raises:
        NotImplementedError: ``total_count`` is not an int (per-element counts are not supported).

    Example::

        >>> m = Multinomial(4, onnxnn.tensor([0.5, 0.5]))
        >>> m.log_prob(onnxnn.tensor([2.0, 2.0]))  # log(6 / 16)
        tensor(-0.9808)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    total_count: int

    def __init__(
        self,
        total_count: int = 1,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Multinomial:
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def logits(self) -> Tensor:
        """The normalized log-probabilities."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """The normalized probabilities."""
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()) -> Tensor:
        sample_shape = _as_size(sample_shape)
        # One category per trial along a leading dimension, one-hot encoded and counted.
        categories = self._categorical.sample(Size((self.total_count,) + tuple(sample_shape)))
        counts = F.one_hot(categories, self._categorical._num_events).sum(0)
        return counts.to(self.probs.dtype).reshape(tuple(self._extended_shape(sample_shape)))

    def entropy(self) -> Tensor:
        # H = n H(categorical) - log n! + sum_i E[log x_i!], each x_i ~ Binomial(n, p_i).
        n = self.total_count
        probs = self.probs
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        binomial = Binomial(tensor(float(n), dtype=probs.dtype), probs=probs, validate_args=False)
        counts = binomial.enumerate_support(expand=False)[1:]
        weights = (counts + 1).lgamma()
        term2 = (binomial.log_prob(counts).exp() * weights).sum((0, -1))
        return term1 + term2

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        # A zero-probability category (logit -inf) counted zero times contributes 0, not -inf * 0.
        logits = _ops.where((value == 0) & (logits == -math.inf), 0.0, logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
