"""Bilinear and CosineSimilarity (with F.bilinear, F.cosine_similarity).

``bilinear`` is ``y[n, o] = sum_ij x1[n, i] A[o, i, j] x2[n, j] + b[o]`` (an einsum in numpy),
held to Higham's bound for its ``in1 * in2`` products; ``cosine_similarity`` is
``sum(x1 x2) / (max(|x1|, eps) max(|x2|, eps))`` along ``dim``, within a few roundings of each
norm's and the dot product's sums. Gradients are checked against float64 finite differences on both
executors; the default initialization is U(-1/sqrt(in1), 1/sqrt(in1)) as PyTorch's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .layer_checks import EXECUTORS, exported_output

RNG = np.random.default_rng(61)


def bilinear_reference(x1, x2, weight, bias):
    out = np.einsum("...i,oij,...j->...o", x1, weight, x2)
    magnitude = np.einsum("...i,oij,...j->...o", np.abs(x1), np.abs(weight), np.abs(x2))
    if bias is not None:
        out, magnitude = out + bias, magnitude + np.abs(bias)
    return out, magnitude


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("batch, with_bias", [((4,), True), ((2, 3), False), ((), True)])
def test_bilinear_is_x1_A_x2_plus_b(batch, with_bias, dtype, executor):
    x1, x2 = RNG.standard_normal(batch + (3,)), RNG.standard_normal(batch + (4,))
    weight, bias = RNG.standard_normal((5, 3, 4)), RNG.standard_normal(5) if with_bias else None
    with onnxnn.set_executor(executor):
        tensors = [None if a is None else onnxnn.tensor(a, dtype=dtype) for a in (x1, x2, weight, bias)]
        actual = F.bilinear(*tensors).numpy()
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    expected, magnitude = bilinear_reference(x1, x2, weight, bias)
    assert actual.shape == batch + (5,)
    # Inputs rounded to the dtype (3 factors), then 12 products summed in two stages and the bias.
    assert np.all(np.abs(actual - expected) <= 2 * gamma(3 + 12 + 2, numpy_dtype) * magnitude)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bilinear_gradients_match_finite_differences(executor):
    inputs = [
        RNG.standard_normal((2, 3)),
        RNG.standard_normal((2, 4)),
        RNG.standard_normal((2, 3, 4)),
        RNG.standard_normal(2),
    ]
    with onnxnn.set_executor(executor):
        check_gradients(F.bilinear, inputs)


def test_bilinear_layer_parameters_init_repr_and_export():
    layer = nn.Bilinear(20, 30, 40)
    assert {k: tuple(v.shape) for k, v in layer.state_dict().items()} == {"weight": (40, 20, 30), "bias": (40,)}
    assert repr(layer) == "Bilinear(in1_features=20, in2_features=30, out_features=40, bias=True)"
    bound = 1 / math.sqrt(20)
    weight = layer.weight.detach().numpy()
    assert np.all(np.abs(weight) <= bound) and np.all(np.abs(layer.bias.detach().numpy()) <= bound)
    # 24000 draws of U(-b, b): the mean is within 5 standard errors (b / sqrt(3 * 24000)) of 0 and
    # the variance within 5 standard errors (b^2 * sqrt(4/45 / 24000)) of b^2 / 3.
    assert abs(weight.mean()) < 5 * bound / math.sqrt(3 * weight.size)
    assert abs(weight.var() - bound**2 / 3) < 5 * bound**2 * math.sqrt(4 / 45 / weight.size)
    assert nn.Bilinear(2, 3, 4, bias=False).bias is None
    x1, x2 = onnxnn.randn(5, 20), onnxnn.randn(5, 30)
    expected, magnitude = bilinear_reference(x1.numpy(), x2.numpy(), weight, layer.bias.detach().numpy())
    assert np.all(np.abs(exported_output(layer, x1, x2) - expected) <= 2 * gamma(600 + 5, np.float32) * magnitude)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: F.bilinear(onnxnn.randn(2, 3), onnxnn.randn(2, 4), onnxnn.randn(5, 3, 3)),
            "input2 size does not match weight size: got 4 but expected 3",
        ),
        (
            lambda: F.bilinear(onnxnn.randn(2, 3), onnxnn.randn(3, 4), onnxnn.randn(5, 3, 4)),
            "input batch dimensions do not match at dim 0: got 2 and 3",
        ),
        (
            lambda: F.bilinear(onnxnn.randn(2, 3), onnxnn.randn(2, 4), onnxnn.randn(5, 3, 4), onnxnn.randn(4)),
            "bias size does not match weight size: got 4 but expected 5",
        ),
        (
            lambda: F.bilinear(onnxnn.randn(2, 2), onnxnn.randn(2, 4), onnxnn.randn(5, 3, 4)),
            "input1 size does not match weight size: got 2 but expected 3",
        ),
    ],
)
def test_bad_bilinear_inputs_raise_pytorchs_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def cosine_reference(x1, x2, dim, eps):
    x1, x2 = np.broadcast_arrays(x1, x2)
    n1 = np.maximum(np.sqrt(np.sum(x1 * x1, axis=dim, keepdims=True)), eps)
    n2 = np.maximum(np.sqrt(np.sum(x2 * x2, axis=dim, keepdims=True)), eps)
    return np.sum(x1 * x2, axis=dim) / (np.squeeze(n1, dim) * np.squeeze(n2, dim))


# (id, x1 shape, x2 shape, dim, eps, x1 scaled by)
COSINE_CASES = [
    ("rows", (4, 5), (4, 5), 1, 1e-8, 1.0),
    ("broadcast-last-dim", (3, 1, 6), (2, 6), -1, 1e-8, 1.0),
    ("first-dim", (5, 3), (5, 3), 0, 1e-8, 1.0),
    ("norm-below-eps", (3, 4), (3, 4), 1, 1e-2, 1e-4),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("case_id, shape1, shape2, dim, eps, scale", COSINE_CASES, ids=[c[0] for c in COSINE_CASES])
def test_cosine_similarity_matches_formula(case_id, shape1, shape2, dim, eps, scale, dtype, executor):
    x1, x2 = RNG.standard_normal(shape1) * scale, RNG.standard_normal(shape2)
    with onnxnn.set_executor(executor):
        actual = nn.CosineSimilarity(dim, eps)(onnxnn.tensor(x1, dtype=dtype), onnxnn.tensor(x2, dtype=dtype))
        actual = actual.numpy()  # realized on ``executor`` (onnxnn is lazy)
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    expected = cosine_reference(x1, x2, dim, eps)
    terms = max(shape1[dim], shape2[dim])
    # |cos| <= 1: the dot product's and both norms' sums of `terms` squares, two square roots and divisions.
    np.testing.assert_allclose(actual, expected, rtol=0, atol=4 * gamma(terms + 4, numpy_dtype))


# Below eps PyTorch's gradient is not the derivative of its value (it clamps the norm outside
# autograd), so finite differences apply above eps only; tests/nn/test_distance_parity.py checks
# PyTorch's formula below it.
GRADIENT_CASES = [case for case in COSINE_CASES if case[0] != "norm-below-eps"]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, shape1, shape2, dim, eps, scale", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES])
def test_cosine_similarity_gradients_match_finite_differences(case_id, shape1, shape2, dim, eps, scale, executor):
    with onnxnn.set_executor(executor):
        check_gradients(
            lambda a, b: F.cosine_similarity(a, b, dim, eps),
            [RNG.standard_normal(shape1) * scale, RNG.standard_normal(shape2)],
        )


def test_cosine_similarity_layer_repr_and_export():
    layer = nn.CosineSimilarity(dim=1, eps=1e-6)
    assert repr(layer) == "CosineSimilarity()" and len(layer.state_dict()) == 0
    x1, x2 = onnxnn.randn(3, 7), onnxnn.randn(3, 7)
    np.testing.assert_allclose(
        exported_output(layer, x1, x2),
        cosine_reference(x1.numpy(), x2.numpy(), 1, 1e-6),
        rtol=0,
        atol=4 * gamma(11, np.float32),
    )


def test_bilinear_and_cosine_similarity_match_torch():
    torch = pytest.importorskip("torch")
    x1, x2, weight, bias = (RNG.standard_normal(s) for s in ((4, 3), (4, 2), (5, 3, 2), (5,)))
    expected = torch.nn.functional.bilinear(*(torch.tensor(a) for a in (x1, x2, weight, bias))).numpy()
    actual = F.bilinear(*(onnxnn.tensor(a, dtype=onnxnn.float64) for a in (x1, x2, weight, bias))).numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)
    for case_id, shape1, shape2, dim, eps, scale in COSINE_CASES:
        a, b = RNG.standard_normal(shape1) * scale, RNG.standard_normal(shape2)
        expected = torch.nn.functional.cosine_similarity(torch.tensor(a), torch.tensor(b), dim, eps).numpy()
        actual = F.cosine_similarity(
            onnxnn.tensor(a, dtype=onnxnn.float64), onnxnn.tensor(b, dtype=onnxnn.float64), dim, eps
        ).numpy()
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12, err_msg=case_id)
    assert repr(torch.nn.Bilinear(20, 30, 40)) == repr(nn.Bilinear(20, 30, 40))


def test_functional_pdist_is_the_distance_of_every_pair_of_rows():
    rows = np.random.default_rng(3).standard_normal((5, 3))
    pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]  # PyTorch's order: row by row
    for p in (1.0, 2.0, 3.0):
        expected = [np.sum(np.abs(rows[i] - rows[j]) ** p) ** (1 / p) for i, j in pairs]
        np.testing.assert_allclose(F.pdist(onnxnn.tensor(rows), p).numpy(), expected, rtol=1e-12)
