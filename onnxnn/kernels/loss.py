"""Loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (as found in imported
training graphs).

Both pick, for every sample and spatial position, the class that the target names (class axis
1); ``ignore_index`` targets contribute nothing and weigh nothing. ``reduction="mean"`` divides
by the summed weights of the counted targets, not by their number, as ONNX specifies.
"""

from __future__ import annotations

import numpy as np

from ._common import reduce_sum
from .linalg import log_softmax
from ..ir.kernel_registry import FLOATING, kernels

__all__: list[str] = []


def _negative_log_likelihood(xp, log_probabilities, target, weight, attrs):
    ignore_index = attrs.get("ignore_index")
    target = xp.asarray(target).astype(np.int64, copy=False)
    ignored = (target == ignore_index) if ignore_index is not None else None
    safe_target = xp.where(ignored, 0, target) if ignored is not None else target
    picked = xp.take_along_axis(log_probabilities, xp.expand_dims(safe_target, 1), axis=1)
    picked = xp.squeeze(picked, 1)
    weights = xp.take(weight, safe_target) if weight is not None else xp.ones(target.shape, log_probabilities.dtype)
    if ignored is not None:
        weights = xp.where(ignored, log_probabilities.dtype.type(0), weights)
    loss = -picked * weights
    reduction = attrs.get("reduction", "mean")
    if reduction == "none":
        return loss
    total = reduce_sum(xp, loss)
    if reduction == "sum":
        return total
    return total / reduce_sum(xp, weights)


@kernels.register("NegativeLogLikelihoodLoss", types=FLOATING)
def negative_log_likelihood_loss(xp, inputs, attrs):
    weight = inputs[2] if len(inputs) > 2 else None
    return [_negative_log_likelihood(xp, inputs[0], inputs[1], weight, attrs)]


@kernels.register("SoftmaxCrossEntropyLoss", types=FLOATING)
def softmax_cross_entropy_loss(xp, inputs, attrs):
    scores, labels = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    log_probabilities = log_softmax(xp, [scores], {"axis": 1})[0]
    loss = _negative_log_likelihood(xp, log_probabilities, labels, weight, attrs)
    return [loss, log_probabilities]
