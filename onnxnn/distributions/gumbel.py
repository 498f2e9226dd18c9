"""``Gumbel``: the extreme-value distribution of maxima, as ``torch.distributions.Gumbel``."""

from __future__ import annotations

import math

from ..runtime.creation import full_like, ones_like
from ..runtime.tensor import Size, Tensor
from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .uniform import Uniform
from .utils import _finfo, _is_number, broadcast_all, euler_constant

__all__ = ["Gumbel"]


class Gumbel(TransformedDistribution):
    """The Gumbel distribution with cdf ``exp(-exp(-(x - loc) / scale))``.

    Built as PyTorch's: ``loc - scale * log(-log U)`` for ``U`` uniform on ``[tiny, 1 - eps)``, so
    draws are reparameterized and the cdf and icdf come from the uniform's.

    Args:
        loc: location (the mode).
        scale: scale; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> Gumbel(0.0, 1.0).log_prob(onnxnn.tensor(0.0))  # -exp(0)
        tensor(-1.)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        finfo = _finfo(self.loc.dtype)
        # Away from 0 and 1: log(-log u) stays finite at both ends.
        low, high = float(finfo.tiny), 1 - float(finfo.eps)
        if _is_number(loc) and _is_number(scale):
            base_dist = Uniform(low, high, validate_args=validate_args)
        else:
            base_dist = Uniform(full_like(self.loc, low), full_like(self.loc, high), validate_args=validate_args)
        transforms = [
            ExpTransform().inv,
            AffineTransform(loc=0, scale=-ones_like(self.scale)),
            ExpTransform().inv,
            AffineTransform(loc=loc, scale=-self.scale),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Gumbel:
        new = self._get_checked_instance(Gumbel, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    def log_prob(self, value: Tensor) -> Tensor:
        """``y - exp(y) - log scale`` with ``y = (loc - value) / scale``: written out, as PyTorch's, since
        the transforms' inverses lose precision in the tails."""
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * euler_constant

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + euler_constant)
