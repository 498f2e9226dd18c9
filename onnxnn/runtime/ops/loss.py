"""ONNX's loss ops, as imported training graphs contain them: NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss (shape and gradient rules; kernels in kernels/loss.py).

onnxnn's own losses record elementwise ops instead (nn/functional/_loss*.py); these rules let an
imported model that uses the fused ops train. Both ops pick, per sample and spatial position, the
class the target names along axis 1; an ``ignore_index`` target weighs nothing, and ``"mean"``
divides by the summed weights of the counted targets. The gradient with respect to the class
weights is not provided (PyTorch has none either); targets are integers.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.graph import static_constant
from ...ir.registry import gradient_rules, shape_rules
from ..tensor import Tensor
from .comparison import eq, ne
from .elementwise import where
from .linalg import log_softmax

__all__: list[str] = []

_REDUCTIONS = ("none", "sum", "mean")


def _loss_shapes(op_type: str, inputs, attrs):
    scores, target = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    if len(scores.shape) < 2:
        raise RuntimeError(f"{op_type}: input of shape {list(scores.shape)} needs a batch and a class axis (rank >= 2)")
    expected = (scores.shape[0],) + tuple(scores.shape[2:])
    if tuple(target.shape) != expected:
        raise RuntimeError(
            f"{op_type}: target of shape {list(target.shape)} does not match input of shape "
            f"{list(scores.shape)}; expected {list(expected)}"
        )
    if target.dtype.is_floating_point:
        raise RuntimeError(f"{op_type}: target must hold integer class indices, got {target.dtype.name}")
    if weight is not None and tuple(weight.shape) != (scores.shape[1],):
        raise RuntimeError(
            f"{op_type}: weight of shape {list(weight.shape)} does not match the {scores.shape[1]} classes"
        )
    reduction = attrs.get("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise RuntimeError(f"{op_type}: reduction must be one of {list(_REDUCTIONS)}, got {reduction!r}")
    return [(expected if reduction == "none" else (), scores.dtype)]


@shape_rules.register("NegativeLogLikelihoodLoss")
def _negative_log_likelihood_loss_shape(inputs, attrs):
    return _loss_shapes("NegativeLogLikelihoodLoss", inputs, attrs)


@shape_rules.register("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy_loss_shape(inputs, attrs):
    (loss,) = _loss_shapes("SoftmaxCrossEntropyLoss", inputs, attrs)
    return [loss, (inputs[0].shape, inputs[0].dtype)]


def _log_probability_gradient(ctx, g: Tensor, log_probabilities: Tensor) -> Tensor:
    """d loss / d log_probabilities: ``-w[t] * g`` at the target class, scaled as the reduction scales."""
    target = ctx.input(1)
    if target.dtype is not dtypes.int64:
        target = target.to(dtypes.int64)
    rank = log_probabilities.dim()
    classes = log_probabilities.shape[1]
    class_shape = (1, classes) + (1,) * (rank - 2)
    class_index = Tensor._from_value(
        static_constant(np.arange(classes).reshape(class_shape), dtypes.int64, log_probabilities.device)
    )
    chosen = eq(target.unsqueeze(1), class_index)
    dtype = log_probabilities.dtype
    ignore_index = ctx.attrs.get("ignore_index")
    counted = None if ignore_index is None else ne(target, int(ignore_index))
    if ctx.num_inputs > 2 and ctx.input_value(2) is not None:
        weight = ctx.input(2).to(dtype).reshape(class_shape)
        sample_weight = where(chosen, weight, 0.0).sum(1)
        if counted is not None:
            sample_weight = where(counted, sample_weight, 0.0)
    elif counted is not None:
        # Unweighted, each counted target weighs 1: read off the targets, not summed over every class.
        sample_weight = counted.to(dtype)
    else:
        sample_weight = chosen.to(dtype).sum(1)
    reduction = ctx.attrs.get("reduction", "mean")
    scaled = g * sample_weight
    if reduction == "mean":
        # Divided by the total weight, 0 / 0 = NaN where every counted target weighs 0, as PyTorch's;
        # ignored targets' rows stay 0 (PyTorch writes nothing there), so a batch of padding alone,
        # 0 / 0 as a loss, has the gradient 0 and sends no NaN to the weights. An ignore_index that
        # is no class (PyTorch's -100) chooses no class in its rows, where the last Where writes 0.
        total = sample_weight.sum()
        scaled = scaled / total
        if counted is not None and 0 <= int(ignore_index) < classes:
            scaled = where(counted, scaled, 0.0)
    return where(chosen, -scaled.unsqueeze(1), 0.0)


@gradient_rules.register("NegativeLogLikelihoodLoss")
def _negative_log_likelihood_loss_grad(ctx, g):
    return _log_probability_gradient(ctx, g, ctx.input(0)), None, None


@gradient_rules.register("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy_loss_grad(ctx, g, g_log_probabilities=None):
    scores = ctx.input(0)
    log_probabilities = ctx.output(1) if len(ctx.function.outputs) > 1 else log_softmax(scores, 1)
    total = _log_probability_gradient(ctx, g, log_probabilities)
    if g_log_probabilities is not None:
        total = total + g_log_probabilities
    # Through LogSoftmax along the class axis.
    return total - log_probabilities.exp() * total.sum(1, keepdim=True), None, None
