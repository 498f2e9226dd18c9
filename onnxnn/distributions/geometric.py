"""``Geometric``: the number of failures before the first success, as ``torch.distributions.Geometric``."""

from __future__ import annotations

from ..nn import functional as F
from ..runtime import ops as _ops
from ..runtime.creation import zeros_like
from ..runtime.random_creation import rand
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._probabilities import ProbsOrLogits
from .distribution import Distribution
from .utils import _finfo, broadcast_all

__all__ = ["Geometric"]


class Geometric(ProbsOrLogits, Distribution):
    """Nonnegative integers ``k`` with probability ``(1 - p)^k p``: the failures of Bernoulli trials of
    success probability ``p`` before the first success.

    Unlike :meth:`onnxnn.Tensor.geometric_` (the number of the trial that first succeeds, from 1),
    the draws count from 0.

    Args:
        probs: the probability of success of each trial, in ``(0, 1]`` (give this or ``logits``,
            not both).
        logits: the log-odds of success.
        validate_args: whether to validate the arguments.

    Raises:
        ValueError: both or neither of ``probs`` and ``logits`` given, or (validating) a ``probs``
            of 0.

    Example::

        >>> m = Geometric(onnxnn.tensor([0.3]))
        >>> m.log_prob(onnxnn.tensor([2.0]))  # log(0.7^2 0.3)
        tensor([-1.9173])
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(
        self,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._store_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)
        if self._validate_args and probs is not None:
            # unit_interval admits 0, but no trial then ever succeeds: PyTorch checks p > 0 besides.
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                invalid_value = value.detach()[~valid]
                raise ValueError(
                    "Expected parameter probs "
                    f"({type(value).__name__} of shape {tuple(value.shape)}) "
                    f"of distribution {self!r} "
                    f"to be positive but found invalid values:\n{invalid_value}"
                )

    def expand(self, batch_shape, _instance=None) -> Geometric:
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = Size(tuple(batch_shape))
        self._expand_probs_or_logits(new, batch_shape)
        super(Geometric, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        tiny = float(_finfo(self.probs.dtype).tiny)
        with no_grad():
            # Inversion: floor(log u / log(1 - p)), with u in [tiny, 1) so that log u stays finite.
            u = rand(shape, dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 scores k = 0 as log 1 = 0, where the formula reads 0 * log 0 = NaN: that p counts as 0
        # in the first term (as PyTorch's, which writes 0 into a copy of probs there).
        probs = _ops.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
