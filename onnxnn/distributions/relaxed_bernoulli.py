"""``LogitRelaxedBernoulli`` and ``RelaxedBernoulli``: the binary Concrete (Gumbel-softmax)
relaxation of a Bernoulli, as ``torch.distributions.RelaxedBernoulli`` (Maddison, Mnih and Teh,
*The Concrete distribution*, 2017; Jang, Gu and Poole, *Categorical reparameterization with
Gumbel-softmax*, 2017).

A draw is ``(logit(u) + logits) / temperature`` for ``u`` uniform (the difference of two Gumbel
variables is logistic); the sigmoid of it lies in ``(0, 1)`` and tends to a Bernoulli draw as the
temperature goes to 0.
"""

from __future__ import annotations

from ..runtime.creation import tensor
from ..runtime.random_creation import rand
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._probabilities import ProbsOrLogits
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import _is_number, broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(ProbsOrLogits, Distribution):
    """The logit of a :class:`RelaxedBernoulli` draw: real values, reparameterized.

    The density of ``y`` is ``t e^(l - t y) / (1 + e^(l - t y))^2`` (``t`` the temperature, ``l`` the
    logits): a logistic distribution of location ``l / t`` and scale ``1 / t``.

    As PyTorch's, ``has_rsample`` is False although :meth:`rsample` draws reparameterized samples
    (:class:`RelaxedBernoulli`, built on it, says True): code that checks the flag behaves alike.

    Args:
        temperature: the relaxation temperature; positive (not validated, as in PyTorch).
        probs: the probability of 1 (give this or ``logits``, not both).
        logits: the log-odds of 1.
        validate_args: whether to validate the arguments.

    Example::

        >>> m = LogitRelaxedBernoulli(onnxnn.tensor(1.0), logits=onnxnn.tensor([0.0]))
        >>> m.log_prob(onnxnn.tensor([0.0]))  # log(1 / 4)
        tensor([-1.3863])
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = False

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._store_probs_or_logits(probs, logits)
        if _is_number(temperature):
            temperature = tensor(temperature, dtype=self._param.dtype, device=self._param.device)
        self.temperature: Tensor = temperature  # type: ignore[assignment]
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LogitRelaxedBernoulli:
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.temperature = self.temperature
        self._expand_probs_or_logits(new, batch_shape)
        super(LogitRelaxedBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        probs = clamp_probs(self.probs.expand(shape))
        # Clamped away from 0 and 1 so that the logit of the uniform stays finite.
        uniforms = clamp_probs(rand(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        difference = logits - value * self.temperature
        return self.temperature.log() + difference - 2 * difference.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """Values in ``(0, 1)``: the sigmoid of a :class:`LogitRelaxedBernoulli` draw, reparameterized.

    Args:
        temperature: the relaxation temperature; positive.
        probs: the probability of 1 (give this or ``logits``, not both).
        logits: the log-odds of 1.
        validate_args: whether to validate the arguments.

    Example::

        >>> m = RelaxedBernoulli(onnxnn.tensor(2.0), onnxnn.tensor([0.1, 0.9]))
        >>> m.rsample().shape
        onnxnn.Size([2])
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    base_dist: LogitRelaxedBernoulli

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> RelaxedBernoulli:
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def temperature(self) -> Tensor:
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        """The log-odds of 1."""
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        """The probability of 1."""
        return self.base_dist.probs
