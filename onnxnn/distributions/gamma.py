"""``Gamma``: the gamma distribution of shape ``concentration`` and rate ``rate``, as ``torch.distributions.Gamma``."""

from __future__ import annotations

from ..ir import dtypes
from ..runtime.creation import as_tensor
from ..runtime.grad_mode import is_grad_enabled, no_grad
from ..runtime.ops.elementwise import where
from ..runtime.ops.incomplete_gamma import igamma
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._standard_gamma import _log_sample_derivative, standard_gamma_log
from .exp_family import ExponentialFamily
from .utils import _finfo, _is_number, broadcast_all

__all__ = ["Gamma"]


def _clamped_below(value: Tensor, bound: float) -> Tensor:
    """``value`` raised to at least ``bound``, with ``value``'s gradient (the clamp is not recorded in autograd)."""
    plain = value.detach()
    return value + (plain.clamp(min=bound) - plain)


class Gamma(ExponentialFamily):
    """The gamma distribution with density ``rate^a x^(a-1) e^(-rate x) / Gamma(a)``, ``a = concentration``.

    ``rsample`` is reparameterized: its gradient in ``concentration`` is the implicit one
    (the draw keeps its quantile), as PyTorch's; see ``onnxnn/distributions/_standard_gamma.py``.
    ``cdf`` reads the largest concentration (see :func:`onnxnn.igamma`).

    Args:
        concentration: shape parameter (often alpha); positive.
        rate: rate parameter (often beta), ``1 / scale``; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> Gamma(onnxnn.tensor([1.0]), onnxnn.tensor([2.0])).log_prob(onnxnn.tensor([1.0]))  # log 2 - 2
        tensor([-1.3069])
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration: Tensor | float, rate: Tensor | float, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch_shape = Size() if _is_number(concentration) and _is_number(rate) else self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Gamma:
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        standard = standard_gamma_log(self.concentration.expand(shape)).exp().to(self.concentration.dtype)
        value = standard / self.rate.expand(shape)
        # Draws that underflow become the smallest normal number, as PyTorch's, so log_prob stays finite.
        return _clamped_below(value, float(_finfo(value.dtype).tiny))

    def log_prob(self, value: Tensor | float) -> Tensor:
        # Numbers and other dtypes are taken as the rate's dtype, as PyTorch's torch.as_tensor here.
        value = as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (
            self.concentration.xlogy(self.rate)
            + (self.concentration - 1).xlogy(value)
            - self.rate * value
            - self.concentration.lgamma()
        )

    def cdf(self, value: Tensor) -> Tensor:
        """``P(concentration, rate * value)``, differentiable in every argument.

        ``igamma`` is differentiable in ``x`` only, as PyTorch's (whose ``Gamma.cdf`` then raises for a
        concentration that requires grad); the concentration's derivative here is the implicit one
        that reparameterized samples use: ``dP/da = -(d log x / da) * x * p(x)``.
        """
        if self._validate_args:
            self._validate_sample(value)
        x = self.rate * value
        probability = igamma(self.concentration, x)
        concentration = self.concentration
        if not (concentration.requires_grad and is_grad_enabled()):
            return probability
        with no_grad():
            alpha = concentration.to(dtypes.float64).expand(probability.shape)
            log_x = x.to(dtypes.float64).expand(probability.shape).log()
            x_times_density = (alpha * log_x - log_x.exp() - alpha.lgamma()).exp()
            derivative = -_log_sample_derivative(alpha, log_x) * x_times_density
            # At the support's edges (x = 0, inf) P is flat in a: no NaN may reach the value below.
            derivative = where(derivative.isfinite(), derivative, 0.0).to(probability.dtype)
        # Zero in value (a - a is exactly 0 for finite a), the derivative above in gradient.
        return probability + (concentration - concentration.detach()) * derivative

    def entropy(self) -> Tensor:
        return (
            self.concentration
            - self.rate.log()
            + self.concentration.lgamma()
            + (1.0 - self.concentration) * self.concentration.digamma()
        )

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()
