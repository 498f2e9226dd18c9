"""What the distributions parametrized by ``probs`` or by ``logits`` share (``Bernoulli``, ``Categorical``
and the like).

The given one is stored; the other is computed from it when first read and then kept, as PyTorch's
``lazy_property`` does, so until then ``repr`` and argument validation see only the given one.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..runtime.tensor import Size, Tensor
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ProbsOrLogits"]


class ProbsOrLogits:
    """A mixin for a distribution given ``probs`` or ``logits`` (not both), the other computed on first read.

    Subclasses say how the two convert: ``_binary`` (sigmoid and log-odds) or not (softmax and
    log-probabilities over the last dimension), and ``_clamps_probs_from_logits`` (probabilities
    computed from logits clamped to ``[eps, 1 - eps]``).
    """

    _binary: ClassVar[bool] = True
    _clamps_probs_from_logits: ClassVar[bool] = False
    _param: Tensor  # whichever of probs and logits was given

    def _store_probs_or_logits(
        self, probs: Tensor | float | None, logits: Tensor | float | None, *broadcast_with: Tensor | float
    ) -> list[Tensor]:
        """Stores the given one of ``probs`` and ``logits`` as a tensor, and as ``_param``.

        Args:
            probs, logits: the constructor's arguments; exactly one must be given.
            *broadcast_with: other parameters to broadcast with it. They come first, so a number among
                them takes their first tensor's dtype, as :func:`broadcast_all` gives it.

        Returns:
            ``broadcast_with``, broadcast.

        Raises:
            ValueError: both or neither of ``probs`` and ``logits`` given.
        """
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            *broadcast, self.probs = broadcast_all(*broadcast_with, probs)
            self._param = self.probs
        else:
            *broadcast, self.logits = broadcast_all(*broadcast_with, logits)  # type: ignore[arg-type]
            self._param = self.logits
        return broadcast

    def _expand_probs_or_logits(self, new: Any, shape: Size | tuple[int, ...]) -> None:
        """Gives ``new`` (what ``expand`` returns) this distribution's stored ``probs`` and ``logits``,
        expanded to ``shape``; one not computed yet is left to compute from the other."""
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(shape)
            new._param = new.logits

    @lazy_property
    def logits(self) -> Tensor:
        """The log-odds ``log(p / (1 - p))`` (of a binary outcome) or the log-probabilities (over the
        last dimension): as given to the constructor, or computed from ``probs`` when first read."""
        return probs_to_logits(self.probs, is_binary=self._binary)

    @lazy_property
    def probs(self) -> Tensor:
        """The probability of the outcome (binary) or of each category (over the last dimension): as
        given to the constructor, or computed from ``logits`` when first read."""
        probs = logits_to_probs(self.logits, is_binary=self._binary)
        return clamp_probs(probs) if self._clamps_probs_from_logits else probs
