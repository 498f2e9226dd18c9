"""Quantiles as PyTorch computes them: from the sorted values, the rank ``q * (n - 1)`` held in the
input's dtype, linear and midpoint interpolation by ``lerp`` (so infinite neighbours give its NaNs
and infinities), a linear quantile differentiable in a ``q`` that requires grad.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ._common import Tensor, normalize_axes, with_zero_gradients
from . import comparison as _c
from . import elementwise as _e
from . import reduce as _r
from .fused_pointwise import lerp
from .indexing import gather_within
from .shape import stack
from .sorting import sort
from ..grad_mode import is_grad_enabled
from ..tensor import outside_autocast

__all__ = ["quantile", "nanquantile"]


@outside_autocast("quantile")
def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The ``q``-quantiles along ``dim`` (of the flattened input when None), from the sorted values.

    A tensor or list ``q`` adds a leading dim with one entry per quantile. A line holding a NaN has
    NaN quantiles (``nanquantile`` leaves NaNs out).
    """
    return _quantiles(input, q, dim, keepdim, interpolation, ignore_nan=False)


@outside_autocast("nanquantile")
def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear"):
    """``quantile`` of the values that are not NaN on each line (NaN for a line of NaNs only)."""
    return _quantiles(input, q, dim, keepdim, interpolation, ignore_nan=True)


_INTERPOLATIONS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantiles(input: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool):
    # PyTorch's checks, in its order and words (nanquantile's messages name quantile() too). Unlike
    # PyTorch's, a q tensor of another dtype is taken, its values held in the input's.
    if not isinstance(q, Tensor) and not np.ndim(q) and not 0 <= q <= 1:  # NaN too
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if np.ndim(q) > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if input.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(
            "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
            f"but got {interpolation}"
        )
    if input.dim() == 0:  # its dim 0 (or -1) is itself, as for the reductions
        normalize_axes([0 if dim is None else dim], 0)
        return _quantiles(input.reshape(1), q, 0, False, interpolation, ignore_nan)
    source = input.reshape(-1) if dim is None else input
    axis = 0 if dim is None else normalize_axes([dim], input.dim())[0]
    # q as PyTorch holds it: in the input's dtype, in which the ranks are computed too.
    qs = np.asarray(q.tolist() if isinstance(q, Tensor) else q, dtype=input.dtype.numpy_dtype)
    if not ((qs >= 0) & (qs <= 1)).all():
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if qs.size == 0:
        return _no_quantiles(input, source, axis, dim, keepdim)
    # A linear interpolation's weight is differentiable in q (the rank's fraction); the other modes'
    # results are gathered at positions and carry no gradient to q, as in PyTorch.
    differentiable = isinstance(q, Tensor) and q._requires_grad and is_grad_enabled() and interpolation == "linear"
    # Each q as a number in the input's dtype, and as a 0-d tensor where its gradient is wanted.
    fractions = [
        (fraction, q.to(input.dtype).reshape(-1)[index] if differentiable else None)
        for index, fraction in enumerate(qs.reshape(-1))
    ]
    ordered = sort(source, axis).values  # NaNs last
    last = ordered.narrow(axis, ordered.shape[axis] - 1, 1)
    if ignore_nan:
        # Each line's own count of numbers sets its positions; a line of NaNs reads its first NaN.
        count = _r.sum(_c.logical_not(_c.isnan(ordered)), axis, keepdim=True).to(input.dtype)
        results = [_at_positions(ordered, axis, count, fraction, interpolation) for fraction in fractions]
    else:
        # A NaN sorts last: where the last value is NaN the quantile is that NaN (its gradient too).
        has_nan = _c.isnan(last)
        results = [
            _e.where(has_nan, last, _at_position(ordered, axis, fraction, interpolation, has_nan))
            for fraction in fractions
        ]
    for index, value in enumerate(results):
        if dim is None:
            results[index] = value.reshape((1,) * input.dim() if keepdim else ())
        elif not keepdim:
            results[index] = value.squeeze(axis)
    if qs.ndim == 0:
        return results[0]
    return stack(results, 0)


def _no_quantiles(input: Tensor, source: Tensor, axis: int, dim, keepdim: bool) -> Tensor:
    """The quantiles for an empty ``q``: a leading dim of 0 before the result's shape, with a zero gradient."""
    if dim is None:
        shape = (1,) * input.dim() if keepdim else ()
    else:
        shape = tuple(
            1 if index == axis else size for index, size in enumerate(source.shape) if keepdim or index != axis
        )
    empty = Tensor._zeros((0, *shape), input.dtype, input.device)
    return with_zero_gradients(empty, (input,), "QuantileBackward0")


def _at_position(ordered: Tensor, axis: int, fraction: tuple, interpolation: str, has_nan: Tensor) -> Tensor:
    """The value at ``fraction`` of the way along every line of ``ordered`` (one position for all).

    As PyTorch: the rank ``q * (n - 1)`` in ``ordered``'s dtype, and linear and midpoint
    interpolation by its ``lerp``, so that an infinite neighbour gives its NaNs and infinities.
    ``fraction`` is q's value in that dtype and q as a 0-d tensor where its gradient is wanted (else None).
    """
    value, tensor = fraction
    rank = value * value.dtype.type(ordered.shape[axis] - 1)
    if interpolation == "lower":
        rank = np.floor(rank)
    elif interpolation == "higher":
        rank = np.ceil(rank)
    elif interpolation == "nearest":
        rank = np.round(rank)  # half to even, as PyTorch
    lower = ordered.narrow(axis, int(rank), 1)
    if interpolation in ("lower", "higher", "nearest"):
        return lower
    upper = ordered.narrow(axis, int(np.ceil(rank)), 1)
    if interpolation == "midpoint":
        return lerp(lower, upper, 0.5)
    if tensor is None:
        return lerp(lower, upper, float(rank - np.floor(rank)))
    # The rank's fraction as a tensor of q: the same value, with q's gradient (none on a NaN line).
    weight = tensor * (ordered.shape[axis] - 1) - float(np.floor(rank))
    return lerp(lower, upper, _e.where(has_nan, 0.0, weight))


def _at_positions(ordered: Tensor, axis: int, count: Tensor, fraction: tuple, interpolation: str) -> Tensor:
    """The value at ``fraction`` (as ``_at_position`` takes it) of the way along the first ``count``
    values of each line (``count`` in ``ordered``'s dtype, size 1 along ``axis``), as PyTorch ranks
    them: in that dtype, a negative rank (a line of NaNs) read as 0, interpolated by ``lerp``."""
    value, tensor = fraction
    position = (count - 1) * (float(value) if tensor is None else tensor)
    position = _e.where(_c.lt(position, 0.0), 0.0, position)
    if interpolation == "lower":
        position = _e.floor(position)
    elif interpolation == "higher":
        position = _e.ceil(position)
    elif interpolation == "nearest":
        position = _e.round(position)  # half to even, as PyTorch
    below = _e.floor(position.detach())
    lower = gather_within(ordered, axis, below.to(dtypes.int64))
    if interpolation in ("lower", "higher", "nearest"):
        return lower
    upper = gather_within(ordered, axis, _e.ceil(position.detach()).to(dtypes.int64))
    if interpolation == "midpoint":
        return lerp(lower, upper, 0.5)
    return lerp(lower, upper, position - below)
