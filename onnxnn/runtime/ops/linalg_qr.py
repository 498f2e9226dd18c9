"""Householder QR and its LAPACK-style pieces (geqrf, orgqr/householder_product, ormqr), least
squares through QR (with column pivoting for rank-deficient matrices), and the matrix exponential.

Each Householder step is unrolled at record time over the ``min(m, n)`` columns with full-length
reflector vectors that are zero above the step's row, so one rank-1 update serves every batch and
no sub-block is sliced out. The conventions are LAPACK's ``dlarfg``, which PyTorch and numpy
return: ``beta = -sign(alpha) * ||x||`` (``sign(0) = +1``) on R's diagonal, ``v[0] = 1``,
``tau = (beta - alpha) / beta``, and a column already zero below the diagonal gets ``tau = 0``
(no reflection). Gradients are the algorithm's exact derivatives: where a column is zero, the
branch not taken is kept finite so its zero cotangent never meets an infinite local derivative.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ._common import Tensor, with_zero_gradients
from .elementwise import where
from .linalg import matmul
from .linalg_lu import (
    check_matrix,
    constant_like,
    eye_like,
    mask_like,
    row_swap,
    solve_triangular,
)
from .shape import cat, stack
from ..tensor import outside_autocast

# torch's top-level names; torch.linalg's (linalg_qr, householder_product, ...) are read by onnxnn.linalg
__all__ = ["geqrf", "matrix_exp", "orgqr", "ormqr", "qr"]

QRResult = namedtuple("qr", ["Q", "R"])
GeqrfResult = namedtuple("geqrf", ["a", "tau"])


def power_of_two_scale(A: Tensor) -> Tensor:
    """A power of two s (..., 1, 1) per matrix of A (..., m, n) bringing its largest finite magnitude to
    about 1, for the factorizations that square entries (Householder column norms; Jacobi rotations, which
    take fourth powers): unscaled, float32 entries past about 1e10 or below 1e-12 overflow or underflow there.

    ``s A`` is exact (only exponents change; an entry more than 2^120 below the largest may round, far
    below the largest's precision), so a result scaled back is A's to rounding. s is detached (a
    constant to the gradient), kept a normal number of A's dtype, and 1 for a matrix with no nonzero
    finite entry.
    """
    if A.shape[-2] == 0 or A.shape[-1] == 0:
        return constant_like(np.ones((1, 1)), A)
    magnitudes = A.detach().abs()
    finite = magnitudes.lt(math.inf)  # not inf, not NaN
    largest = where(finite, magnitudes, constant_like(0.0, A)).amax((-2, -1), keepdim=True)
    exponent = (where(largest.gt(0.0), largest, constant_like(1.0, A)).log() / math.log(2.0)).floor()
    info = np.finfo(A.dtype.numpy_dtype)
    exponent = exponent.clamp(-(info.maxexp - 1), -info.minexp)  # 2^-exponent normal, never 0 or inf
    return constant_like(0.5, A).pow(exponent)


def _householder(A: Tensor, pivot: bool = False) -> tuple:
    """Householder triangularization of A (..., m, n), with column pivoting when ``pivot`` (LAPACK's
    ``geqp3``: each step first swaps in the column of largest norm in the rows not yet reduced, so
    R's diagonal magnitudes do not increase).

    Returns ``(R (..., m, n) upper trapezoidal, reflectors (..., m, k) with v[j] = 1 and zeros above,
    tau (..., k), P)``: ``A P = Q R`` with P (..., n, n) the column permutation when pivoting, else None.
    The steps run on A scaled by a power of two (the reflectors, tau and P do not depend on it; R is
    scaled back), so that the column norms neither overflow nor underflow.
    """
    m, n = A.shape[-2], A.shape[-1]
    rows, columns = np.arange(m), np.arange(n)
    if min(m, n) == 0:
        return A, A.new_zeros(tuple(A.shape[:-2]) + (m, 0)), A.new_zeros(tuple(A.shape[:-2]) + (0,)), None
    scale = power_of_two_scale(A)
    work, permutation = A * scale, None
    vectors, taus = [], []
    for j in range(min(m, n)):
        if pivot:
            reduced = where(mask_like((rows >= j)[:, None], A), work, constant_like(0.0, A))
            norms = (reduced * reduced).sum(-2)  # (..., n): squared, the same order
            # columns before j are out of the running: -1 is below every norm; ArgMax takes the first maximum
            candidates = where(mask_like(columns >= j, A), norms, constant_like(-1.0, A))
            swap = row_swap(n, j, candidates.argmax(-1, keepdim=True), A)
            work = matmul(work, swap)
            permutation = swap if permutation is None else matmul(permutation, swap)
        column = work.select(-1, j)  # (..., m)
        alpha = column.select(-1, j).unsqueeze(-1)  # (..., 1)
        below = where(mask_like(rows > j, A), column, constant_like(0.0, A))
        tail = (below * below).sum(-1, keepdim=True)  # sigma^2 of LAPACK's dlarfg
        no_reflection = tail.eq(0.0)
        norm = (alpha * alpha + where(no_reflection, constant_like(1.0, A), tail)).sqrt()
        sign = where(alpha.ge(0.0), constant_like(1.0, A), constant_like(-1.0, A))
        beta = -sign * norm
        safe_beta = where(no_reflection, constant_like(1.0, A), beta)
        safe_shift = where(no_reflection, constant_like(1.0, A), alpha - beta)
        tau = where(no_reflection, constant_like(0.0, A), (beta - alpha) / safe_beta)  # (..., 1)
        v = below / safe_shift + constant_like(np.eye(m)[j], A)  # (..., m): zeros above j, 1 at j
        # H = I - tau v v^T applied to the rows j.. (v is zero above j, so rows above stay)
        projection = matmul(v.unsqueeze(-2), work)  # (..., 1, n)
        work = work - (tau * v).unsqueeze(-1) * projection
        vectors.append(v)
        taus.append(tau.squeeze(-1))
    return work.triu() / scale, stack(vectors, -1), stack(taus, -1), permutation


def _q_from_reflectors(vectors: Tensor, tau: Tensor, m: int, like: Tensor) -> Tensor:
    """``Q = H_0 H_1 ... H_{k-1}`` (..., m, m) from reflectors (..., m, k) and tau (..., k)."""
    Q = eye_like(m, like).expand(tuple(vectors.shape[:-2]) + (m, m))
    if vectors.shape[-1] == 0:  # no reflectors: their (empty) gradients are zeros, as PyTorch's, rather than none
        return with_zero_gradients(Q, (vectors, tau), "LinalgHouseholderProductBackward0")
    for j in range(vectors.shape[-1]):
        v = vectors.select(-1, j).unsqueeze(-1)  # (..., m, 1)
        t = tau.narrow(-1, j, 1).unsqueeze(-1)  # (..., 1, 1)
        Q = Q - matmul(matmul(Q, v) * t, v.mT)
    return Q


@outside_autocast("linalg_qr")
def linalg_qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """``torch.linalg.qr``: ``A = Q R`` by Householder reflections, with LAPACK's signs (R's diagonal
    may be negative, as PyTorch's and numpy's).

    ``mode``: ``'reduced'`` (Q (..., m, k), R (..., k, n), k = min(m, n)), ``'complete'`` (Q (..., m, m),
    R (..., m, n)) or ``'r'`` (Q empty).

    Example::

        >>> Q, R = onnxnn.linalg.qr(onnxnn.tensor([[3.0, 1.0], [4.0, 2.0]]))
        >>> R
        tensor([[-5.0000, -2.2000],
                [ 0.0000,  0.4000]])
    """
    check_matrix("linalg.qr", A, square=False, kernel="geqrf_cpu")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
        )
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    R, vectors, tau, _ = _householder(A)
    if mode == "r":
        return QRResult(A.new_zeros(0), R.narrow(-2, 0, k))
    Q = _q_from_reflectors(vectors, tau, m, A)
    if mode == "complete":
        return QRResult(Q, R)
    return QRResult(Q.narrow(-1, 0, k), R.narrow(-2, 0, k))


@outside_autocast("qr")
def qr(A: Tensor, some: bool = True) -> QRResult:
    """``torch.qr`` (deprecated in PyTorch for :func:`linalg.qr`): ``some`` is ``mode='reduced'``."""
    return linalg_qr(A, "reduced" if some else "complete")


@outside_autocast("geqrf")
def geqrf(A: Tensor) -> GeqrfResult:
    """``torch.geqrf``: LAPACK's packed QR: R on and above the diagonal, the Householder vectors
    (without their unit first entry) below it, and their scale factors ``tau`` (..., min(m, n))."""
    check_matrix("torch.geqrf", A, square=False, kernel="geqrf_cpu", rank_style="input", floating=False)
    R, vectors, tau, _ = _householder(A)
    n = A.shape[-1]
    packed = R
    if vectors.shape[-1]:
        below = vectors.tril(-1)  # (..., m, k)
        if n > below.shape[-1]:
            below = below @ constant_like(np.eye(below.shape[-1], n), A)  # pad the columns with zeros
        packed = R + below
    return GeqrfResult(packed, tau)


def _reflectors_of(A: Tensor, k: int) -> Tensor:
    """The unit-headed Householder vectors stored below A's diagonal, as (..., m, k) columns."""
    m = A.shape[-2]
    return A.narrow(-1, 0, k).tril(-1) + constant_like(np.eye(m, k), A)


@outside_autocast("linalg_householder_product")
def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """``torch.linalg.householder_product``: the first n columns of ``H_0 ... H_{k-1}``, with
    ``H_i = I - tau_i v_i v_i^T`` and v_i stored below A's diagonal (``geqrf``'s output)."""
    check_matrix(
        "torch.linalg.householder_product", A, square=False, kernel="orgqr_cpu", rank_style="input", floating=False
    )
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    if m < n:
        raise RuntimeError(
            "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]"
        )
    if k > n:
        raise RuntimeError(
            "torch.linalg.householder_product: input.shape[-1] must be greater than or equal to tau.shape[-1]"
        )
    Q = _q_from_reflectors(_reflectors_of(A, k), tau, m, A)
    return Q.narrow(-1, 0, n)


@outside_autocast("orgqr")
def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """``torch.orgqr``: :func:`householder_product`."""
    return householder_product(input, tau)


@outside_autocast("ormqr")
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """``torch.ormqr``: ``Q @ other`` (``other @ Q`` when not ``left``; ``Q^T`` when ``transpose``), with Q
    the full product of the Householder reflectors in ``(input, tau)`` (``geqrf``'s output)."""
    check_matrix("torch.ormqr", input, square=False, kernel="ormqr_cpu", rank_style="input", floating=False)
    m = input.shape[-2]
    size = other.shape[-2] if left else other.shape[-1]
    if size != m:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2]")
    if tau.shape[-1] != min(size, input.shape[-1]):
        raise RuntimeError(
            f"torch.ormqr: tau.shape[-1] must be equal to min(other.shape[{-2 if left else -1}], input.shape[-1])"
        )
    Q = _q_from_reflectors(_reflectors_of(input, tau.shape[-1]), tau, m, input)
    if transpose:
        Q = Q.mT
    return matmul(Q, other) if left else matmul(other, Q)


# ---------------------------------------------------------------- least squares (onnxnn.linalg.lstsq)


def _apply_reflectors(vectors: Tensor, tau: Tensor, B: Tensor, transpose: bool) -> Tensor:
    """``Q^T B`` (``transpose``) or ``Q B`` with ``Q = H_0 H_1 ... H_{k-1}``, one reflection at a time
    (LAPACK's ``ormqr``: Q itself is never formed)."""
    k = vectors.shape[-1]
    for j in range(k) if transpose else range(k - 1, -1, -1):
        v = vectors.select(-1, j).unsqueeze(-1)  # (..., m, 1)
        t = tau.narrow(-1, j, 1).unsqueeze(-1)  # (..., 1, 1)
        B = B - matmul(v * t, matmul(v.mT, B))
    return B


def _padded_rows(X: Tensor, rows: int) -> Tensor:
    """X (..., k, r) with zero rows appended up to ``rows``."""
    missing = rows - X.shape[-2]
    return X if missing == 0 else cat([X, X.new_zeros(tuple(X.shape[:-2]) + (missing, X.shape[-1]))], -2)


def full_rank_least_squares(A: Tensor, B: Tensor) -> tuple:
    """LAPACK's ``gels`` (A of full rank assumed): ``(X, residuals)``.

    m >= n: ``X = R^-1 (Q^T B)[:n]`` and the residuals ``sum((Q^T B)[n:]^2)`` per column (None when
    m == n). m < n: the minimum-norm solution ``X = Q R^-T B`` of ``A^T = Q R``. A rank-deficient A
    gives inf/NaN.
    """
    m, n = A.shape[-2], A.shape[-1]
    if m >= n:
        R, vectors, tau, _ = _householder(A)
        projected = _apply_reflectors(vectors, tau, B, transpose=True)  # Q^T B (..., m, r)
        X = solve_triangular(R.narrow(-2, 0, n), projected.narrow(-2, 0, n), upper=True)
        rest = projected.narrow(-2, n, m - n)
        return X, ((rest * rest).sum(-2) if m > n else None)
    R, vectors, tau, _ = _householder(A.mT)
    y = solve_triangular(R.narrow(-2, 0, m).mT, B, upper=False)  # (..., m, r)
    return _apply_reflectors(vectors, tau, _padded_rows(y, n), transpose=False), None


def pivoted_least_squares(A: Tensor, B: Tensor, rcond: float) -> tuple:
    """LAPACK's ``gelsy``: the minimum-norm least-squares solution and the effective rank, ``(X, rank)``.

    ``A P = Q R`` by Householder QR with column pivoting; the rank r is the number of leading
    diagonal entries with ``|R_ii| > rcond * |R_00|`` (gelsy estimates the condition number of the
    leading block incrementally instead: the two agree but for values at the threshold). The rows
    of ``R`` and ``Q^T B`` from r on are dropped, and the complete orthogonal factorization
    ``R[:r] = T^T Z^T`` (Householder QR of ``R[:r]^T``, LAPACK's ``tzrzf``) gives the solution of
    least norm, ``X = P Z [T[:r, :r]^-T (Q^T B)[:r]; 0]``. The gradient is that of this function
    with the rank held: for a full-rank A the solution's derivative, PyTorch's; for a rank-deficient
    A, PyTorch differentiates ``pinv(A) @ B`` instead (as the SVD drivers' gradient is here), which
    differs in A's gradient.
    """
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    R, vectors, tau, permutation = _householder(A, pivot=True)
    R = R.narrow(-2, 0, k)  # (..., k, n)
    projected = _apply_reflectors(vectors, tau, B, transpose=True).narrow(-2, 0, k)  # (Q^T B)[:k]
    magnitudes = R.diagonal(0, -2, -1).abs()  # (..., k), not increasing
    kept = magnitudes.gt(magnitudes.narrow(-1, 0, 1) * rcond)
    # the leading run of kept entries, as gelsy stops at the first that fails (rounding aside, it is all of them)
    leading = (~kept).to(dtypes.int64).cumsum(-1).eq(0)
    rank = leading.to(dtypes.int64).sum(-1)
    rows_kept = leading.unsqueeze(-1)  # (..., k, 1)
    zero = constant_like(0.0, A)
    T, z_vectors, z_tau, _ = _householder(where(rows_kept, R, zero).mT)  # R[:r]^T = Z T, (..., n, k)
    # T is zero from row and column r on: ones on that part of the diagonal make T^T w = c solvable,
    # with w zero there (c is)
    T = where(mask_like(np.eye(k, dtype=bool), A) & ~rows_kept, constant_like(1.0, A), T.narrow(-2, 0, k))
    w = solve_triangular(T.mT, where(rows_kept, projected, zero), upper=False)  # (..., k, r)
    y = _apply_reflectors(z_vectors, z_tau, _padded_rows(w, n), transpose=False)
    return matmul(permutation, y), rank


# ---------------------------------------------------------------- matrix exponential

_TAYLOR_DEGREE = {"float32": 10, "float64": 18}  # 1/(d+1)! below the unit roundoff for ||X|| <= 1
_MAX_SQUARINGS = 64  # ||A|| up to 2^64: exp overflows float64 long before, unless A is (nearly) nilpotent


@outside_autocast()
def matrix_exp(A: Tensor) -> Tensor:
    """``torch.linalg.matrix_exp``: ``exp(A)`` by scaling and squaring.

    A is scaled by ``2^-s`` with s the least integer making its 1-norm at most 1 (computed in the
    graph, so no value is read at the call), a Taylor polynomial of degree 18 (float64) or 10
    (float32) is evaluated by Horner's rule, and the result is squared s times: a fixed chain of
    64 conditional squarings, each kept only where its index is below s.

    Example::

        >>> onnxnn.linalg.matrix_exp(onnxnn.tensor([[0.0, 1.0], [0.0, 0.0]]))
        tensor([[1., 1.],
                [0., 1.]])
    """
    check_matrix("linalg.matrix_exp", A, half_precision=True)
    if A.dtype not in (dtypes.float32, dtypes.float64):  # PyTorch takes half precision too: computed in float32
        return matrix_exp(A.to(dtypes.float32)).to(A.dtype)
    n = A.shape[-1]
    if n == 0:
        return A.clone()  # the exponential of an empty matrix is empty
    norm = A.abs().sum(-2).amax(-1, keepdim=True).unsqueeze(-1)  # (..., 1, 1): the 1-norm
    log_norm = (norm.detach() + constant_like(1e-300 if A.dtype.name == "float64" else 1e-30, A)).log()
    squarings = (log_norm / math.log(2.0)).ceil().clamp(0, _MAX_SQUARINGS)  # (..., 1, 1)
    X = A * (-squarings * math.log(2.0)).exp()
    identity = eye_like(n, A)
    if n == 1:
        return A.exp()
    result = identity
    for degree in range(_TAYLOR_DEGREE[A.dtype.name], 0, -1):
        # 1/degree as a full (n, n) constant, not a scalar: onnxruntime's optimizer fuses a MatMul
        # scaled by a scalar into FusedMatMul, whose alpha attribute is a float32, which costs float64
        # results 8 digits.
        result = identity + matmul(X, result) * constant_like(np.full((n, n), 1.0 / degree), A)
    zero = constant_like(0.0, A)
    for step in range(_MAX_SQUARINGS):
        active = squarings.gt(step)
        # Matrices whose squarings are done square a zero instead: a large result squared again could
        # overflow, and the zero cotangent of the branch not taken would meet inf (0 * inf = NaN).
        squared = where(active, result, zero)
        result = where(active, matmul(squared, squared), result)
    return result
