"""linear_cross_entropy: cross entropy of a linear projection's logits (PyTorch's fused criterion).

PyTorch can chunk the batch (``options``) to bound the logits' memory; the values are those of the
reference ``cross_entropy(linear(input, W, b), target)``, which is what is recorded here. ``options``
is accepted for compatibility and changes nothing.
"""

from __future__ import annotations

import math

from ...runtime.tensor import Tensor
from ._linear import linear
from ._loss import cross_entropy

__all__ = ["linear_cross_entropy"]


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Tensor | None = None,
    weight: Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options=None,
) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``.

    Args:
        input: ``(N, in_features)`` or ``(in_features)``.
        linear_weight: ``(C, in_features)``, or ``(C, d1, ..., dK, in_features)`` for a K-dimensional loss.
        target: class indices or probabilities, as for :func:`cross_entropy` over logits ``(N, C, d1, ...)``.
        linear_bias: ``(C, d1, ..., dK)``. Default: ``None``.
        ignore_index: None means -100 for class indices; it must stay None for probability targets.
    """
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    batches = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            "expected equal input and linear_weight last dimensions (in_features), "
            f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively"
        )
    classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(classes, *out_features)}, got {tuple(linear_bias.shape)}")
    if out_features and not batches:
        raise RuntimeError(
            f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires"
            f" batched input, (N, {in_features}), got unbatched input with shape {tuple(input.shape)}"
        )
    logits_shape = (*batches, classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if out_features:
        linear_weight = linear_weight.reshape(math.prod(out_features, start=classes), in_features)
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(math.prod(out_features, start=classes))
    logits = linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return cross_entropy(
        logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing
    )
