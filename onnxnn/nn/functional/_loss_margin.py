"""Margin and embedding losses: ranking, hinge, soft margin, multi-label and multi-class margins,
cosine embedding, triplet margins; and ``pairwise_distance``, the triplet losses' distance.

Class indices select by comparison with every class (``_class_mask``), as the classification losses
do, so no loss needs a gather and every one records standard ONNX ops only.
"""

from __future__ import annotations

import functools

from typing import Callable

import numpy as np

from ...ir import dtypes
from ...runtime import ops as _ops
from ...ir.graph import static_constant
from ...runtime.internal import check_known_data, tensor_of
from ...runtime.tensor import Tensor
from ...ir.dtypes import scalar_type_name
from ._common import loss_inputs_in_float32, stable_softplus
from ._loss import _check_not_differentiable, _check_reduction, _class_mask, _legacy_reduction, _reduce_loss

__all__ = [
    "pairwise_distance",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "soft_margin_loss",
    "multilabel_soft_margin_loss",
    "multilabel_margin_loss",
    "multi_margin_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]

# PyTorch's cosine_embedding_loss adds this to each squared magnitude: ``constexpr float EPSILON =
# 1e-12`` (Loss.cpp), so float64 inputs get 1e-12 rounded to float32, 9.99999996e-13, which is
# what sets the gradient's scale at a zero norm (1 / sqrt(EPSILON)).
_COSINE_EPSILON = float(np.float32(1e-12))


def _hinge(x: Tensor) -> Tensor:
    """``max(x, 0)`` as PyTorch's ``clamp_min(x, 0)``, whose gradient passes where ``x`` is exactly 0
    (the kink: tied scores in a ranking loss, say); ReLU's passes none there."""
    return _ops.clamp(x, min=0.0)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension (inputs broadcast).

    Example::

        >>> F.pairwise_distance(onnxnn.zeros(2, 3), onnxnn.ones(2, 3), eps=0.0)
        tensor([1.7321, 1.7321])
    """
    dim = max(x1.dim(), x2.dim()) - 1
    return _ops.norm(x1 - x2 + eps, p, dim, keepdim)


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)`` for targets of 1 or -1."""
    input1, input2, target = loss_inputs_in_float32("MarginRankingLoss", input1, input2, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} "
        )
    loss = _hinge(-target * (input1 - input2) + margin)
    return _reduce_loss(loss, reduction, "ClampMinBackward0")


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1.

    Other target values count both terms, as PyTorch's kernel does.
    """
    input, target = loss_inputs_in_float32("HingeEmbeddingLoss", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    margin_term = _ops.where(_ops.ne(target, 1), _hinge(margin - input), 0.0)
    self_term = _ops.where(_ops.ne(target, -1), input, 0.0)
    return _reduce_loss(margin_term + self_term, reduction, "AddBackward0")


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``, the logistic loss of targets 1 or -1."""
    input, target = loss_inputs_in_float32("SoftMarginLossBackward0", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_not_differentiable("soft_margin_loss", target=target)
    return _reduce_loss(stable_softplus(-input * target), reduction, "SoftMarginLossBackward0")


def multilabel_soft_margin_loss(
    input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """Per-class logistic losses of 0/1 ``target``, averaged over the last (class) dimension."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    # softplus(-x) = -logsigmoid(x); the pair below is -(t log s(x) + (1 - t) log s(-x)).
    loss = target * stable_softplus(-input) + (1 - target) * stable_softplus(input)
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    if reduction == "none":
        return loss
    if reduction not in ("mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce_loss(loss, reduction, "MultilabelSoftMarginLossBackward0")


def _check_vector_or_matrix(input: Tensor) -> None:
    if input.dim() > 2 or (input.dim() == 2 and input.shape[1] == 0) or (input.dim() < 2 and input.numel() == 0):
        raise RuntimeError(
            f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(input.shape)}"
        )


def _check_long(target: Tensor) -> None:
    if target.dtype is not dtypes.int64:
        raise RuntimeError(f"expected scalar type Long but found {scalar_type_name(target.dtype)}")


def _as_matrix(input: Tensor) -> Tensor:
    return input.reshape(1, -1) if input.dim() < 2 else input


def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """Multi-label hinge loss: ``sum_j sum_{i not a target} max(0, 1 - (x[y_j] - x[i])) / C``.

    ``target`` has ``input``'s shape ``(C)`` or ``(N, C)`` and lists each sample's class indices,
    ended by the first -1.
    """
    (input,) = loss_inputs_in_float32("MultilabelMarginLossBackward0", input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_vector_or_matrix(input)
    _check_long(target)
    if target.shape != input.shape:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    classes = input.shape[-1]
    check_known_data(target, functools.partial(_check_listed_classes, classes))
    x, y = _as_matrix(input), _as_matrix(target)
    # Entry j counts while no -1 comes at or before it: the -1s' running count (a triangular matmul) is 0.
    ends = _ops.eq(y, -1).to(x.dtype)
    at_or_before = tensor_of(static_constant(np.triu(np.ones((classes, classes))), x.dtype, x.device))
    listed = _ops.eq(ends.matmul(at_or_before), 0)  # (N, J)
    is_listed_class = _class_mask(y.unsqueeze(2), classes, 2)  # (N, J, C)
    chosen = _ops.logical_and(is_listed_class, listed.unsqueeze(2))
    is_target = chosen.any(1)  # (N, C)
    picked = _ops.where(chosen, x.unsqueeze(1), 0.0).sum(2)  # x[y_j]: (N, J)
    margin = 1 - picked.unsqueeze(2) + x.unsqueeze(1)  # (N, J, C)
    counted = _ops.logical_and(listed.unsqueeze(2), _ops.logical_not(is_target).unsqueeze(1))
    # PyTorch's kernel adds a term only where it is > 0: a NaN one is skipped, value and gradient.
    counted = _ops.logical_and(counted, _ops.gt(margin, 0))
    loss = _ops.where(counted, margin, 0.0).sum((1, 2)) / classes
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce_loss(loss, reduction, "MultilabelMarginLossBackward0")


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge loss: ``sum_{i != y} w[y] * max(0, margin - x[y] + x[i])^p / C``.

    Args:
        p: 1 or 2. Default: ``1``.
        margin: Default: ``1.0``.
        weight: ``(C)`` class weights, applied by the target's class.
    """
    input, weight = loss_inputs_in_float32("MultiMarginLossBackward0", input, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    _check_vector_or_matrix(input)
    _check_long(target)
    samples = input.shape[0] if input.dim() == 2 else 1
    classes = input.shape[-1]
    if target.dim() > 1 or target.numel() != samples:
        raise RuntimeError(
            f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
            f"samples (batch size). Expected target size [{samples}], but got {list(target.shape)}. "
            f"Input has shape {list(input.shape)}."
        )
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got {list(weight.shape)}")
    _check_not_differentiable("multi_margin_loss", weight=weight)
    check_known_data(target, functools.partial(_check_target_classes, classes))
    x = _as_matrix(input)
    mask = _class_mask(target.reshape(samples, 1), classes, 1)  # (N, C)
    picked = _ops.where(mask, x, 0.0).sum(1, keepdim=True)
    difference = margin - picked + x
    # PyTorch's kernel adds (and weighs) a term only where it is > 0 and not the target's: a NaN term
    # is skipped, value and gradient, and so is the target's weight (even NaN) where none counts.
    counted = _ops.logical_and(_ops.gt(difference, 0), _ops.logical_not(mask))
    hinge = _ops.where(counted, difference, 0.0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        target_weight = _ops.where(mask, weight.to(x.dtype), 0.0).sum(1, keepdim=True)
        hinge = hinge * _ops.where(counted, target_weight, 0.0)
    loss = hinge.sum(1) / classes
    return _reduce_loss(loss.reshape(target.shape), reduction, "MultiMarginLossBackward0")


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)`` where it is -1."""
    input1, input2, target = loss_inputs_in_float32("CosineEmbeddingLossBackward0", input1, input2, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.dim() not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    expected = target.dim() + 1
    if input1.dim() != expected or input2.dim() != expected:
        raise RuntimeError(
            f"{target.dim()}D target tensor expects {expected}D input tensors, but found inputs with "
            f"sizes {list(input1.shape)} and {list(input2.shape)}."
        )
    dim = target.dim()
    product = (input1 * input2).sum(dim)
    square1 = (input1 * input1).sum(dim) + _COSINE_EPSILON
    square2 = (input2 * input2).sum(dim) + _COSINE_EPSILON
    cosine = product / _ops.sqrt(square1 * square2)
    loss = _ops.where(_ops.eq(target, 1), 1 - cosine, 0.0) + _ops.where(
        _ops.eq(target, -1), _hinge(cosine - margin), 0.0
    )
    return _reduce_loss(loss, reduction, "CosineEmbeddingLossBackward0")


def _check_triplet_ranks(anchor: Tensor, positive: Tensor, negative: Tensor) -> None:
    if not anchor.dim() == positive.dim() == negative.dim():
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same number of "
            f"dimensions, but got: anchor {anchor.dim()}D, positive {positive.dim()}D, and negative "
            f"{negative.dim()}D inputs"
        )


def _triplet(distance, anchor, positive, negative, margin, swap, reduction):
    to_positive = distance(anchor, positive)
    to_negative = distance(anchor, negative)
    if swap:
        to_negative = _ops.minimum(to_negative, distance(positive, negative))
    # PyTorch's order of the sum, (margin + d(a, p)) - d(a, n), decides which ties are exact zeros.
    return _reduce_loss(_hinge(to_positive + margin - to_negative), reduction, "ClampMinBackward0")


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, d(a, p) - d(a, n) + margin)`` with ``d`` the ``pairwise_distance`` of norm ``p``.

    Args:
        swap: use ``min(d(a, n), d(p, n))`` as the negative distance. Default: ``False``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _check_triplet_ranks(anchor, positive, negative)
    anchor, positive, negative = loss_inputs_in_float32("TripletMarginLoss", anchor, positive, negative)
    return _triplet(lambda a, b: pairwise_distance(a, b, p, eps), anchor, positive, negative, margin, swap, reduction)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """The triplet margin loss with any distance (default ``pairwise_distance``)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _check_triplet_ranks(anchor, positive, negative)
    return _triplet(distance_function or pairwise_distance, anchor, positive, negative, margin, swap, reduction)


def _check_listed_classes(classes: int, data: np.ndarray) -> None:
    """multilabel_margin_loss's targets: class indices, or -1 ending each sample's list."""
    if ((data < -1) | (data >= classes)).any():
        raise RuntimeError("argument #2 'target' is out of range")


def _check_target_classes(classes: int, data: np.ndarray) -> None:
    if ((data < 0) | (data >= classes)).any():
        raise RuntimeError("target out of range")
