"""``Categorical``: one of ``K`` categories with probabilities ``probs``, as ``torch.distributions.Categorical``."""

from __future__ import annotations

import math

from ..ir import dtypes
from ..runtime import ops as _ops
from ..runtime.creation import arange, full
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._probabilities import ProbsOrLogits
from .distribution import Distribution
from .utils import _as_size, _finfo

__all__ = ["Categorical"]


class Categorical(ProbsOrLogits, Distribution):
    """Integers in ``{0, ..., K - 1}`` (``K = probs.size(-1)``), as :func:`onnxnn.multinomial` draws them.

    ``probs`` (non-negative, finite, with a non-zero sum) is normalized over its last dimension, and
    ``logits`` (unnormalized log-probabilities) likewise; the attributes hold the normalized values.
    The leading dimensions are the batch.

    Args:
        probs: event probabilities (give this or ``logits``, not both).
        logits: event log-probabilities (unnormalized).
        validate_args: whether to validate the arguments.

    Example::

        >>> m = Categorical(onnxnn.tensor([0.25, 0.25, 0.25, 0.25]))
        >>> m.log_prob(onnxnn.tensor(2))
        tensor(-1.3863)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True
    _binary = False

    def __init__(
        self,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            """The probabilities, normalized over the last dimension (from ``logits`` when those were given)."""
            self._param = self.probs
        else:
            assert logits is not None
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            """The log-probabilities, normalized over the last dimension (from ``probs`` when those were given)."""
            self._param = self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Categorical:
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(tuple(batch_shape))
        self._expand_probs_or_logits(new, tuple(batch_shape) + (self._num_events,))
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(dim=-1)

    @property
    def variance(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=Size()) -> Tensor:
        sample_shape = _as_size(sample_shape)
        extended = self._extended_shape(sample_shape)
        draws = sample_shape.numel()
        if draws == 0 or self.probs.numel() == 0:
            return full(tuple(extended), 0, dtype=dtypes.int64, device=self.probs.device)
        rows = self.probs.detach().reshape(-1, self._num_events)
        return _ops.multinomial(rows, draws, True).T.reshape(tuple(extended))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = _ops.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        # A zero probability has logit -inf: clamped to the lowest float, 0 * it is 0, not NaN.
        logits = self.logits.clamp(min=float(_finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(self._num_events, dtype=dtypes.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
