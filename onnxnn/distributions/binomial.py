"""``Binomial``: successes in ``total_count`` trials, as ``torch.distributions.Binomial``."""

from __future__ import annotations

from ..runtime import ops as _ops
from ..runtime.creation import arange
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._trials import TrialsWithSuccessProbability

__all__ = ["Binomial"]


def _clamp_by_zero(x: Tensor) -> Tensor:
    """``max(x, 0)`` with gradient 1/2 at 0 (the mean of the one-sided slopes), as PyTorch's."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(TrialsWithSuccessProbability):
    """The number of successes in ``total_count`` independent trials of probability ``probs``.

    ``total_count`` broadcasts with ``probs``/``logits``. Sampling reads the parameters (see
    :func:`onnxnn.binomial`); ``entropy`` and ``enumerate_support`` read
    ``total_count``, which must then be the same everywhere.

    Args:
        total_count: number of trials; a nonnegative integer (as a number or tensor).
        probs: success probability (give this or ``logits``, not both).
        logits: success log-odds.
        validate_args: whether to validate the arguments.

    Example::

        >>> Binomial(4, onnxnn.tensor([0.5])).log_prob(onnxnn.tensor([2.0]))  # log(6 / 16)
        tensor([-0.9808])
    """

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(
        self,
        total_count: Tensor | int = 1,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        super().__init__(total_count, probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None) -> Binomial:
        return self._expanded(Binomial, batch_shape, _instance)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return _ops.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = (self.total_count + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (self.total_count - value + 1).lgamma()
        # n log(1 + e^l), written so that large |logits| neither overflow nor lose digits.
        normalize_term = (
            self.total_count * _clamp_by_zero(self.logits)
            + self.total_count * (-self.logits.abs()).exp().log1p()
            - log_factorial_n
        )
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def _homogeneous_total_count(self, what: str) -> int:
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total_count

    def entropy(self) -> Tensor:
        self._homogeneous_total_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total_count = self._homogeneous_total_count("enumerate_support")
        values = arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
