"""Statistics and arithmetic added for PyTorch parity (issue #12): forward against numpy on both
executors within ``gamma(n)`` of the magnitude of the n terms each output accumulates
(tests/tolerances.py), atan2 at signed zeros, windows, vander, pdist, renorm, and the functions
after them (unravel_index, histogram, bernoulli), with their gradients against float64 finite
differences.

Selections and writes (exact), the other gradients and PyTorch's errors are in
test_tensor_api_stats_exact_and_gradients.py; the inputs in tensor_api_stats_cases.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import assert_within, gamma

import onnxnn

from .tensor_api_stats_cases import (
    EXECUTORS,
    IDX_COLS,
    IDX_ROWS,
    M,
    N,
    S,
    SCATTER_INDEX,
    SCATTER_SRC,
    X1,
    X2,
    _np_scatter_reduce,
    _run,
)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    y = np.moveaxis(y, axis, -1)
    steps = np.diff(x) if x is not None else dx
    return np.sum((y[..., 1:] + y[..., :-1]) * steps / 2, axis=-1)


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
