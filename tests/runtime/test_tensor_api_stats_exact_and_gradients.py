"""Statistics, data-dependent results and out-of-place writes added for PyTorch parity (issue #12):
selections and writes against numpy exactly on both executors, gradients against float64 finite
differences, in-place and top-level forms, and PyTorch's errors.

unique/bincount/histc/mode read their input (as PyTorch synchronizes for them); everything else is
recorded. Selections and writes must match numpy exactly. The arithmetic, held within ``gamma(n)``
of its terms, is in test_tensor_api_stats_within_rounding.py; the inputs in tensor_api_stats_cases.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn

from .tensor_api_stats_cases import (
    AWAY_FROM_ZERO,
    DISTINCT,
    EXECUTORS,
    IDX_COLS,
    IDX_ROWS,
    INTS,
    M,
    N,
    NANS,
    REPEATS,
    S,
    SCATTER_INDEX,
    SCATTER_SRC,
    W,
    X1,
    X2,
    _np_scatter_reduce,
    _run,
    rng,
)


def _np_mode(x, axis):
    def line(v):
        values, counts = np.unique(v, return_counts=True)
        return values[np.argmax(counts)]

    return np.apply_along_axis(line, axis, x)


def _np_block_diag(*blocks):
    blocks = [np.atleast_2d(b) for b in blocks]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        out[r : r + b.shape[0], c : c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


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
