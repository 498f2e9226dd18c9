"""``VonMises``: the circular von Mises distribution, as ``torch.distributions.VonMises``.

Sampling is Best and Fisher's rejection method (*Efficient simulation of the von Mises
distribution*, Applied Statistics 28, 1979), in float64 as PyTorch's (in float32 small
concentrations make the proposal's parameter overflow into a loop that never accepts). A wrapped
Cauchy proposal is accepted with probability at least 0.656 (the limit of a large concentration),
so each round makes ``_PROPOSALS`` proposals per draw at once and keeps the first accepted one
(all are rejected with probability below ``0.344^16 < 4e-8``); rounds repeat for the draws still
pending, as PyTorch's loop, reading one boolean per round. After ``_MAX_ROUNDS`` (128 proposals,
all rejected with probability below ``1e-59``) a draw still pending, which only a NaN or infinite
parameter makes, is NaN where PyTorch's loop would never end.
"""

from __future__ import annotations

import math

from ..ir import dtypes
from ..runtime import ops as _ops
from ..runtime.creation import full, zeros
from ..runtime.grad_mode import no_grad
from ..runtime.random_creation import rand
from ..runtime.tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]

_PROPOSALS = 16
_MAX_ROUNDS = 8
_TAYLOR_BELOW = 1e-5  # below this concentration the proposal parameter takes its Taylor expansion


def _log_bessel_i0(x: Tensor) -> Tensor:
    """``log I_0(x)`` for ``x > 0``, through the scaled ``e^-x I_0(x)`` (no overflow for large x)."""
    return _ops.i0e(x).log() + x


def _proposal_r(kappa: Tensor) -> Tensor:
    """Best and Fisher's ``r = (1 + rho^2) / (2 rho)`` of the wrapped Cauchy proposal."""
    tau = 1 + (1 + 4 * kappa.pow(2)).sqrt()
    rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
    exact = (1 + rho.pow(2)) / (2 * rho)
    # Second order Taylor expansion around 0, where tau - sqrt(2 tau) cancels.
    return _ops.where(kappa < _TAYLOR_BELOW, 1 / kappa + kappa, exact)


def _best_fisher(kappa: Tensor, r: Tensor, shape: tuple) -> Tensor:
    """Angles in ``[-pi, pi]`` of ``VonMises(0, kappa)`` draws of ``shape``, from float64 parameters."""
    angle = full(shape, float("nan"), dtype=dtypes.float64, device=kappa.device)
    done = zeros(shape, dtype=dtypes.bool, device=kappa.device)
    for _ in range(_MAX_ROUNDS):
        u1, u2, u3 = rand((3, _PROPOSALS) + shape, dtype=dtypes.float64, device=kappa.device).unbind(0)
        z = (math.pi * u1).cos()
        # |f| <= 1 exactly; the clamp keeps a rounding of 1 + ulp out of acos.
        f = ((1 + r * z) / (r + z)).clamp(min=-1.0, max=1.0)
        c = kappa * (r - f)
        accept = (c * (2 - c) - u2 > 0) | ((c / u2).log() + 1 - c >= 0)
        first = accept & (accept.to(dtypes.int64).cumsum(0) == 1)
        proposal = _ops.where(first, (u3 - 0.5).sign() * f.acos(), 0.0).sum(0)
        found = accept.any(0)
        angle = _ops.where(done.logical_not() & found, proposal, angle)
        done = done | found
        if bool(done.all()):
            break
    return angle


class VonMises(Distribution):
    """The von Mises distribution on the circle: density ``exp(kappa cos(x - loc)) / (2 pi I_0(kappa))``.

    Polar coordinates: ``loc`` and values may be any real numbers (convenient for unconstrained
    optimization) and are read as angles modulo ``2 pi``; samples lie in ``[-pi, pi)``. ``mean`` and
    ``variance`` are the circular ones. ``log_prob`` takes ``log I_0`` from the exponentially scaled
    Bessel function, accurate to rounding (PyTorch's polynomial approximation: about 1e-7).

    Args:
        loc: the mean angle, in radians.
        concentration: the concentration ``kappa``; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> VonMises(0.0, 1.0).log_prob(onnxnn.tensor(0.0))  # 1 - log(2 pi I_0(1))
        tensor(-1.0738)
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc: Tensor | float, concentration: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, Size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> VonMises:
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(VonMises, new).__init__(batch_shape, Size(), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (
            self.concentration * (value - self.loc).cos() - math.log(2 * math.pi) - _log_bessel_i0(self.concentration)
        )

    def sample(self, sample_shape=Size()) -> Tensor:
        """Draws by Best and Fisher's rejection method (see the module's docstring), outside autograd."""
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            loc = self.loc.to(dtypes.float64)
            kappa = self.concentration.to(dtypes.float64)
            angle = _best_fisher(kappa.expand(shape), _proposal_r(kappa).expand(shape), shape)
            return ((angle + math.pi + loc).remainder(2 * math.pi) - math.pi).to(self.loc.dtype)

    @property
    def mean(self) -> Tensor:
        """The circular mean: ``loc``."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:  # type: ignore[override]
        """The circular variance ``1 - I_1(kappa) / I_0(kappa)``."""
        return 1 - _ops.i1e(self.concentration) / _ops.i0e(self.concentration)
