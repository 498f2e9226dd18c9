"""The loss table shared by the loss tests: numpy references of each unreduced loss, and the cases.

Each reference is PyTorch's documented formula written directly in numpy (loops where the formula
is a sum over label pairs), independent of onnxnn's implementation.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

import onnxnn.nn.functional as F
from onnxnn import nn

RNG = np.random.default_rng(1234)
REDUCTIONS = ["none", "mean", "sum"]


# ---------------------------------------------------------------- numpy references (unreduced)


def _sigmoid_log(x):
    """log(sigmoid(x)), stably."""
    return -np.logaddexp(0.0, -x)


def ref_huber(x, t, delta=1.0, weight=None):
    d = x - t
    loss = np.where(np.abs(d) < delta, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta))
    return loss if weight is None else loss * weight


def ref_smooth_l1(x, t, beta=1.0):
    d = np.abs(x - t)
    return d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


def ref_poisson(x, t, log_input=True, full=False, eps=1e-8):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        with np.errstate(divide="ignore", invalid="ignore"):
            stirling = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
        loss = loss + np.where(t > 1, stirling, 0.0)
    return loss


def ref_gaussian(x, t, var, full=False, eps=1e-6):
    var = np.asarray(var, np.float64)
    if var.ndim and var.shape == x.shape[:-1]:
        var = var[..., None]
    var = np.maximum(var, eps)
    loss = 0.5 * (np.log(var) + (x - t) ** 2 / var)
    return loss + 0.5 * np.log(2 * np.pi) if full else loss


def ref_kl(x, t, log_target=False):
    if log_target:
        return np.exp(t) * (t - x)
    return np.where(t == 0, 0.0, t * np.log(np.where(t == 0, 1.0, t))) - t * x


def ref_margin_ranking(x1, x2, y, margin=0.0):
    return np.maximum(0.0, -y * (x1 - x2) + margin)


def ref_hinge(x, y, margin=1.0):
    return np.where(y == 1, x, np.maximum(0.0, margin - x))


def ref_soft_margin(x, y):
    return np.logaddexp(0.0, -y * x)


def ref_multilabel_soft_margin(x, y, weight=None):
    loss = -(y * _sigmoid_log(x) + (1 - y) * _sigmoid_log(-x))
    if weight is not None:
        loss = loss * weight
    return loss.mean(-1)


def ref_multilabel_margin(x, y):
    """Per sample: sum over listed targets j (up to the first -1) and unlisted classes i of max(0, 1 - x[j] + x[i])."""
    x2, y2 = np.atleast_2d(x), np.atleast_2d(y)
    out = np.zeros(len(x2))
    for n, (row, labels) in enumerate(zip(x2, y2)):
        listed = []
        for label in labels:
            if label == -1:
                break
            listed.append(int(label))
        for j in listed:
            for i in range(len(row)):
                if i not in listed:
                    out[n] += max(0.0, 1 - row[j] + row[i])
        out[n] /= len(row)
    return out if x.ndim == 2 else out[0]


def ref_multi_margin(x, y, p=1, margin=1.0, weight=None):
    x2 = np.atleast_2d(x)
    y1 = np.reshape(y, -1)
    out = np.zeros(len(x2))
    for n, (row, label) in enumerate(zip(x2, y1)):
        for i in range(len(row)):
            if i != label:
                term = max(0.0, margin - row[label] + row[i]) ** p
                out[n] += term * (weight[label] if weight is not None else 1.0)
        out[n] /= len(row)
    return out.reshape(np.shape(y))


def ref_cosine_embedding(x1, x2, y, margin=0.0):
    cosine = (x1 * x2).sum(-1) / np.sqrt(((x1 * x1).sum(-1) + 1e-12) * ((x2 * x2).sum(-1) + 1e-12))
    return np.where(y == 1, 1 - cosine, np.maximum(0.0, cosine - margin))


def _distance(u, v, p=2.0, eps=1e-6):
    return (np.abs(u - v + eps) ** p).sum(-1) ** (1 / p)


def ref_triplet(a, pos, neg, margin=1.0, p=2.0, eps=1e-6, swap=False):
    to_negative = _distance(a, neg, p, eps)
    if swap:
        to_negative = np.minimum(to_negative, _distance(pos, neg, p, eps))
    return np.maximum(0.0, _distance(a, pos, p, eps) - to_negative + margin)


def ref_triplet_with_distance(a, pos, neg, distance_function=None, margin=1.0, swap=False):
    def distance(u, v):
        return _distance(u, v) if distance_function is None else np.abs(u - v).sum(-1)

    to_negative = distance(a, neg)
    if swap:
        to_negative = np.minimum(to_negative, distance(pos, neg))
    return np.maximum(0.0, distance(a, pos) - to_negative + margin)


def _class_weights(t, weight, ignore_index, classes):
    w = np.ones(classes) if weight is None else weight
    return np.where(t == ignore_index, 0.0, w[np.where(t == ignore_index, 0, t)])


def ref_nll(lp, t, weight=None, ignore_index=-100):
    """-w[t] * lp[n, t, ...], the class along axis 1; 0 where ignored."""
    picked = np.take_along_axis(lp, np.expand_dims(np.where(t == ignore_index, 0, t), 1), 1).squeeze(1)
    return -_class_weights(t, weight, ignore_index, lp.shape[1]) * picked


def ref_cross_entropy(x, t, weight=None, ignore_index=-100, label_smoothing=0.0):
    lp = x - np.log(np.exp(x).sum(1, keepdims=True))
    classes = x.shape[1]
    if t.dtype.kind == "f":  # class probabilities
        w = (np.ones(classes) if weight is None else weight).reshape((1, classes) + (1,) * (x.ndim - 2))
        t = t * (1 - label_smoothing) + label_smoothing / classes
        return -(lp * t * w).sum(1)
    w = (np.ones(classes) if weight is None else weight).reshape((1, classes) + (1,) * (x.ndim - 2))
    smooth = np.where(t == ignore_index, 0.0, -(lp * w).sum(1))
    return (1 - label_smoothing) * ref_nll(lp, t, weight, ignore_index) + label_smoothing / classes * smooth


def class_weight_sum(inputs, kwargs):
    """PyTorch's 'mean' for class-index targets: the summed weights of the counted targets."""
    x, t = inputs[0], inputs[1]
    return _class_weights(t, kwargs.get("weight"), kwargs.get("ignore_index", -100), x.shape[1]).sum()


def ref_linear_cross_entropy(x, w, t, linear_bias=None, weight=None, ignore_index=None, label_smoothing=0.0):
    """cross entropy of ``x @ W^T + b`` with the logits laid out ``(N, C, d1, ...)``."""
    logits = np.einsum("ni,c...i->nc...", x, w) + (0.0 if linear_bias is None else linear_bias)
    return ref_cross_entropy(logits, t, weight, -100 if ignore_index is None else ignore_index, label_smoothing)


def linear_class_weight_sum(inputs, kwargs):
    x, w, t = inputs
    ignore_index = kwargs.get("ignore_index")
    return _class_weights(t, kwargs.get("weight"), -100 if ignore_index is None else ignore_index, w.shape[0]).sum()


def ref_bce(x, t, weight=None):
    loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log(1 - x), -100))
    return loss if weight is None else loss * weight


def ref_bce_logits(x, t, weight=None, pos_weight=None):
    log_weight = 1 + (0 if pos_weight is None else (pos_weight - 1) * t)
    loss = (1 - t) * x + log_weight * np.logaddexp(0.0, -x)
    return loss if weight is None else loss * weight


def l1_distance(u, v):
    """A custom distance for TripletMarginWithDistanceLoss, written with Tensor methods torch shares."""
    return (u - v).abs().sum(-1)


# ---------------------------------------------------------------- inputs


def normal(*shape, scale=1.0):
    return scale * RNG.standard_normal(shape)


def signs(*shape):
    return RNG.choice([-1.0, 1.0], size=shape)


def log_probabilities(*shape):
    z = RNG.standard_normal(shape)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def probabilities_with_a_zero(*shape):
    p = np.exp(log_probabilities(*shape))
    p[0, 0] = 0.0
    return p


MULTILABEL_TARGET = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 2, 2]])


@dataclasses.dataclass
class Case:
    id: str
    function: Callable
    module: type
    reference: Callable
    inputs: list  # numpy arrays: float64 (converted to the tested dtype) or int64
    kwargs: dict = dataclasses.field(default_factory=dict)  # np.ndarray values become tensors (class weights)
    differentiable: tuple = ()  # indices of the inputs to differentiate (default: every float input)
    inner_terms: int = 1  # terms summed inside one unreduced element
    weighted_mean: bool = False  # 'mean' divides by the summed ``weight`` (mse_loss and l1_loss)
    mean_divisor: Callable | None = None  # (inputs, kwargs) -> what 'mean' divides the sum by
    reductions: tuple = tuple(REDUCTIONS)

    def grad_inputs(self):
        if self.differentiable:
            return self.differentiable
        return tuple(i for i, a in enumerate(self.inputs) if a.dtype.kind == "f")


CASES = [
    Case("l1", F.l1_loss, nn.L1Loss, lambda x, t: np.abs(x - t), [normal(3, 4), normal(3, 4)]),
    Case("mse", F.mse_loss, nn.MSELoss, lambda x, t: (x - t) ** 2, [normal(3, 4), normal(3, 4)]),
    Case(
        "l1_weight",
        F.l1_loss,
        None,
        lambda x, t, weight: np.abs(x - t) * weight,
        [normal(3, 4), normal(3, 4)],
        {"weight": RNG.uniform(0.5, 2, (3, 4))},
        weighted_mean=True,
    ),
    Case(
        "mse_weight",
        F.mse_loss,
        None,
        lambda x, t, weight: (x - t) ** 2 * weight,
        [normal(3, 4), normal(3, 4)],
        {"weight": RNG.uniform(0.5, 2, (3, 4))},
        weighted_mean=True,
    ),
    Case(
        "huber_weight",
        F.huber_loss,
        None,
        ref_huber,
        [normal(3, 4, scale=2), normal(3, 4)],
        {"weight": RNG.uniform(0.5, 2, (3, 4))},
    ),
    Case(
        "cross_entropy",
        F.cross_entropy,
        nn.CrossEntropyLoss,
        ref_cross_entropy,
        [normal(4, 3), np.array([0, 2, 1, 2])],
        mean_divisor=class_weight_sum,
        inner_terms=3,
    ),
    Case(
        "cross_entropy_spatial_weight_ignore_smoothing",
        F.cross_entropy,
        nn.CrossEntropyLoss,
        ref_cross_entropy,
        [normal(4, 3, 2), np.array([[0, 1], [2, -100], [1, 1], [0, 2]])],
        {"weight": RNG.uniform(0.5, 2, 3), "label_smoothing": 0.2},
        mean_divisor=class_weight_sum,
        inner_terms=6,
    ),
    Case(
        "cross_entropy_probabilities",
        F.cross_entropy,
        nn.CrossEntropyLoss,
        ref_cross_entropy,
        [normal(4, 3, 2), np.exp(log_probabilities(4, 2, 3)).transpose(0, 2, 1).copy()],
        {"weight": RNG.uniform(0.5, 2, 3), "label_smoothing": 0.1},
        inner_terms=6,
    ),
    Case(
        "linear_cross_entropy",
        F.linear_cross_entropy,
        None,
        ref_linear_cross_entropy,
        [normal(4, 5), normal(3, 5), np.array([0, 2, 1, 1])],
        {"linear_bias": normal(3), "ignore_index": 1},
        mean_divisor=linear_class_weight_sum,
        inner_terms=8,
    ),
    Case(
        "linear_cross_entropy_spatial_weight_smoothing",
        F.linear_cross_entropy,
        None,
        ref_linear_cross_entropy,
        [normal(4, 5), normal(3, 2, 5), np.array([[0, 2], [1, 1], [2, 2], [0, 1]])],
        {"weight": RNG.uniform(0.5, 2, 3), "label_smoothing": 0.2},
        mean_divisor=linear_class_weight_sum,
        inner_terms=12,
    ),
    Case(
        "nll_weight_ignore",
        F.nll_loss,
        nn.NLLLoss,
        ref_nll,
        [log_probabilities(5, 4), np.array([0, 1, 3, 1, 2])],
        {"weight": RNG.uniform(0.5, 2, 4), "ignore_index": 1},
        mean_divisor=class_weight_sum,
    ),
    Case(
        "bce_weight",
        F.binary_cross_entropy,
        nn.BCELoss,
        ref_bce,
        [RNG.uniform(0.05, 0.95, (3, 4)), RNG.uniform(0, 1, (3, 4))],
        {"weight": RNG.uniform(0.5, 2, (3, 4))},
    ),
    Case(
        "bce_logits_pos_weight",
        F.binary_cross_entropy_with_logits,
        nn.BCEWithLogitsLoss,
        ref_bce_logits,
        [normal(3, 4, scale=2), RNG.uniform(0, 1, (3, 4))],
        {"weight": RNG.uniform(0.5, 2, (3, 4)), "pos_weight": RNG.uniform(0.5, 3, 4)},
    ),
    Case("huber", F.huber_loss, nn.HuberLoss, ref_huber, [normal(3, 4, scale=2), normal(3, 4)]),
    Case("huber_delta", F.huber_loss, nn.HuberLoss, ref_huber, [normal(3, 4, scale=2), normal(3, 4)], {"delta": 0.5}),
    Case("smooth_l1", F.smooth_l1_loss, nn.SmoothL1Loss, ref_smooth_l1, [normal(3, 4, scale=2), normal(3, 4)]),
    Case(
        "smooth_l1_beta",
        F.smooth_l1_loss,
        nn.SmoothL1Loss,
        ref_smooth_l1,
        [normal(3, 4, scale=2), normal(3, 4)],
        {"beta": 0.5},
    ),
    Case(
        "smooth_l1_beta0", F.smooth_l1_loss, nn.SmoothL1Loss, ref_smooth_l1, [normal(3, 4), normal(3, 4)], {"beta": 0.0}
    ),
    Case(
        "poisson",
        F.poisson_nll_loss,
        nn.PoissonNLLLoss,
        ref_poisson,
        [normal(3, 4), RNG.poisson(2.0, (3, 4)).astype(np.float64)],
        differentiable=(0,),
    ),
    Case(
        "poisson_rate_full",
        F.poisson_nll_loss,
        nn.PoissonNLLLoss,
        ref_poisson,
        [RNG.uniform(0.5, 3, (3, 4)), RNG.poisson(2.0, (3, 4)).astype(np.float64)],
        {"log_input": False, "full": True},
        differentiable=(0,),
    ),
    Case(
        "gaussian",
        F.gaussian_nll_loss,
        nn.GaussianNLLLoss,
        ref_gaussian,
        [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3, 4))],
    ),
    Case(
        "gaussian_shared_var",
        F.gaussian_nll_loss,
        nn.GaussianNLLLoss,
        ref_gaussian,
        [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3, 1))],
        {"full": True},
    ),
    Case(
        "gaussian_var_per_row",
        F.gaussian_nll_loss,
        nn.GaussianNLLLoss,
        ref_gaussian,
        [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3,))],
    ),
    Case(
        "gaussian_var_clamped",
        F.gaussian_nll_loss,
        nn.GaussianNLLLoss,
        ref_gaussian,
        [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3, 4)) * (RNG.random((3, 4)) > 0.5)],
        {"eps": 0.1},
        differentiable=(0, 1),
    ),
    Case(
        "kl",
        F.kl_div,
        nn.KLDivLoss,
        ref_kl,
        [log_probabilities(3, 4), probabilities_with_a_zero(3, 4)],
        differentiable=(0,),
    ),
    Case(
        "kl_log_target",
        F.kl_div,
        nn.KLDivLoss,
        ref_kl,
        [log_probabilities(3, 4), log_probabilities(3, 4)],
        {"log_target": True},
    ),
    Case(
        "margin_ranking",
        F.margin_ranking_loss,
        nn.MarginRankingLoss,
        ref_margin_ranking,
        [normal(6), normal(6), signs(6)],
        {"margin": 0.5},
        differentiable=(0, 1),
    ),
    Case(
        "hinge_embedding",
        F.hinge_embedding_loss,
        nn.HingeEmbeddingLoss,
        ref_hinge,
        [normal(3, 4, scale=2), signs(3, 4)],
        differentiable=(0,),
    ),
    Case(
        "hinge_embedding_margin",
        F.hinge_embedding_loss,
        nn.HingeEmbeddingLoss,
        ref_hinge,
        [normal(3, 4, scale=2), signs(3, 4)],
        {"margin": 0.5},
        differentiable=(0,),
    ),
    Case(
        "soft_margin",
        F.soft_margin_loss,
        nn.SoftMarginLoss,
        ref_soft_margin,
        [normal(3, 4), signs(3, 4)],
        differentiable=(0,),
    ),
    Case(
        "multilabel_soft_margin",
        F.multilabel_soft_margin_loss,
        nn.MultiLabelSoftMarginLoss,
        ref_multilabel_soft_margin,
        [normal(3, 4), RNG.integers(0, 2, (3, 4)).astype(np.float64)],
        differentiable=(0,),
        inner_terms=4,
    ),
    Case(
        "multilabel_soft_margin_weight",
        F.multilabel_soft_margin_loss,
        nn.MultiLabelSoftMarginLoss,
        ref_multilabel_soft_margin,
        [normal(3, 4), RNG.integers(0, 2, (3, 4)).astype(np.float64)],
        {"weight": RNG.uniform(0.5, 2, 4)},
        differentiable=(0,),
        inner_terms=4,
    ),
    Case(
        "multilabel_margin",
        F.multilabel_margin_loss,
        nn.MultiLabelMarginLoss,
        ref_multilabel_margin,
        [normal(3, 4), MULTILABEL_TARGET],
        inner_terms=16,
    ),
    Case(
        "multilabel_margin_unbatched",
        F.multilabel_margin_loss,
        nn.MultiLabelMarginLoss,
        ref_multilabel_margin,
        [normal(4), np.array([2, 1, -1, 0])],
        inner_terms=16,
    ),
    Case(
        "multi_margin",
        F.multi_margin_loss,
        nn.MultiMarginLoss,
        ref_multi_margin,
        [normal(3, 4), np.array([0, 3, 1])],
        inner_terms=4,
    ),
    Case(
        "multi_margin_p2_weight",
        F.multi_margin_loss,
        nn.MultiMarginLoss,
        ref_multi_margin,
        [normal(3, 4), np.array([2, 3, 2])],
        {"p": 2, "margin": 0.7, "weight": RNG.uniform(0.5, 2, 4)},
        inner_terms=4,
    ),
    Case(
        "multi_margin_unbatched",
        F.multi_margin_loss,
        nn.MultiMarginLoss,
        ref_multi_margin,
        [normal(4), np.array(1)],
        inner_terms=4,
    ),
    Case(
        "cosine_embedding",
        F.cosine_embedding_loss,
        nn.CosineEmbeddingLoss,
        ref_cosine_embedding,
        [normal(3, 5), normal(3, 5), np.array([1.0, -1.0, -1.0])],
        {"margin": -0.5},
        differentiable=(0, 1),
        inner_terms=10,
    ),
    Case(
        "cosine_embedding_unbatched",
        F.cosine_embedding_loss,
        nn.CosineEmbeddingLoss,
        ref_cosine_embedding,
        [normal(5), normal(5), np.array(1.0)],
        differentiable=(0, 1),
        inner_terms=10,
    ),
    Case(
        "triplet",
        F.triplet_margin_loss,
        nn.TripletMarginLoss,
        ref_triplet,
        [normal(4, 5), normal(4, 5), normal(4, 5)],
        {"margin": 2.0},
        inner_terms=10,
    ),
    Case(
        "triplet_p1_swap",
        F.triplet_margin_loss,
        nn.TripletMarginLoss,
        ref_triplet,
        [normal(4, 5), normal(4, 5), normal(4, 5)],
        {"margin": 2.0, "p": 1.0, "swap": True},
        inner_terms=10,
    ),
    Case(
        "triplet_p3",
        F.triplet_margin_loss,
        nn.TripletMarginLoss,
        ref_triplet,
        [normal(4, 5), normal(4, 5), normal(4, 5)],
        {"margin": 2.0, "p": 3.0, "eps": 1e-3},
        inner_terms=10,
    ),
    Case(
        "triplet_distance",
        F.triplet_margin_with_distance_loss,
        nn.TripletMarginWithDistanceLoss,
        ref_triplet_with_distance,
        [normal(4, 5), normal(4, 5), normal(4, 5)],
        {"margin": 2.0, "swap": True},
        inner_terms=10,
    ),
    Case(
        "triplet_custom_distance",
        F.triplet_margin_with_distance_loss,
        nn.TripletMarginWithDistanceLoss,
        ref_triplet_with_distance,
        [normal(4, 5), normal(4, 5), normal(4, 5)],
        {"distance_function": l1_distance, "margin": 3.0},
        inner_terms=10,
    ),
]
IDS = [case.id for case in CASES]
# Per-element weights are a functional-only argument (MSELoss, L1Loss and HuberLoss take none).
MODULE_CASES = [case for case in CASES if case.module is not None]
