"""``Chi2``: the chi-squared distribution with ``df`` degrees of freedom, as ``torch.distributions.Chi2``."""

from __future__ import annotations

from ..runtime.tensor import Size, Tensor
from . import constraints
from .gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    """The sum of ``df`` squared standard normals: ``Gamma(concentration=df / 2, rate=1 / 2)``.

    Args:
        df: degrees of freedom; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> Chi2(onnxnn.tensor([2.0])).mean
        tensor([2.])
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Tensor | float, validate_args: bool | None = None) -> None:
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Chi2:
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(Size(tuple(batch_shape)), new)  # type: ignore[return-value]

    @property
    def df(self) -> Tensor:
        return self.concentration * 2
