"""The rounding bounds of tests/tolerances.py hold for every summation order, and are needed.

Each bound is checked against float32 computations in deliberately different orders (sequential
from either end, numpy's pairwise sums, BLAS), the spread a different BLAS or onnxruntime build
may produce; the exact values come from float64. The last tests show why a constant relative
tolerance is not enough: with cancellation, legitimate orders differ by far more than 1e-5
relative to the result, and still stay inside the bound.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tolerances import (
    accumulation_bound,
    assert_within,
    chain_bound,
    conv_bound,
    gamma,
    matmul_bound,
    normalization_bound,
    sum_bound,
    ulps,
    unit_roundoff,
)

RNG = np.random.default_rng(1234)


def sequential_sum(terms: np.ndarray, axis: int = -1, reverse: bool = False) -> np.ndarray:
    """float32 left-to-right (or right-to-left) accumulation: each partial sum rounded."""
    terms = np.moveaxis(np.asarray(terms, np.float32), axis, -1)
    if reverse:
        terms = terms[..., ::-1]
    return np.cumsum(terms, axis=-1, dtype=np.float32)[..., -1]


def float32_orders(terms: np.ndarray, axis: int = -1) -> list:
    """The same float32 sum in three orders."""
    return [
        sequential_sum(terms, axis),
        sequential_sum(terms, axis, reverse=True),
        np.asarray(terms, np.float32).sum(axis=axis, dtype=np.float32),
    ]


def test_unit_roundoff_and_gamma_follow_higham():
    assert unit_roundoff(np.float32) == 2.0**-24
    assert unit_roundoff(np.float64) == 2.0**-53
    assert unit_roundoff(ml_dtypes.bfloat16) == 2.0**-8
    assert gamma(10) == pytest.approx(10 * 2.0**-24 / (1 - 10 * 2.0**-24), rel=1e-15)


@pytest.mark.parametrize("k", [3, 128, 4096])
def test_matmul_bound_covers_every_order(k):
    a = RNG.standard_normal((4, k)).astype(np.float32)
    b = RNG.standard_normal((k, 3)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    products = a[:, :, None].astype(np.float32) * b[None, :, :]  # (4, k, 3), each product rounded
    orders = float32_orders(products, axis=1) + [a @ b]
    bound = matmul_bound(a, b)
    for first in orders:
        assert_within(first, exact, bound / 2)
        for second in orders:
            assert_within(first, second, bound)


def test_sum_bound_covers_sequential_sums_of_mixed_signs():
    x = RNG.standard_normal((3, 20000)).astype(np.float32)
    exact = x.astype(np.float64).sum(1)
    for result in float32_orders(x, axis=1):
        assert_within(result, exact, sum_bound(x, 1) / 2)


def test_a_constant_relative_tolerance_rejects_legitimate_orders_that_the_bound_accepts():
    # Terms that nearly cancel: the sum is small against sum |terms|, so the rounding of the
    # terms, legitimate in any order, is large relative to the result.
    x = np.concatenate([RNG.uniform(1, 2, 5000), -RNG.uniform(1, 2, 5000)]).astype(np.float32)
    x[-1] -= np.float32(x.astype(np.float64).sum() - 0.01)
    forward, backward = sequential_sum(x), sequential_sum(x, reverse=True)
    assert not np.allclose(forward, backward, rtol=1e-5, atol=0)
    assert_within(forward, backward, sum_bound(x))


def _conv2d_float32_sequential(x, w, bias):
    """A float32 direct convolution (no padding, stride 1) accumulating in the order c, kh, kw."""
    n, c, h, width = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, width - kw + 1), np.float32)
    for i in range(c):
        for p in range(kh):
            for q in range(kw):
                patch = x[:, None, i, p : p + out.shape[2], q : q + out.shape[3]]
                out = (out + patch * w[None, :, i, p, q, None, None]).astype(np.float32)
    return (out + bias[None, :, None, None]).astype(np.float32)


def test_conv_bound_covers_a_direct_convolution():
    x = RNG.standard_normal((2, 8, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((5, 8, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal(5).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))
    exact = np.einsum("ncijpq,ocpq->noij", windows, w.astype(np.float64)) + bias[None, :, None, None]
    assert_within(_conv2d_float32_sequential(x, w, bias), exact, conv_bound(x, w, bias) / 2)


@pytest.mark.parametrize("offset", [0.0, 30.0])
def test_normalization_bound_covers_one_and_two_pass_variances(offset):
    x = (RNG.standard_normal((16, 3)) * 2 + offset).astype(np.float32)
    x64 = x.astype(np.float64)
    exact = (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + 1e-5)
    n = np.float32(x.shape[0])
    mean = sequential_sum(x, 0) / n
    two_pass = sequential_sum((x - mean) ** 2, 0) / n
    one_pass = sequential_sum(x * x, 0) / n - mean * mean  # E[x^2] - mean^2: cancels when offset
    for variance in (two_pass, one_pass):
        result = (x - mean) / np.sqrt(np.maximum(variance, 0) + np.float32(1e-5))
        assert_within(result, exact, normalization_bound(x, (0,), 1e-5) / 2)


def test_chain_bound_covers_a_float32_mlp():
    x = RNG.standard_normal((5, 64)).astype(np.float32)
    w1, b1 = (RNG.standard_normal((64, 32)) / 8).astype(np.float32), RNG.standard_normal(32).astype(np.float32)
    w2, b2 = (RNG.standard_normal((32, 4)) / 6).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    exact = np.tanh(np.maximum(x.astype(np.float64) @ w1 + b1, 0) @ w2 + b2)
    hidden = np.maximum(sequential_sum(x[:, :, None] * w1[None], axis=1) + b1, 0)
    result = np.tanh(sequential_sum(hidden[:, :, None] * w2[None], axis=1, reverse=True) + b2)
    steps = [("affine", w1, b1), ("apply", lambda v: np.maximum(v, 0), 0), ("affine", w2, b2), ("apply", np.tanh, 8)]
    assert_within(result, exact, chain_bound(x, steps))


def test_ulps_are_the_spacing_of_the_dtype():
    values = np.array([1.0, 3.0, 1e-3, -5.0])
    np.testing.assert_array_equal(ulps(values, 1, np.float32), np.spacing(np.abs(values).astype(np.float32)))
    np.testing.assert_array_equal(ulps(values, 2, np.float64), 2 * np.spacing(np.abs(values)))
    np.testing.assert_array_equal(ulps([1.0, 3.0], 1, ml_dtypes.bfloat16), [2.0**-7, 2.0**-6])


def test_assert_within_names_the_worst_element():
    with pytest.raises(AssertionError, match=r"at \(1,\): 0.5 > 0.1"):
        assert_within([1.0, 2.5], [1.0, 2.0], 0.1)
    assert_within([1.0, 2.05], [1.0, 2.0], accumulation_bound([0.5, 1e6], 4))
