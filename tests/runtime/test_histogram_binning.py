"""histc and histogram bin as PyTorch's CPU kernel; their errors, and searchsorted's, are PyTorch's.

PyTorch bins in the input's dtype: histc puts ``x`` in bin ``int((x - min) * bins / (max - min))``
(the value ``max`` in the last bin); histogram does the same and then checks the edges next to that
bin, edges from PyTorch's ``linspace``: ``fma(step, i, start)`` for the first half, ``fma(-step,
steps - 1 - i, end)`` for the rest. The references below are those formulas in numpy, with the
fused multiply-add evaluated exactly (``fractions``); binning in float64 instead puts decimal
values such as 0.7f one bin lower.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import onnxnn

DECIMALS = [0.1, 0.2, 0.3, 0.7, 0.9]


def histc_reference(x: np.ndarray, bins: int, low: float, high: float) -> np.ndarray:
    kind = x.dtype.type
    left, right = kind(low), kind(high)
    inside = x[(x >= left) & (x <= right)]
    positions = ((inside - left) * kind(bins) / (right - left)).astype(np.int64)
    return np.bincount(np.minimum(positions, bins - 1), minlength=bins).astype(x.dtype)


def linspace_reference(start: float, end: float, steps: int, kind) -> np.ndarray:
    first, last = kind(start), kind(end)
    step = (last - first) / kind(steps - 1)
    exact = [
        Fraction(float(step)) * i + Fraction(float(first))
        if i < steps // 2
        else Fraction(float(last)) - Fraction(float(step)) * (steps - 1 - i)
        for i in range(steps)
    ]
    return np.asarray([kind(float(value)) for value in exact])  # no float32 ties in these cases


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16, onnxnn.float32, onnxnn.float64])
def test_histc_bins_in_the_input_dtype(dtype):
    rng = np.random.default_rng(0)
    data = np.concatenate([DECIMALS, np.round(rng.uniform(-1, 1, 200), 2)])
    x = onnxnn.tensor(data).to(dtype)
    values = x.numpy()
    for bins, low, high in ((10, 0.0, 1.0), (7, -0.3, 0.7), (100, -1.0, 1.0), (3, 0.0, 0.0)):
        actual = onnxnn.histc(x, bins, min=low, max=high)
        if low == high:  # the data's range
            low, high = float(values.min()), float(values.max())
        expected = histc_reference(values, bins, low, high)
        assert actual.dtype == dtype
        np.testing.assert_array_equal(actual.float().numpy(), expected.astype(np.float32))


def test_histc_and_histogram_put_decimal_float32_values_where_pytorch_does():
    x = onnxnn.tensor(DECIMALS)
    expected = [0, 1, 1, 1, 0, 0, 0, 1, 0, 1]  # 0.7f and 0.9f are just below 0.7 and 0.9, yet in bins 7 and 9
    assert onnxnn.histc(x, bins=10, min=0, max=1).tolist() == expected
    assert onnxnn.histogram(x, bins=10, range=(0.0, 1.0)).hist.tolist() == expected


@pytest.mark.parametrize(
    "data, bins, range, dtype",
    [
        ([0.0, -1.5, -0.25], 100, (-0.5, 0.75), onnxnn.float64),  # edge 40 is 2**-55, not 0: 0.0 in bin 39
        ([-0.25], 100, None, onnxnn.float32),
        ([0.1, 0.35, 0.6, 2.9], 37, (-1.3, 2.9), onnxnn.float32),
        ([0.1, 0.35, 0.6, 2.9, -0.7], 53, None, onnxnn.float64),
    ],
)
def test_histogram_edges_are_pytorchs_linspace(data, bins, range, dtype):
    kind = np.float32 if dtype == onnxnn.float32 else np.float64
    x = np.asarray(data, dtype=kind)
    low, high = range if range is not None else (float(x.min()), float(x.max()))
    if low == high:
        low, high = low - 0.5, high + 0.5
    edges = linspace_reference(low, high, bins + 1, kind)
    hist, bin_edges = onnxnn.histogram(onnxnn.tensor(x), bins, range=range)
    np.testing.assert_array_equal(bin_edges.numpy(), edges)
    expected = np.zeros(bins, kind)
    for value in x[(x >= edges[0]) & (x <= edges[-1])]:
        expected[min(np.searchsorted(edges, value, side="right") - 1, bins - 1)] += 1
    np.testing.assert_array_equal(hist.numpy(), expected)


def test_histogram_float64_zero_lands_below_edge_40():
    hist, edges = onnxnn.histogram(onnxnn.tensor([0.0, -1.5, -0.25], dtype=onnxnn.float64), 100, range=(-0.5, 0.75))
    assert edges.numpy()[40] == 2.0**-55
    assert np.flatnonzero(hist.numpy()).tolist() == [20, 39]


def test_histogram_weights_and_density():
    x = onnxnn.tensor([0.1, 0.2, 0.7, 0.9], dtype=onnxnn.float64)
    weight = onnxnn.tensor([1.0, 2.0, 3.0, -0.5], dtype=onnxnn.float64)
    hist, edges = onnxnn.histogram(x, 2, range=(0.0, 1.0), weight=weight, density=True)
    np.testing.assert_allclose(hist.numpy(), np.array([3.0, 2.5]) / 5.5 / 0.5, rtol=1e-15)


def test_histogram_with_edges_that_do_not_increase_searches_as_pytorch():
    # std::upper_bound over [0, 1, 0.5]: every value in [0, 1] probes 1 first, then 0.5.
    hist, _ = onnxnn.histogram(onnxnn.tensor(DECIMALS), onnxnn.tensor([0.0, 1.0, 0.5]))
    assert hist.tolist() == [3.0, 0.0]


NAN = float("nan")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: onnxnn.histc(onnxnn.tensor([1, 2]), 3),
            NotImplementedError,
            "\"histogram_cpu\" not implemented for 'Long'",
        ),
        (
            lambda: onnxnn.histc(onnxnn.tensor([0.0, NAN]), 3),
            RuntimeError,
            r"histc: range of \[-?nan, -?nan\] is not finite",
        ),
        (
            lambda: onnxnn.histc(onnxnn.tensor([0.0, float("inf")]), 3),
            RuntimeError,
            r"range of \[0, inf\] is not finite",
        ),
        (lambda: onnxnn.histc(onnxnn.ones(2), 3, min=NAN, max=1), RuntimeError, r"range of \[nan, 1\] is not finite"),
        (lambda: onnxnn.histc(onnxnn.ones(2), 3, min=1, max=0), RuntimeError, "histc: max must be larger than min"),
        (lambda: onnxnn.histc(onnxnn.ones(2), 0), RuntimeError, r"histogram\(\): bins must be > 0, but got 0"),
        (
            lambda: onnxnn.histogram(onnxnn.tensor([1, 2]), 3),
            NotImplementedError,
            "\"histogramdd\" not implemented for 'Long'",
        ),
        (lambda: onnxnn.histogram(onnxnn.ones(2).half(), 3), NotImplementedError, "not implemented for 'Half'"),
        (
            lambda: onnxnn.histogram(onnxnn.tensor([0.0, NAN]), 3),
            RuntimeError,
            r"dimension 0's range \[nan, nan\] is not finite",
        ),
        (
            lambda: onnxnn.histogram(onnxnn.ones(2), 3, range=(1.0, 0.0)),
            RuntimeError,
            "min should not exceed max, but got min 1 max 0 for dimension 0",
        ),
        (lambda: onnxnn.histogram(onnxnn.ones(2), onnxnn.tensor([0.5])), RuntimeError, "bins must be > 0, but got 0"),
        (lambda: onnxnn.histogram(onnxnn.ones(2), onnxnn.ones(0)), RuntimeError, "at least 1 element, but got 0"),
        (
            lambda: onnxnn.histogram(onnxnn.ones(2), onnxnn.ones(1, 2)),
            RuntimeError,
            "should have one dimension, but got 2",
        ),
        (
            lambda: onnxnn.histogram(onnxnn.ones(2), onnxnn.ones(2, dtype=onnxnn.float64)),
            RuntimeError,
            "input with dtype float and bins for dimension 0 with dtype double",
        ),
        (
            lambda: onnxnn.histogram(onnxnn.ones(2, dtype=onnxnn.float64), 3, weight=onnxnn.ones(2)),
            RuntimeError,
            r"same dtype, but got input\(double\), and weight\(float\)",
        ),
        (
            lambda: onnxnn.histogram(onnxnn.ones(5), 3, weight=onnxnn.ones(3)),
            RuntimeError,
            r"but got input with shape \[5, 1\] and weight with shape \[3\]",
        ),
    ],
)
def test_bad_histograms_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


SORTED = onnxnn.tensor([1.0, 3.0, 5.0])


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: onnxnn.searchsorted(SORTED, onnxnn.tensor([3.0]), side="left", right=True),
            "side and right can't be set to opposites, got side of left while right was True",
        ),
        (
            lambda: onnxnn.searchsorted(SORTED, onnxnn.tensor([3.0]), sorter=onnxnn.tensor([0, 1])),
            r"boundary and sorter must have the same size, but got boundary tensor \[3\]and got sorter tensor \[2\]",
        ),
        (
            lambda: onnxnn.searchsorted(SORTED, onnxnn.tensor([3.0]), sorter=onnxnn.tensor([0.0, 1.0, 2.0])),
            "sorter must be a tensor of long dtype but got dtype Float",
        ),
        (
            lambda: onnxnn.searchsorted(SORTED, onnxnn.tensor([3.0]), sorter=onnxnn.tensor([0, 3, 1])),
            "sorter index out of range",
        ),
    ],
)
def test_bad_searchsorted_arguments_raise_pytorchs_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_searchsorted_side_right_agrees_with_right():
    values = onnxnn.tensor([3.0, 4.0])
    assert onnxnn.searchsorted(SORTED, values, side="right", right=True).tolist() == [2, 2]
    assert onnxnn.searchsorted(SORTED, values, side="right").tolist() == [2, 2]
    assert onnxnn.searchsorted(SORTED, values, sorter=onnxnn.tensor([0, 1, 2])).tolist() == [1, 2]


def test_histograms_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    for trial in range(60):
        kind = np.float32 if trial % 2 else np.float64
        x = np.round(rng.uniform(-1, 1, int(rng.integers(1, 50))), int(rng.integers(1, 3))).astype(kind)
        bins = int(rng.integers(1, 120))
        low, high = sorted(np.round(rng.uniform(-1.2, 1.2, 2), 1).tolist())
        expected = torch.histc(torch.tensor(x), bins, min=low, max=high).numpy()
        np.testing.assert_array_equal(onnxnn.histc(onnxnn.tensor(x), bins, min=low, max=high).numpy(), expected)
        for range_ in (None, (low, high)):
            t_hist, t_edges = torch.histogram(torch.tensor(x), bins, range=range_)
            o_hist, o_edges = onnxnn.histogram(onnxnn.tensor(x), bins, range=range_)
            np.testing.assert_array_equal(o_edges.numpy(), t_edges.numpy())
            np.testing.assert_array_equal(o_hist.numpy(), t_hist.numpy())
