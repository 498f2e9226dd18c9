"""Linear algebra (runtime/ops/linalg_lu.py, linalg_qr.py, onnxnn.linalg): forward against numpy.linalg
on both executors in float32 and float64, LAPACK's pivots, and singular, indefinite and
rank-deficient inputs.

Tolerances come from the backward stability of the algorithms (Higham, chapters 9, 10 and 19); the
matrices, references and ``_bound`` are in linalg_cases.py. Gradients, export run by plain
onnxruntime, Tensor methods, batch sizes sharing one graph, and PyTorch's errors are in
test_linalg_decompositions_gradients_errors.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

from .linalg_cases import (
    A3,
    A4B,
    A_NEG,
    B3V,
    B4,
    C4,
    DTYPES,
    EXECUTORS,
    L,
    L3,
    S3,
    S4B,
    SINGULAR,
    T4,
    TB,
    W3,
    _bound,
    _expm_reference,
    _geqrf_reference,
    _householder_q,
    _logdet_reference,
    _lu_reference,
    _well_conditioned,
    rng,
)

# (id, onnxnn function, numpy reference, inputs, matrix size n for the tolerance)
FORWARD_CASES = [
    ("det", onnxnn.det, np.linalg.det, [A3], 3),
    ("det-negative", lambda a: a.det(), np.linalg.det, [A_NEG], 3),
    ("det-batch", L.det, np.linalg.det, [A4B], 4),
    ("det-singular", onnxnn.det, lambda a: np.zeros(()), [SINGULAR], 3),
    ("slogdet-sign", lambda a: onnxnn.slogdet(a)[0], lambda a: np.linalg.slogdet(a)[0], [A_NEG], 3),
    ("slogdet-logabsdet", lambda a: L.slogdet(a).logabsdet, lambda a: np.linalg.slogdet(a)[1], [A4B], 4),
    ("logdet-negative-is-nan", onnxnn.logdet, _logdet_reference, [A_NEG], 3),
    ("logdet", lambda a: a.logdet(), _logdet_reference, [S4B], 4),
    ("inverse", onnxnn.inverse, np.linalg.inv, [A3], 3),
    ("inv-batch", L.inv, np.linalg.inv, [A4B], 4),
    ("solve-matrix", L.solve, np.linalg.solve, [A4B, B4], 4),
    ("solve-vector", L.solve, lambda a, b: np.linalg.solve(a, b[:, None])[:, 0], [A_NEG, B3V], 3),
    ("solve-broadcast", L.solve, np.linalg.solve, [A4B[0], B4], 4),
    (
        "solve-right",
        lambda a, b: L.solve(a, b, left=False),
        lambda a, b: np.linalg.solve(a.T, b.T).T,
        [A3, rng.standard_normal((2, 3))],
        3,
    ),
    (
        "solve_triangular-upper",
        lambda a, b: L.solve_triangular(a, b, upper=True),
        lambda a, b: np.linalg.solve(np.triu(a), b),
        [A4B, B4],
        4,
    ),
    (
        "solve_triangular-unit-lower",
        lambda a, b: L.solve_triangular(a, b, upper=False, unitriangular=True),
        lambda a, b: np.linalg.solve(np.tril(a, -1) + np.eye(4), b),
        [A4B, B4],
        4,
    ),
    (
        "triangular_solve-transpose",
        lambda b, a: onnxnn.triangular_solve(b, a, transpose=True).solution,
        lambda b, a: np.linalg.solve(np.swapaxes(np.triu(a), -1, -2), b),
        [B4, A4B],
        4,
    ),
    (
        "triangular_solve-method",
        lambda b, a: b.triangular_solve(a, upper=False)[0],
        lambda b, a: np.linalg.solve(np.tril(a), b),
        [B4, A4B],
        4,
    ),
    ("cholesky", L.cholesky, np.linalg.cholesky, [S4B], 4),
    ("cholesky-upper", lambda a: onnxnn.cholesky(a, upper=True), lambda a: np.linalg.cholesky(a).T, [S3], 3),
    (
        "cholesky-reads-lower",
        lambda a: a.cholesky(),
        lambda a: np.linalg.cholesky(np.tril(a) + np.tril(a, -1).T),
        [np.triu(S3, 1) * 7 + np.tril(S3)],
        3,
    ),
    ("cholesky_solve", onnxnn.cholesky_solve, lambda b, lower: np.linalg.solve(lower @ lower.T, b), [C4[:3], L3], 3),
    (
        "cholesky_solve-upper",
        lambda b, u: b.cholesky_solve(u, upper=True),
        lambda b, u: np.linalg.solve(u.T @ u, b),
        [C4[:3], L3.T],
        3,
    ),
    ("cholesky_inverse", onnxnn.cholesky_inverse, lambda lower: np.linalg.inv(lower @ lower.T), [L3], 3),
    ("lu_factor-LU", lambda a: L.lu_factor(a).LU, lambda a: np.stack([_lu_reference(m)[0] for m in a]), [A4B], 4),
    ("lu-tall", lambda a: onnxnn.lu(a)[0], lambda a: _lu_reference(a)[0], [T4], 4),
    ("lu-wide", lambda a: a.lu()[0], lambda a: _lu_reference(a)[0], [W3], 5),
    ("lu_unpack", lambda a: _product(*onnxnn.lu_unpack(*onnxnn.lu(a))), lambda a: a, [A4B], 4),
    ("linalg.lu", lambda a: _product(*L.lu(a)), lambda a: a, [T4], 4),
    ("lu_solve", lambda a, b: onnxnn.lu_solve(b, *onnxnn.lu(a)), np.linalg.solve, [A4B, B4], 4),
    (
        "linalg.lu_solve-adjoint",
        lambda a, b: L.lu_solve(*L.lu_factor(a), b, adjoint=True),
        lambda a, b: np.linalg.solve(np.swapaxes(a, -1, -2), b),
        [A4B, B4],
        4,
    ),
    (
        "linalg.lu_solve-right",
        lambda a, b: L.lu_solve(*L.lu_factor(a), b, left=False),
        lambda a, b: np.linalg.solve(a.T, b.T).T,
        [A3, rng.standard_normal((2, 3))],
        3,
    ),
    ("qr-Q-tall", lambda a: onnxnn.qr(a).Q, lambda a: np.linalg.qr(a)[0], [T4], 4),
    ("qr-R-tall", lambda a: a.qr()[1], lambda a: np.linalg.qr(a)[1], [T4], 4),
    ("qr-Q-wide", lambda a: L.qr(a)[0], lambda a: np.linalg.qr(a)[0], [W3], 5),
    ("qr-R-batch", lambda a: L.qr(a)[1], lambda a: np.linalg.qr(a)[1], [TB], 5),
    ("qr-complete-Q", lambda a: L.qr(a, mode="complete")[0], lambda a: np.linalg.qr(a, mode="complete")[0], [T4], 4),
    ("qr-r", lambda a: L.qr(a, mode="r")[1], lambda a: np.linalg.qr(a, mode="r"), [T4], 4),
    ("qr-upper-triangular-input", lambda a: L.qr(a)[1], lambda a: np.linalg.qr(a)[1], [np.triu(A3)], 3),
    ("geqrf-a", lambda a: onnxnn.geqrf(a)[0], lambda a: _geqrf_reference(a)[0], [T4], 4),
    ("geqrf-tau", lambda a: a.geqrf().tau, lambda a: _geqrf_reference(a)[1], [W3], 5),
    ("orgqr", lambda a: onnxnn.orgqr(*onnxnn.geqrf(a)), _householder_q, [T4], 4),
    ("householder_product", lambda a: L.householder_product(*onnxnn.geqrf(a)), _householder_q, [A3], 3),
    (
        "ormqr",
        lambda a, c: onnxnn.ormqr(*onnxnn.geqrf(a), c),
        lambda a, c: np.linalg.qr(a, "complete")[0] @ c,
        [T4, C4],
        4,
    ),
    (
        "ormqr-transpose-right",
        lambda a, c: a.geqrf()[0].ormqr(a.geqrf()[1], c, left=False, transpose=True),
        lambda a, c: c @ np.linalg.qr(a, "complete")[0].T,
        [T4, C4.T],
        4,
    ),
    ("lstsq-tall", lambda a, b: L.lstsq(a, b).solution, lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], [T4, C4], 4),
    (
        "lstsq-wide-min-norm",
        lambda a, b: L.lstsq(a, b).solution,
        lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0],
        [W3, C4[:3]],
        5,
    ),
    ("matrix_exp", onnxnn.matrix_exp, _expm_reference, [rng.standard_normal((3, 3))], 3),
    ("matrix_exp-large-norm", L.matrix_exp, _expm_reference, [4 * rng.standard_normal((3, 3))], 3),
    (
        "matrix_exp-rotation",
        lambda a: a.matrix_exp(),
        lambda a: np.array([[np.cos(2.5), -np.sin(2.5)], [np.sin(2.5), np.cos(2.5)]]),
        [np.array([[0.0, -2.5], [2.5, 0.0]])],
        2,
    ),
    (
        "matrix_exp-nilpotent",
        L.matrix_exp,
        lambda a: np.eye(3) + a + a @ a / 2,
        [np.triu(rng.standard_normal((3, 3)), 1)],
        3,
    ),
    ("matrix_exp-zero", L.matrix_exp, lambda a: np.broadcast_to(np.eye(2), a.shape), [np.zeros((2, 2, 2))], 2),
    ("norm-fro", lambda a: L.norm(a), np.linalg.norm, [T4], 4),
    ("norm-1", lambda a: L.norm(a, 1), lambda a: np.linalg.norm(a, 1), [T4], 4),
    (
        "matrix_norm-inf",
        lambda a: L.matrix_norm(a, float("inf")),
        lambda a: np.linalg.norm(a, np.inf, (-2, -1)),
        [TB],
        5,
    ),
    (
        "matrix_norm--1-keepdim",
        lambda a: L.matrix_norm(a, -1, keepdim=True),
        lambda a: np.linalg.norm(a, -1, (-2, -1), keepdims=True),
        [TB],
        5,
    ),
    ("vector_norm-3", lambda a: L.vector_norm(a, 3, dim=-1), lambda a: np.linalg.norm(a, 3, -1), [TB], 5),
    (
        "multi_dot",
        lambda a, b, c: L.multi_dot([a, b, c]),
        lambda a, b, c: np.linalg.multi_dot([a, b, c]),
        [B3V, W3, rng.standard_normal(5)],
        5,
    ),
    ("vander", lambda x: L.vander(x, N=4), lambda x: np.vander(x, 4, increasing=True), [B3V], 4),
    ("vecdot", lambda x, y: L.vecdot(x, y), lambda x, y: (x * y).sum(-1), [T4, T4[::-1].copy()], 3),
    (
        "tensorinv",
        lambda a: L.tensorinv(a, ind=1),
        lambda a: np.linalg.tensorinv(a, 1),
        [_well_conditioned(6, 6).reshape(6, 2, 3)],
        6,
    ),
    ("tensorsolve", L.tensorsolve, np.linalg.tensorsolve, [_well_conditioned(6, 6).reshape(2, 3, 6), C4[:3].T], 6),
    # Jacobi: singular values and sign-invariant products of the vectors
    ("svd-S", lambda a: L.svd(a)[1], lambda a: np.linalg.svd(a, compute_uv=False), [T4], 4),
    ("svdvals-batch-wide", L.svdvals, lambda a: np.linalg.svd(a, compute_uv=False), [np.swapaxes(TB, -1, -2)], 5),
    ("svd-reconstructs", lambda a: _usv(*L.svd(a, full_matrices=False)), lambda a: a, [W3], 5),
    (
        "svd-U-projector",
        lambda a: _projector(L.svd(a, full_matrices=False).U),
        lambda a: _projector_np(np.linalg.svd(a, full_matrices=False)[0]),
        [TB],
        5,
    ),
    ("svd-full-U-orthogonal", lambda a: _gram(L.svd(a).U), lambda a: np.eye(4), [T4], 4),
    ("svd-rank-deficient-U-orthonormal", lambda a: _gram(onnxnn.svd(a).U), lambda a: np.eye(3), [SINGULAR], 3),
    ("torch.svd-V", lambda a: _usv(onnxnn.svd(a)[0], a.svd()[1], onnxnn.svd(a)[2].mT), lambda a: a, [A4B], 4),
    ("pinverse", onnxnn.pinverse, np.linalg.pinv, [T4], 4),
    ("pinv-wide", L.pinv, np.linalg.pinv, [W3], 5),
    ("nuclear_norm", onnxnn.nuclear_norm, lambda a: np.linalg.norm(a, "nuc"), [T4], 4),
    ("matrix_norm-2", lambda a: L.matrix_norm(a, 2), lambda a: np.linalg.norm(a, 2, (-2, -1)), [TB], 5),
    (
        "matrix_norm--2-dims",
        lambda a: L.matrix_norm(a, -2, dim=(0, 2)),
        lambda a: np.linalg.norm(a, -2, (0, 2)),
        [TB],
        5,
    ),
    ("cond", L.cond, np.linalg.cond, [A4B], 4),
    ("cond-1", lambda a: L.cond(a, 1), lambda a: np.linalg.cond(a, 1), [A3], 3),
    ("eigvalsh", L.eigvalsh, np.linalg.eigvalsh, [S4B], 4),
    (
        "eigh-reconstructs",
        lambda a: _vwv(*L.eigh(a)),
        lambda a: np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2),
        [A4B],
        4,
    ),
    (
        "eigh-upper-values",
        lambda a: L.eigh(a, UPLO="U")[0],
        lambda a: np.linalg.eigvalsh(np.triu(a) + np.triu(a, 1).T),
        [A3],
        3,
    ),
]


def _usv(U, S, Vh):
    return (U * S.unsqueeze(-2)) @ Vh


def _vwv(w, V):
    return (V * w.unsqueeze(-2)) @ V.mT


def _projector(U):
    return U @ U.mT


def _projector_np(U):
    return U @ np.swapaxes(U, -1, -2)


def _gram(U):
    return U.mT @ U


def _product(P, lower, upper):
    return P @ lower @ upper


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("case_id,function,reference,inputs,n", FORWARD_CASES, ids=[c[0] for c in FORWARD_CASES])
def test_forward_matches_numpy(case_id, function, reference, inputs, n, executor, dtype):
    np_dtype = dtype.numpy_dtype
    rounded = [np.asarray(a, np_dtype) for a in inputs]  # the reference sees the rounded inputs
    expected = reference(*[a.astype(np.float64) for a in rounded])
    with onnxnn.set_executor(executor):
        actual = function(*[onnxnn.tensor(a, dtype=dtype) for a in rounded])
        assert actual.dtype is dtype
        values = actual.numpy().astype(np.float64)
    assert values.shape == np.shape(expected)
    np.testing.assert_allclose(values, expected, rtol=0, atol=_bound(expected, n, np_dtype), equal_nan=True)


def test_pivots_are_lapack_s():
    for matrix in (A_NEG, *A4B, T4, W3):
        _, expected = _lu_reference(matrix)
        for executor in EXECUTORS:
            with onnxnn.set_executor(executor):
                pivots = L.lu_factor(onnxnn.tensor(matrix)).pivots
            assert pivots.dtype is onnxnn.int32
            np.testing.assert_array_equal(pivots.numpy(), expected)


def test_lu_without_pivoting():
    # PyTorch computes it on CUDA only (its CPU refuses); the factors are Doolittle's, P is empty.
    a = _well_conditioned(3, 3)
    P, lower, upper = L.lu(onnxnn.tensor(a), pivot=False)
    assert P.numel() == 0
    np.testing.assert_allclose((lower @ upper).numpy(), a, rtol=0, atol=_bound(a, 3, np.float64))
    np.testing.assert_array_equal(L.lu_factor(onnxnn.tensor(a), pivot=False).pivots.numpy(), [1, 2, 3])


def test_singular_and_indefinite_inputs_give_info_and_nan_not_errors():
    # PyTorch reads the values to raise; a lazy op cannot, so the *_ex variants report LAPACK's info.
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            sign, logabsdet = onnxnn.slogdet(onnxnn.tensor(SINGULAR))
            assert sign.item() == 0.0 and logabsdet.item() == -np.inf
            # LAPACK's info: the 1-based index of the first zero pivot (U[2, 2] here, after two swaps)
            assert np.diag(_lu_reference(SINGULAR)[0])[2] == 0.0
            assert L.lu_factor_ex(onnxnn.tensor(SINGULAR)).info.item() == 3
            assert L.lu_factor_ex(onnxnn.tensor(A3)).info.item() == 0
            assert not np.isfinite(L.inv(onnxnn.tensor(SINGULAR)).numpy()).all()
            inverse, info = L.inv_ex(onnxnn.tensor(A3))
            assert info.item() == 0
            np.testing.assert_allclose(
                inverse.numpy(), np.linalg.inv(A3), rtol=0, atol=_bound(inverse.numpy(), 3, np.float64)
            )
            with pytest.raises(L.LinAlgError, match="The diagonal element 3 is zero"):
                L.inv_ex(onnxnn.tensor(SINGULAR), check_errors=True)
            indefinite = np.diag([2.0, -1.0, 3.0])
            factor, info = L.cholesky_ex(onnxnn.tensor(indefinite))
            assert info.dtype is onnxnn.int32 and info.item() == 2
            assert np.isnan(factor.numpy()[1:, 1]).all()
            with pytest.raises(L.LinAlgError, match=r"the leading minor of order 2 is not positive-definite"):
                L.cholesky_ex(onnxnn.tensor(indefinite), check_errors=True)


def test_rank_and_pseudoinverse_of_rank_deficient_matrices():
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            ranks = L.matrix_rank(onnxnn.tensor(np.stack([SINGULAR, A3, np.zeros((3, 3))])))
            assert ranks.dtype is onnxnn.int64
            np.testing.assert_array_equal(ranks.numpy(), [2, 3, 0])
            assert L.matrix_rank(onnxnn.tensor(SINGULAR), atol=0.5, rtol=0.0).item() == 2  # S = 8.5, 0.64, 0
            actual = L.pinv(onnxnn.tensor(SINGULAR)).numpy()
            expected = np.linalg.pinv(SINGULAR)
            np.testing.assert_allclose(actual, expected, rtol=0, atol=_bound(expected, 3, np.float64, condition=1e2))
