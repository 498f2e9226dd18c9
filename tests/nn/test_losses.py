"""Loss modules and their functional forms: PyTorch's formulas, reductions, gradients, errors and export.

Every case in ``CASES`` names a functional form, its module, a numpy reference of the unreduced loss
and its inputs. The same table drives the forward checks (both executors, float32 and float64), the
finite-difference gradients, export to plain onnxruntime and, when torch is installed, a comparison
with torch. float32 results are held to a rounding bound: each unreduced element is within
``gamma(DEPTH + inner terms)`` of a magnitude that dominates its intermediate values, and a reduction
over ``n`` elements adds ``gamma(n)`` of their summed magnitudes (tests/tolerances.py).
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx
from tests.gradcheck import check_gradients
from tests.tolerances import gamma

RNG = np.random.default_rng(1234)
REDUCTIONS = ["none", "mean", "sum"]
EXECUTORS = ["onnxruntime", "kernels"]
# Rounded operations (log and exp counted as a few each) along any path of one unreduced element.
DEPTH = 24


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
    inputs: list                   # numpy arrays: float64 (converted to the tested dtype) or int64
    kwargs: dict = dataclasses.field(default_factory=dict)   # np.ndarray values become tensors (class weights)
    differentiable: tuple = ()     # indices of the inputs to differentiate (default: every float input)
    inner_terms: int = 1           # terms summed inside one unreduced element
    weighted_mean: bool = False    # 'mean' divides by the summed ``weight`` (mse_loss and l1_loss)
    mean_divisor: Callable | None = None   # (inputs, kwargs) -> what 'mean' divides the sum by
    reductions: tuple = tuple(REDUCTIONS)

    def grad_inputs(self):
        if self.differentiable:
            return self.differentiable
        return tuple(i for i, a in enumerate(self.inputs) if a.dtype.kind == "f")


CASES = [
    Case("l1", F.l1_loss, nn.L1Loss, lambda x, t: np.abs(x - t), [normal(3, 4), normal(3, 4)]),
    Case("mse", F.mse_loss, nn.MSELoss, lambda x, t: (x - t) ** 2, [normal(3, 4), normal(3, 4)]),
    Case("l1_weight", F.l1_loss, None, lambda x, t, weight: np.abs(x - t) * weight, [normal(3, 4), normal(3, 4)],
         {"weight": RNG.uniform(0.5, 2, (3, 4))}, weighted_mean=True),
    Case("mse_weight", F.mse_loss, None, lambda x, t, weight: (x - t) ** 2 * weight, [normal(3, 4), normal(3, 4)],
         {"weight": RNG.uniform(0.5, 2, (3, 4))}, weighted_mean=True),
    Case("huber_weight", F.huber_loss, None, ref_huber, [normal(3, 4, scale=2), normal(3, 4)],
         {"weight": RNG.uniform(0.5, 2, (3, 4))}),
    Case("cross_entropy", F.cross_entropy, nn.CrossEntropyLoss, ref_cross_entropy,
         [normal(4, 3), np.array([0, 2, 1, 2])], mean_divisor=class_weight_sum, inner_terms=3),
    Case("cross_entropy_spatial_weight_ignore_smoothing", F.cross_entropy, nn.CrossEntropyLoss, ref_cross_entropy,
         [normal(4, 3, 2), np.array([[0, 1], [2, -100], [1, 1], [0, 2]])],
         {"weight": RNG.uniform(0.5, 2, 3), "label_smoothing": 0.2}, mean_divisor=class_weight_sum, inner_terms=6),
    Case("cross_entropy_probabilities", F.cross_entropy, nn.CrossEntropyLoss, ref_cross_entropy,
         [normal(4, 3, 2), np.exp(log_probabilities(4, 2, 3)).transpose(0, 2, 1).copy()],
         {"weight": RNG.uniform(0.5, 2, 3), "label_smoothing": 0.1}, inner_terms=6),
    Case("nll_weight_ignore", F.nll_loss, nn.NLLLoss, ref_nll, [log_probabilities(5, 4), np.array([0, 1, 3, 1, 2])],
         {"weight": RNG.uniform(0.5, 2, 4), "ignore_index": 1}, mean_divisor=class_weight_sum),
    Case("bce_weight", F.binary_cross_entropy, nn.BCELoss, ref_bce,
         [RNG.uniform(0.05, 0.95, (3, 4)), RNG.uniform(0, 1, (3, 4))], {"weight": RNG.uniform(0.5, 2, (3, 4))}),
    Case("bce_logits_pos_weight", F.binary_cross_entropy_with_logits, nn.BCEWithLogitsLoss, ref_bce_logits,
         [normal(3, 4, scale=2), RNG.uniform(0, 1, (3, 4))],
         {"weight": RNG.uniform(0.5, 2, (3, 4)), "pos_weight": RNG.uniform(0.5, 3, 4)}),
    Case("huber", F.huber_loss, nn.HuberLoss, ref_huber, [normal(3, 4, scale=2), normal(3, 4)]),
    Case("huber_delta", F.huber_loss, nn.HuberLoss, ref_huber, [normal(3, 4, scale=2), normal(3, 4)],
         {"delta": 0.5}),
    Case("smooth_l1", F.smooth_l1_loss, nn.SmoothL1Loss, ref_smooth_l1, [normal(3, 4, scale=2), normal(3, 4)]),
    Case("smooth_l1_beta", F.smooth_l1_loss, nn.SmoothL1Loss, ref_smooth_l1, [normal(3, 4, scale=2), normal(3, 4)],
         {"beta": 0.5}),
    Case("smooth_l1_beta0", F.smooth_l1_loss, nn.SmoothL1Loss, ref_smooth_l1, [normal(3, 4), normal(3, 4)],
         {"beta": 0.0}),
    Case("poisson", F.poisson_nll_loss, nn.PoissonNLLLoss, ref_poisson,
         [normal(3, 4), RNG.poisson(2.0, (3, 4)).astype(np.float64)], differentiable=(0,)),
    Case("poisson_rate_full", F.poisson_nll_loss, nn.PoissonNLLLoss, ref_poisson,
         [RNG.uniform(0.5, 3, (3, 4)), RNG.poisson(2.0, (3, 4)).astype(np.float64)],
         {"log_input": False, "full": True}, differentiable=(0,)),
    Case("gaussian", F.gaussian_nll_loss, nn.GaussianNLLLoss, ref_gaussian,
         [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3, 4))]),
    Case("gaussian_shared_var", F.gaussian_nll_loss, nn.GaussianNLLLoss, ref_gaussian,
         [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3, 1))], {"full": True}),
    Case("gaussian_var_per_row", F.gaussian_nll_loss, nn.GaussianNLLLoss, ref_gaussian,
         [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3,))]),
    Case("gaussian_var_clamped", F.gaussian_nll_loss, nn.GaussianNLLLoss, ref_gaussian,
         [normal(3, 4), normal(3, 4), RNG.uniform(0.5, 2, (3, 4)) * (RNG.random((3, 4)) > 0.5)],
         {"eps": 0.1}, differentiable=(0, 1)),
    Case("kl", F.kl_div, nn.KLDivLoss, ref_kl, [log_probabilities(3, 4), probabilities_with_a_zero(3, 4)],
         differentiable=(0,)),
    Case("kl_log_target", F.kl_div, nn.KLDivLoss, ref_kl, [log_probabilities(3, 4), log_probabilities(3, 4)],
         {"log_target": True}),
    Case("margin_ranking", F.margin_ranking_loss, nn.MarginRankingLoss, ref_margin_ranking,
         [normal(6), normal(6), signs(6)], {"margin": 0.5}, differentiable=(0, 1)),
    Case("hinge_embedding", F.hinge_embedding_loss, nn.HingeEmbeddingLoss, ref_hinge,
         [normal(3, 4, scale=2), signs(3, 4)], differentiable=(0,)),
    Case("hinge_embedding_margin", F.hinge_embedding_loss, nn.HingeEmbeddingLoss, ref_hinge,
         [normal(3, 4, scale=2), signs(3, 4)], {"margin": 0.5}, differentiable=(0,)),
    Case("soft_margin", F.soft_margin_loss, nn.SoftMarginLoss, ref_soft_margin, [normal(3, 4), signs(3, 4)],
         differentiable=(0,)),
    Case("multilabel_soft_margin", F.multilabel_soft_margin_loss, nn.MultiLabelSoftMarginLoss,
         ref_multilabel_soft_margin, [normal(3, 4), RNG.integers(0, 2, (3, 4)).astype(np.float64)],
         differentiable=(0,), inner_terms=4),
    Case("multilabel_soft_margin_weight", F.multilabel_soft_margin_loss, nn.MultiLabelSoftMarginLoss,
         ref_multilabel_soft_margin, [normal(3, 4), RNG.integers(0, 2, (3, 4)).astype(np.float64)],
         {"weight": RNG.uniform(0.5, 2, 4)}, differentiable=(0,), inner_terms=4),
    Case("multilabel_margin", F.multilabel_margin_loss, nn.MultiLabelMarginLoss, ref_multilabel_margin,
         [normal(3, 4), MULTILABEL_TARGET], inner_terms=16),
    Case("multilabel_margin_unbatched", F.multilabel_margin_loss, nn.MultiLabelMarginLoss, ref_multilabel_margin,
         [normal(4), np.array([2, 1, -1, 0])], inner_terms=16),
    Case("multi_margin", F.multi_margin_loss, nn.MultiMarginLoss, ref_multi_margin,
         [normal(3, 4), np.array([0, 3, 1])], inner_terms=4),
    Case("multi_margin_p2_weight", F.multi_margin_loss, nn.MultiMarginLoss, ref_multi_margin,
         [normal(3, 4), np.array([2, 3, 2])], {"p": 2, "margin": 0.7, "weight": RNG.uniform(0.5, 2, 4)},
         inner_terms=4),
    Case("multi_margin_unbatched", F.multi_margin_loss, nn.MultiMarginLoss, ref_multi_margin,
         [normal(4), np.array(1)], inner_terms=4),
    Case("cosine_embedding", F.cosine_embedding_loss, nn.CosineEmbeddingLoss, ref_cosine_embedding,
         [normal(3, 5), normal(3, 5), np.array([1.0, -1.0, -1.0])], {"margin": -0.5}, differentiable=(0, 1),
         inner_terms=10),
    Case("cosine_embedding_unbatched", F.cosine_embedding_loss, nn.CosineEmbeddingLoss, ref_cosine_embedding,
         [normal(5), normal(5), np.array(1.0)], differentiable=(0, 1), inner_terms=10),
    Case("triplet", F.triplet_margin_loss, nn.TripletMarginLoss, ref_triplet,
         [normal(4, 5), normal(4, 5), normal(4, 5)], {"margin": 2.0}, inner_terms=10),
    Case("triplet_p1_swap", F.triplet_margin_loss, nn.TripletMarginLoss, ref_triplet,
         [normal(4, 5), normal(4, 5), normal(4, 5)], {"margin": 2.0, "p": 1.0, "swap": True}, inner_terms=10),
    Case("triplet_p3", F.triplet_margin_loss, nn.TripletMarginLoss, ref_triplet,
         [normal(4, 5), normal(4, 5), normal(4, 5)], {"margin": 2.0, "p": 3.0, "eps": 1e-3}, inner_terms=10),
    Case("triplet_distance", F.triplet_margin_with_distance_loss, nn.TripletMarginWithDistanceLoss,
         ref_triplet_with_distance, [normal(4, 5), normal(4, 5), normal(4, 5)], {"margin": 2.0, "swap": True},
         inner_terms=10),
    Case("triplet_custom_distance", F.triplet_margin_with_distance_loss, nn.TripletMarginWithDistanceLoss,
         ref_triplet_with_distance, [normal(4, 5), normal(4, 5), normal(4, 5)],
         {"distance_function": l1_distance, "margin": 3.0}, inner_terms=10),
]
IDS = [case.id for case in CASES]
# Per-element weights are a functional-only argument (MSELoss, L1Loss and HuberLoss take none).
MODULE_CASES = [case for case in CASES if case.module is not None]


# ---------------------------------------------------------------- helpers

def _tensor(array, dtype):
    array = np.asarray(array)
    return onnxnn.tensor(array, dtype=dtype) if array.dtype.kind == "f" else onnxnn.tensor(array)


def _call_kwargs(case, dtype):
    return {k: _tensor(v, dtype) if isinstance(v, np.ndarray) else v for k, v in case.kwargs.items()}


def _rounded(case, dtype):
    """The inputs as the tested dtype holds them, in float64, so the reference sees the same values."""
    return [a.astype(dtype).astype(np.float64) if a.dtype.kind == "f" else a for a in case.inputs]


def _expected(case, inputs, reduction):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = case.reference(*inputs, **case.kwargs)
    return loss if reduction == "none" else loss.sum() / _mean_divisor(case, loss, inputs) if reduction == "mean" \
        else loss.sum()


def _mean_divisor(case, loss, inputs=None):
    if case.mean_divisor is not None:
        return case.mean_divisor(case.inputs if inputs is None else inputs, case.kwargs)
    return case.kwargs["weight"].sum() if case.weighted_mean else loss.size


def _gamma(terms: int, unit: float) -> float:
    return terms * unit / (1 - terms * unit)


def _bound(case, inputs, reduction, dtype=None, unit=None):
    """Rounding bound for comparing a result of unit roundoff ``unit`` (or ``dtype``'s) with the float64
    reference (module docstring)."""
    unit = float(np.finfo(dtype).eps) / 2 if unit is None else unit
    loss = np.asarray(case.reference(*inputs, **case.kwargs), np.float64)
    size = sum(np.abs(a).sum() for a in inputs if a.dtype.kind == "f") / max(loss.size, 1)
    magnitude = 1 + np.abs(loss) + size + size * size
    if reduction == "none":
        return 2 * _gamma(DEPTH + case.inner_terms, unit) * magnitude
    total = 2 * _gamma(DEPTH + case.inner_terms + loss.size, unit) * magnitude.sum()
    return total / _mean_divisor(case, loss, inputs) if reduction == "mean" else total


def _call(case, reduction, dtype=onnxnn.float32, through_module=False):
    tensors = [_tensor(a, dtype) for a in case.inputs]
    kwargs = _call_kwargs(case, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's 'mean' warning
        if through_module:
            return case.module(reduction=reduction, **kwargs)(*tensors)
        return case.function(*tensors, reduction=reduction, **kwargs)


# ---------------------------------------------------------------- forward

@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_matches_the_numpy_formula_in_float32(case, reduction, executor):
    with onnxnn.set_executor(executor):
        result = _call(case, reduction).numpy()
    inputs = _rounded(case, np.float32)
    expected = _expected(case, inputs, reduction)
    assert result.dtype == np.float32 and result.shape == np.shape(expected)
    assert np.all(np.abs(result - expected) <= _bound(case, inputs, reduction, np.float32))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", MODULE_CASES, ids=[case.id for case in MODULE_CASES])
def test_module_computes_its_functional_form_in_float64(case, reduction):
    result = _call(case, reduction, onnxnn.float64, through_module=True).numpy()
    expected = _expected(case, case.inputs, reduction)
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, expected, rtol=0,
                               atol=np.max(_bound(case, case.inputs, reduction, np.float64)))


# ---------------------------------------------------------------- gradients

@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_finite_differences(case, reduction):
    differentiated = case.grad_inputs()
    requires_grad = [i in differentiated for i in range(len(case.inputs))]
    kwargs = _call_kwargs(case, onnxnn.float64)

    def loss(*tensors):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return case.function(*tensors, reduction=reduction, **kwargs)

    check_gradients(loss, case.inputs, requires_grad=requires_grad)


# ---------------------------------------------------------------- torch

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_gradients_match_torch(case, reduction):
    torch = pytest.importorskip("torch")
    torch_function = getattr(torch.nn.functional, case.function.__name__)
    differentiated = case.grad_inputs()
    ours = [_tensor(a, onnxnn.float64) for a in case.inputs]
    theirs = [torch.tensor(a) for a in case.inputs]
    for index in differentiated:
        ours[index].requires_grad_(True)
        theirs[index].requires_grad_(True)
    torch_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in case.kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch_function(*theirs, reduction=reduction, **torch_kwargs)
        result = case.function(*ours, reduction=reduction, **_call_kwargs(case, onnxnn.float64))
    bound = np.max(_bound(case, case.inputs, reduction, np.float64))
    np.testing.assert_allclose(result.detach().numpy(), expected.detach().numpy(), rtol=0, atol=bound)
    cotangent = RNG.standard_normal(tuple(expected.shape))
    expected.backward(torch.tensor(cotangent))
    result.backward(onnxnn.tensor(cotangent))
    for index in differentiated:
        np.testing.assert_allclose(ours[index].grad.numpy(), theirs[index].grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=f"gradient of input {index}")


# ---------------------------------------------------------------- export

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_exported_module_runs_in_onnxruntime_as_onnxnn_does(case):
    kwargs = _call_kwargs(case, onnxnn.float32)
    if case.module is not None:
        module = case.module(reduction="none", **kwargs)
    else:
        def module(*tensors):
            return case.function(*tensors, reduction="none", **kwargs)
    tensors = [_tensor(a, onnxnn.float32) for a in case.inputs]
    names = [f"input_{i}" for i in range(len(tensors))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = to_onnx(module, tuple(tensors), input_names=names, output_names=["loss"])
        ours = module(*tensors).numpy()
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {name: tensor.numpy() for name, tensor in zip(names, tensors) if name in
             {i.name for i in session.get_inputs()}}
    (exported,) = session.run(None, feeds)
    bound = _bound(case, _rounded(case, np.float32), "none", np.float32)
    assert exported.shape == ours.shape and np.all(np.abs(exported - ours) <= bound)


# ---------------------------------------------------------------- dtypes

# float16 keeps 11 significant bits (unit roundoff 2^-11), bfloat16 8 (2^-8).
@pytest.mark.parametrize("dtype, unit", [(onnxnn.float16, 2.0 ** -11), (onnxnn.bfloat16, 2.0 ** -8)],
                         ids=["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_half_precision_keeps_the_dtype_and_the_value(case, dtype, unit):
    result = _call(case, "sum", dtype)
    assert result.dtype is dtype
    # The reference sees the inputs as the half dtype holds them; class weights are rounded too.
    inputs = [_tensor(a, dtype).to(onnxnn.float64).numpy() if a.dtype.kind == "f" else a for a in case.inputs]
    rounded = dataclasses.replace(case, kwargs={
        k: _tensor(v, dtype).to(onnxnn.float64).numpy() if isinstance(v, np.ndarray) else v
        for k, v in case.kwargs.items()})
    expected = _expected(rounded, inputs, "sum")
    assert abs(float(result.to(onnxnn.float64).item()) - expected) <= _bound(rounded, inputs, "sum", unit=unit)


# ---------------------------------------------------------------- special reductions and values

def test_kl_div_batchmean_divides_the_sum_by_the_batch_size():
    x, t = log_probabilities(3, 4), np.exp(log_probabilities(3, 4))
    result = F.kl_div(onnxnn.tensor(x), onnxnn.tensor(t), reduction="batchmean")
    np.testing.assert_allclose(result.numpy(), ref_kl(x, t).sum() / 3, rtol=gamma(DEPTH + 12) * 2)
    check_gradients(lambda a: F.kl_div(a, onnxnn.tensor(t, dtype=onnxnn.float64), reduction="batchmean"), [x])


def test_kl_div_mean_warns_as_pytorch_does():
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(onnxnn.randn(2, 3), onnxnn.rand(2, 3))


def test_gaussian_nll_loss_takes_a_float_variance():
    x, t = normal(3, 4), normal(3, 4)
    result = F.gaussian_nll_loss(onnxnn.tensor(x, dtype=onnxnn.float64), onnxnn.tensor(t, dtype=onnxnn.float64),
                                 0.5, reduction="none")
    np.testing.assert_allclose(result.numpy(), ref_gaussian(x, t, 0.5), rtol=2 * gamma(DEPTH, np.float64))


def test_gaussian_nll_loss_gradient_passes_the_clamp_unchanged():
    # PyTorch clamps the variance under no_grad: below eps the value is eps, the gradient is d/dvar at eps.
    var = onnxnn.tensor([0.0, 2.0], dtype=onnxnn.float64, requires_grad=True)
    F.gaussian_nll_loss(onnxnn.zeros(2, dtype=onnxnn.float64), onnxnn.ones(2, dtype=onnxnn.float64), var,
                        eps=0.5, reduction="sum").backward()
    clamped = np.array([0.5, 2.0])
    np.testing.assert_allclose(var.grad.numpy(), 0.5 / clamped - 0.5 / clamped ** 2, rtol=1e-15)


def test_poisson_full_loss_is_finite_at_zero_targets_with_finite_gradients():
    x = onnxnn.tensor([0.5, 1.0, 2.0], dtype=onnxnn.float64, requires_grad=True)
    t = onnxnn.tensor([0.0, 1.0, 3.0], dtype=onnxnn.float64, requires_grad=True)
    loss = F.poisson_nll_loss(x, t, full=True, reduction="sum")
    loss.backward()
    np.testing.assert_allclose(loss.detach().numpy(), ref_poisson(x.detach().numpy(), t.detach().numpy(), full=True).sum(),
                               rtol=2 * gamma(DEPTH, np.float64))
    assert np.isfinite(x.grad.numpy()).all() and np.isfinite(t.grad.numpy()).all()


def test_hinge_embedding_counts_both_terms_for_other_targets():
    # PyTorch's kernel: the margin term where target != 1, the input where target != -1.
    loss = F.hinge_embedding_loss(onnxnn.tensor([0.25]), onnxnn.tensor([0.0]), reduction="none")
    np.testing.assert_allclose(loss.numpy(), [0.25 + 0.75])


# ---------------------------------------------------------------- errors

X = onnxnn.randn(3, 4)
ERRORS = [
    (lambda: F.huber_loss(X, X, delta=0), RuntimeError, "huber_loss does not support non-positive values for delta."),
    (lambda: F.huber_loss(X, X, weight=onnxnn.ones(4)), ValueError, "Weights and input must have the same size."),
    (lambda: F.mse_loss(X, X, weight=onnxnn.ones(4)), ValueError, "Weights and input must have the same size."),
    (lambda: F.l1_loss(X, X, weight=onnxnn.ones(3, 1)), ValueError, "Weights and input must have the same size."),
    (lambda: F.huber_loss(X, X, reduction="avg"), ValueError, "avg is not a valid value for reduction"),
    (lambda: F.smooth_l1_loss(X, X, beta=-1), RuntimeError, "smooth_l1_loss does not support negative values for beta."),
    (lambda: F.poisson_nll_loss(X, X, reduction="avg"), ValueError, "avg is not a valid value for reduction"),
    (lambda: F.gaussian_nll_loss(X, X, onnxnn.ones(2, 4)), ValueError, "var is of incorrect size"),
    (lambda: F.gaussian_nll_loss(X, X, -1.0), ValueError, "var has negative entry/entries"),
    (lambda: F.gaussian_nll_loss(X, X, onnxnn.tensor(-np.ones((3, 4)))), ValueError, "var has negative entry/entries"),
    (lambda: F.gaussian_nll_loss(X, X, onnxnn.ones(3, 4), reduction="avg"), ValueError, "avg is not valid"),
    (lambda: F.kl_div(X, X, reduction="avg"), ValueError, "avg is not a valid value for reduction"),
    (lambda: F.margin_ranking_loss(X, X[0], X), RuntimeError,
     r"margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: "
     r"onnxnn.Size\(\[3, 4\]\), input2: onnxnn.Size\(\[4\]\), target: onnxnn.Size\(\[3, 4\]\)"),
    (lambda: F.multilabel_soft_margin_loss(X, X, reduction="avg"), ValueError, "avg is not valid"),
    (lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1])), RuntimeError,
     r"multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples \(batch size\)."
     r" Expected target size \[3\], but got \[2\]. Input has shape \[3, 4\]."),
    (lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1, 4])), RuntimeError, "target out of range"),
    (lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1, 2]), weight=onnxnn.ones(3)), RuntimeError,
     r"inconsistent weight size, expected 4 but got \[3\]"),
    (lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1, 2]), p=3), ValueError, "only p == 1 and p == 2 supported"),
    (lambda: F.multi_margin_loss(X, onnxnn.tensor([0.0, 1.0, 2.0])), RuntimeError,
     "expected scalar type Long but found Float"),
    (lambda: F.multi_margin_loss(onnxnn.randn(2, 3, 4), onnxnn.tensor([0, 1])), RuntimeError,
     r"Expected non-empty vector or matrix with optional 0-dim batch size, but got: \[2, 3, 4\]"),
    (lambda: F.multilabel_margin_loss(X, onnxnn.tensor([[0, 1, 2, -1]])), RuntimeError,
     r"inconsistent target size: \[1, 4\] for input of size: \[3, 4\]"),
    (lambda: F.multilabel_margin_loss(X, onnxnn.tensor([[0, 1, 2, 4]] * 3)), RuntimeError,
     "argument #2 'target' is out of range"),
    (lambda: F.cosine_embedding_loss(X, X, onnxnn.ones(3, 1)), RuntimeError,
     "0D or 1D target tensor expected, multi-target not supported"),
    (lambda: F.cosine_embedding_loss(X, X, onnxnn.ones(())), RuntimeError,
     r"0D target tensor expects 1D input tensors, but found inputs with sizes \[3, 4\] and \[3, 4\]."),
    (lambda: F.triplet_margin_loss(X, X, X[0]), RuntimeError,
     "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: "
     "anchor 2D, positive 2D, and negative 1D inputs"),
    (lambda: F.triplet_margin_loss(X, X, X, margin=0), ValueError, "margin must be greater than 0, got 0"),
    (lambda: F.triplet_margin_with_distance_loss(X, X, X, reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
    (lambda: nn.TripletMarginLoss(margin=-1.0), ValueError,
     "TripletMarginLoss: expected margin to be greater than 0, got -1.0 instead"),
    (lambda: nn.TripletMarginWithDistanceLoss(margin=0.0), ValueError,
     "TripletMarginWithDistanceLoss: expected margin to be greater than 0, got 0.0 instead"),
    (lambda: nn.MultiMarginLoss(weight=onnxnn.ones(2, 2)), ValueError,
     "MultiMarginLoss: expected weight to be None or 1D tensor, got 2D instead"),
    (lambda: nn.HuberLoss(delta="1"), TypeError, "delta must be a float or int, got: <class 'str'>"),
]


@pytest.mark.parametrize("call, error, message", ERRORS)
def test_bad_arguments_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_size_mismatch_warns_as_pytorch_does():
    with pytest.warns(UserWarning, match="Using a target size"):
        F.huber_loss(onnxnn.randn(3, 1), onnxnn.randn(3))
    with pytest.warns(UserWarning, match="Using a target size"):
        F.smooth_l1_loss(onnxnn.randn(3, 1), onnxnn.randn(3))


def test_pairwise_distance_is_the_norm_of_the_shifted_difference():
    x1, x2 = normal(3, 5), normal(5)
    result = nn.PairwiseDistance(p=1.0, eps=0.1, keepdim=True)(onnxnn.tensor(x1, dtype=onnxnn.float64),
                                                              onnxnn.tensor(x2, dtype=onnxnn.float64))
    np.testing.assert_allclose(result.numpy(), np.abs(x1 - x2 + 0.1).sum(-1, keepdims=True),
                               rtol=2 * gamma(8, np.float64))
    assert math.isclose(float(F.pairwise_distance(onnxnn.zeros(3), onnxnn.ones(3), eps=0.0).item()), math.sqrt(3),
                        rel_tol=1e-6)
