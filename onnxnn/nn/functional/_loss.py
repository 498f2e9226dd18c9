"""Loss functions: mse_loss, l1_loss, nll_loss, cross_entropy, binary cross entropy; and one_hot.

``nll_loss`` and ``cross_entropy`` with class indices record ONNX's NegativeLogLikelihoodLoss,
whose ``ignore_index`` and weighted mean are PyTorch's: one node instead of a dozen to record,
plan and export, and a gather instead of passes over every class. Label smoothing's extra term
compares the indices with every class (a one-hot mask), as does ``one_hot``.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from ...ir import dtypes
from ...runtime import ops as _ops
from ...ir.graph import shared_attributes, static_constant
from ...ir.mode import MODE
from ...runtime.internal import check_known_data, tensor_of
from ...runtime.ops.indexing import negatives_out_of_range
from ...runtime.ops.reduce import recorded_mean
from ...runtime.ops.binary_cross_entropy import binary_cross_entropy_terms
from ...runtime.ops.opmath import REDUCED_FLOATS, widened
from ...runtime.tensor import Tensor, apply_op
from ...ir.dtypes import scalar_type_name
from ._common import loss_inputs_in_float32, stable_softplus

__all__ = [
    "one_hot",
    "mse_loss",
    "l1_loss",
    "nll_loss",
    "cross_entropy",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """Maps the deprecated ``size_average``/``reduce`` pair to a reduction, warning as PyTorch does."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{result}' instead.", stacklevel=3
    )
    return result


def _reduce_loss(loss: Tensor, reduction: str, name: str) -> Tensor:
    if reduction == "none":
        # Under autocast the loss is named by an Identity, so that it comes out in float32 as the
        # reduced forms do (autocast finds losses by that name); otherwise nothing is recorded.
        return loss if MODE.autocast is None else apply_op("Identity", (loss,), None, name)
    if reduction == "mean":
        return recorded_mean(loss, None, False, name)
    if reduction == "sum":
        return apply_op("ReduceSum", (loss,), {"keepdims": 0}, name)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def half_loss_dtype(*tensors: Tensor | None) -> dtypes.dtype | None:
    """The float16/bfloat16 dtype a loss of ``tensors`` (None for an absent one) has, or None for any other.

    PyTorch's CPU loss kernels compute such a loss, and its gradient, in float32 and round once;
    with it, a loss widens its tensors (``widened_or_none``) and ends with ``rounded_loss``.
    """
    dtype = None
    for tensor in tensors:
        if tensor is not None:
            dtype = tensor.dtype if dtype is None else dtypes.promote_types(dtype, tensor.dtype)
    return dtype if dtype in REDUCED_FLOATS else None


def widened_or_none(tensor: Tensor | None) -> Tensor | None:
    """``opmath.widened(tensor)``; None stays None."""
    return None if tensor is None else widened(tensor)


def rounded_loss(loss: Tensor, dtype: dtypes.dtype | None, name: str) -> Tensor:
    """A loss computed in float32 rounded once to its half ``dtype`` (from ``half_loss_dtype``), under
    the loss's grad_fn name; the loss itself where ``dtype`` is None."""
    return loss if dtype is None else apply_op("Cast", (loss,), {"to": dtype}, name)


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_size_mismatch(input: Tensor, target: Tensor) -> None:
    if target.shape != input.shape:
        warnings.warn(
            f"Using a target size ({target.size()}) that is different to the input size "
            f"({input.size()}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            stacklevel=3,
        )


def _weighted(loss: Tensor, weight: Tensor | None, reduction: str, name: str) -> Tensor:
    """PyTorch's weighted mse/l1: per-element weights of the input's shape; 'mean' divides by their sum."""
    if weight is None:
        return _reduce_loss(loss, reduction, name)
    loss = loss * weight
    if reduction == "mean":
        return apply_op("ReduceSum", (loss,), {"keepdims": 0}, name) / weight.sum()
    return _reduce_loss(loss, reduction, name)


def _check_weight_shape(input: Tensor, weight: Tensor | None) -> None:
    if weight is not None and weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")


def _check_floating(kernel: str, input: Tensor, target: Tensor) -> None:
    """PyTorch's kernel of the loss takes floating-point values only (the difference of integers would be
    squared and averaged in integers here, truncated)."""
    if not input.dtype.is_floating_point and not target.dtype.is_floating_point:
        dtype = dtypes.promote_types(input.dtype, target.dtype)
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_type_name(dtype)}'")


def _check_not_differentiable(function: str, **arguments: Tensor | None) -> None:
    """PyTorch's refusal of a tensor argument its loss has no gradient for, when it requires one."""
    if not MODE.grad.enabled:
        return
    for name, tensor in arguments.items():
        if tensor is not None and tensor.requires_grad:
            raise RuntimeError(
                f"The function '{function}' is not differentiable with respect to argument '{name}'. "
                "This input cannot have requires_grad True."
            )


def mse_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", weight: Tensor | None = None
) -> Tensor:
    """The mean (or sum, or elementwise) squared error ``(input - target)^2``.

    ``weight`` (the input's shape) scales each element; with it, 'mean' divides by the summed weights.
    """
    input, target, weight = loss_inputs_in_float32("MseLossBackward0", input, target, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_size_mismatch(input, target)
    _check_floating("mse_cpu", input, target)
    _check_weight_shape(input, weight)
    half = half_loss_dtype(input, target, weight)
    if half is not None:
        input, target, weight = widened(input), widened(target), widened_or_none(weight)
    difference = input - target
    return rounded_loss(
        _weighted(difference * difference, weight, reduction, "MseLossBackward0"), half, "MseLossBackward0"
    )


def l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", weight: Tensor | None = None
) -> Tensor:
    """The mean (or sum, or elementwise) absolute error ``|input - target|``.

    ``weight`` (the input's shape) scales each element; with it, 'mean' divides by the summed weights.
    """
    input, target, weight = loss_inputs_in_float32("L1LossBackward0", input, target, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_size_mismatch(input, target)
    _check_weight_shape(input, weight)
    return _weighted(_ops.abs(input - target), weight, reduction, "L1LossBackward0")


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of class indices: ``(*) -> (*, num_classes)``.

    With ``num_classes=-1`` the count is ``max + 1``, which reads the indices. Indices already in
    memory are checked against the classes, as PyTorch's CPU kernel checks them.
    """
    if tensor.dtype is not dtypes.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    # PyTorch refuses an empty tensor unless num_classes is positive (0 too, not only -1).
    if tensor.numel() == 0 and num_classes <= 0:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1
    check_known_data(tensor, functools.partial(_check_one_hot_classes, num_classes))
    mask = _class_mask(tensor.unsqueeze(-1), num_classes, -1)
    return mask.to(dtypes.int64)


def _check_one_hot_classes(num_classes: int, data: np.ndarray) -> None:
    if data.size:
        if data.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if data.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")


def _class_mask(target: Tensor, num_classes: int, class_dim: int) -> Tensor:
    """Boolean ``target == c`` for every class c, laid out along ``class_dim`` (where target has size 1)."""
    shape = [1] * target.dim()
    shape[class_dim] = num_classes
    classes = tensor_of(static_constant(np.arange(num_classes).reshape(shape), dtypes.int64, target.device))
    if target.dtype is not dtypes.int64:
        target = target.to(dtypes.int64)
    return _ops.eq(target, classes)


def _check_class_targets(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int) -> None:
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    if target.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Long but found {scalar_type_name(target.dtype)}")
    if target.dtype is not dtypes.int64 and target.dtype is not dtypes.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {scalar_type_name(target.dtype)}")
    if target.dtype is dtypes.uint8 and input.dim() > 2:  # PyTorch's spatial kernel takes int64 only
        raise RuntimeError("expected scalar type Long but found Byte")
    if input.dim() == 1 and target.dim() != 0:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input.dim() >= 2:
        if target.dim() == 0 or target.shape[0] != input.shape[0]:
            target_batch = target.shape[0] if target.dim() else 1
            raise ValueError(
                f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({target_batch})."
            )
        expected = input.shape[:1] + input.shape[2:]
        if tuple(target.shape) != tuple(expected):
            if input.dim() == 2:
                raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
            raise RuntimeError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    classes = input.shape[1] if input.dim() >= 2 else input.shape[0]
    if weight is not None and (weight.dim() != 1 or weight.numel() != classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but "
            f"got weight tensor of shape: {list(weight.shape)}"
        )
    # Indices already in memory are checked as PyTorch's CPU kernel does; pending ones would need a run.
    check_known_data(target, functools.partial(_check_class_indices, classes, ignore_index))


def _check_class_indices(classes: int, ignore_index: int, data: np.ndarray) -> None:
    # Two reductions settle the common case (every index a class); the elementwise test, which
    # ignore_index needs, only runs when some index is outside the classes.
    if not data.size or (data.min() >= 0 and data.max() < classes):
        return
    invalid = (data != ignore_index) & ((data < 0) | (data >= classes))
    if invalid.any():
        raise IndexError(f"Target {int(data[invalid].reshape(-1)[0])} is out of bounds.")


def _nll_terms(log_probs: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int):
    """Per-element ``-w[t] * log_probs[t]`` and the weight ``w[t]`` (0 where ignored); class dim is 1."""
    classes = log_probs.shape[1]
    mask = _class_mask(target.unsqueeze(1), classes, 1)
    picked = _ops.where(mask, log_probs, 0.0).sum(1)
    valid = _ops.ne(target, ignore_index)
    if weight is None:
        sample_weight = valid.to(log_probs.dtype)
        loss = _ops.where(valid, -picked, 0.0)
    else:
        class_weight = weight.to(log_probs.dtype).reshape((1, classes) + (1,) * (log_probs.dim() - 2))
        sample_weight = _ops.where(valid, _ops.where(mask, class_weight, 0.0).sum(1), 0.0)
        loss = _ops.where(valid, -picked * sample_weight, 0.0)
    return loss, sample_weight


def _batched(input: Tensor, target: Tensor) -> tuple[Tensor, Tensor, bool]:
    """Gives an unbatched ``(C)`` input and its 0-d target a batch dim of 1."""
    if input.dim() == 1:
        return input.unsqueeze(0), target.reshape(1), True
    return input, target, False


# The dtypes ONNX's NegativeLogLikelihoodLoss takes; others (bfloat16) record the one-hot form.
_NLL_OP_DTYPES = frozenset({dtypes.float16, dtypes.float32, dtypes.float64})
_NLL_TARGET_DTYPES = frozenset({dtypes.int32, dtypes.int64})


def _nll_from_log_probs(
    log_probs: Tensor, target: Tensor, weight, ignore_index: int, reduction: str, name: str
) -> Tensor:
    log_probs, target, unbatched = _batched(log_probs, target)
    target = negatives_out_of_range(target, log_probs.shape[1], keep=ignore_index)
    # The op has no gradient for the class weights (nor has PyTorch's nll_loss, which raises):
    # weights that require one take the one-hot form, whose ops all differentiate.
    weight_needs_grad = weight is not None and weight.requires_grad and MODE.grad.enabled
    if log_probs.dtype in _NLL_OP_DTYPES and not weight_needs_grad:
        if target.dtype not in _NLL_TARGET_DTYPES:
            target = target.to(dtypes.int64)
        inputs = (log_probs, target) if weight is None else (log_probs, target, weight.to(log_probs.dtype))
        attributes = shared_attributes((("ignore_index", int(ignore_index)), ("reduction", reduction)))
        loss = apply_op("NegativeLogLikelihoodLoss", inputs, attributes, name)
        return loss.reshape(()) if unbatched and reduction == "none" else loss
    loss, sample_weight = _nll_terms(log_probs, target, weight, ignore_index)
    if reduction == "none":
        return loss.reshape(()) if unbatched else loss
    if reduction == "sum":
        return apply_op("ReduceSum", (loss,), {"keepdims": 0}, name)
    return apply_op("Div", (loss.sum(), sample_weight.sum()), None, name)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log likelihood of class indices ``target`` under log-probabilities ``input``.

    Args:
        input: ``(N, C)``, ``(C)`` or ``(N, C, d1, ...)`` log-probabilities.
        target: class indices ``(N)``, ``()`` or ``(N, d1, ...)``.
        weight: ``(C)`` class weights; 'mean' divides by the summed weights of the targets.
        ignore_index: a target value that contributes neither loss nor weight.
    """
    input, weight = loss_inputs_in_float32("NllLossBackward0", input, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_class_targets(input, target, weight, ignore_index)
    _check_not_differentiable(_nll_kernel(input), weight=weight)
    return _nll_from_log_probs(input, target, weight, ignore_index, reduction, "NllLossBackward0")


def _nll_kernel(input: Tensor) -> str:
    """The name of PyTorch's kernel for class-index targets, which its weight errors give."""
    return "nll_loss2d_forward" if input.dim() == 4 else "nll_loss_forward"


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy between ``softmax(input)`` along the class dim and ``target``.

    ``target`` holds class indices (shape of ``input`` without the class dim) or, when it has the
    shape of ``input``, class probabilities. ``label_smoothing`` mixes the target with the uniform
    distribution, as PyTorch does.

    Example::

        >>> logits = onnxnn.randn(3, 5, requires_grad=True)
        >>> F.cross_entropy(logits, onnxnn.tensor([1, 0, 4])).backward()
    """
    input, target, weight = loss_inputs_in_float32("NllLossBackward0", input, target, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    class_dim = 0 if input.dim() == 1 else 1
    classes = input.shape[class_dim]
    if target.shape == input.shape:
        return _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing, class_dim)
    _check_class_targets(input, target, weight, ignore_index)
    _check_not_differentiable(_nll_kernel(input), weight=weight)
    log_probs = _ops.log_softmax(input, class_dim)
    nll = _nll_from_log_probs(log_probs, target, weight, ignore_index, reduction, "NllLossBackward0")
    if label_smoothing == 0.0:
        return nll
    log_probs, target, unbatched = _batched(log_probs, target)
    ignored = _ops.eq(target, ignore_index)
    weighted = log_probs
    if weight is not None:
        weighted = log_probs * weight.to(log_probs.dtype).reshape((1, classes) + (1,) * (log_probs.dim() - 2))
    smooth = _ops.where(ignored, 0.0, -weighted.sum(1))
    if reduction == "none":
        smooth = smooth.reshape(()) if unbatched else smooth
    elif reduction == "sum":
        smooth = smooth.sum()
    else:
        _, sample_weight = _nll_terms(log_probs, target, weight, ignore_index)
        smooth = smooth.sum() / sample_weight.sum()
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / classes)


def _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing, class_dim):
    if not target.dtype.is_floating_point:
        raise RuntimeError(
            f"Expected floating point type for target with class probabilities, got {scalar_type_name(target.dtype)}"
        )
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    classes = input.shape[class_dim]
    if weight is not None and (weight.dim() != 1 or weight.numel() != classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but "
            f"got weight tensor of shape: {list(weight.shape)}"
        )
    log_probs = _ops.log_softmax(input, class_dim)
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    product = log_probs * target
    if weight is not None:
        shape = [1] * input.dim()
        shape[class_dim] = classes
        product = product * weight.to(input.dtype).reshape(shape)
    if reduction == "none":
        return -product.sum(class_dim)
    total = -apply_op("ReduceSum", (product,), {"keepdims": 0}, "SumBackward0")
    if reduction == "sum":
        return total
    return total / (input.numel() // classes)


def _check_probabilities(tensor: Tensor, name: str) -> None:
    """PyTorch's check that every probability lies in [0, 1], made on values already in memory only: a
    pending tensor (a sigmoid's output) would need a run, which the loss never forces."""
    check_known_data(tensor, functools.partial(_check_unit_interval, name))


def _check_unit_interval(name: str, data: np.ndarray) -> None:
    # min and max are NaN where an element is, which fails both comparisons, as PyTorch's check does.
    if data.size and not (data.min() >= 0 and data.max() <= 1):
        raise RuntimeError(f"all elements of {name} should be between 0 and 1")


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """``-w * (t * log(x) + (1 - t) * log(1 - x))`` for probabilities ``x``; logs clamped at -100 as in PyTorch."""
    input, target, weight = loss_inputs_in_float32("BinaryCrossEntropyBackward0", input, target, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the input size "
            f"({input.size()}) is deprecated. Please ensure they have the same size."
        )
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {scalar_type_name(target.dtype)} but expected {scalar_type_name(input.dtype)}")
    _check_probabilities(input, "input")
    _check_probabilities(target, "target")
    _check_not_differentiable("binary_cross_entropy", weight=weight)
    loss = binary_cross_entropy_terms(input, target)
    if weight is not None:
        # PyTorch multiplies the loss by the weight in place: the product keeps the input's dtype.
        loss = (loss * weight).to(input.dtype)
    return _reduce_loss(loss, reduction, "BinaryCrossEntropyBackward0")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits.

    ``loss = (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)``, optionally times ``weight``.
    """
    input, target, weight, pos_weight = loss_inputs_in_float32(
        "BinaryCrossEntropyWithLogitsBackward0", input, target, weight, pos_weight
    )
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    _check_not_differentiable("binary_cross_entropy_with_logits", weight=weight, pos_weight=pos_weight)
    half = half_loss_dtype(input, target, weight, pos_weight)
    if half is not None:
        input, target = widened(input), widened(target)
        weight, pos_weight = widened_or_none(weight), widened_or_none(pos_weight)
    negative_log_sigmoid = stable_softplus(_ops.neg(input))
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        negative_log_sigmoid = log_weight * negative_log_sigmoid
    loss = (1 - target) * input + negative_log_sigmoid
    if weight is not None:
        loss = loss * weight
    name = "BinaryCrossEntropyWithLogitsBackward0"
    return rounded_loss(_reduce_loss(loss, reduction, name), half, name)
