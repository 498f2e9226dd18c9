"""The Tensor and top-level functions added for PyTorch parity (issue #12): forward against numpy
on both executors in float32 and float64.

Data movement (roll, tril, diagonal, sort, index writes...) must match numpy exactly; arithmetic
within Higham's ``gamma(n)`` of the magnitude of its n accumulated terms (tests/tolerances.py).
Gradients, export, methods and in-place variants, and PyTorch's errors are in
test_tensor_api_ops_gradients_errors.py; the inputs in tensor_api_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from tolerances import assert_within, gamma

import onnxnn

from .tensor_api_cases import B1, B2, C, EXECUTORS, I2, I_COPY, M, MASK, N, P, T, TIES, V3, V4, V5, Z, rng


def _np_diag_embed(x, offset=0):
    n = x.shape[-1] + abs(offset)
    out = np.zeros(x.shape[:-1] + (n, n), x.dtype)
    for i in range(x.shape[-1]):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = x[..., i]
    return out


def _np_index_add(x, dim, index, source, alpha=1.0):
    out = np.moveaxis(x.copy(), dim, 0)
    np.add.at(out, index, np.moveaxis(source, dim, 0) * alpha)
    return np.moveaxis(out, 0, dim)


def _np_index_copy(x, dim, index, source):
    out = np.moveaxis(x.copy(), dim, 0)
    out[index] = np.moveaxis(source, dim, 0)
    return np.moveaxis(out, 0, dim)


def _np_masked_scatter(x, mask, source):
    out = x.copy()
    out[mask] = source.reshape(-1)[: mask.sum()]
    return out


def _np_cumulative(x, axis, better):
    values, indices = np.empty_like(x), np.zeros(x.shape, np.int64)
    xs, vs, ids = np.moveaxis(x, axis, -1), np.moveaxis(values, axis, -1), np.moveaxis(indices, axis, -1)
    for line in np.ndindex(xs.shape[:-1]):
        best, where = xs[line][0], 0
        for j, v in enumerate(xs[line]):
            if better(v, best) or v == best:  # PyTorch reports the last position of a repeated extremum
                best, where = v, j
            vs[line][j], ids[line][j] = best, where
    return values, indices


def _unfold(x, axis, size, step):
    windows = np.lib.stride_tricks.sliding_window_view(x, size, axis=axis)
    return np.take(windows, np.arange(0, windows.shape[axis], step), axis=axis)


def _logcumsumexp(x, axis):
    return np.log(np.cumsum(np.exp(x), axis=axis))


# (id, onnxnn function, numpy function, inputs). Bit-exact: pure data movement and selection.
EXACT_CASES = [
    ("roll_dim", lambda x: onnxnn.roll(x, 2, 1), lambda x: np.roll(x, 2, 1), [M]),
    ("roll_negative_flat", lambda x: onnxnn.roll(x, -3), lambda x: np.roll(x, -3), [M]),
    ("roll_two_dims", lambda x: onnxnn.roll(x, (1, -1), (0, 2)), lambda x: np.roll(x, (1, -1), (0, 2)), [T]),
    ("fliplr", onnxnn.fliplr, np.fliplr, [M]),
    ("flipud", onnxnn.flipud, np.flipud, [M]),
    *[
        (f"rot90_k{k}", lambda x, k=k: onnxnn.rot90(x, k, (0, 1)), lambda x, k=k: np.rot90(x, k, (0, 1)), [M])
        for k in (1, 2, 3, -1)
    ],
    ("rot90_dims_1_2", lambda x: onnxnn.rot90(x, 1, (1, 2)), lambda x: np.rot90(x, 1, (1, 2)), [T]),
    *[(f"tril_{k}", lambda x, k=k: onnxnn.tril(x, k), lambda x, k=k: np.tril(x, k), [T]) for k in (0, 1, -1)],
    *[(f"triu_{k}", lambda x, k=k: onnxnn.triu(x, k), lambda x, k=k: np.triu(x, k), [T]) for k in (0, 2, -1)],
    *[
        (f"diagonal_{o}", lambda x, o=o: onnxnn.diagonal(x, o), lambda x, o=o: np.diagonal(x, o), [M])
        for o in (0, 1, -2, 5)
    ],
    ("diagonal_dims", lambda x: onnxnn.diagonal(x, 1, 2, 0), lambda x: np.diagonal(x, 1, 2, 0), [T]),
    *[
        (f"diag_embed_{o}", lambda x, o=o: onnxnn.diag_embed(x, o), lambda x, o=o: _np_diag_embed(x, o), [M])
        for o in (0, 1, -2)
    ],
    (
        "diag_embed_dims",
        lambda x: onnxnn.diag_embed(x, 0, 0, 2),
        lambda x: np.moveaxis(_np_diag_embed(x), (-2, -1), (0, 2)),
        [M],
    ),
    ("diag_vector", lambda x: onnxnn.diag(x, 1), lambda x: np.diag(x, 1), [V3]),
    ("diag_matrix", lambda x: onnxnn.diag(x, -1), lambda x: np.diag(x, -1), [M]),
    ("hstack", lambda a, b: onnxnn.hstack([a, b]), lambda a, b: np.hstack([a, b]), [M, C]),
    ("vstack_1d", lambda a, b: onnxnn.vstack([a, b]), lambda a, b: np.vstack([a, b]), [V4, V4]),
    ("dstack", lambda a, b: onnxnn.dstack([a, b]), lambda a, b: np.dstack([a, b]), [M, M]),
    ("column_stack", lambda a, b: onnxnn.column_stack([a, b]), lambda a, b: np.column_stack([a, b]), [V3, M]),
    ("repeat_interleave_int", lambda x: onnxnn.repeat_interleave(x, 2, 1), lambda x: np.repeat(x, 2, 1), [M]),
    ("repeat_interleave_flat", lambda x: onnxnn.repeat_interleave(x, 3), lambda x: np.repeat(x, 3), [M]),
    (
        "repeat_interleave_counts",
        lambda x: onnxnn.repeat_interleave(x, onnxnn.tensor([1, 0, 2]), 0),
        lambda x: np.repeat(x, [1, 0, 2], 0),
        [M],
    ),
    ("movedim", lambda x: onnxnn.movedim(x, (0, 1), (2, 0)), lambda x: np.moveaxis(x, (0, 1), (2, 0)), [T]),
    ("swapaxes", lambda x: onnxnn.swapaxes(x, 0, 2), lambda x: np.swapaxes(x, 0, 2), [T]),
    ("unfold", lambda x: x.unfold(2, 2, 1), lambda x: _unfold(x, 2, 2, 1), [T]),
    ("unfold_step", lambda x: x.unfold(1, 2, 2), lambda x: _unfold(x, 1, 2, 2), [M]),
    ("select", lambda x: onnxnn.select(x, 1, -1), lambda x: x[:, -1], [T]),
    (
        "index_copy",
        lambda x, s: onnxnn.index_copy(x, 0, onnxnn.tensor(I_COPY), s),
        lambda x, s: _np_index_copy(x, 0, I_COPY, s),
        [M, M[:2] * 3],
    ),
    (
        "index_fill",
        lambda x: onnxnn.index_fill(x, 1, onnxnn.tensor([3, 0]), -7.0),
        lambda x: np.where(np.isin(np.arange(4), [3, 0])[None, :], -7.0, x),
        [M],
    ),
    ("masked_fill", lambda x: onnxnn.masked_fill(x, onnxnn.tensor(MASK), 2.5), lambda x: np.where(MASK, 2.5, x), [M]),
    (
        "masked_scatter",
        lambda x, s: onnxnn.masked_scatter(x, onnxnn.tensor(MASK), s),
        lambda x, s: _np_masked_scatter(x, MASK, s),
        [M, N],
    ),
    ("sort_values", lambda x: onnxnn.sort(x, 1).values, lambda x: np.sort(x, 1), [TIES]),
    ("sort_indices_stable", lambda x: onnxnn.sort(x, 1).indices, lambda x: np.argsort(x, 1, kind="stable"), [TIES]),
    ("sort_descending", lambda x: onnxnn.sort(x, 0, descending=True).values, lambda x: -np.sort(-x, 0), [M]),
    (
        "argsort_descending_stable",
        lambda x: onnxnn.argsort(x, -1, descending=True),
        lambda x: np.argsort(-x, -1, kind="stable"),
        [TIES],
    ),
    ("msort", onnxnn.msort, lambda x: np.sort(x, 0), [M]),
    ("topk_values", lambda x: onnxnn.topk(x, 2).values, lambda x: -np.sort(-x, -1)[:, :2], [M]),
    (
        "topk_smallest_indices",
        lambda x: onnxnn.topk(x, 3, largest=False).indices,
        lambda x: np.argsort(x, -1, kind="stable")[:, :3],
        [TIES],
    ),
    ("topk_dim0", lambda x: onnxnn.topk(x, 2, dim=0).values, lambda x: -np.sort(-x, 0)[:2], [M]),
    ("kthvalue", lambda x: onnxnn.kthvalue(x, 2, 1).values, lambda x: np.sort(x, 1)[:, 1], [M]),
    (
        "kthvalue_keepdim_indices",
        lambda x: onnxnn.kthvalue(x, 3, 0, keepdim=True).indices,
        lambda x: np.argsort(x, 0, kind="stable")[2:3],
        [M],
    ),
    ("median_all_lower", onnxnn.median, lambda x: np.sort(x.reshape(-1))[(x.size - 1) // 2], [M]),
    ("median_dim", lambda x: onnxnn.median(x, 1).values, lambda x: np.sort(x, 1)[:, (x.shape[1] - 1) // 2], [M]),
    (
        "nanmedian",
        lambda x: onnxnn.nanmedian(x, 1).values,
        lambda x: np.array([np.sort(r[~np.isnan(r)])[(np.sum(~np.isnan(r)) - 1) // 2] for r in x]),
        [np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, 4.0, -1.0, 0.5]])],
    ),
    ("cummax_values", lambda x: onnxnn.cummax(x, 1).values, lambda x: _np_cumulative(x, 1, np.greater)[0], [TIES]),
    (
        "cummax_indices_last_tie",
        lambda x: onnxnn.cummax(x, 1).indices,
        lambda x: _np_cumulative(x, 1, np.greater)[1],
        [TIES],
    ),
    ("cummin_indices", lambda x: onnxnn.cummin(x, 0).indices, lambda x: _np_cumulative(x, 0, np.less)[1], [M]),
    (
        "meshgrid_ij",
        lambda a, b: onnxnn.stack(onnxnn.meshgrid(a, b, indexing="ij")),
        lambda a, b: np.stack(np.meshgrid(a, b, indexing="ij")),
        [V3, V4],
    ),
    (
        "meshgrid_xy",
        lambda a, b, c: onnxnn.stack(onnxnn.meshgrid(a, b, c, indexing="xy")),
        lambda a, b, c: np.stack(np.meshgrid(a, b, c, indexing="xy")),
        [V3, V4, V5],
    ),
    (
        "nan_to_num",
        lambda x: onnxnn.nan_to_num(x, 0.5, 9.0),
        lambda x: np.nan_to_num(x, nan=0.5, posinf=9.0),
        [np.array([1.0, np.nan, np.inf, -np.inf])],
    ),
    ("diff", onnxnn.diff, np.diff, [np.array([1.0, 4.0, 9.0, 16.0, 15.0])]),
    (
        "diff_n2_prepend",
        lambda x: onnxnn.diff(x, 2, 0, prepend=x[:1]),
        lambda x: np.diff(x, 2, 0, prepend=x[:1]),
        [np.round(M * 4)],
    ),
    ("count_nonzero", lambda x: onnxnn.count_nonzero(x, 1), lambda x: np.count_nonzero(x, 1), [Z]),
    ("aminmax_min", lambda x: onnxnn.aminmax(x, dim=0).min, lambda x: x.min(0), [M]),
    ("aminmax_max", lambda x: onnxnn.aminmax(x).max, lambda x: x.max(), [M]),
    (
        "bucketize_left",
        lambda x: onnxnn.bucketize(x, onnxnn.tensor([-1.0, 0.0, 1.0])),
        lambda x: np.searchsorted([-1.0, 0.0, 1.0], x, side="left"),
        [np.array([-2.0, -1.0, 0.5, 1.0, 3.0])],
    ),
    (
        "bucketize_right",
        lambda x: onnxnn.bucketize(x, onnxnn.tensor([-1.0, 0.0, 1.0]), right=True),
        lambda x: np.searchsorted([-1.0, 0.0, 1.0], x, side="right"),
        [np.array([-2.0, -1.0, 0.5, 1.0, 3.0])],
    ),
    (
        "searchsorted_rows",
        lambda s, v: onnxnn.searchsorted(s, v, side="right"),
        lambda s, v: np.stack([np.searchsorted(s[i], v[i], side="right") for i in range(2)]),
        [np.sort(rng.standard_normal((2, 5)), 1), rng.standard_normal((2, 3))],
    ),
    (
        "cumsum_int",
        lambda x: onnxnn.cumsum(x.long(), 1),
        lambda x: np.cumsum(x.astype(np.int64), 1),
        [np.round(M * 10)],
    ),
]


def _sum_bound(terms, magnitude):
    return lambda dtype, *inputs: gamma(terms, dtype) * magnitude(*inputs)


# (id, onnxnn function, numpy function, inputs, bound(dtype, *inputs)): the bound is gamma(n) times the
# magnitude of the n terms each output accumulates (the function applied to |inputs| where monotone).
ROUNDED_CASES = [
    (
        "cumsum",
        lambda x: onnxnn.cumsum(x, 1),
        lambda x: np.cumsum(x, 1),
        [M],
        _sum_bound(4, lambda x: np.cumsum(np.abs(x), 1)),
    ),
    (
        "cumsum_tensor_method",
        lambda x: x.cumsum(0),
        lambda x: np.cumsum(x, 0),
        [T],
        _sum_bound(2, lambda x: np.cumsum(np.abs(x), 0)),
    ),
    (
        "cumprod",
        lambda x: onnxnn.cumprod(x, 1),
        lambda x: np.cumprod(x, 1),
        [Z],
        _sum_bound(4, lambda x: np.abs(np.cumprod(x, 1))),
    ),
    (
        "logcumsumexp",
        lambda x: onnxnn.logcumsumexp(x, 1),
        lambda x: _logcumsumexp(x, 1),
        [M],
        _sum_bound(12, lambda x: np.abs(_logcumsumexp(x, 1)) + 1),
    ),
    (
        "logcumsumexp_far_below_max",
        lambda x: onnxnn.logcumsumexp(x, 0),
        lambda x: np.array([-1000.0, np.logaddexp(-1000.0, 0.0), np.logaddexp(np.logaddexp(-1000.0, 0.0), 1.0)]),
        [np.array([-1000.0, 0.0, 1.0])],
        _sum_bound(12, lambda x: np.array([1000.0, 1.0, 2.0])),
    ),
    (
        "einsum_matmul",
        lambda a, b: onnxnn.einsum("ij,jk->ik", a, b),
        lambda a, b: a @ b,
        [M, N],
        _sum_bound(4, lambda a, b: np.abs(a) @ np.abs(b)),
    ),
    ("einsum_implicit_transpose", lambda a: onnxnn.einsum("ij", a), lambda a: a, [M], _sum_bound(1, np.abs)),
    (
        "einsum_batched_ellipsis",
        lambda a, b: onnxnn.einsum("...ij,...jk", a, b),
        lambda a, b: a @ b,
        [B1, B2],
        _sum_bound(4, lambda a, b: np.abs(a) @ np.abs(b)),
    ),
    (
        "einsum_sum_out_and_outer",
        lambda a, b: onnxnn.einsum("bij,k->bk", a, b),
        lambda a, b: np.einsum("bij,k->bk", a, b),
        [T, V5],
        _sum_bound(12, lambda a, b: np.einsum("bij,k->bk", np.abs(a), np.abs(b))),
    ),
    (
        "einsum_three_operands",
        lambda a, b, c: onnxnn.einsum("ij,jk,ik->i", a, b, c),
        lambda a, b, c: np.einsum("ij,jk,ik->i", a, b, c),
        [M, N, C],
        _sum_bound(22, lambda a, b, c: np.einsum("ij,jk,ik->i", np.abs(a), np.abs(b), np.abs(c))),
    ),
    (
        "addmm",
        lambda c, a, b: onnxnn.addmm(c, a, b, beta=0.5, alpha=2.0),
        lambda c, a, b: 0.5 * c + 2 * a @ b,
        [C, M, N],
        _sum_bound(7, lambda c, a, b: 0.5 * np.abs(c) + 2 * np.abs(a) @ np.abs(b)),
    ),
    (
        "addmm_beta_zero_ignores_nan",
        lambda c, a, b: onnxnn.addmm(c, a, b, beta=0),
        lambda c, a, b: a @ b,
        [np.full((3, 5), np.nan), M, N],
        _sum_bound(4, lambda c, a, b: np.abs(a) @ np.abs(b)),
    ),
    (
        "baddbmm",
        lambda c, a, b: onnxnn.baddbmm(c, a, b),
        lambda c, a, b: c + a @ b,
        [C, B1, B2],
        _sum_bound(5, lambda c, a, b: np.abs(c) + np.abs(a) @ np.abs(b)),
    ),
    (
        "addbmm",
        lambda c, a, b: onnxnn.addbmm(c, a, b, alpha=-1),
        lambda c, a, b: c - (a @ b).sum(0),
        [C, B1, B2],
        _sum_bound(10, lambda c, a, b: np.abs(c) + (np.abs(a) @ np.abs(b)).sum(0)),
    ),
    (
        "addmv",
        lambda c, a, v: onnxnn.addmv(c, a, v),
        lambda c, a, v: c + a @ v,
        [V3, M, V4],
        _sum_bound(5, lambda c, a, v: np.abs(c) + np.abs(a) @ np.abs(v)),
    ),
    (
        "addr",
        lambda c, a, b: onnxnn.addr(c, a, b, beta=2),
        lambda c, a, b: 2 * c + np.outer(a, b),
        [M, V3, V4],
        _sum_bound(3, lambda c, a, b: 2 * np.abs(c) + np.abs(np.outer(a, b))),
    ),
    ("mv", onnxnn.mv, lambda a, v: a @ v, [M, V4], _sum_bound(4, lambda a, v: np.abs(a) @ np.abs(v))),
    ("outer", onnxnn.outer, np.outer, [V3, V4], _sum_bound(1, lambda a, b: np.abs(np.outer(a, b)))),
    ("inner", onnxnn.inner, np.inner, [M, T], _sum_bound(4, lambda a, b: np.inner(np.abs(a), np.abs(b)))),
    ("kron", onnxnn.kron, np.kron, [M, V3.reshape(3, 1)], _sum_bound(1, lambda a, b: np.abs(np.kron(a, b)))),
    ("trace", onnxnn.trace, np.trace, [M], _sum_bound(3, lambda x: np.abs(np.diagonal(x)).sum())),
    (
        "cross",
        lambda a, b: onnxnn.cross(a, b, dim=0),
        lambda a, b: np.cross(a, b, axis=0),
        [M[:, :3], C[:, :3]],
        _sum_bound(2, lambda a, b: 2 * np.abs(a).max() * np.abs(b).max()),
    ),
    (
        "lerp",
        lambda a, b: onnxnn.lerp(a, b, 0.3),
        lambda a, b: a + 0.3 * (b - a),
        [M, P],
        _sum_bound(3, lambda a, b: np.abs(a) + 0.3 * (np.abs(a) + np.abs(b))),
    ),
    (
        "addcmul",
        lambda a, b, c: onnxnn.addcmul(a, b, c, value=0.5),
        lambda a, b, c: a + 0.5 * b * c,
        [M, P, M],
        _sum_bound(3, lambda a, b, c: np.abs(a) + 0.5 * np.abs(b * c)),
    ),
    (
        "addcdiv",
        lambda a, b, c: onnxnn.addcdiv(a, b, c, value=2),
        lambda a, b, c: a + 2 * b / c,
        [M, M, P],
        _sum_bound(3, lambda a, b, c: np.abs(a) + 2 * np.abs(b / c)),
    ),
    (
        "index_add_repeated",
        lambda x, s: onnxnn.index_add(x, 0, onnxnn.tensor(I2), s, alpha=2),
        lambda x, s: _np_index_add(x, 0, I2, s, 2.0),
        [M, M * 0.5],
        _sum_bound(4, lambda x, s: _np_index_add(np.abs(x), 0, I2, np.abs(s), 2.0)),
    ),
    ("log1p", onnxnn.log1p, np.log1p, [P], _sum_bound(4, lambda x: np.abs(np.log1p(x)) + 1)),
    ("expm1", onnxnn.expm1, np.expm1, [M], _sum_bound(4, lambda x: np.exp(x) + 1)),
    ("log2", onnxnn.log2, np.log2, [P], _sum_bound(4, lambda x: np.abs(np.log2(x)) + 1)),
    ("log10", onnxnn.log10, np.log10, [P], _sum_bound(4, lambda x: np.abs(np.log10(x)) + 1)),
    ("exp2", onnxnn.exp2, np.exp2, [M], _sum_bound(8, lambda x: np.exp2(x) * (1 + np.abs(x)))),
    (
        "logaddexp",
        onnxnn.logaddexp,
        np.logaddexp,
        [M, C[:, :4]],
        _sum_bound(6, lambda a, b: np.abs(np.logaddexp(a, b)) + 1),
    ),
    ("xlogy", onnxnn.xlogy, lambda a, b: a * np.log(b), [M, P], _sum_bound(4, lambda a, b: np.abs(a * np.log(b)) + 1)),
    ("hypot", onnxnn.hypot, np.hypot, [M, P], _sum_bound(4, np.hypot)),
    ("square", onnxnn.square, np.square, [M], _sum_bound(1, np.square)),
    ("frac", onnxnn.frac, lambda x: x - np.trunc(x), [M * 3], _sum_bound(1, np.abs)),
    ("fmod", lambda a: onnxnn.fmod(a, 0.7), lambda a: np.fmod(a, 0.7), [M * 3], _sum_bound(2, lambda a: np.abs(a))),
    (
        "logit",
        onnxnn.logit,
        lambda p: np.log(p / (1 - p)),
        [P / 3],
        _sum_bound(6, lambda p: np.abs(np.log(p / (1 - p))) + 1 / (1 - p)),
    ),
    (
        "nansum",
        lambda x: onnxnn.nansum(x, 1),
        lambda x: np.nansum(x, 1),
        [np.array([[1.0, np.nan, 2.5], [np.nan] * 3])],
        _sum_bound(3, lambda x: np.nansum(np.abs(x), 1)),
    ),
    (
        "nanmean",
        onnxnn.nanmean,
        np.nanmean,
        [np.array([1.0, np.nan, 2.5, -4.0])],
        _sum_bound(5, lambda x: np.nanmean(np.abs(x))),
    ),
]


def _run(executor, function, arrays, dtype):
    with onnxnn.set_executor(executor):
        tensors = [onnxnn.tensor(a, dtype=dtype) if a.dtype.kind == "f" else onnxnn.tensor(a) for a in arrays]
        result = function(*tensors)
        return np.asarray(result.numpy())


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", EXACT_CASES, ids=[case[0] for case in EXACT_CASES])
def test_data_movement_matches_numpy_exactly(case, dtype, executor):
    _, function, reference, inputs = case
    arrays = [a.astype(dtype.numpy_dtype) if a.dtype.kind == "f" else a for a in inputs]
    expected = np.asarray(reference(*arrays))
    actual = _run(executor, function, arrays, dtype)
    assert actual.shape == expected.shape
    if expected.dtype.kind == "f":
        assert actual.dtype == dtype.numpy_dtype
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", ROUNDED_CASES, ids=[case[0] for case in ROUNDED_CASES])
def test_arithmetic_matches_numpy_within_rounding(case, dtype, executor):
    _, function, reference, inputs, bound = case
    arrays = [a.astype(dtype) for a in inputs]
    expected = reference(*[a.astype(np.float64) for a in arrays])
    actual = _run(executor, function, arrays, onnxnn.float32 if dtype == np.float32 else onnxnn.float64)
    # Rounding the float64 reference to the dtype costs half an ulp more.
    assert_within(
        actual,
        expected,
        bound(dtype, *[a.astype(np.float64) for a in arrays]) * 1.0 + gamma(1, dtype) * np.abs(expected),
    )
