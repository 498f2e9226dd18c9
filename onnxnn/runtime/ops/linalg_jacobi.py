"""Singular value and symmetric eigen decompositions by Jacobi rotations, unrolled at record time:
svd, svdvals, eigh, eigvalsh, and what is defined by singular values (pinverse, nuclear_norm,
matrix_rank, cond, the 2-norms, lstsq's SVD drivers).

Both are the cyclic Jacobi method on the Gram matrix: the symmetric eigenproblem rotates ``A`` itself
(``A <- R^T A R``), the SVD rotates the columns of ``A`` until they are orthogonal (one-sided Jacobi,
Hestenes: ``U <- U R``, the Gram matrix recomputed from U each round, so the squared condition number
of ``A^T A`` never enters). A round rotates ``n/2`` disjoint column pairs at once (the round-robin
"chess tournament" ordering), so a sweep over all pairs is ``n - 1`` rounds of a few matrix
products, each rotation matrix assembled from fixed one-hot placements.

A fixed number of sweeps replaces LAPACK's "until converged": Jacobi converges quadratically once
the off-diagonal mass is small (Forsythe-Henrici; in practice 5-8 sweeps for double precision at the
sizes this suits), and ``SWEEPS`` leaves a margin. The graph grows as ``sweeps * n`` rounds, so the
decompositions suit small matrices (n up to a few dozen). The signs of singular vectors and
eigenvectors are the algorithm's, as LAPACK's are its own: only sign-invariant uses (``U S V^T``,
projections) match PyTorch exactly. Gradients are the exact derivatives of the unrolled rotations,
which converge with the values where the singular values (eigenvalues) are distinct, but for two
that PyTorch defines in closed form: the singular values' own, ``U diag(G) V^T`` (finite where one
is 0), and the symmetric gradient of eigh's input.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ._common import Tensor, with_closed_form_gradient
from .elementwise import where
from .indexing import take_along_dim
from .linalg import matmul
from .linalg_lu import (
    check_matrix,
    constant_like,
    eye_like,
    grad_wanted,
    symmetric_gradient,
    torch_dtype_name,
)
from .linalg_qr import linalg_qr, power_of_two_scale
from .reduce import MATRIX_NORMS, root
from .shape import cat
from .sorting import topk
from ..tensor import outside_autocast

__all__ = ["nuclear_norm", "pinverse", "svd"]

SvdResult = namedtuple("svd", ["U", "S", "V"])
LinalgSvdResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])

# Sweeps per dtype: 6 (float64) and 4 (float32) reach the unit roundoff on random and graded matrices
# up to n = 16, measured against LAPACK; two more are margin. Each costs n - 1 rounds of graph.
SWEEPS = {"float32": 6, "float64": 8}


def _rounds(n: int) -> list:
    """The round-robin schedule: ``n - 1`` rounds (n even; one more player sits out when odd), each a
    list of disjoint pairs (p, q) covering every pair once per sweep."""
    players = list(range(n + (n % 2)))
    count = len(players)
    rounds = []
    for _ in range(count - 1):
        pairs = [(players[i], players[count - 1 - i]) for i in range(count // 2)]
        rounds.append([(min(p, q), max(p, q)) for p, q in pairs if p < n and q < n])
        players = [players[0], players[-1]] + players[1:-1]
    return [pairs for pairs in rounds if pairs]


class _Round:
    """The fixed placements of one round's k disjoint pairs (p, q), as matrices on flattened (n*n) planes.

    ``reads`` (n*n, 2k) takes ``d = G[q, q] - G[p, p]`` and ``g = G[p, q]`` of each pair from the flat Gram
    matrix; ``writes`` (2k, n*n) places ``c - 1`` on (p, p) and (q, q), ``s`` on (p, q) and ``-s`` on (q, p),
    so the rotation is ``I + reshape([c - 1, s] @ writes)``: a few products instead of a scatter.
    """

    __slots__ = ("k", "reads", "writes")

    def __init__(self, pairs: list, n: int, like: Tensor):
        k = len(pairs)
        reads, writes = np.zeros((n * n, 2 * k)), np.zeros((2 * k, n * n))
        for column, (p, q) in enumerate(pairs):
            reads[q * n + q, column] += 1.0
            reads[p * n + p, column] -= 1.0
            reads[p * n + q, k + column] = 1.0
            writes[column, p * n + p] = writes[column, q * n + q] = 1.0
            writes[k + column, p * n + q] = 1.0
            writes[k + column, q * n + p] = -1.0
        self.k = k
        self.reads, self.writes = constant_like(reads, like), constant_like(writes, like)


def _rotation(gram: Tensor, round_: _Round, like: Tensor) -> Tensor:
    """The rotation (..., n, n) zeroing ``gram[p, q]`` of every pair of the round: ``R^T gram R``.

    ``t = tan(theta) = 2 g sign(d) / (|d| + sqrt(d^2 + 4 g^2))`` with ``d = gram[q, q] - gram[p, p]`` and
    ``g = gram[p, q]`` (the smaller root, written without dividing by g, so it is smooth where g -> 0);
    pairs already orthogonal with equal norms (d = g = 0) are not rotated.
    """
    n = gram.shape[-1]
    batch = tuple(gram.shape[:-2])
    read = matmul(gram.reshape(batch + (n * n,)), round_.reads)  # (..., 2k)
    d, g = read.narrow(-1, 0, round_.k), read.narrow(-1, round_.k, round_.k)
    twice_g = where(d.lt(0.0), -2.0 * g, 2.0 * g)  # 2 g sign(d), sign(0) = +1
    radicand = d * d + twice_g * twice_g
    still = radicand.eq(0.0)
    root = where(still, constant_like(1.0, like), radicand).sqrt()
    t = twice_g / (d.abs() + root)  # 0 where still: twice_g is 0 there
    c = (t * t + 1.0).rsqrt()
    placed = matmul(cat([c - 1.0, c * t], -1), round_.writes)  # (..., n*n)
    return placed.reshape(batch + (n, n)) + eye_like(n, like)


def _sweeps(like: Tensor) -> int:
    return SWEEPS[like.dtype.name]


def _one_sided_jacobi(A: Tensor) -> tuple:
    """``(U S, V)`` with orthogonal columns of ``U S = A V`` (A (..., m, n), m >= n)."""
    n = A.shape[-1]
    work, V = A, None
    schedule = [_Round(pairs, n, A) for pairs in _rounds(n)]
    for _ in range(_sweeps(A)):
        for round_ in schedule:
            rotation = _rotation(matmul(work.mT, work), round_, A)
            work = matmul(work, rotation)
            V = rotation if V is None else matmul(V, rotation)
    return work, (V if V is not None else eye_like(n, A).expand(tuple(A.shape[:-2]) + (n, n)))


def _sorted_columns(values: Tensor, columns: list, descending: bool) -> tuple:
    """values (..., k) sorted, and each matrix of ``columns`` with its last-dim columns in that order."""
    ordered, order = topk(values, values.shape[-1], -1, largest=descending)
    index = order.unsqueeze(-2)  # (..., 1, k): the same order for every row
    return ordered, [take_along_dim(matrix, index, -1) for matrix in columns]


def _thin_svd(A: Tensor) -> tuple:
    """U (..., m, k), S (..., k) descending, V (..., n, k), k = min(m, n).

    S's gradient is the closed form ``U diag(G) V^T`` (PyTorch's, when only S is differentiated):
    it needs no division, so a zero singular value gives no NaN, where the derivative of the
    rotations meets ``sqrt``'s infinite slope at 0, and repeated singular values need no converged
    rotations. Its second derivative goes through U and V, whose gradients are the rotations'.
    """
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        U, S, V = _thin_svd(A.mT)
        return V, S, U
    # The rotations run on A scaled by a power of two (exact), as they take fourth powers of its entries
    scale = power_of_two_scale(A)
    rotated, V = _one_sided_jacobi(A * scale)
    norms = root((rotated * rotated).sum(-2), 2)  # column norms: the singular values (gradient 0 where 0)
    U = rotated / where(norms.eq(0.0), constant_like(1.0, A), norms).unsqueeze(-2)
    S = norms / scale.squeeze(-1)
    S, (U, V) = _sorted_columns(S, [U, V], descending=True)
    U = _orthonormalized(U)
    if grad_wanted(A):
        # d s_i = u_i^T dA v_i: the gradient is U diag(G) V^T, with U and V as computed (their history
        # kept, so a second derivative has the terms through them, as PyTorch's svd_backward does).
        S = with_closed_form_gradient(S, (A,), (U, V), _singular_value_gradient, "LinalgSvdBackward0")
    return U, S, V


def _singular_value_gradient(G: Tensor, U: Tensor, V: Tensor) -> tuple:
    return (matmul(U * G.unsqueeze(-2), V.mT),)


def _orthonormalized(U: Tensor) -> Tensor:
    """U's columns made exactly orthonormal by Householder QR, signs kept (``Q diag(sign(R_jj))``).

    A column of a zero singular value is zero after the normalization (and one of a tiny singular
    value is mostly rounding): QR replaces it by a unit vector orthogonal to the ones before it, as
    LAPACK's U has. Where U is already orthonormal, QR returns it (R = I), derivative included.
    """
    Q, R = linalg_qr(U)
    diagonal = R.diagonal(0, -2, -1)
    signs = where(diagonal.lt(0.0), constant_like(-1.0, U), constant_like(1.0, U))
    return Q * signs.unsqueeze(-2)


def _complete_basis(U: Tensor) -> Tensor:
    """Orthonormal columns (..., m, k) extended to a square orthogonal matrix, by Householder QR."""
    m, k = U.shape[-2], U.shape[-1]
    if m == k:
        return U
    Q, _ = linalg_qr(U, "complete")
    return cat([U, Q.narrow(-1, k, m - k)], -1)


def _check_no_driver(driver) -> None:
    """PyTorch's refusal of ``driver=`` (cuSOLVER's choice of algorithm) for inputs not on CUDA."""
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."
        )


@outside_autocast("linalg_svd")
def linalg_svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> LinalgSvdResult:
    """``torch.linalg.svd``: ``A = U diag(S) Vh``, S descending, by one-sided Jacobi rotations.

    Example::

        >>> U, S, Vh = onnxnn.linalg.svd(onnxnn.tensor([[3.0, 0.0], [4.0, 5.0]]))
        >>> S
        tensor([6.7082, 2.2361])
    """
    check_matrix("linalg.svd", A, square=False, kernel="linalg_svd_cpu")
    _check_no_driver(driver)
    U, S, V = _thin_svd(A)
    if full_matrices:
        U, V = _complete_basis(U), _complete_basis(V)
    return LinalgSvdResult(U, S, V.mT)


@outside_autocast("linalg_svdvals")
def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:
    """``torch.linalg.svdvals``: the singular values, descending."""
    check_matrix("linalg.svd", A, square=False, kernel="linalg_svd_cpu")
    _check_no_driver(driver)
    return _thin_svd(A)[1]


@outside_autocast("svd")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> SvdResult:
    """``torch.svd``: ``(U, S, V)`` with ``input = U diag(S) V^T`` (V, not ``Vh``); ``some=False`` completes
    U and V to square matrices; ``compute_uv=False`` returns zero-filled square U and V, as PyTorch."""
    if input.dim() < 2:
        raise RuntimeError(
            f"linalg.svd: input should have at least 2 dimensions, but has {input.dim()} dimensions instead"
        )
    check_matrix("linalg.svd", input, square=False, kernel="linalg_svd_cpu")
    m, n = input.shape[-2], input.shape[-1]
    batch = tuple(input.shape[:-2])
    if not compute_uv:
        S = _thin_svd(input)[1]
        return SvdResult(input.new_zeros(batch + (m, m)), S, input.new_zeros(batch + (n, n)))
    U, S, V = _thin_svd(input)
    if not some:
        U, V = _complete_basis(U), _complete_basis(V)
    return SvdResult(U, S, V)


def _symmetric_jacobi(A: Tensor) -> tuple:
    """Eigenvalues (..., n) and eigenvectors (..., n, n) of the symmetric A, by two-sided Jacobi, run on A
    scaled by a power of two (exact), as the rotations square its entries."""
    n = A.shape[-1]
    scale = power_of_two_scale(A)
    work, V = A * scale, None
    schedule = [_Round(pairs, n, A) for pairs in _rounds(n)]
    for _ in range(_sweeps(A)):
        for round_ in schedule:
            rotation = _rotation(work, round_, A)
            work = matmul(matmul(rotation.mT, work), rotation)
            V = rotation if V is None else matmul(V, rotation)
    V = V if V is not None else eye_like(n, A).expand(tuple(A.shape))
    return work.diagonal(0, -2, -1) / scale.squeeze(-1), V


def _symmetric_from(A: Tensor, UPLO: str) -> Tensor:
    if UPLO not in ("L", "U"):
        raise RuntimeError("Expected UPLO argument to be 'L' or 'U', but got " + UPLO)
    if UPLO == "L":
        return A.tril() + A.tril(-1).mT
    return A.triu() + A.triu(1).mT


@outside_autocast("linalg_eigh")
def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """``torch.linalg.eigh``: eigenvalues (ascending) and orthonormal eigenvectors of the symmetric
    matrix read from A's lower (``UPLO='L'``) or upper triangle, by cyclic Jacobi rotations.

    The gradient is PyTorch's symmetric one: the same in ``A[i, j]`` and ``A[j, i]`` (half of what
    the triangle read would get alone; both agree on symmetric perturbations)."""
    check_matrix("linalg.eigh", A, kernel="linalg_eigh_cpu", floating=False)
    values, vectors = _symmetric_jacobi(symmetric_gradient(A, _symmetric_from(A, UPLO)))
    values, (vectors,) = _sorted_columns(values, [vectors], descending=False)
    return EighResult(values, vectors)


@outside_autocast("linalg_eigvalsh")
def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """``torch.linalg.eigvalsh``: the eigenvalues of the symmetric A, ascending."""
    return eigh(A, UPLO).eigenvalues


# ---------------------------------------------------------------- defined by singular values


def _default_rtol(A: Tensor) -> float:
    return float(np.finfo(A.dtype.numpy_dtype).eps) * max(A.shape[-2], A.shape[-1])


def _tolerance(magnitudes: Tensor, atol, rtol, A: Tensor) -> Tensor:
    """PyTorch's ``max(atol, rtol * sigma_max)`` over singular values (or eigenvalue magnitudes) (..., k),
    rtol defaulting to eps * max(m, n), or to 0 where atol is positive. atol and rtol are numbers or
    tensors broadcasting against the batch dims (one tolerance per matrix)."""
    if rtol is None:
        default = _default_rtol(A)
        if isinstance(atol, Tensor):
            rtol = where(atol.gt(0), constant_like(0.0, A), constant_like(default, A))
        else:
            rtol = default if atol is None or atol <= 0 else 0.0
    largest = magnitudes.amax(-1, keepdim=True) if magnitudes.shape[-1] else magnitudes.sum(-1, keepdim=True)
    tolerance = largest * _per_matrix(rtol, A)
    if atol is not None:
        tolerance = tolerance.maximum(_per_matrix(atol, A))
    return tolerance  # (..., 1)


def _per_matrix(value, A: Tensor) -> Tensor:
    """A tolerance against values (..., k): a number, or a tensor over the batch dims given a last dim of 1."""
    if isinstance(value, Tensor):
        return value.to(A.dtype).unsqueeze(-1)
    return constant_like(float(value), A)


def _reciprocal_above(values: Tensor, keep: Tensor, like: Tensor) -> Tensor:
    """``1 / values`` where ``keep``, else 0, with a finite gradient everywhere."""
    safe = where(keep, values, constant_like(1.0, like))
    return where(keep, 1.0 / safe, constant_like(0.0, like))


def _hermitian_eigen(A: Tensor) -> tuple:
    """Eigenvalues and eigenvectors of the symmetric matrix in A's lower triangle, for ``hermitian=True``
    (PyTorch's eigh path: ``linalg.eigh``'s checks and symmetric gradient)."""
    check_matrix("linalg.eigh", A, kernel="linalg_eigh_cpu", floating=False)
    return _symmetric_jacobi(symmetric_gradient(A, _symmetric_from(A, "L")))


def _pseudoinverse_gradient(G: Tensor, A: Tensor, P: Tensor) -> tuple:
    """PyTorch's ``pinv_backward``: the adjoint of ``dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P``
    (Golub and Pereyra, for A of fixed rank) at ``P = A^+``, in ops on A and P, so it is differentiable again."""
    m, n = A.shape[-2], A.shape[-1]
    left = eye_like(m, A) - matmul(A, P)  # (..., m, m)
    right = eye_like(n, A) - matmul(P, A)  # (..., n, n)
    return (
        -matmul(matmul(P.mT, G), P.mT)
        + matmul(matmul(left, G.mT), matmul(P, P.mT))
        + matmul(matmul(P.mT, P), matmul(G.mT, right)),
    )


@outside_autocast()
def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """``torch.linalg.pinv``: the pseudoinverse ``V diag(1/S) U^T``, singular values at or below
    ``max(atol, rtol * S_max)`` treated as zero.

    ``hermitian=True`` reads only A's lower triangle, as PyTorch's: ``V diag(1/w) V^T`` from the
    eigenvalues w of that symmetric matrix, those of magnitude at or below the tolerance dropped. Its
    gradient is PyTorch's ``pinv_backward`` at A (all of it, not symmetrized).
    """
    if A.dim() < 2 or A.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError(
            f"linalg.pinv({torch_dtype_name(A.dtype)}{{{list(A.shape)}}}): expected a tensor with 2 or "
            "more dimensions of float, double, cfloat or cdouble types"
        )
    if hermitian:
        values, vectors = _hermitian_eigen(A)
        magnitudes = values.abs()
        reciprocal = _reciprocal_above(values, magnitudes.gt(_tolerance(magnitudes, atol, rtol, A)), A)
        P = matmul(vectors * reciprocal.unsqueeze(-2), vectors.mT)
        if not grad_wanted(A):
            return P
        return with_closed_form_gradient(P, (A,), (A, P), _pseudoinverse_gradient, "LinalgPinvBackward0")
    U, S, V = _thin_svd(A)
    reciprocal = _reciprocal_above(S, S.gt(_tolerance(S, atol, rtol, A)), A)
    return matmul(V * reciprocal.unsqueeze(-2), U.mT)


def svd_least_squares(A: Tensor, B: Tensor, rcond: float, residuals: bool) -> tuple:
    """LAPACK's ``gelsd``/``gelss``: ``(X, rank, S, residuals)``, X the minimum-norm least-squares solution
    ``V diag(1/s) U^T B`` over the singular values ``s > rcond * s_max`` (the others treated as zero).

    With ``residuals``, the squared norms per column of ``B - U U^T B``: ``|A X - B|^2`` when A has full
    column rank (the only case where PyTorch returns them), else None.
    """
    U, S, V = _thin_svd(A)
    kept = S.gt(S.narrow(-1, 0, 1) * rcond)
    projected = matmul(U.mT, B)  # (..., k, r)
    X = matmul(V, _reciprocal_above(S, kept, A).unsqueeze(-1) * projected)
    squares = None
    if residuals:
        rest = B - matmul(U, projected)
        squares = (rest * rest).sum(-2)
    return X, kept.to(dtypes.int64).sum(-1), S, squares


@outside_autocast("pinverse")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: :func:`pinv` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


@outside_autocast("linalg_matrix_rank")
def matrix_rank(A: Tensor, tol=None, hermitian: bool = False, *, atol=None, rtol=None) -> Tensor:
    """``torch.linalg.matrix_rank``: the number of singular values above ``max(atol, rtol * S_max)`` (int64).

    ``tol`` is PyTorch's older overload ``matrix_rank(A, tol, hermitian=False)``: ``atol=tol, rtol=0``.
    ``hermitian=True`` counts the eigenvalue magnitudes of the symmetric matrix in A's lower triangle.
    """
    if tol is not None:
        if atol is not None or rtol is not None:
            raise TypeError("linalg_matrix_rank() received an invalid combination of arguments: tol with atol or rtol")
        atol, rtol = tol, 0.0
    check_matrix("torch.linalg.matrix_rank", A, square=False, argument="input", floating=False, half_precision=True)
    if A.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    S = _hermitian_eigen(A)[0].abs() if hermitian else _thin_svd(A)[1]
    return S.gt(_tolerance(S, atol, rtol, A)).to(dtypes.int64).sum(-1)


@outside_autocast()
def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """``torch.nuclear_norm``: the sum of the singular values over the two dims ``dim`` (default the last two
    of a matrix)."""
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    return svd_matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)


@outside_autocast()
def svd_matrix_norm(A: Tensor, ord, dim, keepdim: bool) -> Tensor:
    """The matrix norms of singular values: 2 (largest), -2 (smallest), 'nuc' (their sum)."""
    check_matrix("linalg.matrix_norm", A, square=False, kernel="linalg_svd_cpu")
    rows, columns = [axis % A.dim() for axis in dim]
    rest = [axis for axis in range(A.dim()) if axis not in (rows, columns)]
    S = _thin_svd(A.permute(rest + [rows, columns]))[1]
    if ord == "nuc" or (ord == 2 and S.shape[-1] == 0):
        result = S.sum(-1)  # an empty matrix's norm is 0, as PyTorch's
    elif ord == 2:
        # amax, not the first singular value: a repeated largest one shares the gradient evenly, as
        # PyTorch's, instead of giving it all to whichever singular pair the iteration returned first.
        result = S.amax(-1)
    elif S.shape[-1] == 0:
        raise IndexError("amin(): Expected reduction dim -1 to have non-zero size.")  # PyTorch's for ord=-2
    else:
        result = S.amin(-1)
    if keepdim:
        for axis in sorted((rows, columns)):
            result = result.unsqueeze(axis)
    return result


MATRIX_NORMS["nuc"] = svd_matrix_norm  # torch.norm(x, p="nuc")


@outside_autocast("linalg_cond")
def svd_cond(A: Tensor, p=None) -> Tensor:
    """``torch.linalg.cond`` for p in (None, 2): ``S_max / S_min``; for -2: ``S_min / S_max``."""
    if A.dim() < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    check_matrix("linalg.cond", A, square=False, kernel="linalg_svd_cpu")
    S = _thin_svd(A)[1]
    largest, smallest = S.select(-1, 0), S.select(-1, S.shape[-1] - 1)
    return smallest / largest if p == -2 else largest / smallest
