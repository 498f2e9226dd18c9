"""``Weibull``: the two-parameter Weibull distribution, as ``torch.distributions.Weibull``."""

from __future__ import annotations

from ..runtime.creation import ones_like
from ..runtime.tensor import Size, Tensor
from . import constraints
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .utils import broadcast_all, euler_constant

__all__ = ["Weibull"]


class Weibull(TransformedDistribution):
    """Positive values with cdf ``1 - exp(-(x / scale)^concentration)``.

    Built as PyTorch's: ``scale * E^(1 / concentration)`` for ``E ~ Exponential(1)``.

    Args:
        scale: scale (lambda); positive.
        concentration: shape (k); positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> Weibull(1.0, 1.0).log_prob(onnxnn.tensor(2.0))  # an Exponential(1): -x
        tensor(-2.)
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale: Tensor | float, concentration: Tensor | float, validate_args: bool | None = None) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(ones_like(self.scale), validate_args=validate_args)
        transforms = [
            PowerTransform(exponent=self.concentration_reciprocal),
            AffineTransform(loc=0, scale=self.scale),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)  # type: ignore[arg-type]

    def expand(self, batch_shape, _instance=None) -> Weibull:
        new = self._get_checked_instance(Weibull, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        # New transforms: the old ones carry the unexpanded parameters.
        transforms = [
            PowerTransform(exponent=new.concentration_reciprocal),
            AffineTransform(loc=0, scale=new.scale),
        ]
        super(Weibull, new).__init__(base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.scale * (1 + self.concentration_reciprocal).lgamma().exp()

    @property
    def mode(self) -> Tensor:
        # NaN for concentration < 1 (a negative base to a fractional power), as PyTorch's; the density
        # then peaks at 0.
        return self.scale * ((self.concentration - 1) / self.concentration) ** self.concentration.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (
            (1 + 2 * self.concentration_reciprocal).lgamma().exp()
            - (2 * (1 + self.concentration_reciprocal).lgamma()).exp()
        )

    def entropy(self) -> Tensor:
        return (
            euler_constant * (1 - self.concentration_reciprocal)
            + (self.scale * self.concentration_reciprocal).log()
            + 1
        )
