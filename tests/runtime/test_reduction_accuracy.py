"""Long float32 sums, means, variances and running sums keep their digits, as PyTorch's do.

onnxruntime's ReduceSum/ReduceMean add a long reduction's elements one after another (per SIMD lane
along the innermost axis, per output down a strided one): a float32 sum of 10^7 values near 1000 was
1.2% high, their variance 143 for 0.999. onnxnn's sessions sum in two levels instead, blocks of
``b`` consecutive reduced elements and then the ``n / b`` block sums (``runtime/ops/reduction_accuracy.py``).
Summing ``k`` numbers one after another errs by at most ``(k - 1) eps`` times the sum of their
magnitudes; the lowering keeps both levels within ``4 sqrt(n)`` elements, so ``b + n / b <= 4.25
sqrt(n)`` and a sum errs by at most ``4.25 sqrt(n) eps sum|x|`` (a mean by one rounding more). The
expected values are float64 numpy sums (pairwise: exact to about 1e-16 of the sum of magnitudes).

Sessions shared across sizes (``fastpath.dynamic_shapes``) block the innermost run of reduced axes with
sizes read at run time: the tests turn them off, so each graph is built for its own sizes whatever ran
before in the process, but for the test of the shared form, which turns them on.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.caches import clear_caches
from onnxnn.runtime.fastpath import dynamic_shapes

EXECUTORS = ["kernels", "onnxruntime"]
EPS = float(np.finfo(np.float32).eps)


@pytest.fixture(autouse=True)
def _graphs_built_for_their_sizes(monkeypatch):
    monkeypatch.setattr(dynamic_shapes, "ENABLED", False)


def blocked_bound(count: int) -> float:
    """The relative bound (to the sum of magnitudes) of a float32 two-level sum of ``count`` elements."""
    return 4.25 * math.sqrt(count) * EPS


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_long_sum_mean_and_variance_keep_their_digits(executor):
    x = (1e3 + np.random.default_rng(0).standard_normal(10**7)).astype(np.float32)
    wide = x.astype(np.float64)
    n = x.size
    total, mean = wide.sum(), wide.mean()
    variance = ((wide - mean) ** 2).sum() / (n - 1)
    with onnxnn.set_executor(executor):
        t = onnxnn.from_numpy(x)
        results = {name: float(getattr(t, name)().item()) for name in ("sum", "mean", "var", "std")}
    gamma = blocked_bound(n)
    magnitude = np.abs(wide).sum()
    assert abs(results["sum"] - total) <= gamma * magnitude, results["sum"]
    mean_error = (gamma + EPS) * magnitude / n
    assert abs(results["mean"] - mean) <= mean_error, results["mean"]
    # Two passes: sum((x - m')^2) with m' = m + d is sum((x - m)^2) + n d^2 (the cross term sums to
    # 0); the differences and squares round once each, the second sum as the first, the quotient once.
    centered = mean_error + EPS * (np.abs(wide).max() + abs(mean))  # |x - m'| errs by d and one rounding
    variance_error = n * centered**2 / (n - 1) + (gamma + 3 * EPS) * ((np.abs(wide - mean) + centered) ** 2).sum() / (
        n - 1
    )
    assert abs(results["var"] - variance) <= variance_error, results["var"]
    assert abs(results["std"] - math.sqrt(variance)) <= variance_error / math.sqrt(variance) + EPS, results["std"]
    # What the arithmetic allows is far above what the blocks give: PyTorch's digits, within 4 ulps.
    for name, exact in (("sum", total), ("mean", mean), ("var", variance), ("std", math.sqrt(variance))):
        assert abs(results[name] - exact) <= 4 * np.spacing(np.float32(exact)), (name, results[name], exact)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_column_sum_over_a_million_rows_keeps_its_digits(executor):
    # Down a strided axis onnxruntime adds each column's elements one by one: 0.9% off here, before.
    x = (1e3 + np.random.default_rng(1).standard_normal((10**6, 10))).astype(np.float32)
    wide = x.astype(np.float64)
    with onnxnn.set_executor(executor):
        t = onnxnn.from_numpy(x)
        total, mean = t.sum(0).numpy(), t.mean(0).numpy()
    gamma = blocked_bound(x.shape[0])
    magnitude = np.abs(wide).sum(0)
    assert np.all(np.abs(total - wide.sum(0)) <= gamma * magnitude)
    assert np.all(np.abs(mean - wide.mean(0)) <= (gamma + EPS) * magnitude / x.shape[0])


# A reduction whose every slice starts with 2^24 and continues with ones: added one after another
# (or per lane), each 2^24 + 1 rounds back to 2^24 and all of a lane's ones are lost; in blocks, only
# the first block's. (shape, dims, keepdim, whether the innermost axis is reduced)
CASES = {
    "all_of_a_vector": ((1 << 16,), None, False, True),
    "a_prime_length_padded": ((65537,), None, False, True),
    "all_of_a_matrix": ((256, 256), None, False, True),
    "trailing_axis_keepdim": ((3, 1 << 16), (1,), True, True),
    "trailing_axes": ((5, 128, 512), (-2, -1), False, True),
    "leading_axis": ((1 << 12, 5), (0,), False, False),
    "a_middle_axis_keepdim": ((2, 300, 7), (1,), True, False),
    "outer_and_inner_axes": ((64, 3, 32, 32), (0, 2, 3), False, True),
    "interleaved_axes_keepdim": ((16, 64, 8, 64), (1, 3), True, True),
    "two_strided_axes": ((64, 3, 64, 5), (0, 2), False, False),
}


def _ones_after_two_to_the_24(shape, dims) -> np.ndarray:
    x = np.ones(shape, np.float32)
    reduced = set(range(len(shape))) if dims is None else {dim % len(shape) for dim in dims}
    x[tuple(0 if axis in reduced else slice(None) for axis in range(len(shape)))] = 2.0**24
    return x


def _cases():
    for name, (shape, dims, keepdim, _) in CASES.items():
        for executor in EXECUTORS:
            yield pytest.param(shape, dims, keepdim, executor, id=f"{name}-{executor}")


def _sum_and_mean(x: np.ndarray, dims, keepdim: bool) -> tuple:
    t = onnxnn.from_numpy(x)
    if dims is None:
        return t.sum().numpy(), t.mean().numpy()
    return t.sum(dims, keepdim=keepdim).numpy(), t.mean(dims, keepdim=keepdim).numpy()


def _assert_within(gamma: float, x: np.ndarray, dims, keepdim: bool, total, mean) -> None:
    """The sum errs by at most ``gamma`` of its magnitudes' sum, the mean by one rounding more."""
    wide = x.astype(np.float64)
    axes = None if dims is None else tuple(dims)
    count = x.size if dims is None else math.prod(x.shape[dim] for dim in dims)
    keep = keepdim and dims is not None
    expected_total, magnitude = wide.sum(axis=axes, keepdims=keep), np.abs(wide).sum(axis=axes, keepdims=keep)
    assert total.shape == mean.shape == expected_total.shape
    assert np.all(np.abs(total - expected_total) <= gamma * magnitude), np.abs(total - expected_total).max()
    error = np.abs(mean - expected_total / count)
    assert np.all(error <= (gamma + EPS) * magnitude / count), error.max()


@pytest.mark.parametrize("shape, dims, keepdim, executor", _cases())
def test_sums_and_means_of_every_layout_lose_only_a_block(shape, dims, keepdim, executor):
    x = _ones_after_two_to_the_24(shape, dims)
    count = x.size if dims is None else math.prod(shape[dim] for dim in dims)
    with onnxnn.set_executor(executor):
        total, mean = _sum_and_mean(x, dims, keepdim)
    _assert_within(blocked_bound(count), x, dims, keepdim, total, mean)


def size_blind_bound(shape, dims) -> float:
    """The relative bound of the shared graphs' form: blocks of ``b = ceil(sqrt(R))`` along the innermost
    run of ``R`` reduced elements, then the ``ceil(R / b)`` block sums and the other reduced axes."""
    axes = set(range(len(shape))) if dims is None else {dim % len(shape) for dim in dims}
    first = last = max(axes)
    while first - 1 in axes:
        first -= 1
    run = math.prod(shape[first : last + 1])
    block = max(1, math.isqrt(run - 1) + 1) if run else 1
    outer = math.prod(shape[axis] for axis in axes if axis < first)
    return (block + -(-run // block) * outer) * EPS


@pytest.mark.parametrize("name", CASES)
def test_sums_shared_across_sizes_lose_only_a_block(name, monkeypatch):
    # A loop whose batch varies runs one graph built with symbolic sizes; its sums are blocked too,
    # with the blocks' sizes computed at run time (they were added one after another: 80 ulps).
    monkeypatch.setattr(dynamic_shapes, "ENABLED", True)
    clear_caches()  # the sizes' own graphs, which other tests compiled, would take the runs
    shape, dims, keepdim, _ = CASES[name]
    with onnxnn.set_executor("onnxruntime"):
        for extra in (2, 1, 0):  # the first size builds a static graph, the others the shared one
            varied = (shape[0] + extra, *shape[1:])
            x = _ones_after_two_to_the_24(varied, dims)
            total, mean = _sum_and_mean(x, dims, keepdim)
            _assert_within(size_blind_bound(varied, dims), x, dims, keepdim, total, mean)
    assert dynamic_shapes.dynamic_info()["shared_runs"] >= 2  # two sizes, sum and mean each


# dtype, its significand bits after the point, count, magnitude (float16 sums stay below 65504)
HALF_CASES = [(onnxnn.bfloat16, 7, 10**7, 1e3), (onnxnn.float16, 10, 1 << 22, 1e-2)]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype, bits, count, magnitude", HALF_CASES, ids=["bfloat16", "float16"])
def test_half_precision_sums_round_once(dtype, bits, count, magnitude, executor):
    # float16 and bfloat16 are summed in float32 and rounded once: the blocked float32 sum errs by
    # far less than the dtype's spacing (see blocked_bound), so the result is within one spacing of
    # the exact sum (onnxruntime's running float32 sum was 1.2% off the bfloat16 one, two spacings).
    x = (magnitude * (1 + 1e-3 * np.random.default_rng(4).standard_normal(count))).astype(np.float32)
    with onnxnn.set_executor(executor):
        t = onnxnn.from_numpy(x).to(dtype)
        wide = t.float().numpy().astype(np.float64)
        total, mean = float(t.sum().float().item()), float(t.mean().float().item())
    for result, exact in ((total, wide.sum()), (mean, wide.mean())):
        spacing = 2.0 ** (math.floor(math.log2(exact)) - bits)
        assert abs(result - exact) <= spacing, (result, exact)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("size", [10**4, 10**5])
def test_cumsum_rounds_each_running_sum_once(size, executor):
    # PyTorch's CPU cumsum accumulates float32 in double: each prefix sum is rounded once.
    x = np.random.default_rng(0).random(size, dtype=np.float32)
    with onnxnn.set_executor(executor):
        result = onnxnn.from_numpy(x).cumsum(0).numpy()
    exact = np.cumsum(x.astype(np.float64))
    assert result.dtype == np.float32
    # float64 running sums of float32 values err by at most n * 2^-53 of the last (exact at 10^5).
    bound = 0.5 * np.spacing(exact.astype(np.float32)).astype(np.float64) + size * 2.0**-53 * exact
    assert np.all(np.abs(result - exact) <= bound)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_cumsum_gradient_is_the_reversed_running_sum(executor):
    x = np.random.default_rng(2).random((3, 5000), dtype=np.float32)
    g = np.random.default_rng(3).random((3, 5000), dtype=np.float32)
    with onnxnn.set_executor(executor):
        t = onnxnn.from_numpy(x).requires_grad_()
        result = t.cumsum(1)
        result.backward(onnxnn.from_numpy(g))
    assert type(result.grad_fn).__name__ == "CumsumBackward0"
    expected = np.cumsum(g.astype(np.float64)[:, ::-1], axis=1)[:, ::-1]
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=EPS, atol=0)
