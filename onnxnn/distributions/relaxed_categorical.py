"""``ExpRelaxedCategorical`` and ``RelaxedOneHotCategorical``: the Concrete (Gumbel-softmax)
relaxation of a one-hot categorical, as ``torch.distributions.RelaxedOneHotCategorical``
(Maddison, Mnih and Teh, *The Concrete distribution*, 2017; Jang, Gu and Poole, *Categorical
reparameterization with Gumbel-softmax*, 2017).

A draw is ``softmax((logits + g) / temperature)`` for independent standard Gumbel ``g``; it lies in
the simplex and tends to a one-hot draw as the temperature goes to 0. ``ExpRelaxedCategorical`` is
its logarithm (a log-softmax), where the density is computed without the exponent's rounding.
"""

from __future__ import annotations

import math

from ..runtime.creation import full_like, tensor
from ..runtime.random_creation import rand
from ..runtime.tensor import Size, Tensor
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform
from .utils import _is_number, broadcast_all, clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    """The logarithm of a :class:`RelaxedOneHotCategorical` draw: vectors ``x`` with ``logsumexp(x) = 0``.

    Its support is reported as ``real_vector``, as PyTorch's; the values lie on the submanifold
    ``logsumexp(x) = 0`` of it.

    Args:
        temperature: the relaxation temperature; positive (not validated, as in PyTorch).
        probs: event probabilities (normalized over the last dimension; give this or ``logits``).
        logits: event log-probabilities (unnormalized).
        validate_args: whether to validate the arguments.

    Example::

        >>> m = ExpRelaxedCategorical(onnxnn.tensor(0.5), onnxnn.tensor([0.2, 0.8]))
        >>> m.rsample().exp().sum()
        tensor(1.)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._categorical = Categorical(probs, logits)
        param = self._categorical._param
        if _is_number(temperature):
            temperature = tensor(temperature, dtype=param.dtype, device=param.device)
        self.temperature: Tensor = temperature  # type: ignore[assignment]
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> ExpRelaxedCategorical:
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        super(ExpRelaxedCategorical, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def logits(self) -> Tensor:
        """The normalized log-probabilities."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """The normalized probabilities."""
        return self._categorical.probs

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        # Clamped away from 0 and 1 so that the Gumbel draws -log(-log u) stay finite.
        uniforms = clamp_probs(rand(shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        num_events = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # (K - 1)! t^(K - 1), the density's constant.
        log_scale = full_like(self.temperature, math.lgamma(num_events)) + (num_events - 1) * self.temperature.log()
        score = logits - value * self.temperature
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """Points of the simplex: the exponent of an :class:`ExpRelaxedCategorical` draw, reparameterized.

    Args:
        temperature: the relaxation temperature; positive.
        probs: event probabilities (normalized over the last dimension; give this or ``logits``).
        logits: event log-probabilities (unnormalized).
        validate_args: whether to validate the arguments.

    Example::

        >>> m = RelaxedOneHotCategorical(onnxnn.tensor(2.2), onnxnn.tensor([0.1, 0.2, 0.3, 0.4]))
        >>> m.rsample().sum()
        tensor(1.)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True
    base_dist: ExpRelaxedCategorical

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        base_dist = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> RelaxedOneHotCategorical:
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def temperature(self) -> Tensor:
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        """The normalized log-probabilities."""
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        """The normalized probabilities."""
        return self.base_dist.probs
