"""What ``Binomial`` and ``NegativeBinomial`` share: a count of trials broadcast with a success
probability given as ``probs`` or as ``logits``."""

from __future__ import annotations

from ..runtime.tensor import Size, Tensor
from ._probabilities import ProbsOrLogits
from .distribution import Distribution

__all__ = ["TrialsWithSuccessProbability"]


class TrialsWithSuccessProbability(ProbsOrLogits, Distribution):
    """A distribution of ``total_count`` trials of success probability ``probs`` (or log-odds ``logits``)."""

    def __init__(
        self,
        total_count: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        (total_count,) = self._store_probs_or_logits(probs, logits, total_count)
        self.total_count = total_count.type_as(self._param)
        super().__init__(self._param.size(), validate_args=validate_args)

    def _expanded(self, cls: type, batch_shape, _instance):
        """``expand`` for ``cls`` (the subclass whose constructor a subclass of it must not skip)."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        return self._param.size()
