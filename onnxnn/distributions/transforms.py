"""Invertible transforms with computable log-determinants of their Jacobians, as
``torch.distributions.transforms``; :class:`TransformedDistribution` pushes a distribution through them.

Provided: ``Transform`` (the base), ``ComposeTransform``, ``IndependentTransform``,
``ReshapeTransform``, ``ExpTransform``, ``PowerTransform``, ``SigmoidTransform``,
``SoftplusTransform``, ``TanhTransform``, ``AbsTransform``, ``AffineTransform``,
``SoftmaxTransform``, ``StickBreakingTransform`` and ``identity_transform``.

Example::

    >>> t = ExpTransform()
    >>> x = onnxnn.tensor([0.0, 1.0])
    >>> t.inv(t(x))
    tensor([0., 1.])
"""

from __future__ import annotations

import math

from ..nn import functional as F
from ..runtime import ops as _ops
from ..runtime.creation import arange, full_like, ones
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._transform_base import ComposeTransform, IndependentTransform, ReshapeTransform, Transform, identity_transform
from .utils import _finfo, _is_number, broadcast_all, lazy_property

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "ComposeTransform",
    "ExpTransform",
    "IndependentTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftplusTransform",
    "TanhTransform",
    "SoftmaxTransform",
    "StickBreakingTransform",
    "Transform",
    "identity_transform",
]


class ExpTransform(Transform):
    """``y = exp(x)``."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExpTransform)

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class PowerTransform(Transform):
    """``y = x ** exponent`` on positive numbers.

    Args:
        exponent: the power (a tensor or number).
    """

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent: Tensor | float, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self):  # type: ignore[override]
        return self.exponent.sign()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PowerTransform):
            return False
        return bool(self.exponent.eq(other.exponent).all().item())

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return Size(_ops.broadcast_shapes(tuple(shape), tuple(self.exponent.shape)))

    def inverse_shape(self, shape):
        return Size(_ops.broadcast_shapes(tuple(shape), tuple(self.exponent.shape)))


def _clipped_sigmoid(x: Tensor) -> Tensor:
    # Away from exactly 0 and 1, so the inverse (a logit) stays finite.
    finfo = _finfo(x.dtype)
    return x.sigmoid().clamp(min=float(finfo.tiny), max=1.0 - float(finfo.eps))


class SigmoidTransform(Transform):
    """``y = 1 / (1 + exp(-x))``, inverted by ``x = logit(y)``."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigmoidTransform)

    def _call(self, x: Tensor) -> Tensor:
        return _clipped_sigmoid(x)

    def _inverse(self, y: Tensor) -> Tensor:
        finfo = _finfo(y.dtype)
        y = y.clamp(min=float(finfo.tiny), max=1.0 - float(finfo.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -F.softplus(-x) - F.softplus(x)


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))`` (linear beyond ``x > 20``, as ``softplus``)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftplusTransform)

    def _call(self, x: Tensor) -> Tensor:
        return F.softplus(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -F.softplus(-x)


class TanhTransform(Transform):
    """``y = tanh(x)``: RL's squashed Gaussians push a Normal through it.

    Equal to ``ComposeTransform([AffineTransform(0.0, 2.0), SigmoidTransform(), AffineTransform(-1.0, 2.0)])``
    but stabler; ``log |dy/dx| = 2 (log 2 - x - softplus(-2x))``, finite for every x. Use
    ``cache_size=1`` so the inverse of a sample near +-1 is its exact pre-image.
    """

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TanhTransform)

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        # atanh(y), as log1p's (onnxruntime has no float64 Atanh kernel; this is as accurate).
        return 0.5 * (y.log1p() - (-y).log1p())

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AbsTransform(Transform):
    """``y = |x|`` (not bijective: the inverse returns the positive pre-image)."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbsTransform)

    def _call(self, x: Tensor) -> Tensor:
        return x.abs()

    def _inverse(self, y: Tensor) -> Tensor:
        return y


class AffineTransform(Transform):
    """The pointwise affine map ``y = loc + scale * x``.

    Args:
        loc: location (tensor or number).
        scale: scale (tensor or number).
        event_dim: the size of ``event_shape``: 0 for univariate values, 1 for vectors, ...
        cache_size: 0 or 1.
    """

    bijective = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        for mine, theirs in ((self.loc, other.loc), (self.scale, other.scale)):
            if _is_number(mine) and _is_number(theirs):
                if mine != theirs:
                    return False
            elif not bool((mine == theirs).all().item()):  # type: ignore[union-attr]
                return False
        return True

    @property
    def sign(self):  # type: ignore[override]
        if _is_number(self.scale):
            scale = float(self.scale)  # type: ignore[arg-type]
            return 1 if scale > 0 else -1 if scale < 0 else 0
        return self.scale.sign()  # type: ignore[union-attr]

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shape = tuple(x.shape)
        if _is_number(self.scale):
            result = full_like(x, math.log(abs(self.scale)))  # type: ignore[arg-type]
        else:
            result = self.scale.abs().log()  # type: ignore[union-attr]
        if self.event_dim:
            result = result.reshape(tuple(result.shape[: -self.event_dim]) + (-1,)).sum(-1)
            shape = shape[: -self.event_dim]
        return result.expand(shape)

    def _parameter_shapes(self) -> tuple:
        return tuple(getattr(self.loc, "shape", ())), tuple(getattr(self.scale, "shape", ()))

    def forward_shape(self, shape):
        return Size(_ops.broadcast_shapes(tuple(shape), *self._parameter_shapes()))

    def inverse_shape(self, shape):
        return Size(_ops.broadcast_shapes(tuple(shape), *self._parameter_shapes()))


class SoftmaxTransform(Transform):
    """From unconstrained vectors to the simplex: ``exp`` then normalization over the last dimension.

    Not bijective (adding a constant to ``x`` gives the same ``y``); the inverse is ``log``.
    """

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftmaxTransform)

    def _call(self, x: Tensor) -> Tensor:
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape


def _stick_offsets(x: Tensor, count: int) -> Tensor:
    """``count, count - 1, ..., 1``: the number of coordinates each stick-breaking step still divides."""
    return arange(count, 0, -1, dtype=x.dtype, device=x.device)


class StickBreakingTransform(Transform):
    """From unconstrained vectors of ``K`` entries to the simplex of ``K + 1`` by stick breaking.

    Step ``i`` breaks off the fraction ``z_i = sigmoid(x_i - log(K - i))`` of what is left of the stick
    (``i = 0 .. K - 1``; the shift makes ``x = 0`` the simplex's center); the last coordinate is the
    rest. Bijective, as PyTorch's: suited to HMC, less to optimization (it mixes coordinates).
    """

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StickBreakingTransform)

    def _call(self, x: Tensor) -> Tensor:
        z = _clipped_sigmoid(x - _stick_offsets(x, x.shape[-1]).log())
        one = ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype, device=x.device)
        # y_i = z_i times the stick left before step i; the last coordinate is all that is left.
        left = _ops.cat([one, (1 - z).cumprod(-1)], -1)
        return _ops.cat([z, one], -1) * left

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        # Clamped: rounding can leave no stick (y[-1] ~ 0, or y[:-1] summing to 1).
        left = (1 - y_crop.cumsum(-1)).clamp(min=float(_finfo(y.dtype).tiny))
        return y_crop.log() - left.log() + _stick_offsets(y, y_crop.shape[-1]).log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shifted = x - _stick_offsets(x, x.shape[-1]).log()
        # log(1 - sigmoid(t)) = -t + log sigmoid(t): the triangular Jacobian's diagonal, in logs.
        return (-shifted + F.logsigmoid(shifted) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] - 1,))
