"""Variance and standard deviation: ``var``, ``std`` and the argument forms they share with
``var_mean``/``std_mean`` (stats.py)."""

from __future__ import annotations

import builtins

from ...ir import dtypes
from ._common import Tensor, with_closed_form_gradient
from .elementwise import where
from .opmath import REDUCED_FLOATS, rounded, widened
from .reduce import _dims, mean, root, sum
from ..grad_mode import is_grad_enabled

__all__ = ["check_one_correction", "std", "unbiased_overload", "var"]


def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance over ``dim`` (all dims when None or empty) with Bessel's correction by default
    (``correction=1``); ``var(x, False)`` is PyTorch's ``var(input, unbiased)`` overload."""
    check_one_correction("var", unbiased, correction)
    if input.dtype in REDUCED_FLOATS:
        # In float32, rounded once (opmath): the squares of float16 values past 256 overflow.
        return rounded(var(widened(input), dim, unbiased, keepdim, correction=correction), input.dtype)
    if input.dtype is dtypes.float32:
        # PyTorch's CPU kernel accumulates float32 in double: two float32 passes lost 45,000 ulps
        # at a mean of 1e6, and squares past 1.8e19 overflowed (below 1e-19, vanished).
        return var(input.to(dtypes.float64), dim, unbiased, keepdim, correction=correction).to(dtypes.float32)
    dim, unbiased = unbiased_overload(dim, unbiased)
    if correction is None:
        correction = 0 if unbiased is False else 1
    centered = input - mean(input, dim, keepdim=True)
    dims = _dims(input, dim) or None  # no dims reduce them all, as sum and mean do
    count = input.numel()
    if dims is not None and input.dim() > 0:  # a 0-d tensor's dim 0 is itself: one element
        count = 1
        for axis in dims:
            count *= input.shape[axis]
    value = sum(centered * centered, dim, keepdim) / builtins.max(count - correction, 0)
    if not (input._requires_grad and is_grad_enabled()):
        return value
    return with_closed_form_gradient(
        value, (input,), (centered,), _var_gradient(input, dims, count - correction), "VarBackward0"
    )


def _var_gradient(input: Tensor, dims: list[int] | None, dof):
    """PyTorch's gradient of ``var``, ``2 (x - mean) / dof`` (``var_backward``), as a function of the output
    gradient and the centered input. The mean's own term, zero in exact arithmetic, is left out: an
    infinite element leaves the finite ones of its line their gradient (autograd's chain through the
    mean made them all NaN). Over all elements ``dof <= 0`` gives inf, NaN where ``x == mean``; along
    dims ``2 / dof`` is taken as it is (inf at 0: +-inf, NaN at ``x == mean``; negative past it)."""
    kept_shape = tuple(1 if dims is None or axis in dims else size for axis, size in enumerate(input.shape))
    if (dims is None or input.dim() == 0) and dof <= 0:
        return lambda G, centered: (G.reshape(kept_shape) * where(centered == 0, float("nan"), float("inf")),)
    scale = 2.0 / dof if dof != 0 else float("inf")
    return lambda G, centered: (G.reshape(kept_shape) * centered * scale,)


def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    check_one_correction("std", unbiased, correction)
    if input.dtype in REDUCED_FLOATS:  # the root taken before rounding: a variance past 65504 has a float16 root
        return rounded(std(widened(input), dim, unbiased, keepdim, correction=correction), input.dtype)
    if input.dtype is dtypes.float32:  # the root of the double variance, rounded once (see var)
        return std(input.to(dtypes.float64), dim, unbiased, keepdim, correction=correction).to(dtypes.float32)
    return root(var(input, dim, unbiased, keepdim, correction=correction), 2)


def check_one_correction(name: str, unbiased, correction) -> None:
    """PyTorch's overloads take ``unbiased`` or ``correction``, never both (a TypeError, as its parser's)."""
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments: both unbiased and correction")


def unbiased_overload(dim, unbiased) -> tuple:
    """``(dim, unbiased)`` of var/std/var_mean/std_mean's arguments: a bool in ``dim``'s place is
    PyTorch's ``(input, unbiased)`` overload, not dim 0 or 1."""
    if isinstance(dim, bool):
        if unbiased is not None:
            raise TypeError("var(): the second positional argument is unbiased (a bool) or dim, not both")
        return None, dim
    return dim, unbiased
