"""Loss modules and their functional forms: PyTorch's formulas, reductions, gradients, errors and export.

Every case in ``CASES`` (loss_cases.py) names a functional form, its module, a numpy reference of
the unreduced loss and its inputs. The same table drives the forward checks (both executors,
float32 and float64, float16 and bfloat16), the finite-difference gradients, export to plain
onnxruntime and, when torch is installed, a comparison of values and gradients with torch on both
executors. Results are held to a rounding bound: each unreduced element is within
``gamma(DEPTH + inner terms)`` of a magnitude that dominates its intermediate values, and a
reduction over ``n`` elements adds ``gamma(n)`` of their summed magnitudes (tests/tolerances.py).
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx
from gradcheck import check_gradients
from tolerances import gamma

from .loss_cases import (
    CASES,
    IDS,
    MODULE_CASES,
    REDUCTIONS,
    log_probabilities,
    normal,
    ref_gaussian,
    ref_kl,
    ref_poisson,
)

RNG = np.random.default_rng(4321)
EXECUTORS = ["onnxruntime", "kernels"]
# Rounded operations (log and exp counted as a few each) along any path of one unreduced element.
DEPTH = 24


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
    return (
        loss
        if reduction == "none"
        else loss.sum() / _mean_divisor(case, loss, inputs)
        if reduction == "mean"
        else loss.sum()
    )


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
    np.testing.assert_allclose(result, expected, rtol=0, atol=np.max(_bound(case, case.inputs, reduction, np.float64)))


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


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_gradients_match_torch(case, reduction, executor):
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
    cotangent = RNG.standard_normal(tuple(expected.shape))
    expected.backward(torch.tensor(cotangent))
    with onnxnn.set_executor(executor), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = case.function(*ours, reduction=reduction, **_call_kwargs(case, onnxnn.float64))
        value = result.detach().numpy()
        result.backward(onnxnn.tensor(cotangent))
        gradients = {index: ours[index].grad.numpy() for index in differentiated}
    bound = np.max(_bound(case, case.inputs, reduction, np.float64))
    np.testing.assert_allclose(value, expected.detach().numpy(), rtol=0, atol=bound)
    for index in differentiated:
        np.testing.assert_allclose(
            gradients[index], theirs[index].grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=f"gradient of input {index}"
        )


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
    feeds = {
        name: tensor.numpy() for name, tensor in zip(names, tensors) if name in {i.name for i in session.get_inputs()}
    }
    (exported,) = session.run(None, feeds)
    bound = _bound(case, _rounded(case, np.float32), "none", np.float32)
    assert exported.shape == ours.shape and np.all(np.abs(exported - ours) <= bound)


# ---------------------------------------------------------------- dtypes


# float16 keeps 11 significant bits (unit roundoff 2^-11), bfloat16 8 (2^-8).
@pytest.mark.parametrize(
    "dtype, unit", [(onnxnn.float16, 2.0**-11), (onnxnn.bfloat16, 2.0**-8)], ids=["float16", "bfloat16"]
)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_half_precision_keeps_the_dtype_and_the_value(case, dtype, unit):
    result = _call(case, "sum", dtype)
    assert result.dtype is dtype
    # The reference sees the inputs as the half dtype holds them; class weights are rounded too.
    inputs = [_tensor(a, dtype).to(onnxnn.float64).numpy() if a.dtype.kind == "f" else a for a in case.inputs]
    rounded = dataclasses.replace(
        case,
        kwargs={
            k: _tensor(v, dtype).to(onnxnn.float64).numpy() if isinstance(v, np.ndarray) else v
            for k, v in case.kwargs.items()
        },
    )
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
    result = F.gaussian_nll_loss(
        onnxnn.tensor(x, dtype=onnxnn.float64), onnxnn.tensor(t, dtype=onnxnn.float64), 0.5, reduction="none"
    )
    np.testing.assert_allclose(result.numpy(), ref_gaussian(x, t, 0.5), rtol=2 * gamma(DEPTH, np.float64))


def test_gaussian_nll_loss_gradient_passes_the_clamp_unchanged():
    # PyTorch clamps the variance under no_grad: below eps the value is eps, the gradient is d/dvar at eps.
    var = onnxnn.tensor([0.0, 2.0], dtype=onnxnn.float64, requires_grad=True)
    F.gaussian_nll_loss(
        onnxnn.zeros(2, dtype=onnxnn.float64), onnxnn.ones(2, dtype=onnxnn.float64), var, eps=0.5, reduction="sum"
    ).backward()
    clamped = np.array([0.5, 2.0])
    np.testing.assert_allclose(var.grad.numpy(), 0.5 / clamped - 0.5 / clamped**2, rtol=1e-15)


def test_poisson_full_loss_is_finite_at_zero_targets():
    x = onnxnn.tensor([0.5, 1.0, 2.0], dtype=onnxnn.float64, requires_grad=True)
    t = onnxnn.tensor([0.0, 1.0, 3.0], dtype=onnxnn.float64, requires_grad=True)
    loss = F.poisson_nll_loss(x, t, full=True, reduction="sum")
    loss.backward()
    np.testing.assert_allclose(
        loss.detach().numpy(),
        ref_poisson(x.detach().numpy(), t.detach().numpy(), full=True).sum(),
        rtol=2 * gamma(DEPTH, np.float64),
    )
    # PyTorch's target gradient is NaN at target 0 (the masked Stirling term's 0 * log(0)); see
    # tests/nn/test_loss_leftovers.py. The input gradient stays finite.
    assert np.isfinite(x.grad.numpy()).all() and np.isfinite(t.grad.numpy()[1:]).all()


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
    (
        lambda: F.smooth_l1_loss(X, X, beta=-1),
        RuntimeError,
        "smooth_l1_loss does not support negative values for beta.",
    ),
    (lambda: F.poisson_nll_loss(X, X, reduction="avg"), ValueError, "avg is not a valid value for reduction"),
    (lambda: F.gaussian_nll_loss(X, X, onnxnn.ones(2, 4)), ValueError, "var is of incorrect size"),
    (lambda: F.gaussian_nll_loss(X, X, -1.0), ValueError, "var has negative entry/entries"),
    (lambda: F.gaussian_nll_loss(X, X, onnxnn.tensor(-np.ones((3, 4)))), ValueError, "var has negative entry/entries"),
    (lambda: F.gaussian_nll_loss(X, X, onnxnn.ones(3, 4), reduction="avg"), ValueError, "avg is not valid"),
    (lambda: F.kl_div(X, X, reduction="avg"), ValueError, "avg is not a valid value for reduction"),
    (
        lambda: F.margin_ranking_loss(X, X[0], X),
        RuntimeError,
        r"margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: "
        r"onnxnn.Size\(\[3, 4\]\), input2: onnxnn.Size\(\[4\]\), target: onnxnn.Size\(\[3, 4\]\)",
    ),
    (lambda: F.multilabel_soft_margin_loss(X, X, reduction="avg"), ValueError, "avg is not valid"),
    (
        lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1])),
        RuntimeError,
        r"multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples \(batch size\)."
        r" Expected target size \[3\], but got \[2\]. Input has shape \[3, 4\].",
    ),
    (lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1, 4])), RuntimeError, "target out of range"),
    (
        lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1, 2]), weight=onnxnn.ones(3)),
        RuntimeError,
        r"inconsistent weight size, expected 4 but got \[3\]",
    ),
    (lambda: F.multi_margin_loss(X, onnxnn.tensor([0, 1, 2]), p=3), ValueError, "only p == 1 and p == 2 supported"),
    (
        lambda: F.multi_margin_loss(X, onnxnn.tensor([0.0, 1.0, 2.0])),
        RuntimeError,
        "expected scalar type Long but found Float",
    ),
    (
        lambda: F.multi_margin_loss(onnxnn.randn(2, 3, 4), onnxnn.tensor([0, 1])),
        RuntimeError,
        r"Expected non-empty vector or matrix with optional 0-dim batch size, but got: \[2, 3, 4\]",
    ),
    (
        lambda: F.multilabel_margin_loss(X, onnxnn.tensor([[0, 1, 2, -1]])),
        RuntimeError,
        r"inconsistent target size: \[1, 4\] for input of size: \[3, 4\]",
    ),
    (
        lambda: F.multilabel_margin_loss(X, onnxnn.tensor([[0, 1, 2, 4]] * 3)),
        RuntimeError,
        "argument #2 'target' is out of range",
    ),
    (
        lambda: F.cosine_embedding_loss(X, X, onnxnn.ones(3, 1)),
        RuntimeError,
        "0D or 1D target tensor expected, multi-target not supported",
    ),
    (
        lambda: F.cosine_embedding_loss(X, X, onnxnn.ones(())),
        RuntimeError,
        r"0D target tensor expects 1D input tensors, but found inputs with sizes \[3, 4\] and \[3, 4\].",
    ),
    (
        lambda: F.triplet_margin_loss(X, X, X[0]),
        RuntimeError,
        "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: "
        "anchor 2D, positive 2D, and negative 1D inputs",
    ),
    (lambda: F.triplet_margin_loss(X, X, X, margin=0), ValueError, "margin must be greater than 0, got 0"),
    (
        lambda: F.triplet_margin_with_distance_loss(X, X, X, reduction="avg"),
        ValueError,
        "avg is not a valid value for reduction",
    ),
    (
        lambda: nn.TripletMarginLoss(margin=-1.0),
        ValueError,
        "TripletMarginLoss: expected margin to be greater than 0, got -1.0 instead",
    ),
    (
        lambda: nn.TripletMarginWithDistanceLoss(margin=0.0),
        ValueError,
        "TripletMarginWithDistanceLoss: expected margin to be greater than 0, got 0.0 instead",
    ),
    (
        lambda: nn.MultiMarginLoss(weight=onnxnn.ones(2, 2)),
        ValueError,
        "MultiMarginLoss: expected weight to be None or 1D tensor, got 2D instead",
    ),
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
    result = nn.PairwiseDistance(p=1.0, eps=0.1, keepdim=True)(
        onnxnn.tensor(x1, dtype=onnxnn.float64), onnxnn.tensor(x2, dtype=onnxnn.float64)
    )
    np.testing.assert_allclose(
        result.numpy(), np.abs(x1 - x2 + 0.1).sum(-1, keepdims=True), rtol=2 * gamma(8, np.float64)
    )
    assert math.isclose(
        float(F.pairwise_distance(onnxnn.zeros(3), onnxnn.ones(3), eps=0.0).item()), math.sqrt(3), rel_tol=1e-6
    )
