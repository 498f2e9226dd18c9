"""``GeneralizedPareto``: the generalized Pareto distribution, as ``torch.distributions.GeneralizedPareto``."""

from __future__ import annotations

from ..runtime import ops as _ops
from ..runtime.random_creation import rand
from ..runtime.tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all

__all__ = ["GeneralizedPareto"]

# A concentration this close to 0 takes the exponential limit, as PyTorch's
# isclose(concentration, 0) (whose absolute tolerance this is).
_ZERO_CONCENTRATION = 1e-8


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution: survival function ``(1 + c z)^(-1/c)`` for
    ``z = (x - loc) / scale`` and concentration ``c`` (``e^-z`` at ``c = 0``).

    Special cases: Exponential (``loc = 0``, ``c = 0``), Pareto (``c > 0``, ``loc = scale / c``) and
    Uniform (``c = -1``). The support is ``[loc, inf)`` for ``c >= 0``, ``[loc, loc - scale / c]`` for
    ``c < 0``. A concentration within ``1e-8`` of 0 is taken as 0 (the formulas' limit), as PyTorch's.

    Args:
        loc: location; real.
        scale: scale; positive.
        concentration: shape parameter; real.
        validate_args: whether to validate the arguments.

    Example::

        >>> GeneralizedPareto(0.0, 1.0, 0.0).log_prob(onnxnn.tensor(1.0))  # the exponential's -1
        tensor(-1.)
    """

    arg_constraints = {
        "loc": constraints.real,
        "scale": constraints.positive,
        "concentration": constraints.real,
    }
    has_rsample = True

    def __init__(
        self,
        loc: Tensor | float,
        scale: Tensor | float,
        concentration: Tensor | float,
        validate_args: bool | None = None,
    ) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if _is_number(loc) and _is_number(scale) and _is_number(concentration):
            batch_shape = Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> GeneralizedPareto:
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _zero_and_safe_concentration(self) -> tuple[Tensor, Tensor]:
        """Where the concentration counts as 0, and the concentration with 1 there (no 0 divisor)."""
        is_zero = self.concentration.abs() <= _ZERO_CONCENTRATION
        return is_zero, _ops.where(is_zero, 1.0, self.concentration)

    def _z(self, value: Tensor) -> Tensor:
        return (value - self.loc) / self.scale

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        return self.icdf(rand(shape, dtype=self.loc.dtype, device=self.loc.device))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        is_zero, safe = self._zero_and_safe_concentration()
        exponent = 1 / safe + 1
        # At c = -1 (uniform) the exponent is 0: 0 * log(0) at the upper end would be NaN, the density is flat.
        nonzero = _ops.where(exponent == 0, exponent, exponent * (safe * z).log1p())
        return -self.scale.log() - _ops.where(is_zero, z, nonzero)

    def log_survival_function(self, value: Tensor) -> Tensor:
        """``log P(X > value)``."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        is_zero, safe = self._zero_and_safe_concentration()
        return _ops.where(is_zero, -z, -(safe * z).log1p() / safe)

    def log_cdf(self, value: Tensor) -> Tensor:
        """``log P(X <= value)``."""
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        is_zero, safe = self._zero_and_safe_concentration()
        log_u = (-value).log1p()
        nonzero = self.loc + self.scale / safe * (-safe * log_u).expm1()
        return _ops.where(is_zero, self.loc - self.scale * log_u, nonzero)

    @property
    def mean(self) -> Tensor:
        finite = self.concentration < 1
        safe = _ops.where(finite, self.concentration, 0.5)
        return _ops.where(finite, self.loc + self.scale / (1 - safe), float("nan"))

    @property
    def variance(self) -> Tensor:
        finite = self.concentration < 0.5
        safe = _ops.where(finite, self.concentration, 0.25)
        value = self.scale.pow(2) / ((1 - safe).pow(2) * (1 - 2 * safe))
        return _ops.where(finite, value, float("nan"))

    def entropy(self) -> Tensor:
        return (self.scale.log() + self.concentration + 1).broadcast_to(tuple(self._batch_shape))

    @property
    def mode(self) -> Tensor:
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        negative = self.concentration < 0
        safe = _ops.where(negative, self.concentration, -1.0)
        upper = _ops.where(negative, self.loc - self.scale / safe, float("inf"))
        return constraints.interval(self.loc, upper)
