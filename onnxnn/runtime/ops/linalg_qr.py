"""Householder QR and its LAPACK-style pieces (geqrf, orgqr/householder_product, ormqr), least
squares through QR, and the matrix exponential.

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
from ._common import Tensor
from .elementwise import where
from .linalg import matmul
from .linalg_lu import (
    check_matrix,
    constant_like,
    eye_like,
    mask_like,
    solve_triangular,
    torch_dtype_name,
)
from .shape import stack
from ..tensor import outside_autocast

# torch's top-level names; torch.linalg's (linalg_qr, householder_product, ...) are read by onnxnn.linalg
__all__ = ["geqrf", "matrix_exp", "orgqr", "ormqr", "qr"]

QRResult = namedtuple("qr", ["Q", "R"])
GeqrfResult = namedtuple("geqrf", ["a", "tau"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _householder(A: Tensor) -> tuple:
    """Householder triangularization of A (..., m, n).

    Returns ``(R (..., m, n) upper trapezoidal, reflectors (..., m, k) with v[j] = 1 and zeros above,
    tau (..., k))``.
    """
    m, n = A.shape[-2], A.shape[-1]
    rows = np.arange(m)
    work = A
    vectors, taus = [], []
    for j in range(min(m, n)):
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
    if not vectors:
        return A, A.new_zeros(tuple(A.shape[:-2]) + (m, 0)), A.new_zeros(tuple(A.shape[:-2]) + (0,))
    return work.triu(), stack(vectors, -1), stack(taus, -1)


def _q_from_reflectors(vectors: Tensor, tau: Tensor, m: int, like: Tensor) -> Tensor:
    """``Q = H_0 H_1 ... H_{k-1}`` (..., m, m) from reflectors (..., m, k) and tau (..., k)."""
    Q = eye_like(m, like).expand(tuple(vectors.shape[:-2]) + (m, m))
    for j in range(vectors.shape[-1]):
        v = vectors.select(-1, j).unsqueeze(-1)  # (..., m, 1)
        t = tau.narrow(-1, j, 1).unsqueeze(-1)  # (..., 1, 1)
        Q = Q - matmul(matmul(Q, v) * t, v.mT)
    return Q


@outside_autocast()
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
    R, vectors, tau = _householder(A)
    if mode == "r":
        return QRResult(A.new_zeros(0), R.narrow(-2, 0, k))
    Q = _q_from_reflectors(vectors, tau, m, A)
    if mode == "complete":
        return QRResult(Q, R)
    return QRResult(Q.narrow(-1, 0, k), R.narrow(-2, 0, k))


@outside_autocast()
def qr(A: Tensor, some: bool = True) -> QRResult:
    """``torch.qr`` (deprecated in PyTorch for :func:`linalg.qr`): ``some`` is ``mode='reduced'``."""
    return linalg_qr(A, "reduced" if some else "complete")


@outside_autocast()
def geqrf(A: Tensor) -> GeqrfResult:
    """``torch.geqrf``: LAPACK's packed QR: R on and above the diagonal, the Householder vectors
    (without their unit first entry) below it, and their scale factors ``tau`` (..., min(m, n))."""
    check_matrix("torch.geqrf", A, square=False, kernel="geqrf_cpu", rank_style="input", floating=False)
    R, vectors, tau = _householder(A)
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


@outside_autocast()
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


@outside_autocast()
def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """``torch.orgqr``: :func:`householder_product`."""
    return householder_product(input, tau)


@outside_autocast()
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """``torch.ormqr``: ``Q @ other`` (``other @ Q`` when not ``left``; ``Q^T`` when ``transpose``), with Q
    the full product of the Householder reflectors in ``(input, tau)`` (``geqrf``'s output)."""
    check_matrix("torch.ormqr", input, square=False, kernel="ormqr_cpu", rank_style="input", floating=False)
    m = input.shape[-2]
    size = other.shape[-2] if left else other.shape[-1]
    if size != m:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2]")
    Q = _q_from_reflectors(_reflectors_of(input, tau.shape[-1]), tau, m, input)
    if transpose:
        Q = Q.mT
    return matmul(Q, other) if left else matmul(other, Q)


@outside_autocast()
def linalg_lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> LstsqResult:
    """``torch.linalg.lstsq`` for full-rank A: the least-squares solution of ``A X = B`` (m >= n) or
    the minimum-norm one (m < n), through Householder QR.

    Only the solution is computed: as with PyTorch's default CPU driver ``'gelsy'``, ``residuals`` and
    ``singular_values`` are empty; ``rank`` (which needs the values) is empty too. Rank-deficient A
    (which ``gelsy`` handles by column pivoting) gives inf/NaN.
    """
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if A.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
            f"dtype {torch_dtype_name(A.dtype)} and other's dtype {torch_dtype_name(B.dtype)}"
        )
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = B.dim() == A.dim() - 1
    if vector:
        B = B.unsqueeze(-1)
    m, n = A.shape[-2], A.shape[-1]
    if B.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    if m >= n:
        Q, R = linalg_qr(A)
        X = solve_triangular(R, matmul(Q.mT, B), upper=True)
    else:  # minimum norm: A^T = Q R, X = Q R^-T B
        Q, R = linalg_qr(A.mT)
        X = matmul(Q, solve_triangular(R.mT, B, upper=False))
    if vector:
        X = X.squeeze(-1)
    empty = A.new_zeros(0)
    return LstsqResult(X, empty, A.new_zeros(0).long(), empty)


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
