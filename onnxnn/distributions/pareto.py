"""``Pareto``: the type I Pareto (power-law) distribution, as ``torch.distributions.Pareto``."""

from __future__ import annotations

from ..runtime.tensor import Size, Tensor
from . import constraints
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .utils import broadcast_all

__all__ = ["Pareto"]


class Pareto(TransformedDistribution):
    """Values ``x >= scale`` with density ``alpha scale^alpha / x^(alpha + 1)``.

    Built as PyTorch's: ``scale * exp(E)`` for ``E ~ Exponential(alpha)``.

    Args:
        scale: scale, the least value; positive.
        alpha: shape (the tail index); positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> Pareto(1.0, 2.0).cdf(onnxnn.tensor(2.0))  # 1 - (scale / x)^alpha
        tensor(0.7500)
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale: Tensor | float, alpha: Tensor | float, validate_args: bool | None = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)  # type: ignore[arg-type]

    def expand(self, batch_shape, _instance=None) -> Pareto:
        new = self._get_checked_instance(Pareto, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def mean(self) -> Tensor:
        # Infinite for alpha <= 1: alpha clamped to 1 divides by 0.
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        # Infinite for alpha <= 2: alpha clamped to 2 divides by 0.
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
