"""``FisherSnedecor``: the F distribution, as ``torch.distributions.FisherSnedecor``."""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .gamma import Gamma, _clamped_below
from .utils import _finfo, _is_number, broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """The ratio ``(X1 / df1) / (X2 / df2)`` of chi-squared variables ``X1``, ``X2`` of ``df1`` and
    ``df2`` degrees of freedom.

    Draws are ratios of reparameterized gamma draws (``Gamma(df / 2, df / 2)`` is a chi-squared
    variable over its degrees of freedom), so ``rsample`` is differentiable in both.

    Args:
        df1: degrees of freedom of the numerator; positive.
        df2: degrees of freedom of the denominator; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> FisherSnedecor(2.0, 2.0).log_prob(onnxnn.tensor(1.0))  # 1 / (1 + x)^2 at 1
        tensor(-1.3863)
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Tensor | float, df2: Tensor | float, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)
        batch_shape = Size() if _is_number(df1) and _is_number(df2) else self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> FisherSnedecor:
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        super(FisherSnedecor, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        """``df2 / (df2 - 2)``, NaN for ``df2 <= 2`` (as PyTorch's; the mean is infinite there)."""
        df2 = _ops.where(self.df2 <= 2, math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return _ops.where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        """NaN for ``df2 <= 4``, as PyTorch's."""
        df2 = _ops.where(self.df2 <= 4, math.nan, self.df2)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = self._gamma2.rsample(sample_shape).reshape(shape)
        # Kept above the smallest normal number, as PyTorch's: log_prob of a draw stays finite.
        tiny = float(_finfo(x2.dtype).tiny)
        return _clamped_below(x1 / _clamped_below(x2, tiny), tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        half1 = self.df1 * 0.5
        half2 = self.df2 * 0.5
        ratio = self.df1 / self.df2
        t1 = (half1 + half2).lgamma() - half1.lgamma() - half2.lgamma()
        t2 = half1 * ratio.log() + (half1 - 1) * value.log()
        t3 = (half1 + half2) * (ratio * value).log1p()
        return t1 + t2 - t3
