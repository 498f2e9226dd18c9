"""``ContinuousBernoulli``: the continuous relaxation of a Bernoulli on ``[0, 1]``, as
``torch.distributions.ContinuousBernoulli`` (Loaiza-Ganem and Cunningham, *The continuous
Bernoulli: fixing a pervasive error in variational autoencoders*, NeurIPS 2019).

The density is ``C(p) p^x (1 - p)^(1 - x)`` with the normalizer ``C(p) = 2 atanh(1 - 2p) / (1 - 2p)``,
which (as the moments) is ``0 / 0`` at ``p = 1/2``. Inside ``lims`` around 1/2 the closed forms lose
their digits to cancellation, so there their Taylor series in ``p - 1/2`` take over (truncation
below 1e-17 within the default ``lims``); the closed forms are evaluated at a safe ``p`` there, so
no NaN reaches a gradient. Just outside ``lims`` the closed forms still cancel to about
``eps / |1 - 2p|^2`` relative: for float32 and half inputs they are computed in float64 and rounded
back (PyTorch's float32 values there are off by up to 1e-4, and the variance came out negative).
"""

from __future__ import annotations

import math

from ..ir import dtypes
from ..nn import functional as F
from ..runtime import ops as _ops
from ..runtime.random_creation import rand
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._probabilities import ProbsOrLogits
from .exp_family import ExponentialFamily
from .utils import broadcast_all, clamp_probs

__all__ = ["ContinuousBernoulli"]


def _wide(tensor: Tensor) -> Tensor:
    """``tensor`` in float64 when it is a lower-precision float (the closed forms' working precision)."""
    if not isinstance(tensor, Tensor) or tensor.dtype == dtypes.float64:
        return tensor
    return tensor.to(dtypes.float64)


class ContinuousBernoulli(ProbsOrLogits, ExponentialFamily):
    """Values in ``[0, 1]`` with density proportional to ``p^x (1 - p)^(1 - x)``.

    Unlike a Bernoulli's, ``probs`` is no probability and ``logits`` no log-odds of an outcome; the
    names follow the Bernoulli's. ``probs`` is clamped away from 0 and 1 (by the machine epsilon of
    its dtype). ``rsample`` inverts the cdf at uniform draws.

    Args:
        probs: the shape parameter in ``[0, 1]`` (give this or ``logits``, not both).
        logits: its log-odds ``log(p / (1 - p))``.
        lims: the interval around 1/2 where Taylor series replace the closed forms.
        validate_args: whether to validate the arguments.

    Example::

        >>> m = ContinuousBernoulli(onnxnn.tensor([0.5]))
        >>> m.log_prob(onnxnn.tensor([0.3]))  # the uniform density
        tensor([0.])
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    _mean_carrier_measure = 0
    # As PyTorch's, so that log p and log(1 - p) stay finite where the sigmoid of the logits rounds to 0 or 1.
    _clamps_probs_from_logits = True

    def __init__(
        self,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        lims: tuple[float, float] = (0.499, 0.501),
        validate_args: bool | None = None,
    ) -> None:
        self._store_probs_or_logits(probs, logits)
        self._lims = lims
        # Validated before the clamp below, which would move any value into the interval.
        super().__init__(self._param.size(), validate_args=validate_args)
        if probs is not None:
            self.probs = clamp_probs(self.probs)
            """The shape parameter, clamped away from 0 and 1 (from ``logits`` when those were given)."""
            self._param = self.probs

    def expand(self, batch_shape, _instance=None) -> ContinuousBernoulli:
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = Size(tuple(batch_shape))
        self._expand_probs_or_logits(new, batch_shape)
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        """``probs`` outside the unstable region, ``lims[0]`` inside (a harmless value for the closed
        forms), in float64 for lower-precision ``probs`` (the closed forms cancel: see the module)."""
        return _wide(_ops.where(self._outside_unstable_region(), self.probs, self._lims[0]))

    def _narrow(self, closed_form: Tensor) -> Tensor:
        """A closed form computed from :meth:`_cut_probs`, back in the dtype of ``probs``."""
        return closed_form.to(self.probs.dtype)

    def _log_odds_gap(self, cut_probs: Tensor) -> Tensor:
        """``log(1 - p) - log p`` (that is, ``-logit(p)``) at the cut probabilities."""
        return (-cut_probs).log1p() - cut_probs.log()

    def _cont_bern_log_norm(self) -> Tensor:
        """The log normalizer ``log C(p)``."""
        cut_probs = self._cut_probs()
        # log|1 - 2p|, each branch evaluated where its argument is positive.
        below_half = _ops.where(cut_probs <= 0.5, cut_probs, 0.0)
        above_half = _ops.where(cut_probs >= 0.5, cut_probs, 1.0)
        log_distance = _ops.where(cut_probs <= 0.5, (-2.0 * below_half).log1p(), (2.0 * above_half - 1.0).log())
        closed_form = self._narrow(self._log_odds_gap(cut_probs).abs().log() - log_distance)
        squared = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * squared) * squared
        return _ops.where(self._outside_unstable_region(), closed_form, taylor)

    @property
    def mean(self) -> Tensor:
        cut_probs = self._cut_probs()
        closed_form = self._narrow(cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / self._log_odds_gap(cut_probs))
        shift = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * shift.pow(2)) * shift
        return _ops.where(self._outside_unstable_region(), closed_form, taylor)

    @property
    def variance(self) -> Tensor:
        cut_probs = self._cut_probs()
        gap = self._log_odds_gap(cut_probs)
        closed_form = self._narrow(cut_probs * (cut_probs - 1.0) / (1.0 - 2.0 * cut_probs).pow(2) + 1.0 / gap.pow(2))
        squared = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * squared) * squared
        return _ops.where(self._outside_unstable_region(), closed_form, taylor)

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        u = rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut_probs, wide_value = self._cut_probs(), _wide(value)
        closed_form = (cut_probs.pow(wide_value) * (1.0 - cut_probs).pow(1.0 - wide_value) + cut_probs - 1.0) / (
            2.0 * cut_probs - 1.0
        )
        closed_form = self._narrow(closed_form)
        inside = _ops.where(self._outside_unstable_region(), closed_form, value)
        return _ops.where(value <= 0.0, 0.0, _ops.where(value >= 1.0, 1.0, inside))

    def icdf(self, value: Tensor) -> Tensor:
        cut_probs, wide_value = self._cut_probs(), _wide(value)
        closed_form = ((-cut_probs + wide_value * (2.0 * cut_probs - 1.0)).log1p() - (-cut_probs).log1p()) / (
            cut_probs.log() - (-cut_probs).log1p()
        )
        closed_form = self._narrow(closed_form)
        return _ops.where(self._outside_unstable_region(), closed_form, value)

    def entropy(self) -> Tensor:
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        """``log((e^x - 1) / x)`` of the natural parameter ``x``, by its Taylor series near ``x = 0``."""
        low, high = (math.log(limit / (1 - limit)) for limit in self._lims)
        outside = (x <= low) | (x > high)
        cut = _wide(_ops.where(outside, x, low))
        closed_form = (cut.expm1().abs().log() - cut.abs().log()).to(x.dtype)
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return _ops.where(outside, closed_form, taylor)
