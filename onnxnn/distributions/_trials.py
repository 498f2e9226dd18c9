"""What ``Binomial`` and ``NegativeBinomial`` share: a count of trials broadcast with a success
probability given as ``probs`` or as ``logits``."""

from __future__ import annotations

from ..runtime.tensor import Size, Tensor
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["TrialsWithSuccessProbability"]


class TrialsWithSuccessProbability(Distribution):
    """A distribution of ``total_count`` trials of success probability ``probs`` (or log-odds ``logits``)."""

    def __init__(
        self,
        total_count: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
            self._param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)  # type: ignore[arg-type]
            self.total_count = self.total_count.type_as(self.logits)
            self._param = self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def _expanded(self, cls: type, batch_shape, _instance):
        """``expand`` for ``cls`` (the subclass whose constructor a subclass of it must not skip)."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.total_count = self.total_count.expand(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self) -> Tensor:
        """The success log-odds."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """The success probability of each trial."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return self._param.size()
