"""NaN in extrema, orderings, signs and thresholds: PyTorch's semantics on both executors.

A max or min over elements one of which is NaN is NaN, and argmax/argmin point at the first NaN,
wherever the NaNs sit (onnxruntime's own ReduceMax/ArgMax answer depending on their positions:
three NaNs before a number gave the number). Sorting ranks NaN above every number, equal elements
keeping their order (a NaN and an infinity of one line tie, and keep their order: the one
documented gap); ``median`` of a line holding a NaN is NaN, ``nanmedian`` skips NaNs, and the
running extrema turn NaN at the first NaN. ``sign(NaN)`` is 0 and ``threshold`` keeps a NaN.
Expectations are numpy's formulas, or the orderings spelled out below.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ["onnxruntime", "kernels"]


def _rows_with_nans() -> np.ndarray:
    """Rows whose NaNs sit first, last, in runs of one to four, and nowhere (no infinities: orderings
    and argmax/argmin tie a NaN with an infinity of the same line; see the test of infinities)."""
    rows = np.array(
        [
            [np.nan, 1.0, 2.0, -3.0, 0.5],
            [1.0, 2.0, -3.0, 0.5, np.nan],
            [np.nan, np.nan, np.nan, 42.0, 1.0],
            [np.nan, np.nan, np.nan, np.nan, 42.0],
            [7.0, np.nan, -7.0, 1.0, 2.0],
            [np.nan, 1.0, 8.0, -8.0, 2.0],
            [1.0, -2.0, 9.0, -9.0, 0.0],
            [0.25, 3.0, 3.0, -1.0, -1.0],
        ],
        dtype=np.float32,
    )
    return np.stack([rows, rows[::-1].copy()])  # (2, 8, 5)


X = _rows_with_nans()

# name, onnxnn call, numpy expectation
EXTREMA = [
    ("amax over the last dim", lambda t: t.amax(-1), lambda a: np.max(a, -1)),
    ("amax over two dims, kept", lambda t: t.amax((0, 2), keepdim=True), lambda a: np.max(a, (0, 2), keepdims=True)),
    ("amin over the last dim", lambda t: t.amin(-1), lambda a: np.min(a, -1)),
    ("max of everything", lambda t: t.max(), lambda a: np.max(a)),
    ("min of everything", lambda t: t.min(), lambda a: np.min(a)),
    ("max along a dim: values", lambda t: t.max(2).values, lambda a: np.max(a, 2)),
    ("max along a dim: indices", lambda t: t.max(2).indices, lambda a: np.argmax(a, 2)),
    ("min along a dim, kept: values", lambda t: t.min(2, keepdim=True).values, lambda a: np.min(a, 2, keepdims=True)),
    ("min along a dim, kept: indices", lambda t: t.min(2, keepdim=True).indices, lambda a: np.argmin(a, 2)[..., None]),
    ("argmax along a dim", lambda t: t.argmax(2), lambda a: np.argmax(a, 2)),
    ("argmax along a dim, kept", lambda t: t.argmax(1, keepdim=True), lambda a: np.argmax(a, 1)[:, None]),
    ("argmin along a dim", lambda t: t.argmin(2), lambda a: np.argmin(a, 2)),
    ("argmax of the flattened tensor", lambda t: t.argmax(), lambda a: np.argmax(a)),
    ("argmin of the flattened tensor", lambda t: t.argmin(), lambda a: np.argmin(a)),
    ("aminmax: min", lambda t: onnxnn.aminmax(t, dim=2).min, lambda a: np.min(a, 2)),
    ("aminmax: max", lambda t: onnxnn.aminmax(t, dim=2).max, lambda a: np.max(a, 2)),
    ("infinity norm", lambda t: t.norm(float("inf"), dim=2), lambda a: np.max(np.abs(a), 2)),
    ("sign", lambda t: t.sign(), lambda a: np.where(np.isnan(a), 0.0, np.sign(a))),
    ("sort: values", lambda t: t.sort(2).values, lambda a: np.take_along_axis(a, _ascending(a), 2)),
    ("sort: indices", lambda t: t.sort(2).indices, lambda a: _ascending(a)),
    ("descending sort: indices", lambda t: t.sort(2, descending=True).indices, lambda a: _descending(a)),
    ("argsort", lambda t: t.argsort(1), lambda a: np.argsort(a, 1, kind="stable")),
    ("topk: values", lambda t: t.topk(3, 2).values, lambda a: np.take_along_axis(a, _descending(a)[..., :3], 2)),
    ("topk: indices", lambda t: t.topk(3, 2).indices, lambda a: _descending(a)[..., :3]),
    ("smallest topk: indices", lambda t: t.topk(2, 2, largest=False).indices, lambda a: _ascending(a)[..., :2]),
    ("kthvalue: values", lambda t: t.kthvalue(4, 2).values, lambda a: np.take_along_axis(a, _ascending(a), 2)[..., 3]),
    ("kthvalue: indices", lambda t: t.kthvalue(4, 2).indices, lambda a: _ascending(a)[..., 3]),
    ("median along a dim: values", lambda t: t.median(2).values, lambda a: _median(a)[0]),
    ("median along a dim: indices", lambda t: t.median(2).indices, lambda a: _median(a)[1]),
    ("median of everything", lambda t: t.median(), lambda a: np.float32(np.nan)),
    ("median of a NaN-free line", lambda t: t[0, 6].median(), lambda a: np.sort(a[0, 6])[2]),
    ("nanmedian", lambda t: t.nanmedian(2).values, lambda a: _nanmedian(a)),
    ("cummax: values", lambda t: t.cummax(2).values, lambda a: np.maximum.accumulate(a, 2)),
    ("cummax: indices", lambda t: t.cummax(2).indices, lambda a: _running_extremum_indices(a, np.greater_equal)),
    ("cummin: values", lambda t: t.cummin(2).values, lambda a: np.minimum.accumulate(a, 2)),
    ("cummin: indices", lambda t: t.cummin(2).indices, lambda a: _running_extremum_indices(a, np.less_equal)),
    ("threshold", lambda t: F.threshold(t, 0.5, 9.0), lambda a: np.where(a <= 0.5, 9.0, a)),
]


def _ascending(a: np.ndarray) -> np.ndarray:
    """The stable ascending order along the last dim: numpy's, which puts NaNs last, as PyTorch."""
    return np.argsort(a, -1, kind="stable")


def _descending(a: np.ndarray) -> np.ndarray:
    """The stable descending order along the last dim with NaN above every number (PyTorch's)."""
    order = [
        sorted(range(len(line)), key=lambda i, line=line: (not np.isnan(line[i]), -line[i]))
        for line in a.reshape(-1, a.shape[-1])
    ]
    return np.array(order).reshape(a.shape)


def _median(a: np.ndarray):
    """The lower median along the last dim and its index; NaN at the first NaN's index in a line holding one."""
    order = _ascending(a)[..., (a.shape[-1] - 1) // 2]
    has_nan = np.isnan(a).any(-1)
    values = np.where(has_nan, np.nan, np.take_along_axis(a, order[..., None], -1)[..., 0])
    return values.astype(a.dtype), np.where(has_nan, np.argmax(np.isnan(a), -1), order)


def _nanmedian(a: np.ndarray) -> np.ndarray:
    lines = [np.sort(line[~np.isnan(line)]) for line in a.reshape(-1, a.shape[-1])]
    return np.array([line[(len(line) - 1) // 2] if len(line) else np.nan for line in lines], a.dtype).reshape(
        a.shape[:-1]
    )


def _running_extremum_indices(a: np.ndarray, better_or_equal) -> np.ndarray:
    """Where each running extremum along the last dim was found: the last of equal ones, and from
    the first NaN on, the last NaN's position."""
    result = np.zeros(a.shape, np.int64)
    for position in np.ndindex(a.shape[:-1]):
        line, best = a[position], 0
        for i, value in enumerate(line):
            if np.isnan(value) or (not np.isnan(line[best]) and better_or_equal(value, line[best])):
                best = i
            result[position + (i,)] = best
    return result


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("call, expected", [case[1:] for case in EXTREMA], ids=[case[0] for case in EXTREMA])
def test_nan_is_the_extremum_as_in_pytorch(executor, call, expected):
    with onnxnn.set_executor(executor):
        result = call(onnxnn.tensor(X)).numpy()
    want = expected(X)
    assert result.shape == np.shape(want)
    np.testing.assert_array_equal(result, want)


# The cases whose expectation is a formula of the input (two are written for X itself).
FORMULA_CASES = [case for case in EXTREMA if case[0] not in ("median of everything", "median of a NaN-free line")]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "call, expected", [case[1:] for case in FORMULA_CASES], ids=[case[0] for case in FORMULA_CASES]
)
def test_infinities_without_nan_order_as_numbers(executor, call, expected):
    a = np.array([[[1.0, np.inf, -np.inf, 0.0, np.inf], [-np.inf, 2.0, -1.0, -np.inf, 3.0]]] * 2, np.float32)
    a = np.concatenate([a, a[:, :, ::-1]], axis=2)  # both orders of every pair
    with onnxnn.set_executor(executor):
        result = call(onnxnn.tensor(a)).numpy()
    np.testing.assert_array_equal(result, expected(a))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "call, expected", [case[1:] for case in FORMULA_CASES], ids=[case[0] for case in FORMULA_CASES]
)
def test_nan_ranks_above_an_infinity_of_its_line(executor, call, expected):
    # A NaN beside +inf (and -inf) in one line, in both orders: NaN still comes first (argmax, topk)
    # or last (sort), never tied with the infinity.
    nan, inf = np.nan, np.inf
    a = np.array([[[inf, nan, 1.0, -inf, 0.0], [-inf, 2.0, nan, inf, nan]]] * 2, np.float32)
    a = np.concatenate([a, a[:, :, ::-1]], axis=2)
    with onnxnn.set_executor(executor):
        result = call(onnxnn.tensor(a)).numpy()
    np.testing.assert_array_equal(result, expected(a))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_zero_dimensional_nan_is_its_own_extremum(executor):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(float("nan"))
        assert np.isnan(x.amax().item()) and np.isnan(x.max(0).values.item())
        assert x.argmax().item() == 0 and x.argmin(0).item() == 0


@pytest.mark.parametrize("executor", EXECUTORS)
def test_integer_extrema_are_unchanged(executor):
    a = np.array([[3, -1, 7], [7, 2, 7]], dtype=np.int64)
    with onnxnn.set_executor(executor):
        t = onnxnn.tensor(a)
        np.testing.assert_array_equal(t.amax(1).numpy(), a.max(1))
        np.testing.assert_array_equal(t.max(1).indices.numpy(), a.argmax(1))
        np.testing.assert_array_equal(t.argmin(1).numpy(), a.argmin(1))


def _adaptive_max_pool_1d_windows(a: np.ndarray, size: int) -> np.ndarray:
    """PyTorch's adaptive windows over the last dim: [floor(i * L / size), ceil((i + 1) * L / size))."""
    length = a.shape[-1]
    return np.stack(
        [np.max(a[..., (i * length) // size : -(-((i + 1) * length) // size)], -1) for i in range(size)], -1
    )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_uneven_adaptive_max_pool_propagates_nan(executor):
    a = np.array([[[1.0, np.nan, 2.0, 5.0, -1.0, 0.0, 3.0]]], dtype=np.float32)
    with onnxnn.set_executor(executor):
        result = F.adaptive_max_pool1d(onnxnn.tensor(a), 3).numpy()
    np.testing.assert_array_equal(result, _adaptive_max_pool_1d_windows(a, 3))


def test_max_along_a_dim_keeps_its_gradient_on_one_element():
    x = onnxnn.tensor([[1.0, 3.0, 3.0], [2.0, -1.0, 0.5]], requires_grad=True)
    x.max(1).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


# clamp's gradient is PyTorch's mask ``min <= x <= max``: 1 at the bounds themselves, 0 outside
# and at NaN (whose comparisons are false); with no bound, 1 everywhere but NaN.
CLAMP_GRADIENTS = [
    ("both_bounds", {"min": 0.0, "max": 6.0}, [0, 0, 1, 1, 1, 0, 0, 0]),
    ("min_only", {"min": 0.0}, [0, 0, 1, 1, 1, 1, 1, 0]),
    ("max_only", {"max": 6.0}, [1, 1, 1, 1, 1, 0, 0, 0]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, bounds, expected", CLAMP_GRADIENTS, ids=[c[0] for c in CLAMP_GRADIENTS])
def test_clamps_gradient_is_zero_outside_the_bounds_and_at_nan(executor, case_id, bounds, expected):
    x = onnxnn.tensor(
        np.array([-np.inf, -1.0, 0.0, 3.0, 6.0, 7.0, np.inf, np.nan], dtype=np.float32), requires_grad=True
    )
    with onnxnn.set_executor(executor):
        x.clamp(**bounds).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.array(expected, dtype=np.float32))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "loss",
    [lambda x: x.abs().sum(), lambda x: onnxnn.nn.functional.l1_loss(x, onnxnn.zeros(4), reduction="sum")],
    ids=["abs", "l1_loss"],
)
def test_abs_passes_no_gradient_to_a_nan(executor, loss):
    # PyTorch's abs backward multiplies by sgn, which is 0 at NaN.
    x = onnxnn.tensor([float("nan"), -1.0, 0.0, 2.0], requires_grad=True)
    with onnxnn.set_executor(executor):
        loss(x).backward()
        np.testing.assert_array_equal(x.grad.numpy(), [0.0, -1.0, 0.0, 1.0])


def _log_softmax(a: np.ndarray, axis: int) -> np.ndarray:
    """PyTorch's formula: x - max - log(sum(exp(x - max))); a +inf makes its line NaN (inf - inf)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = a - a.max(axis, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_log_softmax_of_a_line_holding_infinities_is_pytorchs(executor, dtype, axis):
    # onnxruntime's float64 LogSoftmax gave -inf beside a +inf (and 46.05 with a NaN there too).
    nan, inf = np.nan, np.inf
    a = np.array([[-4.2, 1.0, nan, -inf], [inf, 2.0, 9.0, -inf], [0.5, inf, inf, 3.0]], dtype)
    with onnxnn.set_executor(executor):
        result = onnxnn.log_softmax(onnxnn.tensor(a), axis).numpy()
    np.testing.assert_allclose(result, _log_softmax(a, axis), rtol=4 * np.finfo(dtype).eps, atol=0)
