"""Linear algebra (runtime/ops/linalg_lu.py, linalg_qr.py, onnxnn.linalg): forward against numpy.linalg
on both executors in float32 and float64, gradients against float64 finite differences, export run
by plain onnxruntime, Tensor methods, batch sizes sharing one graph, and PyTorch's errors.

Tolerances come from the backward stability of the algorithms (Higham, chapters 9, 10 and 19): LU with
partial pivoting, Cholesky and Householder QR compute the exact result of a matrix perturbed by
``gamma(c n) * growth * |A|``, so a computed solution or inverse is within ``cond(A)`` times that of the
exact one, relative to its own magnitude. The test matrices are diagonally dominant or made
well-conditioned (cond < 50, growth <= 2); ``_bound`` spells the bound out, doubled because
numpy's LAPACK result carries an error of its own.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

EXECUTORS = ("onnxruntime", "kernels")
DTYPES = (onnxnn.float32, onnxnn.float64)
rng = np.random.default_rng(12)


def _well_conditioned(*shape) -> np.ndarray:
    """Random square matrices (batched) with a dominant diagonal: cond(A) small, pivot growth <= 2."""
    n = shape[-1]
    return rng.standard_normal(shape) + 2.0 * np.sqrt(n) * np.eye(n)


def _spd(*shape) -> np.ndarray:
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _lower(*shape) -> np.ndarray:
    return np.tril(_well_conditioned(*shape))


A3 = _well_conditioned(3, 3)
A4B = _well_conditioned(2, 4, 4)  # a batch
A_NEG = np.array([[0.0, 2.0, 1.0], [1.0, 0.5, 3.0], [2.0, 1.0, 0.0]])  # negative det, pivoting needed
B4 = rng.standard_normal((2, 4, 2))
B3V = rng.standard_normal(3)
S3, S4B = _spd(3, 3), _spd(2, 4, 4)
L3 = np.linalg.cholesky(S3)
T4 = rng.standard_normal((4, 3))  # tall
W3 = rng.standard_normal((3, 5))  # wide
TB = rng.standard_normal((2, 5, 3))  # a batch of tall ones
C4 = rng.standard_normal((4, 2))
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])


def _bound(reference, n: int, dtype, condition: float = 50.0, growth: float = 2.0) -> float:
    """Twice the forward error bound ``cond * gamma(3n) * growth`` relative to the result's magnitude."""
    scale = max(float(np.max(np.abs(reference))), 1.0)
    return 2 * condition * gamma(3 * n, dtype) * growth * scale


def _lu_reference(a: np.ndarray):
    """LAPACK's getf2 in numpy: (packed LU, 1-based pivots) of one matrix, for the pivot choice."""
    a = a.astype(np.float64).copy()
    m, n = a.shape
    pivots = []
    for j in range(min(m, n)):
        p = j + int(np.argmax(np.abs(a[j:, j])))
        pivots.append(p + 1)
        a[[j, p]] = a[[p, j]]
        if a[j, j] != 0:
            a[j + 1 :, j] /= a[j, j]
            a[j + 1 :, j + 1 :] -= np.outer(a[j + 1 :, j], a[j, j + 1 :])
    return a, np.array(pivots, np.int32)


def _logdet_reference(a):
    sign, logabs = np.linalg.slogdet(a)
    return np.where(sign < 0, np.nan, logabs)


def _geqrf_reference(a):
    h, tau = np.linalg.qr(a, mode="raw")
    return h.T, tau


def _householder_q(a):
    return np.linalg.qr(a)[0]


def _expm_reference(a):
    """exp(A) = V diag(exp(w)) V^-1 (random matrices are diagonalizable; complex pairs cancel)."""
    w, v = np.linalg.eig(a)
    return np.real(v @ np.diag(np.exp(w)) @ np.linalg.inv(v))


L = onnxnn.linalg
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


# ---------------------------------------------------------------- gradients (float64 finite differences)


def _symmetric(f):
    """f of the symmetric matrix (x + x^T) / 2: Cholesky's domain, on which PyTorch's gradient is defined."""
    return lambda x, *rest: f((x + x.mT) / 2, *rest)


GRADIENT_CASES = [
    ("det", onnxnn.det, [A_NEG]),
    ("det-batch", L.det, [A4B[:, :3, :3]]),
    ("slogdet", lambda a: onnxnn.slogdet(a).logabsdet, [A_NEG]),
    ("logdet", onnxnn.logdet, [S3]),
    ("inverse", onnxnn.inverse, [A_NEG]),
    ("solve", L.solve, [A_NEG, B4[0, :3]]),
    ("solve-right", lambda a, b: L.solve(a, b, left=False), [A3, B4[0, :3].T.copy()]),
    ("solve_triangular", lambda a, b: L.solve_triangular(a, b, upper=True), [A3, B4[0, :3]]),
    ("triangular_solve-unit", lambda b, a: onnxnn.triangular_solve(b, a, False, True, True)[0], [B4[0, :3], A3]),
    ("cholesky", _symmetric(L.cholesky), [S3]),
    ("cholesky-upper", _symmetric(lambda a: onnxnn.cholesky(a, upper=True)), [S3]),
    # the factor's gradient is PyTorch's closed form, not the derivative of a function of its triangle:
    # test_linalg_against_pytorch_semantics.py checks it
    ("cholesky_solve", lambda b: onnxnn.cholesky_solve(b, onnxnn.tensor(L3)), [C4[:3]]),
    ("lu-packed", lambda a: onnxnn.lu(a)[0], [A_NEG]),
    ("lu_unpack-L", lambda a: onnxnn.lu_unpack(*onnxnn.lu(a))[1], [T4]),
    ("lu_solve", lambda a, b: onnxnn.lu_solve(b, *onnxnn.lu(a)), [A_NEG, B4[0, :3]]),
    ("qr-Q", lambda a: L.qr(a).Q, [T4]),
    ("qr-R-wide", lambda a: onnxnn.qr(a).R, [W3]),
    ("geqrf", lambda a: onnxnn.geqrf(a)[0], [T4]),
    ("orgqr", lambda a: onnxnn.orgqr(*onnxnn.geqrf(a)), [T4]),
    ("ormqr", lambda a, c: onnxnn.ormqr(*onnxnn.geqrf(a), c, transpose=True), [T4, C4]),
    ("lstsq", lambda a, b: L.lstsq(a, b).solution, [T4, C4]),
    ("matrix_exp", onnxnn.matrix_exp, [rng.standard_normal((3, 3))]),
    ("matrix_exp-squared", L.matrix_exp, [3 * rng.standard_normal((2, 2))]),
    ("matrix_norm-inf", lambda a: L.matrix_norm(a, float("inf")), [T4]),
    ("svdvals-wide", L.svdvals, [W3[:2, :4]]),
    ("svd-U", lambda a: L.svd(a, full_matrices=False).U, [T4[:, :2]]),
    ("pinverse", onnxnn.pinverse, [T4[:, :2]]),
    ("eigh-values", _symmetric(lambda a: L.eigh(a).eigenvalues), [S3[:2, :2]]),
    ("eigh-vectors", _symmetric(lambda a: L.eigh(a).eigenvectors), [S3]),
]
# Jacobi graphs are long (sweeps x rounds of rotations): their gradients are checked along a random
# direction (two evaluations) instead of element by element.
DIRECTIONAL = {"svdvals-wide", "svd-U", "pinverse", "eigh-values", "eigh-vectors"}


# The backward graphs are made of the same standard ops as the forward ones (checked on both executors
# above), so every rule is checked on the kernels executor and one case per family on onnxruntime too.
ON_BOTH = {"det", "inverse", "cholesky", "qr-Q", "matrix_exp", "lu_solve", "svd-U"}
GRADIENT_PARAMS = [pytest.param(*case, "kernels", id=f"{case[0]}-kernels") for case in GRADIENT_CASES] + [
    pytest.param(*case, "onnxruntime", id=f"{case[0]}-onnxruntime") for case in GRADIENT_CASES if case[0] in ON_BOTH
]


@pytest.mark.parametrize("case_id,function,inputs,executor", GRADIENT_PARAMS)
def test_gradients_match_finite_differences(case_id, function, inputs, executor):
    with onnxnn.set_executor(executor):
        check_gradients(
            function, [np.asarray(a, np.float64) for a in inputs], exhaustive_limit=0 if case_id in DIRECTIONAL else 64
        )


def test_solve_and_inverse_have_closed_form_backward_nodes():
    x = onnxnn.tensor(A3, requires_grad=True)
    assert L.inv(x).grad_fn.name() == "LinalgInvExBackward0"
    assert L.solve(x, onnxnn.tensor(B3V)).grad_fn is not None


SECOND_ORDER_CASES = [
    ("inverse", L.inv, A3),  # the unrolled elimination
    # Singular values' gradient is the closed form U diag(G) V^T: its derivative goes through U and V.
    ("svdvals-cubed", lambda a: L.svdvals(a) ** 3, T4),
    ("svdvals-wide", L.svdvals, W3[:2, :4]),
    ("nuclear-norm", lambda a: L.matrix_norm(a, "nuc"), T4),
    ("spectral-norm", lambda a: L.matrix_norm(a, 2), T4[:3]),
    ("pinverse", onnxnn.pinverse, T4[:, :2]),
    ("pinv-hermitian", _symmetric(lambda a: L.pinv(a, hermitian=True)), S3),  # PyTorch's pinv_backward
]


@pytest.mark.parametrize(
    "function,matrix", [case[1:] for case in SECOND_ORDER_CASES], ids=[c[0] for c in SECOND_ORDER_CASES]
)
def test_second_order_gradients_match_finite_differences(function, matrix):
    # d/dA <gradient of sum(f(A)), W> by finite differences of the first-order gradient.
    direction = rng.standard_normal(matrix.shape)

    def first_order(a):
        with onnxnn.enable_grad():  # the finite differences evaluate under no_grad
            x = a if a.requires_grad else a.detach().requires_grad_(True)
            (gradient,) = onnxnn.autograd.grad(function(x).sum(), x, create_graph=True)
            value = (gradient * onnxnn.tensor(direction)).sum()
        return value if a.requires_grad else value.detach()

    check_gradients(first_order, [np.asarray(matrix, np.float64)], exhaustive_limit=0)


def test_singular_values_have_a_closed_form_backward_node():
    assert L.svdvals(onnxnn.tensor(T4, requires_grad=True)).grad_fn.name() == "LinalgSvdBackward0"


# ---------------------------------------------------------------- export, batch sizes, methods, errors


class _Solver(nn.Module):
    def forward(self, a, b):
        x = onnxnn.linalg.solve(a, b)
        q, r = onnxnn.linalg.qr(a)
        lower = onnxnn.linalg.cholesky(a @ a.mT + 4 * onnxnn.eye(4))
        return (
            x.sum()
            + onnxnn.det(a)
            + onnxnn.slogdet(a)[1]
            + q.sum()
            + r.sum()
            + lower.sum()
            + onnxnn.matrix_exp(a * 0.1).sum()
            + onnxnn.inverse(a).sum()
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_exported_model_runs_in_plain_onnxruntime_like_onnxnn(dtype):
    a, b = onnxnn.tensor(A4B[0], dtype=dtype), onnxnn.tensor(B4[0], dtype=dtype)
    module = _Solver()
    expected = module(a, b).numpy()
    proto = to_onnx(module.eval(), (a, b))
    onnx.checker.check_model(proto, full_check=True)
    assert {node.domain for node in proto.graph.node} <= {"", "ai.onnx"}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {graph_input.name: t.numpy() for graph_input, t in zip(session.get_inputs(), (a, b))}
    actual = session.run(None, feeds)[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_bound(expected, 4, dtype.numpy_dtype) * 8)


class _Spectral(nn.Module):
    def forward(self, a):
        U, S, _ = onnxnn.linalg.svd(a, full_matrices=False)
        return U.abs().sum() + S.sum() + onnxnn.linalg.eigvalsh(a.mT @ a).sum() + onnxnn.pinverse(a).sum()


def test_exported_jacobi_decompositions_run_in_plain_onnxruntime():
    a = onnxnn.tensor(T4[:, :2])
    module = _Spectral()
    expected = module(a).numpy()
    proto = to_onnx(module.eval(), (a,))
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    actual = session.run(None, {session.get_inputs()[0].name: a.numpy()})[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_bound(expected, 3, np.float64) * 8)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_batch_sizes_share_a_structure_and_stay_right(executor):
    # The onnxruntime executor compiles one graph with a symbolic batch for the later sizes.
    with onnxnn.set_executor(executor):
        for batch in (2, 3, 5, 4):
            a, b = _well_conditioned(batch, 3, 3), rng.standard_normal((batch, 3, 2))
            actual = L.solve(onnxnn.tensor(a), onnxnn.tensor(b)).numpy()
            np.testing.assert_allclose(actual, np.linalg.solve(a, b), rtol=0, atol=_bound(actual, 3, np.float64))
            inverse = L.inv(onnxnn.tensor(a)).numpy()
            np.testing.assert_allclose(inverse, np.linalg.inv(a), rtol=0, atol=_bound(inverse, 3, np.float64))


def test_tensor_methods_and_top_level_functions_exist():
    x = onnxnn.tensor(A3)
    for name in (
        "det",
        "slogdet",
        "logdet",
        "inverse",
        "cholesky",
        "cholesky_inverse",
        "lu",
        "matrix_exp",
        "qr",
        "geqrf",
    ):
        method, function = getattr(x, name)(), getattr(onnxnn, name)(x)
        first = method[0] if isinstance(method, tuple) else method
        second = function[0] if isinstance(function, tuple) else function
        np.testing.assert_array_equal(first.numpy(), second.numpy(), err_msg=name)
    assert type(onnxnn.qr(x)).__name__ == "qr" and onnxnn.slogdet(x)._fields == ("sign", "logabsdet")


ERROR_CASES = [
    (
        lambda: onnxnn.det(onnxnn.ones(2, 3)),
        RuntimeError,
        "linalg.det: A must be batches of square matrices, but they are 2 by 3 matrices",
    ),
    (
        lambda: onnxnn.inverse(onnxnn.ones(3)),
        RuntimeError,
        "linalg.inv: The input tensor A must have at least 2 dimensions.",
    ),
    (
        lambda: onnxnn.logdet(onnxnn.ones(2, 2, dtype=onnxnn.int64)),
        RuntimeError,
        "logdet: Expected a floating point or complex tensor as input. Got Long",
    ),
    (
        lambda: L.slogdet(onnxnn.ones(2, 2, dtype=onnxnn.float16)),
        RuntimeError,
        "linalg.slogdet: Low precision dtypes not supported. Got Half",
    ),
    (
        lambda: onnxnn.det(onnxnn.ones(2, 2, dtype=onnxnn.float16)),
        NotImplementedError,
        "\"lu_cpu\" not implemented for 'Half'",
    ),
    (
        lambda: onnxnn.cholesky(onnxnn.ones(2, 2, dtype=onnxnn.int64)),
        NotImplementedError,
        "\"cholesky_cpu\" not implemented for 'Long'",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(4, 2)),
        RuntimeError,
        "linalg.solve: Incompatible shapes of A and B for the equation AX = B (3x3 and 4x2)",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(3), left=False),
        RuntimeError,
        "linalg.solve: Incompatible shapes of A and B for the equation XA = B (3x3 and 3x1)",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(3, 2), left=False),
        RuntimeError,
        "linalg.solve: Incompatible shapes of A and B for the equation XA = B (3x3 and 3x2)",
    ),
    (
        lambda: L.solve(onnxnn.eye(1), onnxnn.ones(1), left=False),
        RuntimeError,
        "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False.",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(3, 2, dtype=onnxnn.float64)),
        RuntimeError,
        "linalg.solve: Expected A and B to have the same dtype, but found A of type Float and B of type Double instead",
    ),
    (
        lambda: onnxnn.triangular_solve(onnxnn.ones(3), onnxnn.eye(3)),
        RuntimeError,
        "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has 1 dimensions instead",
    ),
    (
        lambda: onnxnn.cholesky_solve(onnxnn.ones(4, 2), onnxnn.eye(3)),
        RuntimeError,
        "Incompatible matrix sizes for cholesky_solve: each A matrix is 3 by 3 but each b matrix is 4 by 2",
    ),
    (
        lambda: onnxnn.lu_unpack(onnxnn.eye(2), onnxnn.tensor([1, 2])),
        RuntimeError,
        "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.",
    ),
    (
        lambda: L.lu_factor(onnxnn.ones(3)),
        RuntimeError,
        "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: [3] instead",
    ),
    (
        lambda: L.qr(onnxnn.eye(2), mode="x"),
        RuntimeError,
        "qr received unrecognized mode 'x' but expected one of 'reduced' (default), 'r', or 'complete'",
    ),
    (
        lambda: L.householder_product(onnxnn.ones(2, 3), onnxnn.ones(2)),
        RuntimeError,
        "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]",
    ),
    (
        lambda: onnxnn.ormqr(onnxnn.eye(3), onnxnn.ones(3), onnxnn.ones(4, 2)),
        RuntimeError,
        "torch.ormqr: other.shape[-2] must be equal to input.shape[-2]",
    ),
    (
        lambda: L.lstsq(onnxnn.ones(3, 2), onnxnn.ones(2, 1)),
        RuntimeError,
        "torch.linalg.lstsq: input.size(-2) should match other.size(-2)",
    ),
    (
        lambda: L.matrix_exp(onnxnn.ones(2, 3)),
        RuntimeError,
        "linalg.matrix_exp: A must be batches of square matrices, but they are 2 by 3 matrices",
    ),
    (
        lambda: L.multi_dot([onnxnn.eye(2), onnxnn.ones(2, 2, 2)]),
        RuntimeError,
        "multi_dot(): the last tensor must be 1D or 2D but got 3D",
    ),
    (
        lambda: onnxnn.svd(onnxnn.ones(3)),
        RuntimeError,
        "linalg.svd: input should have at least 2 dimensions, but has 1 dimensions instead",
    ),
    (
        lambda: L.eigh(onnxnn.ones(3, 2)),
        RuntimeError,
        "linalg.eigh: A must be batches of square matrices, but they are 3 by 2 matrices",
    ),
    (lambda: L.eigh(onnxnn.eye(3), "X"), RuntimeError, "Expected UPLO argument to be 'L' or 'U', but got X"),
    (
        lambda: onnxnn.pinverse(onnxnn.ones(3, 3, dtype=onnxnn.int64)),
        RuntimeError,
        (
            "linalg.pinv(Long{[3, 3]}): expected a tensor with 2 or more dimensions of float, double, cfloat or "
            "cdouble types"
        ),
    ),
    (
        lambda: L.cond(onnxnn.ones(3, 2), 1),
        RuntimeError,
        "linalg.cond(ord=1): A must be batches of square matrices, but they are 3 by 2 matrices",
    ),
]


@pytest.mark.parametrize("call,error,message", ERROR_CASES, ids=[c[2][:40] for c in ERROR_CASES])
def test_bad_input_gets_pytorchs_error(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)


def test_error_messages_are_pytorchs():
    torch = pytest.importorskip("torch")
    calls = [
        lambda lib: lib.det(lib.ones(2, 3)),
        lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(4, 2)),
        lambda lib: lib.cholesky_solve(lib.ones(4, 2), lib.eye(3)),
        lambda lib: lib.linalg.lu_factor(lib.ones(3)),
        lambda lib: lib.triangular_solve(lib.ones(3), lib.eye(3)),
        lambda lib: lib.linalg.qr(lib.eye(2), "x"),
        lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(3), left=False),
    ]
    for call in calls:
        messages = []
        for lib in (torch, onnxnn):
            with pytest.raises(Exception) as raised:
                call(lib)
            messages.append((type(raised.value).__name__, str(raised.value).splitlines()[0]))
        assert messages[0] == messages[1]
