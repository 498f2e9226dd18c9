"""``Kumaraswamy``: a Beta-like distribution on ``[0, 1]`` with a closed-form cdf, as
``torch.distributions.Kumaraswamy``."""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import full_like
from ..runtime.tensor import Size, Tensor
from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a: Tensor, b: Tensor, n: int) -> Tensor:
    """The ``n``-th raw moment ``b B(1 + n / a, b)``."""
    shifted = 1 + n / a
    return b * (shifted.lgamma() + b.lgamma() - (shifted + b).lgamma()).exp()


class Kumaraswamy(TransformedDistribution):
    """Values in ``[0, 1]`` with density ``a b x^(a-1) (1 - x^a)^(b-1)`` and cdf ``1 - (1 - x^a)^b``.

    Built as PyTorch's: ``(1 - U^(1/b))^(1/a)`` for ``U`` uniform on ``[0, 1)``, so draws are
    reparameterized and the cdf and icdf come from the uniform's.

    Args:
        concentration1: the first concentration ``a`` (often alpha); positive.
        concentration0: the second concentration ``b`` (often beta); positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> Kumaraswamy(1.0, 1.0).log_prob(onnxnn.tensor(0.3))  # the uniform density
        tensor(0.)
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(
        self,
        concentration1: Tensor | float,
        concentration0: Tensor | float,
        validate_args: bool | None = None,
    ) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(
            full_like(self.concentration0, 0), full_like(self.concentration0, 1), validate_args=validate_args
        )
        transforms = [
            PowerTransform(exponent=self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)  # type: ignore[arg-type]

    def expand(self, batch_shape, _instance=None) -> Kumaraswamy:
        new = self._get_checked_instance(Kumaraswamy, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def mean(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        """``((a - 1) / (a b - 1))^(1 / a)``, NaN where ``a < 1`` or ``b < 1`` (the density is then
        unbounded at an end) and at ``a = b = 1`` (the uniform)."""
        a, b = self.concentration1, self.concentration0
        mode = ((a - 1) / (a * b - 1)).pow(a.reciprocal())
        return _ops.where((a < 1) | (b < 1), math.nan, mode)

    @property
    def variance(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        # (1 - 1/b) + (1 - 1/a) H_b - log(a b), with the harmonic number H_b = psi(b + 1) + gamma.
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        harmonic = (self.concentration0 + 1).digamma() + euler_constant
        return t0 + t1 * harmonic - self.concentration1.log() - self.concentration0.log()
