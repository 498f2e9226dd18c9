"""``Beta``: distributions on the unit interval, as ``torch.distributions.Beta``."""

from __future__ import annotations

from ..runtime import ops as _ops
from ..runtime.creation import tensor
from ..runtime.tensor import Size, Tensor
from . import constraints
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily
from .utils import _is_number, broadcast_all

__all__ = ["Beta"]


class Beta(ExponentialFamily):
    """The beta distribution with density ``x^(a-1) (1-x)^(b-1) / B(a, b)``, ``a = concentration1``,
    ``b = concentration0``: the first coordinate of a two-dimensional :class:`Dirichlet`.

    Args:
        concentration1: the first concentration (often alpha); positive.
        concentration0: the second concentration (often beta); positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> Beta(2.0, 2.0).log_prob(onnxnn.tensor(0.5))  # log(6 / 4)
        tensor(0.4055)
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(
        self, concentration1: Tensor | float, concentration0: Tensor | float, validate_args: bool | None = None
    ) -> None:
        if _is_number(concentration1) and _is_number(concentration0):
            both = tensor([float(concentration1), float(concentration0)])  # type: ignore[arg-type]
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            both = _ops.stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Beta:
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = Size(tuple(batch_shape))
        new._dirichlet = self._dirichlet.expand(batch_shape)
        super(Beta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()) -> Tensor:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = _ops.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return x.lgamma() + y.lgamma() - (x + y).lgamma()
