"""``Dirichlet``: distributions over the simplex, as ``torch.distributions.Dirichlet``."""

from __future__ import annotations

from ..runtime import ops as _ops
from ..runtime.creation import arange
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._standard_gamma import standard_gamma_log
from .exp_family import ExponentialFamily
from .utils import _finfo

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution of ``concentration`` (often alpha) over the last dimension.

    ``rsample`` normalizes independent gamma draws (as a softmax of their logarithms, so tiny
    concentrations do not underflow to 0/0); its gradient flows through the gammas' implicit
    reparameterization gradients. PyTorch differentiates its samples with the implicit gradient of
    each coordinate's Beta marginal instead: both are unbiased, and give the same expected
    gradients; a single draw's gradient differs.

    Args:
        concentration: positive concentrations, at least one-dimensional (the last dimension is the event).
        validate_args: whether to validate the arguments.

    Raises:
        ValueError: ``concentration`` is 0-dimensional.

    Example::

        >>> Dirichlet(onnxnn.tensor([1.0, 1.0, 1.0])).log_prob(onnxnn.tensor([0.2, 0.3, 0.5]))  # log 2
        tensor(0.6931)
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Dirichlet:
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        log_gammas = standard_gamma_log(self.concentration.expand(shape))
        value = _ops.softmax(log_gammas, -1).to(self.concentration.dtype)
        # Coordinates stay in [tiny, 1 - eps], as PyTorch's: one that underflows becomes the smallest normal
        # number, and one that rounds to 1 (small concentrations put nearly all mass on one coordinate) stays
        # below it, where a Beta's log_prob of its own sample would be +inf.
        plain = value.detach()
        info = _finfo(value.dtype)
        return value + (plain.clamp(min=float(info.tiny), max=1.0 - float(info.eps)) - plain)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (
            (self.concentration - 1.0).xlogy(value).sum(-1)
            + self.concentration.sum(-1).lgamma()
            - self.concentration.lgamma().sum(-1)
        )

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        shifted = (self.concentration - 1).clamp(min=0.0)
        mode = shifted / shifted.sum(-1, True)
        # All concentrations below 1: the density is unbounded at every vertex; PyTorch's answer
        # (the argmax of its 0/0 = NaN entries) is the first one.
        first_vertex = (arange(shifted.shape[-1], device=mode.device) == 0).to(mode.dtype)
        corner = (self.concentration < 1).all(-1, keepdim=True)
        return _ops.where(corner, first_vertex, mode)

    @property
    def variance(self) -> Tensor:
        total = self.concentration.sum(-1, True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def entropy(self) -> Tensor:
        k = self.concentration.size(-1)
        total = self.concentration.sum(-1)
        return (
            self.concentration.lgamma().sum(-1)
            - total.lgamma()
            - (k - total) * total.digamma()
            - ((self.concentration - 1.0) * self.concentration.digamma()).sum(-1)
        )

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.concentration,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()
