"""``LogisticNormal``: a normal vector pushed onto the simplex by stick breaking, as
``torch.distributions.LogisticNormal``."""

from __future__ import annotations

from ..runtime.tensor import Tensor
from . import constraints
from .independent import Independent
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """``X = StickBreakingTransform()(Y)`` for ``Y ~ Normal(loc, scale)``, a point of the simplex with one
    more coordinate than ``loc``; inversely ``log(X / (1 - X.cumsum(-1)))[..., :-1]`` is the normal
    vector up to the transform's fixed shift.

    Args:
        loc: means of the base normal (the last dimension is the event; a number gives one coordinate).
        scale: standard deviations of the base normal; positive.
        validate_args: whether to validate the arguments.

    Example::

        >>> m = LogisticNormal(onnxnn.zeros(3), onnxnn.ones(3))
        >>> m.event_shape
        onnxnn.Size([4])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True
    base_dist: Independent

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])  # the stick-breaking transform needs a vector
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LogisticNormal:
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def loc(self) -> Tensor:
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.base_dist.scale
