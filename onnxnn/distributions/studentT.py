"""``StudentT``: Student's t-distribution, as ``torch.distributions.StudentT``."""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.tensor import Size, Tensor
from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t-distribution with ``df`` degrees of freedom, located at ``loc`` and scaled by ``scale``.

    ``rsample`` draws ``X / sqrt(Z / df)`` for a standard normal ``X`` and ``Z ~ Chi2(df)``,
    reparameterized in all three parameters.

    Args:
        df: degrees of freedom; positive.
        loc: location (the mean when ``df > 1``).
        scale: scale; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> StudentT(onnxnn.tensor([1.0])).log_prob(onnxnn.tensor([0.0]))  # Cauchy: -log(pi)
        tensor([-1.1447])
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(
        self,
        df: Tensor | float,
        loc: Tensor | float = 0.0,
        scale: Tensor | float = 1.0,
        validate_args: bool | None = None,
    ) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> StudentT:
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return _ops.where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        finite = self.scale.pow(2) * self.df / _ops.where(self.df > 2, self.df - 2, 1.0)
        infinite_or_undefined = _ops.where(self.df > 1, math.inf, math.nan)
        return _ops.where(self.df > 2, finite, infinite_or_undefined)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        X = _standard_normal(shape, self.df.dtype, self.df.device)
        Z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * X * (Z / self.df).rsqrt()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + (0.5 * self.df).lgamma()
            - (0.5 * (self.df + 1.0)).lgamma()
        )
        return -0.5 * (self.df + 1.0) * (y**2.0 / self.df).log1p() - Z

    def entropy(self) -> Tensor:
        lbeta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (
            self.scale.log()
            + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma() - (0.5 * self.df).digamma())
            + 0.5 * self.df.log()
            + lbeta
        )
