"""Regression and distribution losses: huber, smooth L1, Poisson and Gaussian NLL, KL divergence.

Each is an elementwise formula over standard ONNX ops followed by the shared reduction. Piecewise
formulas pick their branch with Where, so the gradient of the unused branch never reaches the input;
a branch that would be infinite where it is unused (the square of an infinite difference) is
computed from a safe argument, since a zero gradient times an infinite factor is NaN.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ...runtime import ops as _ops
from ...runtime.internal import check_known_data
from ...runtime.ops.opmath import widened
from ...runtime.tensor import Tensor
from ._common import loss_inputs_in_float32
from ._loss import (
    _check_floating,
    _check_reduction,
    _check_weight_shape,
    _legacy_reduction,
    _reduce_loss,
    _warn_size_mismatch,
    half_loss_dtype,
    rounded_loss,
)

__all__ = ["huber_loss", "smooth_l1_loss", "poisson_nll_loss", "gaussian_nll_loss", "kl_div"]


def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0, weight: Tensor | None = None
) -> Tensor:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 delta)``, with ``d = input - target``.

    Args:
        delta: where the quadratic part turns linear; must be positive. Default: ``1.0``.
        weight: optional per-element weights of the shape of ``input``; 'mean' stays the plain mean of
            the weighted terms, as in PyTorch (unlike mse_loss and l1_loss).
    """
    input, target, weight = loss_inputs_in_float32("HuberLossBackward0", input, target, weight)
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _warn_size_mismatch(input, target)
    _check_floating("huber_cpu", input, target)
    _check_weight_shape(input, weight)
    difference = input - target
    magnitude = _ops.abs(difference)
    # A NaN difference takes the quadratic branch, whose gradient (the difference) is NaN, as PyTorch's.
    quadratic = _ops.logical_not(_ops.ge(magnitude, delta))
    bounded = _ops.where(quadratic, difference, 0.0)  # PyTorch's gradient at an infinite difference: +-delta
    loss = _ops.where(quadratic, bounded * bounded * 0.5, (magnitude - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce_loss(loss, reduction, "HuberLossBackward0")


def smooth_l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``; ``beta=0`` is the L1 loss.

    Args:
        beta: where the quadratic part turns linear; must be non-negative. Default: ``1.0``.
    """
    input, target = loss_inputs_in_float32("SmoothL1LossBackward0", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _warn_size_mismatch(input, target)
    _check_floating("smooth_l1_cpu", input, target)
    half = half_loss_dtype(input, target)
    if half is not None:  # in float32, rounded once, as PyTorch's CPU kernel
        input, target = widened(input), widened(target)
    difference = input - target
    magnitude = _ops.abs(difference)
    if beta == 0.0:
        return rounded_loss(_reduce_loss(magnitude, reduction, "L1LossBackward0"), half, "L1LossBackward0")
    # A NaN difference takes the quadratic branch, whose gradient (difference / beta) is NaN, as PyTorch's.
    quadratic = _ops.logical_not(_ops.ge(magnitude, beta))
    bounded = _ops.where(quadratic, difference, 0.0)  # PyTorch's gradient at an infinite difference: +-1
    loss = _ops.where(quadratic, bounded * bounded * (0.5 / beta), magnitude - 0.5 * beta)
    return rounded_loss(_reduce_loss(loss, reduction, "SmoothL1LossBackward0"), half, "SmoothL1LossBackward0")


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average=None,
    eps: float = 1e-8,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log likelihood of ``target ~ Poisson(rate)``, dropping the constant ``log(target!)``.

    Args:
        log_input: ``input`` is ``log(rate)`` (loss ``exp(input) - target * input``); otherwise the
            rate itself (loss ``input - target * log(input + eps)``). Default: ``True``.
        full: add Stirling's approximation of ``log(target!)`` where ``target > 1``. Default: ``False``.
        eps: keeps ``log`` finite when ``log_input=False``. Default: ``1e-8``.
    """
    input, target = loss_inputs_in_float32("PoissonNllLossBackward0", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if log_input:
        loss = _ops.exp(input) - target * input
    else:
        loss = input - target * _ops.log(input + eps)
    if full:
        # PyTorch's masked_fill(target <= 1, 0) of the term computed everywhere: a NaN target keeps its
        # NaN, and the masked term's zero gradient times log(target) and 1 / target is NaN where
        # target <= 0 (0 * -inf, 0 * NaN) and 0 in (0, 1], the target gradient PyTorch gives.
        stirling = target * _ops.log(target) - target + _ops.log(target * (2 * math.pi)) * 0.5
        loss = loss + _ops.where(_ops.le(target, 1), 0.0, stirling)
    return _reduce_loss(loss, reduction, "PoissonNllLossBackward0")


def gaussian_nll_loss(
    input: Tensor, target: Tensor, var: Tensor | float, full: bool = False, eps: float = 1e-6, reduction: str = "mean"
) -> Tensor:
    """Negative log likelihood of ``target ~ N(input, var)``: ``0.5 * (log(var) + (input - target)^2 / var)``.

    Args:
        var: variances of ``input``'s shape, or of that shape with one dimension of size 1 (or the last
            one left out) for a variance shared along it, or a float.
        full: add the constant ``0.5 * log(2 pi)``. Default: ``False``.
        eps: variances are clamped at ``eps`` in the forward pass only; the gradient is the
            unclamped one, as in PyTorch. Default: ``1e-6``.
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
    else:
        # Values already in memory are checked as PyTorch does; a pending var would need a run to check.
        check_known_data(var, _check_nonnegative_variances)
        if var.shape != input.shape:
            if input.shape[:-1] == var.shape:
                var = var.unsqueeze(-1)
            elif not (input.dim() == var.dim() and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
                raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    difference = input - target
    if isinstance(var, (int, float)):
        var = max(float(var), eps)
        loss = (difference * difference / var + math.log(var)) * 0.5
    else:
        # PyTorch clamps a clone under no_grad: the forward value is clamped, the gradient passes unchanged.
        # Only clamped entries are shifted, so an infinite variance stays inf (inf - inf would be NaN).
        var = _ops.where(_ops.lt(var, eps), var + (eps - var).detach(), var)
        loss = (_ops.log(var) + difference * difference / var) * 0.5  # type: ignore[arg-type]  # var: a Tensor here
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce_loss(loss, reduction, "MeanBackward0")


def kl_div(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False
) -> Tensor:
    """Kullback-Leibler divergence ``target * (log(target) - input)`` of log-probabilities ``input``.

    Args:
        reduction: ``'none'``, ``'mean'`` (over all elements), ``'sum'`` or ``'batchmean'`` (the sum
            divided by the batch size, the mathematical KL divergence). Default: ``'mean'``.
        log_target: ``target`` holds log-probabilities. Default: ``False``.
    """
    input, target = loss_inputs_in_float32("KlDivBackward0", input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size."
            "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
            "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
            stacklevel=2,
        )
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = _ops.exp(target) * (target - input)
    else:
        # PyTorch's xlogy(target, target): 0 at target == 0, where its target gradient
        # (log(target) + target / target) is NaN.
        loss = _ops.xlogy(target, target) - target * input
    if reduction == "batchmean":
        total = _reduce_loss(loss, "sum", "KlDivBackward0")
        return total / input.shape[0] if input.dim() != 0 else total
    return _reduce_loss(loss, reduction, "KlDivBackward0")


def _check_nonnegative_variances(data: np.ndarray) -> None:
    if (data < 0).any():
        raise ValueError("var has negative entry/entries")
