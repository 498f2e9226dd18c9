"""Loss modules: the criteria of ``torch.nn``, each a thin Module over its functional form.

As in PyTorch, class weights (and BCEWithLogitsLoss's ``pos_weight``) are buffers, so they follow
``.to()`` and appear in ``state_dict`` when given; a loss has no parameters. The deprecated
``size_average``/``reduce`` pair is folded into ``reduction`` at construction, with PyTorch's warning.
"""

from __future__ import annotations

import math
from typing import Callable

from ...runtime.tensor import Tensor
from .. import functional as F
from ..functional._loss import _legacy_reduction
from .distance import PairwiseDistance
from .linear import Linear
from .module import Module

__all__ = [
    "L1Loss",
    "NLLLoss",
    "NLLLoss2d",
    "PoissonNLLLoss",
    "GaussianNLLLoss",
    "KLDivLoss",
    "MSELoss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "HingeEmbeddingLoss",
    "MultiLabelMarginLoss",
    "SmoothL1Loss",
    "HuberLoss",
    "SoftMarginLoss",
    "CrossEntropyLoss",
    "MultiLabelSoftMarginLoss",
    "CosineEmbeddingLoss",
    "MarginRankingLoss",
    "MultiMarginLoss",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
    "CTCLoss",
    "LinearCrossEntropyLoss",
]


class _Loss(Module):
    reduction: str

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = _legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean absolute error ``|input - target|``, reduced by ``reduction`` (``'none'``, ``'mean'``, ``'sum'``).

    Example::

        >>> nn.L1Loss()(onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([0.0, 0.0]))
        tensor(1.5000)
    """

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of class indices under log-probabilities ``(N, C, d1, ...)``.

    Args:
        weight: ``(C)`` class weights (a buffer). Default: ``None``.
        ignore_index: a target value that counts neither in the loss nor in the mean. Default: ``-100``.
        reduction: ``'none'``, ``'mean'`` (weighted mean) or ``'sum'``. Default: ``'mean'``.
    """

    __constants__ = ["ignore_index", "reduction"]
    ignore_index: int

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average=None,
        ignore_index: int = -100,
        reduce=None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """Legacy alias of :class:`NLLLoss` (which already takes ``(N, C, H, W)`` inputs), kept as PyTorch keeps it."""


class PoissonNLLLoss(_Loss):
    """Poisson negative log likelihood; see :func:`onnxnn.nn.functional.poisson_nll_loss`.

    Args:
        log_input: the input is the log of the rate. Default: ``True``.
        full: add Stirling's approximation term. Default: ``False``.
        eps: keeps the log finite when ``log_input=False``. Default: ``1e-8``.
    """

    __constants__ = ["log_input", "full", "eps", "reduction"]

    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        size_average=None,
        eps: float = 1e-8,
        reduce=None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(
            log_input, target, log_input=self.log_input, full=self.full, eps=self.eps, reduction=self.reduction
        )


class GaussianNLLLoss(_Loss):
    """Gaussian negative log likelihood of ``target`` given mean ``input`` and variance ``var``.

    Args:
        full: include the constant ``0.5 * log(2 pi)``. Default: ``False``.
        eps: variances are clamped at ``eps`` (forward only). Default: ``1e-6``.
    """

    __constants__ = ["full", "eps", "reduction"]

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of log-probabilities ``input`` from ``target``.

    Args:
        reduction: ``'none'``, ``'mean'``, ``'sum'`` or ``'batchmean'`` (the true KL divergence).
        log_target: ``target`` holds log-probabilities. Default: ``False``.
    """

    __constants__ = ["reduction"]

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MSELoss(_Loss):
    """Mean squared error ``(input - target)^2``, reduced by ``reduction``.

    Example::

        >>> loss = nn.MSELoss()(model(x), y)
        >>> loss.backward()
    """

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities ``input`` (logs clamped at -100).

    Args:
        weight: per-element rescaling, broadcast to the input (a buffer). Default: ``None``.
    """

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits.

    Args:
        weight: per-element rescaling (a buffer). Default: ``None``.
        pos_weight: weight of the positive term per class, broadcast along the last dim (a buffer).
    """

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average=None,
        reduce=None,
        reduction: str = "mean",
        pos_weight: Tensor | None = None,
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, pos_weight=self.pos_weight, reduction=self.reduction
        )


class HingeEmbeddingLoss(_Loss):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1. Default margin: ``1.0``."""

    __constants__ = ["margin", "reduction"]
    margin: float

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss over class indices listed in ``target`` (ended by -1)."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above: ``0.5 d^2 / beta`` or ``|d| - 0.5 beta``. Default beta: ``1.0``."""

    __constants__ = ["reduction"]

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below ``delta``, linear above: ``0.5 d^2`` or ``delta * (|d| - 0.5 delta)``. Default delta: 1."""

    __constants__ = ["reduction", "delta"]

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        if not isinstance(delta, (float, int)):
            raise TypeError(f"delta must be a float or int, got: {type(delta)}")
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SoftMarginLoss(_Loss):
    """Logistic loss ``log(1 + exp(-target * input))`` for targets of 1 or -1."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of ``softmax(input)`` over the class dim against class indices or probabilities.

    Args:
        weight: ``(C)`` class weights (a buffer). Default: ``None``.
        ignore_index: a class-index target to skip. Default: ``-100``.
        reduction: ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'mean'``.
        label_smoothing: mix of the uniform distribution into the target, in [0, 1]. Default: ``0.0``.

    Example::

        >>> criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
        >>> criterion(onnxnn.randn(3, 5, requires_grad=True), onnxnn.tensor([1, 0, 4])).backward()
    """

    __constants__ = ["ignore_index", "reduction", "label_smoothing"]
    ignore_index: int
    label_smoothing: float

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average=None,
        ignore_index: int = -100,
        reduce=None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-class logistic losses of 0/1 targets, averaged over classes.

    Args:
        weight: ``(C)`` class weights (a buffer). Default: ``None``.
    """

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` for target 1, ``max(0, cos(x1, x2) - margin)`` for -1. Default margin: ``0.0``."""

    __constants__ = ["margin", "reduction"]
    margin: float

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -target * (input1 - input2) + margin)``. Default margin: ``0.0``."""

    __constants__ = ["margin", "reduction"]
    margin: float

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss ``sum_{i != y} max(0, margin - x[y] + x[i])^p / C``.

    Args:
        p: 1 or 2. Default: ``1``.
        margin: Default: ``1.0``.
        weight: ``(C)`` class weights (a buffer). Default: ``None``.
    """

    __constants__ = ["p", "margin", "reduction"]
    margin: float
    p: int

    def __init__(
        self,
        p: int = 1,
        margin: float = 1.0,
        weight: Tensor | None = None,
        size_average=None,
        reduce=None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p != 1 and p != 2:
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.dim()}D instead")
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(
            input, target, p=self.p, margin=self.margin, weight=self.weight, reduction=self.reduction
        )


class TripletMarginLoss(_Loss):
    """``max(0, d(a, p) - d(a, n) + margin)`` with ``d`` the pairwise ``p``-norm distance.

    Args:
        margin: must be positive. Default: ``1.0``.
        p: the norm degree. Default: ``2.0``.
        eps: added to the difference before the norm. Default: ``1e-6``.
        swap: use the smaller of ``d(a, n)`` and ``d(p, n)``. Default: ``False``.
    """

    __constants__ = ["margin", "p", "eps", "swap", "reduction"]
    margin: float
    p: float
    eps: float
    swap: bool

    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        size_average=None,
        reduce=None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(
            anchor,
            positive,
            negative,
            margin=self.margin,
            p=self.p,
            eps=self.eps,
            swap=self.swap,
            reduction=self.reduction,
        )


class TripletMarginWithDistanceLoss(_Loss):
    """The triplet margin loss with any distance; the default is a :class:`PairwiseDistance` submodule.

    Args:
        distance_function: maps two tensors to their distances. Default: ``PairwiseDistance()``.
        margin: must be positive. Default: ``1.0``.
        swap: use the smaller of ``d(a, n)`` and ``d(p, n)``. Default: ``False``.
    """

    __constants__ = ["margin", "swap", "reduction"]
    margin: float
    swap: bool

    def __init__(
        self,
        *,
        distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ) -> None:
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(
                f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead"
            )
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor,
            positive,
            negative,
            distance_function=self.distance_function,
            margin=self.margin,
            swap=self.swap,
            reduction=self.reduction,
        )


class CTCLoss(_Loss):
    """Connectionist temporal classification loss; see :func:`onnxnn.nn.functional.ctc_loss`.

    Args:
        blank: the blank class. Default: ``0``.
        reduction: ``'none'``, ``'mean'`` (each loss divided by its target length, then averaged) or
            ``'sum'``. Default: ``'mean'``.
        zero_infinity: report impossible alignments as 0 instead of inf. Default: ``False``.

    Example::

        >>> log_probs = onnxnn.randn(50, 16, 20).log_softmax(2)
        >>> targets = onnxnn.randint(1, 20, (16, 30))
        >>> nn.CTCLoss()(log_probs, targets, [50] * 16, [30] * 16)
    """

    __constants__ = ["blank", "reduction"]
    blank: int
    zero_infinity: bool

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Tensor, target_lengths: Tensor) -> Tensor:
        return F.ctc_loss(
            log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction, self.zero_infinity
        )


class LinearCrossEntropyLoss(_WeightedLoss):
    """Cross entropy of the logits of an own :class:`Linear` layer: ``cross_entropy(linear(input), target)``.

    Args:
        in_features: size of each input sample.
        num_classes: number of classes ``C``.
        out_features: ``(d1, ..., dK)`` for a K-dimensional loss. Default: ``()``.
        bias: give the projection a bias (stored flat, ``(C * prod(out_features),)``). Default: ``False``.
        device, dtype: where and in which dtype to create the projection.
        reduction, weight, label_smoothing: as for :class:`CrossEntropyLoss`.
        ignore_index: None means -100 for class-index targets. Default: ``None``.
        options: PyTorch's chunking options; accepted and ignored (the values do not depend on them).
    """

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple = (),
        bias: bool = False,
        device=None,
        dtype=None,
        reduction: str = "mean",
        weight: Tensor | None = None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options=None,
    ) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__(weight=weight, size_average=None, reduce=None, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = out_features
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        # Linear's weight is 2-D: the K-dimensional projection is stored flat and reshaped in forward.
        self.linear = Linear(
            in_features, math.prod(out_features, start=num_classes), bias=bias, device=device, dtype=dtype
        )
        self.options = options

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        linear_weight = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
        linear_bias = (
            self.linear.bias.reshape((self.num_classes, *self.out_features)) if self.linear.bias is not None else None
        )
        return F.linear_cross_entropy(
            input,
            linear_weight,
            target,
            linear_bias=linear_bias,
            weight=self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            options=self.options,
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )
