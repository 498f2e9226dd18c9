"""``Poisson``: counts of events at rate ``rate``, as ``torch.distributions.Poisson``."""

from __future__ import annotations

from ..runtime import ops as _ops
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size, Tensor
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _is_number, broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """Nonnegative integers ``k`` with probability ``rate^k exp(-rate) / k!``.

    Sampling reads the rates (small ones are drawn by an inverse CDF, large ones by transformed
    rejection: see :func:`onnxnn.poisson`).

    Args:
        rate: the mean number of events; nonnegative.
        validate_args: whether to validate the arguments.

    Example::

        >>> Poisson(onnxnn.tensor([2.0])).log_prob(onnxnn.tensor([0.0]))  # -rate
        tensor([-2.])
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if _is_number(rate) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Poisson:
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.rate = self.rate.expand(batch_shape)
        super(Poisson, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return _ops.poisson(self.rate.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.rate.log(),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.exp()
