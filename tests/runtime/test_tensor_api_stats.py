"""Statistics, data-dependent results and out-of-place writes added for PyTorch parity (issue #12):
forward against numpy on both executors, gradients against float64 finite differences.

unique/bincount/histc/mode read their input (as PyTorch synchronizes for them); everything else is
recorded. Selections and writes must match numpy exactly; arithmetic within ``gamma(n)`` of the
magnitude of the n terms each output accumulates (tests/tolerances.py).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import assert_within, gamma

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
rng = np.random.default_rng(11)
M = rng.standard_normal((3, 4))
N = rng.standard_normal((4, 5))
S = rng.standard_normal((3, 3))
X1, X2 = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
INTS = np.array([3, 1, 3, 0, 5, 1, 3])
W = rng.uniform(0.5, 2.0, 7)
DISTINCT = np.random.default_rng(5).permutation(12).reshape(3, 4) * 0.41 - 2
AWAY_FROM_ZERO = rng.uniform(0.5, 1.5, (3, 4)) * np.where(rng.random((3, 4)) < 0.5, -1, 1)
REPEATS = np.array([[1.0, 2.0, 2.0, 3.0, 3.0], [4.0, 4.0, 1.0, 1.0, 0.0]])
NANS = np.array([1.0, np.nan, -2.0, np.nan, 0.5])


def _np_mode(x, axis):
    def line(v):
        values, counts = np.unique(v, return_counts=True)
        return values[np.argmax(counts)]

    return np.apply_along_axis(line, axis, x)


def _np_scatter_reduce(x, index, src, reduce, include_self):
    out = x.copy()
    touched = {}
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            touched.setdefault((int(index[i, j]), j), []).append(src[i, j])
    for (r, c), values in touched.items():
        pool = ([x[r, c]] if include_self else []) + values
        out[r, c] = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min, "mean": np.mean}[reduce](pool)
    return out


def _np_block_diag(*blocks):
    blocks = [np.atleast_2d(b) for b in blocks]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        out[r : r + b.shape[0], c : c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    y = np.moveaxis(y, axis, -1)
    steps = np.diff(x) if x is not None else dx
    return np.sum((y[..., 1:] + y[..., :-1]) * steps / 2, axis=-1)


SCATTER_INDEX = np.array([[0, 2, 1, 0], [0, 0, 2, 1]])
SCATTER_SRC = rng.standard_normal((2, 4))
IDX_ROWS, IDX_COLS = np.array([0, 2, 0]), np.array([1, 3, 1])

EXACT_CASES = [
    ("unique_sorted", lambda x: onnxnn.unique(x.long()), lambda x: np.unique(x.astype(np.int64)), [INTS * 1.0]),
    (
        "unique_inverse",
        lambda x: onnxnn.unique(x, return_inverse=True)[1],
        lambda x: np.unique(x, return_inverse=True)[1].reshape(x.shape),
        [REPEATS],
    ),
    (
        "unique_counts",
        lambda x: onnxnn.unique(x, return_counts=True)[1],
        lambda x: np.unique(x, return_counts=True)[1],
        [REPEATS],
    ),
    (
        "unique_dim",
        lambda x: onnxnn.unique(x, dim=0),
        lambda x: np.unique(x, axis=0),
        [np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0]])],
    ),
    (
        "unique_consecutive",
        lambda x: onnxnn.unique_consecutive(x),
        lambda x: np.array([1.0, 2.0, 3.0, 4.0, 1.0, 0.0]),
        [REPEATS],
    ),
    (
        "unique_consecutive_counts",
        lambda x: onnxnn.unique_consecutive(x, return_counts=True)[1],
        lambda x: np.array([1, 2, 2, 2, 2, 1]),
        [REPEATS],
    ),
    (
        "bincount",
        lambda x: onnxnn.bincount(x.long(), minlength=8),
        lambda x: np.bincount(x.astype(int), minlength=8),
        [INTS * 1.0],
    ),
    (
        "bincount_weights",
        lambda x, w: onnxnn.bincount(x.long(), w),
        lambda x, w: np.bincount(x.astype(int), w).astype(w.dtype),
        [INTS * 1.0, W],
    ),
    ("histc", lambda x: onnxnn.histc(x, 4, -2.0, 2.0), lambda x: np.histogram(x, 4, (-2.0, 2.0))[0], [M]),
    ("histc_data_range", lambda x: onnxnn.histc(x, 3), lambda x: np.histogram(x, 3, (x.min(), x.max()))[0], [M]),
    ("mode_values", lambda x: onnxnn.mode(x, 1).values, lambda x: _np_mode(x, 1), [REPEATS]),
    (
        "mode_indices_point_at_mode",
        lambda x: x.gather(1, onnxnn.mode(x, 1, keepdim=True).indices).squeeze(1),
        lambda x: _np_mode(x, 1),
        [REPEATS],
    ),
    (
        "index_put",
        lambda x, v: onnxnn.index_put(x, (onnxnn.tensor([0, 2]), onnxnn.tensor([1, 3])), v),
        lambda x, v: _set(x, ([0, 2], [1, 3]), v),
        [M, np.array([7.0, 8.0])],
    ),
    (
        "put",
        lambda x, v: onnxnn.put(x, onnxnn.tensor([0, -1, 5]), v),
        lambda x, v: _put(x, [0, -1, 5], v),
        [M, np.array([7.0, 8.0, 9.0])],
    ),
    *[
        (
            f"scatter_reduce_{r}_{'self' if s else 'noself'}",
            lambda x, src, r=r, s=s: onnxnn.scatter_reduce(x, 0, onnxnn.tensor(SCATTER_INDEX), src, r, include_self=s),
            lambda x, src, r=r, s=s: _np_scatter_reduce(x, SCATTER_INDEX, src, r, s),
            [M, SCATTER_SRC],
        )
        for r in ("amax", "amin")
        for s in (True, False)
    ],
    (
        "select_scatter",
        lambda x, v: onnxnn.select_scatter(x, v, 1, -1),
        lambda x, v: _set(x, (slice(None), -1), v),
        [M, np.array([1.0, 2.0, 3.0])],
    ),
    (
        "slice_scatter",
        lambda x, v: onnxnn.slice_scatter(x, v, 1, 0, 4, 2),
        lambda x, v: _set(x, (slice(None), slice(0, 4, 2)), v),
        [M, np.ones((3, 2))],
    ),
    (
        "diagonal_scatter",
        lambda x, v: onnxnn.diagonal_scatter(x, v, 1),
        lambda x, v: _set(x, ([0, 1, 2], [1, 2, 3]), v),
        [M, np.array([5.0, 6.0, 7.0])],
    ),
    (
        "fill_diagonal_wrap",
        lambda x: x.clone().fill_diagonal_(9.0, wrap=True),
        lambda x: _fill_diag(x, 9.0, True),
        [rng.standard_normal((7, 3))],
    ),
    (
        "fill_diagonal",
        lambda x: x.clone().fill_diagonal_(9.0),
        lambda x: _fill_diag(x, 9.0, False),
        [rng.standard_normal((7, 3))],
    ),
    ("block_diag", lambda a, b, c: onnxnn.block_diag(a, b, c), _np_block_diag, [M, np.array([1.0, 2.0]), S[:1, :1]]),
    (
        "cartesian_prod",
        lambda a, b: onnxnn.cartesian_prod(a, b),
        lambda a, b: np.array(list(itertools.product(a, b))),
        [M[0], N[0, :2]],
    ),
    (
        "combinations",
        lambda a: onnxnn.combinations(a, 2),
        lambda a: np.array(list(itertools.combinations(a, 2))),
        [M[0]],
    ),
    (
        "combinations_with_replacement",
        lambda a: onnxnn.combinations(a, 2, with_replacement=True),
        lambda a: np.array(list(itertools.combinations_with_replacement(a, 2))),
        [M[0, :3]],
    ),
    (
        "broadcast_tensors",
        lambda a, b: onnxnn.stack(onnxnn.broadcast_tensors(a, b)),
        lambda a, b: np.stack(np.broadcast_arrays(a, b)),
        [M[:, :1], M[:1]],
    ),
    ("isin", lambda a, b: onnxnn.isin(a, b), np.isin, [INTS * 1.0, np.array([1.0, 5.0])]),
    (
        "isin_invert",
        lambda a, b: onnxnn.isin(a, b, invert=True),
        lambda a, b: np.isin(a, b, invert=True),
        [INTS * 1.0, np.array([1.0, 5.0])],
    ),
    ("fmax_ignores_nan", lambda a, b: onnxnn.fmax(a, b), np.fmax, [NANS, np.array([0.0, 2.0, np.nan, np.nan, 1.0])]),
    ("fmin_ignores_nan", lambda a, b: onnxnn.fmin(a, b), np.fmin, [NANS, np.array([0.0, 2.0, np.nan, np.nan, 1.0])]),
    ("copysign", onnxnn.copysign, np.copysign, [M, np.array([1.0, -0.0, 0.0, -2.0])]),
    ("fix", onnxnn.fix, np.fix, [M * 3]),
    (
        "quantile_lower",
        lambda x: onnxnn.quantile(x, 0.4, 1, interpolation="lower"),
        lambda x: np.quantile(x, 0.4, 1, method="lower"),
        [M],
    ),
    (
        "quantile_nearest",
        lambda x: onnxnn.quantile(x, onnxnn.tensor([0.5, 1.0]), interpolation="nearest"),
        lambda x: np.quantile(x, [0.5, 1.0], method="nearest"),
        [M],
    ),
]


def _set(x, key, v):
    out = x.copy()
    out[key] = v
    return out


def _put(x, index, v):
    out = x.copy().reshape(-1)
    out[index] = v
    return out.reshape(x.shape)


def _fill_diag(x, value, wrap):
    out = x.copy()
    np.fill_diagonal(out, value, wrap=wrap)
    return out


def _run(executor, function, arrays, dtype):
    with onnxnn.set_executor(executor):
        tensors = [onnxnn.tensor(a, dtype=dtype) if a.dtype.kind == "f" else onnxnn.tensor(a) for a in arrays]
        return np.asarray(function(*tensors).numpy())


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", EXACT_CASES, ids=[case[0] for case in EXACT_CASES])
def test_selection_and_writes_match_numpy_exactly(case, dtype, executor):
    _, function, reference, inputs = case
    arrays = [a.astype(dtype.numpy_dtype) for a in inputs]
    expected = np.asarray(reference(*arrays))
    actual = _run(executor, function, arrays, dtype)
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


def _bound(terms, magnitude):
    return lambda dtype, *inputs: gamma(terms, dtype) * magnitude(*inputs)


ROUNDED_CASES = [
    *[
        (
            f"quantile_{method}",
            lambda x, m=method: onnxnn.quantile(x, [0.1, 0.5, 0.75], 0, interpolation=m),
            lambda x, m=method: np.quantile(x, [0.1, 0.5, 0.75], 0, method=m),
            [M],
            _bound(4, lambda x: np.abs(x).max()),
        )
        for method in ("linear", "midpoint", "higher")
    ],
    (
        "quantile_flat_keepdim",
        lambda x: onnxnn.quantile(x, 0.3, keepdim=True),
        lambda x: np.quantile(x, 0.3, keepdims=True),
        [M],
        _bound(4, lambda x: np.abs(x).max()),
    ),
    ("cov", lambda x: onnxnn.cov(x), np.cov, [M], _bound(8, lambda x: np.abs(x).max() ** 2 * 2)),
    (
        "cov_weights_correction0",
        lambda x, f, a: onnxnn.cov(x, correction=0, fweights=f.long(), aweights=a),
        lambda x, f, a: np.cov(x, ddof=0, fweights=f.astype(int), aweights=a),
        [M, np.array([1.0, 2.0, 1.0, 3.0]), np.array([0.5, 1.0, 2.0, 1.0])],
        _bound(16, lambda x, f, a: np.abs(x).max() ** 2 * 4),
    ),
    ("corrcoef", onnxnn.corrcoef, np.corrcoef, [M], _bound(24, lambda x: np.ones((3, 3)))),
    (
        "dist_p3",
        lambda a, b: onnxnn.dist(a, b, 3),
        lambda a, b: np.sum(np.abs(a - b) ** 3) ** (1 / 3),
        [M, N[:3, :4]],
        _bound(20, lambda a, b: np.sum(np.abs(a - b) ** 3) ** (1 / 3)),
    ),
    (
        "cdist_p2",
        onnxnn.cdist,
        lambda a, b: np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1)),
        [X1, X2],
        _bound(8, lambda a, b: np.sqrt(((np.abs(a[:, None]) + np.abs(b[None])) ** 2).sum(-1))),
    ),
    (
        "cdist_p1",
        lambda a, b: onnxnn.cdist(a, b, 1.0),
        lambda a, b: np.abs(a[:, None] - b[None]).sum(-1),
        [X1, X2],
        _bound(5, lambda a, b: (np.abs(a[:, None]) + np.abs(b[None])).sum(-1)),
    ),
    (
        "trapezoid_dx",
        lambda y: onnxnn.trapezoid(y, dx=0.5),
        lambda y: _trapezoid(y, dx=0.5),
        [M],
        _bound(6, lambda y: np.abs(y).sum(-1)),
    ),
    (
        "trapezoid_x",
        lambda y, x: onnxnn.trapezoid(y, x, dim=0),
        lambda y, x: _trapezoid(y, x, axis=0),
        [M, np.array([0.0, 0.5, 2.0])],
        _bound(6, lambda y, x: 2 * np.abs(y).sum(0) * 2),
    ),
    (
        "cumulative_trapezoid",
        lambda y: onnxnn.cumulative_trapezoid(y),
        lambda y: np.cumsum((y[:, 1:] + y[:, :-1]) / 2, 1),
        [M],
        _bound(6, lambda y: np.abs(y).sum(-1, keepdims=True)),
    ),
    (
        "tensordot",
        lambda a, b: onnxnn.tensordot(a, b, ([1], [0])),
        lambda a, b: np.tensordot(a, b, ([1], [0])),
        [M, N],
        _bound(4, lambda a, b: np.abs(a) @ np.abs(b)),
    ),
    (
        "tensordot_int",
        lambda a, b: onnxnn.tensordot(a, b, 0),
        lambda a, b: np.tensordot(a, b, 0),
        [S[0], S[1]],
        _bound(1, lambda a, b: np.abs(np.tensordot(a, b, 0))),
    ),
    (
        "matrix_power_5",
        lambda a: onnxnn.matrix_power(a, 5),
        lambda a: np.linalg.matrix_power(a, 5),
        [S],
        _bound(15, lambda a: np.linalg.matrix_power(np.abs(a), 5)),
    ),
    ("matrix_power_0", lambda a: onnxnn.matrix_power(a, 0), lambda a: np.eye(3), [S], _bound(1, lambda a: 0 * a)),
    (
        "chain_matmul",
        lambda a, b, c: onnxnn.chain_matmul(a, b, c),
        lambda a, b, c: a @ b @ c,
        [S, M, N],
        _bound(8, lambda a, b, c: np.abs(a) @ np.abs(b) @ np.abs(c)),
    ),
    (
        "std_mean_std",
        lambda x: onnxnn.std_mean(x, 1)[0],
        lambda x: np.std(x, 1, ddof=1),
        [M],
        _bound(12, lambda x: np.abs(x).max(1)),
    ),
    (
        "var_mean_mean",
        lambda x: onnxnn.var_mean(x, 0, correction=0)[1],
        lambda x: np.mean(x, 0),
        [M],
        _bound(4, lambda x: np.abs(x).mean(0)),
    ),
    ("sinc", onnxnn.sinc, np.sinc, [np.array([0.0, 0.25, -1.5, 3.3])], _bound(8, lambda x: np.ones_like(x))),
    (
        "ldexp",
        onnxnn.ldexp,
        lambda a, b: a * 2.0**b,
        [M, np.array([1.0, -2.0, 3.0, 0.0])],
        _bound(4, lambda a, b: np.abs(a * 2.0**b)),
    ),
    ("erfc", onnxnn.erfc, np.vectorize(math.erfc), [M], _bound(8, lambda x: np.ones_like(x))),
    (
        "atan2",
        onnxnn.atan2,
        np.arctan2,
        [np.array([1.0, -1.0, 0.0, 2.0, -0.5, 0.0]), np.array([-1.0, -1.0, -2.0, 0.0, 3.0, 1.0])],
        _bound(8, lambda a, b: np.full(a.shape, np.pi)),
    ),
    (
        "rsub",
        lambda a, b: onnxnn.rsub(a, b, alpha=2),
        lambda a, b: b - 2 * a,
        [M, M[::-1]],
        _bound(2, lambda a, b: np.abs(b) + 2 * np.abs(a)),
    ),
    (
        "scatter_reduce_sum",
        lambda x, s: onnxnn.scatter_reduce(x, 0, onnxnn.tensor(SCATTER_INDEX), s, "sum"),
        lambda x, s: _np_scatter_reduce(x, SCATTER_INDEX, s, "sum", True),
        [M, SCATTER_SRC],
        _bound(3, lambda x, s: _np_scatter_reduce(np.abs(x), SCATTER_INDEX, np.abs(s), "sum", True)),
    ),
    (
        "scatter_reduce_mean_noself",
        lambda x, s: onnxnn.scatter_reduce(x, 0, onnxnn.tensor(SCATTER_INDEX), s, "mean", include_self=False),
        lambda x, s: _np_scatter_reduce(x, SCATTER_INDEX, s, "mean", False),
        [M, SCATTER_SRC],
        _bound(4, lambda x, s: np.abs(x) + np.abs(s).max()),
    ),
    (
        "scatter_reduce_prod",
        lambda x, s: onnxnn.scatter_reduce(x, 0, onnxnn.tensor(SCATTER_INDEX), s, "prod"),
        lambda x, s: _np_scatter_reduce(x, SCATTER_INDEX, s, "prod", True),
        [M, SCATTER_SRC],
        _bound(3, lambda x, s: np.abs(_np_scatter_reduce(x, SCATTER_INDEX, s, "prod", True))),
    ),
    (
        "index_put_accumulate",
        lambda x, v: onnxnn.index_put(x, (onnxnn.tensor(IDX_ROWS), onnxnn.tensor(IDX_COLS)), v, accumulate=True),
        lambda x, v: _index_add_np(x, v),
        [M, np.array([1.0, 2.0, 4.0])],
        _bound(3, lambda x, v: np.abs(x) + 7),
    ),
]


def _index_add_np(x, v):
    out = x.copy()
    np.add.at(out, (IDX_ROWS, IDX_COLS), v)
    return out


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", ROUNDED_CASES, ids=[case[0] for case in ROUNDED_CASES])
def test_statistics_match_numpy_within_rounding(case, dtype, executor):
    _, function, reference, inputs, bound = case
    arrays = [a.astype(dtype) for a in inputs]
    as64 = [a.astype(np.float64) for a in arrays]
    expected = np.asarray(reference(*as64), dtype=np.float64)
    actual = _run(executor, function, arrays, onnxnn.float32 if dtype == np.float32 else onnxnn.float64)
    assert_within(actual, expected, bound(dtype, *as64) + gamma(1, dtype) * np.abs(expected))


# atan2 on the axes and at signed zeros, where C's (and numpy's) answers are exact: +-0, +-pi/2, +-pi.
AXIS_Y = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0, -0.0, 0.0, -0.0])
AXIS_X = np.array([-1.0, -1.0, -0.0, -0.0, 0.0, -0.0, 0.0, 0.0, 2.0, 2.0])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_atan2_follows_the_signs_of_zeros(executor):
    arrays = [AXIS_Y.astype(np.float32), AXIS_X.astype(np.float32)]
    actual = _run(executor, onnxnn.atan2, arrays, onnxnn.float32)
    expected = np.arctan2(*arrays)
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))


GRADIENT_CASES = [
    ("quantile_linear", lambda x: onnxnn.quantile(x, onnxnn.tensor([0.2, 0.9]), 1), [DISTINCT]),
    ("cov", lambda x: onnxnn.cov(x), [M]),
    ("cov_aweights", lambda x, a: onnxnn.cov(x, aweights=a), [M, np.array([0.5, 1.0, 2.0, 1.0])]),
    ("corrcoef", onnxnn.corrcoef, [M]),
    ("cdist", onnxnn.cdist, [X1, X2]),
    ("cdist_p3", lambda a, b: onnxnn.cdist(a, b, 3.0), [X1, X2]),
    ("trapezoid_x", lambda y, x: onnxnn.trapezoid(y, x), [M, np.array([0.0, 0.5, 2.0, 2.5])]),
    ("cumulative_trapezoid", lambda y: onnxnn.cumulative_trapezoid(y, dim=0), [M]),
    ("tensordot", lambda a, b: onnxnn.tensordot(a, b, 1), [M, N]),
    ("matrix_power", lambda a: onnxnn.matrix_power(a, 3), [S]),
    (
        "index_put_accumulate",
        lambda x, v: onnxnn.index_put(x, (onnxnn.tensor(IDX_ROWS), onnxnn.tensor(IDX_COLS)), v, accumulate=True),
        [M, np.array([1.0, 2.0, 4.0])],
    ),
    ("index_put", lambda x, v: onnxnn.index_put(x, (onnxnn.tensor([0, 2]),), v), [M, N[:2, :4]]),
    ("put", lambda x, v: onnxnn.put(x, onnxnn.tensor([0, -1, 5]), v), [M, np.array([7.0, 8.0, 9.0])]),
    (
        "scatter_reduce_sum",
        lambda x, s: onnxnn.scatter_reduce(x, 0, onnxnn.tensor(SCATTER_INDEX), s, "sum"),
        [M, SCATTER_SRC],
    ),
    (
        "scatter_reduce_mean",
        lambda x, s: onnxnn.scatter_reduce(x, 0, onnxnn.tensor(SCATTER_INDEX), s, "mean"),
        [M, SCATTER_SRC],
    ),
    ("select_scatter", lambda x, v: onnxnn.select_scatter(x, v, 0, 1), [M, N[0, :4]]),
    ("slice_scatter", lambda x, v: onnxnn.slice_scatter(x, v, 1, 1, 3), [M, N[:3, :2]]),
    ("diagonal_scatter", lambda x, v: onnxnn.diagonal_scatter(x, v, -1), [M, N[0, :2]]),
    ("fill_diagonal", lambda x: x.clone().fill_diagonal_(0.5), [M]),
    ("block_diag", lambda a, b: onnxnn.block_diag(a, b), [M, S]),
    ("cartesian_prod", lambda a, b: onnxnn.cartesian_prod(a, b), [M[0], N[0]]),
    ("combinations", lambda a: onnxnn.combinations(a, 3), [N[0]]),
    ("copysign", lambda a: onnxnn.copysign(a, onnxnn.tensor(M)), [AWAY_FROM_ZERO]),
    ("fmax", onnxnn.fmax, [DISTINCT, DISTINCT.T.reshape(3, 4) * 0.9]),
    ("sinc", onnxnn.sinc, [AWAY_FROM_ZERO]),
    ("ldexp", lambda a: onnxnn.ldexp(a, onnxnn.tensor([1.0, -2.0, 3.0, 0.0], dtype=onnxnn.float64)), [M]),
    ("mode_values", lambda x: onnxnn.mode(x, 1).values, [DISTINCT]),
    ("std_mean", lambda x: onnxnn.std_mean(x, 0)[0] + onnxnn.std_mean(x, 0)[1], [M]),
]


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=[case[0] for case in GRADIENT_CASES])
def test_gradient_matches_finite_differences(case):
    _, function, inputs = case
    check_gradients(function, [np.asarray(a, np.float64) for a in inputs])


def test_shape_changing_in_place_methods_rebind_the_handle():
    x = onnxnn.tensor(M)
    assert x.unsqueeze_(1) is x and x.shape == (3, 1, 4)
    assert x.squeeze_(1) is x and x.shape == (3, 4)
    assert x.t_() is x and x.shape == (4, 3)
    np.testing.assert_array_equal(x.swapaxes_(0, 1).numpy(), M)


def test_top_level_in_place_and_functional_forms():
    x = onnxnn.tensor([-1.0, 4.0])
    assert onnxnn.sqrt_(onnxnn.abs_(x)) is x
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(onnxnn.fill(x, 3.0).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])  # fill is out of place
    y = onnxnn.tensor([-1.0, 1.0])
    onnxnn.threshold_(y, 0.0, 5.0)
    np.testing.assert_array_equal(y.numpy(), [5.0, 1.0])


ERROR_CASES = [
    ("quantile_q_range", lambda: onnxnn.quantile(onnxnn.zeros(3), 1.5), RuntimeError, "q values must be in the range"),
    ("quantile_integer", lambda: onnxnn.quantile(onnxnn.tensor([1, 2]), 0.5), RuntimeError, "float or double"),
    ("bincount_negative", lambda: onnxnn.bincount(onnxnn.tensor([1, -1])), RuntimeError, "non-negative integral"),
    ("bincount_float", lambda: onnxnn.bincount(onnxnn.zeros(2)), NotImplementedError, "not implemented for 'Float'"),
    (
        "bincount_bool",
        lambda: onnxnn.bincount(onnxnn.tensor([True])),
        NotImplementedError,
        "\"bincount_cpu\" not implemented for 'Bool'",
    ),
    (
        "bincount_negative_minlength",
        lambda: onnxnn.bincount(onnxnn.tensor([1]), minlength=-1),
        RuntimeError,
        "minlength should be >= 0",
    ),
    ("histc_reversed", lambda: onnxnn.histc(onnxnn.zeros(2), 3, 2.0, 1.0), RuntimeError, "max must be larger than min"),
    ("cov_rank", lambda: onnxnn.cov(onnxnn.zeros(2, 2, 2)), RuntimeError, "two or fewer dimensions"),
    (
        "cdist_columns",
        lambda: onnxnn.cdist(onnxnn.zeros(2, 3), onnxnn.zeros(2, 4)),
        RuntimeError,
        "same number of columns",
    ),
    (
        "tensordot_sizes",
        lambda: onnxnn.tensordot(onnxnn.zeros(2, 3), onnxnn.zeros(2, 3), 1),
        RuntimeError,
        "contracted dimensions need to match",
    ),
    (
        "matrix_power_square",
        lambda: onnxnn.matrix_power(onnxnn.zeros(2, 3), 2),
        RuntimeError,
        "batches of square matrices",
    ),
    (
        "scatter_reduce_kind",
        lambda: onnxnn.scatter_reduce(onnxnn.zeros(2), 0, onnxnn.tensor([0]), onnxnn.ones(1), "median"),
        RuntimeError,
        "sum, prod, mean, amax or amin",
    ),
    (
        "put_sizes",
        lambda: onnxnn.put(onnxnn.zeros(3), onnxnn.tensor([0, 1]), onnxnn.ones(1)),
        RuntimeError,
        "same number of elements",
    ),
    (
        "fill_diagonal_vector",
        lambda: onnxnn.zeros(3).fill_diagonal_(1.0),
        RuntimeError,
        "dimensions must larger than 1",
    ),
    ("block_diag_rank", lambda: onnxnn.block_diag(onnxnn.zeros(1, 1, 1)), RuntimeError, "2 or fewer dimensions"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[case[0] for case in ERROR_CASES])
def test_bad_arguments_raise_pytorchs_errors(case):
    _, call, error, message = case
    with pytest.raises(error, match=message):
        call()


def test_index_helpers_and_broadcast_shapes():
    np.testing.assert_array_equal(onnxnn.tril_indices(3, 4, 1).numpy(), np.stack(np.tril_indices(3, 1, 4)))
    np.testing.assert_array_equal(onnxnn.triu_indices(4, 3, -1).numpy(), np.stack(np.triu_indices(4, -1, 3)))
    assert onnxnn.broadcast_shapes((3, 1), (1, 4), 4) == (3, 4)


# ---------------------------------------------------------------- windows, vander, pdist, renorm, ...


def _np_renorm(x, p, axis, maxnorm):
    moved = np.moveaxis(x, axis, 0)
    norms = np.sum(np.abs(moved.reshape(moved.shape[0], -1)) ** p, 1) ** (1 / p)
    factor = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return np.moveaxis(moved * factor.reshape((-1,) + (1,) * (x.ndim - 1)), 0, axis)


MORE_ROUNDED_CASES = [
    (
        "vander",
        lambda x: onnxnn.vander(x, 4),
        lambda x: np.vander(x, 4),
        [M[0]],
        _bound(3, lambda x: np.abs(np.vander(x, 4))),
    ),
    (
        "vander_increasing",
        lambda x: onnxnn.vander(x, increasing=True),
        lambda x: np.vander(x, increasing=True),
        [M[0]],
        _bound(3, lambda x: np.abs(np.vander(x, increasing=True))),
    ),
    (
        "pdist",
        onnxnn.pdist,
        lambda x: np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))[np.triu_indices(4, 1)],
        [X1],
        _bound(6, lambda x: np.sqrt(((np.abs(x[:, None]) + np.abs(x[None])) ** 2).sum(-1))[np.triu_indices(4, 1)]),
    ),
    (
        "pdist_p1",
        lambda x: onnxnn.pdist(x, 1),
        lambda x: np.abs(x[:, None] - x[None]).sum(-1)[np.triu_indices(4, 1)],
        [X1],
        _bound(4, lambda x: (np.abs(x[:, None]) + np.abs(x[None])).sum(-1)[np.triu_indices(4, 1)]),
    ),
    (
        "renorm",
        lambda x: onnxnn.renorm(x, 2, 0, 1.5),
        lambda x: _np_renorm(x, 2, 0, 1.5),
        [M],
        _bound(10, lambda x: np.abs(x)),
    ),
    (
        "frobenius_norm",
        onnxnn.frobenius_norm,
        lambda x: np.sqrt(np.sum(x * x)),
        [M],
        _bound(14, lambda x: np.sqrt(np.sum(x * x))),
    ),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", MORE_ROUNDED_CASES, ids=[case[0] for case in MORE_ROUNDED_CASES])
def test_more_functions_match_numpy_within_rounding(case, dtype, executor):
    test_statistics_match_numpy_within_rounding(case, dtype, executor)


@pytest.mark.parametrize(
    "case",
    [
        ("vander", lambda x: onnxnn.vander(x, 4), [M[0]]),
        ("pdist", onnxnn.pdist, [X1]),
        ("pdist_p3", lambda x: onnxnn.pdist(x, 3), [X1]),
        ("renorm", lambda x: onnxnn.renorm(x, 2, 1, 1.0), [M]),
    ],
    ids=lambda case: case[0],
)
def test_more_gradients_match_finite_differences(case):
    check_gradients(case[1], [np.asarray(a, np.float64) for a in case[2]])


@pytest.mark.parametrize(
    "name,reference",
    [
        ("hann_window", lambda n, periodic: np.hanning(n + 1)[:-1] if periodic else np.hanning(n)),
        ("hamming_window", lambda n, periodic: np.hamming(n + 1)[:-1] if periodic else np.hamming(n)),
        ("blackman_window", lambda n, periodic: np.blackman(n + 1)[:-1] if periodic else np.blackman(n)),
        ("bartlett_window", lambda n, periodic: np.bartlett(n + 1)[:-1] if periodic else np.bartlett(n)),
        ("kaiser_window", lambda n, periodic: np.kaiser(n + 1, 12.0)[:-1] if periodic else np.kaiser(n, 12.0)),
    ],
)
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_numpy(name, reference, periodic):
    for length in (0, 1, 2, 7):
        window = getattr(onnxnn, name)(length, periodic, dtype=onnxnn.float64).numpy()
        expected = np.ones(length) if length <= 1 else reference(length, periodic)
        np.testing.assert_allclose(window, expected, rtol=gamma(8, np.float64), atol=gamma(8, np.float64))


def test_unravel_index_range_histogram_nonzero_static():
    rows, cols = onnxnn.unravel_index(onnxnn.tensor([5, 0, -1, 3]), (2, 3))
    expected = np.unravel_index(np.array([5, 0, 5, 3]), (2, 3))
    np.testing.assert_array_equal(rows.numpy(), expected[0])
    np.testing.assert_array_equal(cols.numpy(), expected[1])
    np.testing.assert_array_equal(onnxnn.range(1, 2, 0.25).numpy(), [1.0, 1.25, 1.5, 1.75, 2.0])
    result = onnxnn.histogram(onnxnn.tensor(M), 5)
    hist, edges = result
    assert result.hist is hist and result.bin_edges is edges  # a named tuple, as torch.return_types.histogram
    reference_hist, reference_edges = np.histogram(M.astype(np.float32).astype(np.float64), 5)
    np.testing.assert_array_equal(hist.numpy(), reference_hist)
    np.testing.assert_allclose(edges.numpy(), reference_edges, rtol=gamma(2))
    np.testing.assert_array_equal(
        onnxnn.nonzero_static(onnxnn.tensor(MASK_DATA), size=3, fill_value=-9).numpy(), [[0, 1], [1, 0], [-9, -9]]
    )


MASK_DATA = np.array([[0.0, 2.0], [3.0, 0.0]])


def test_bernoulli_draws_follow_the_generator_and_the_probabilities():
    onnxnn.manual_seed(3)
    first = onnxnn.bernoulli(onnxnn.tensor([[0.0, 1.0, 0.5]] * 200)).numpy()
    onnxnn.manual_seed(3)
    again = onnxnn.tensor([[0.0, 1.0, 0.5]] * 200).bernoulli().numpy()
    np.testing.assert_array_equal(first, again)
    assert (first[:, 0] == 0).all() and (first[:, 1] == 1).all()
    assert 0 < first[:, 2].sum() < 200
