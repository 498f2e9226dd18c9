"""Linear algebra by elimination: LU with partial pivoting, determinants, triangular and general
solves and inverses (torch.linalg's and the Tensor API's names); the Cholesky family, which shares
these helpers, is in ``linalg_cholesky.py``.

Matrix sizes are static at record time, so every factorization is unrolled over the columns into
standard ONNX ops: the pivot row is chosen by ArgMax over the column's magnitudes below the
diagonal (the first of equal ones, as LAPACK's ``idamax``), rows are swapped by a one-hot
permutation matrix, and a step's elimination is one rank-1 update. The recorded graph therefore
runs on both executors and exports to any ONNX runtime, and its gradient is the exact derivative of
the algorithm (differentiable wherever no pivot choice ties and no pivot is zero), higher-order
included; except where PyTorch defines the gradient otherwise (Cholesky's is symmetric, the
factor's of ``cholesky_solve`` a closed form): there the values come with the gradient of another
computation of them (``with_gradient_of``). LAPACK conventions are kept: pivots are int32 and
1-based, a zero pivot column is left unscaled (its multipliers are 0, as ``dgetf2`` leaves them),
and R/U diagonals keep their signs.

Errors that PyTorch raises from the values (a singular matrix for ``inv`` and ``solve``, a matrix
that is not positive-definite for ``cholesky``) cannot be raised at the call of a lazy op without
running the graph: as PyTorch's ``*_ex`` variants with ``check_errors=False``, the results then
hold inf or NaN (``lu_factor_ex``/``cholesky_ex`` also return the LAPACK ``info``).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ...errors import LinAlgError
from ...ir import dtypes
from ...ir.graph import static_constant
from ..grad_mode import is_grad_enabled
from ._common import Tensor, with_zero_gradients
from .elementwise import where
from .linalg import matmul
from .linalg_solve import solve
from .matrix import matrix_power as _positive_power
from .shape import cat, stack
from ..tensor import outside_autocast

# torch's top-level names; torch.linalg's (linalg_solve, linalg_lu, ...) are read by onnxnn.linalg
__all__ = [
    "det",
    "inverse",
    "logdet",
    "lu",
    "lu_solve",
    "lu_unpack",
    "matrix_power",
    "slogdet",
    "triangular_solve",
]

SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
LuFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LuFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LuUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])
LuResult = namedtuple("linalg_lu", ["P", "L", "U"])
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])

# ---------------------------------------------------------------- argument checks (PyTorch's words)


def torch_dtype_name(dtype) -> str:
    """The dtype as PyTorch's messages name it (Float, Double, Half, Long...)."""
    return dtypes.scalar_type_name(dtype)


def check_matrix(
    name: str,
    A: Tensor,
    *,
    square: bool = True,
    argument: str = "A",
    kernel: str | None = None,
    rank_style: str = "tensor",
    floating: bool = True,
    half_precision: bool = False,
) -> None:
    """PyTorch's checks of a (batch of) matrices, in its order and words.

    Args:
        name: the function as PyTorch's messages name it (``"linalg.det"``).
        kernel: the LAPACK kernel PyTorch dispatches to without a dtype check of its own: then other
            dtypes than float32/float64 raise its NotImplementedError (``"lu_cpu" not implemented
            for 'Half'``) instead of "Low precision dtypes not supported".
        rank_style: which of PyTorch's messages a 1-D input gets (``"tensor"``, ``"size"``, ``"input"``).
        floating: whether a non-floating dtype gets the "Expected a floating point" check first.
        half_precision: whether float16 and bfloat16 are accepted (matrix_exp).
    """
    if A.dim() < 2:
        if rank_style == "size":
            raise RuntimeError(f"{name}: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} instead")
        if rank_style == "input":
            raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
        raise RuntimeError(f"{name}: The input tensor {argument} must have at least 2 dimensions.")
    if floating and not A.dtype.is_floating_point:
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {torch_dtype_name(A.dtype)}"
        )
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"{name}: {argument} must be batches of square matrices, but they are "
            f"{A.shape[-2]} by {A.shape[-1]} matrices"
        )
    if A.dtype not in (dtypes.float32, dtypes.float64) and not half_precision:
        if kernel is not None:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_dtype_name(A.dtype)}'")
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {torch_dtype_name(A.dtype)}")


def check_same_dtype(name: str, A: Tensor, B: Tensor) -> None:
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"{name}: Expected A and B to have the same dtype, but found A of type "
            f"{torch_dtype_name(A.dtype)} and B of type {torch_dtype_name(B.dtype)} instead"
        )


def raise_for_info(info: Tensor, batched: bool, message, error=LinAlgError) -> None:
    """Reads LAPACK's ``info`` (the one place these functions read values: ``check_errors=True``) and
    raises PyTorch's error for the first failed matrix, ``message(info)`` prefixed with its batch index."""
    values = info.numpy(force=True).reshape(-1)
    failed = np.flatnonzero(values)
    if failed.size:
        first = int(failed[0])
        prefix = f"(Batch element {first}): " if batched else ""
        raise error(message(prefix, int(values[first])))


# ---------------------------------------------------------------- constants of a factorization


def constant_like(array, like: Tensor, dtype=None) -> Tensor:
    """A fixed array (a mask, an identity) in ``dtype`` (default ``like``'s) on ``like``'s device, embedded in
    the compiled graph."""
    dtype = dtype or like.dtype
    return Tensor._from_value(static_constant(np.asarray(array, dtype.numpy_dtype), dtype, like.device))


def mask_like(array, like: Tensor) -> Tensor:
    """A fixed bool array on ``like``'s device, embedded in the compiled graph."""
    return Tensor._from_value(static_constant(np.asarray(array, bool), dtypes.bool, like.device))


def eye_like(n: int, like: Tensor) -> Tensor:
    return constant_like(np.eye(n), like)


# ---------------------------------------------------------------- PyTorch's gradients for computed values


def grad_wanted(*tensors: Tensor) -> bool:
    """Whether a result computed from ``tensors`` is recorded for backward (grad mode on, an input requiring it)."""
    return is_grad_enabled() and any(tensor.requires_grad for tensor in tensors)


def with_gradient_of(value: Tensor, plain: Tensor) -> Tensor:
    """``value``'s values with ``plain``'s gradient (``value`` itself gets none), ``plain`` being ``value``
    computed another way: the way whose derivative PyTorch returns.

    ``plain - plain`` is exactly 0 where ``plain`` is finite, so ``value + (plain - settled)`` is ``value``
    exactly; where ``plain`` is not finite (the difference would be NaN) the result is ``value``, with
    no gradient.
    """
    value, settled = value.detach(), plain.detach()
    return where(settled.isfinite(), value + (plain - settled), value)


def symmetric_gradient(A: Tensor, read: Tensor) -> Tensor:
    """``read`` (A, or the symmetric matrix read from one of its triangles) with the gradient of
    ``(A + A^T) / 2``: the symmetric ``(G + G^T) / 2`` of what reaches it.

    PyTorch's functions of a symmetric matrix (cholesky, eigh) read one triangle but return that
    symmetric gradient, where the function of one triangle alone would put the off-diagonal part in
    the triangle read and zeros in the other. Both agree on symmetric perturbations.
    """
    if not grad_wanted(A):
        return read
    return with_gradient_of(read, A * 0.5 + A.mT * 0.5)  # halves first: A + A^T could overflow


def row_swap(rows: int, j: int, target: Tensor, like: Tensor) -> Tensor:
    """The permutation matrices (batched) swapping row ``j`` with row ``target`` ((..., 1) int64); being
    symmetric, ``X @ swap`` swaps X's columns ``j`` and ``target``.

    ``I - d d^T`` with ``d = e_j - e_p``: the identity when ``p == j`` (d = 0); every entry is exact.
    """
    one_hot = target.eq(constant_like(np.arange(rows), target)).to(like.dtype)  # (..., rows); target is int64
    difference = constant_like(np.eye(rows)[j], like) - one_hot
    return eye_like(rows, like) - difference.unsqueeze(-1) * difference.unsqueeze(-2)


# ---------------------------------------------------------------- LU with partial pivoting


def _lu_steps(A: Tensor, pivot: bool = True):
    """Gaussian elimination of ``A`` (..., m, n) with partial pivoting.

    Returns ``(packed LU, pivot rows (..., k) int64 0-based, row permutation matrix P_rows with
    P_rows @ A = L @ U, swap signs (..., k), zero-pivot info (..., ) int32)``.
    """
    m, n = A.shape[-2], A.shape[-1]
    steps = min(m, n)
    rows = np.arange(m)
    work, permutation = A, None
    pivots, signs = [], []
    info = None
    for j in range(steps):
        column = work.select(-1, j)  # (..., m)
        if pivot:
            # rows above j are out of the running: -1 is below every magnitude (NaN aside)
            candidates = where(mask_like(rows >= j, A), column.abs(), constant_like(-1.0, A))
            target = candidates.argmax(-1, keepdim=True)  # (..., 1)
            swap = row_swap(m, j, target, A)
            work = matmul(swap, work)
            permutation = swap if permutation is None else matmul(swap, permutation)
            signs.append(where(target.eq(j).squeeze(-1), constant_like(1.0, A), constant_like(-1.0, A)))
            pivots.append(target.squeeze(-1))
            column = work.select(-1, j)
        pivot_value = column.select(-1, j).unsqueeze(-1)  # (..., 1)
        is_zero = pivot_value.eq(0.0)
        # A zero pivot column is left as it is (its multipliers are 0, as LAPACK leaves them).
        safe_pivot = where(is_zero, constant_like(1.0, A), pivot_value)
        multipliers = where(mask_like(rows > j, A), column / safe_pivot, constant_like(0.0, A))  # (..., m)
        pivot_row = work.select(-2, j) * constant_like(np.arange(n) > j, A)  # (..., n), columns after j
        work = work - multipliers.unsqueeze(-1) * pivot_row.unsqueeze(-2)
        store = np.zeros((m, n), bool)
        store[j + 1 :, j] = True
        work = where(mask_like(store, A), multipliers.unsqueeze(-1), work)
        step_info = where(is_zero.squeeze(-1), constant_like(j + 1, A, dtypes.int32), constant_like(0, A, dtypes.int32))
        info = step_info if info is None else where(info.eq(0), step_info, info)
    if not pivot or steps == 0:
        batch = tuple(A.shape[:-2])
        identity = eye_like(m, A).expand(batch + (m, m))  # one per matrix, as PyTorch's P
        pivot_rows = constant_like(np.broadcast_to(np.arange(steps), batch + (steps,)), A, dtypes.int64)
        sign = constant_like(np.ones(batch + (steps,)), A)
        info = info if info is not None else constant_like(np.zeros(batch), A, dtypes.int32)
        return work, pivot_rows, identity, sign, info
    return work, stack(pivots, -1), permutation, stack(signs, -1), info


def _unpack_lu(packed: Tensor) -> tuple:
    """L (unit lower, (..., m, k)) and U (upper, (..., k, n)) of a packed LU."""
    m, n = packed.shape[-2], packed.shape[-1]
    k = min(m, n)
    lower = packed.tril(-1).narrow(-1, 0, k) + constant_like(np.eye(m, k), packed)
    upper = packed.narrow(-2, 0, k).triu()
    return lower, upper


@outside_autocast()
def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> LuFactorExResult:
    """``torch.linalg.lu_factor_ex``: packed LU, 1-based int32 pivots and LAPACK's ``info`` (the
    1-based index of the first zero pivot, 0 if none). ``check_errors=True`` reads the values."""
    check_matrix("torch.lu_factor_ex", A, square=False, kernel="lu_cpu", rank_style="size", floating=False)
    packed, pivot_rows, _, _, info = _lu_steps(A, pivot)
    if check_errors:
        raise_for_info(
            info,
            A.dim() > 2,
            lambda prefix, i: (
                f"torch.linalg.lu_factor_ex: {prefix}U[{i},{i}] is zero and using it on lu_solve would result in a "
                "division by zero. If you still want to perform the factorization, consider calling "
                "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
            ),
            RuntimeError,
        )
    return LuFactorExResult(packed, (pivot_rows + 1).to(dtypes.int32), info)


@outside_autocast()
def lu_factor(A: Tensor, *, pivot: bool = True) -> LuFactorResult:
    """``torch.linalg.lu_factor``: ``A = P L U`` packed as LAPACK's ``getrf`` (L below the diagonal with an
    implicit unit diagonal, U on and above it) and 1-based int32 row-swap pivots.

    Example::

        >>> LU, pivots = onnxnn.linalg.lu_factor(onnxnn.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> pivots
        tensor([2, 2], dtype=onnxnn.int32)
    """
    check_matrix("torch.lu_factor", A, square=False, kernel="lu_cpu", rank_style="size", floating=False)
    packed, pivot_rows, _, _, _ = _lu_steps(A, pivot)
    return LuFactorResult(packed, (pivot_rows + 1).to(dtypes.int32))


@outside_autocast()
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """``torch.lu``: ``(LU, pivots)`` or ``(LU, pivots, infos)`` as :func:`lu_factor_ex`."""
    packed, pivots, info = lu_factor_ex(A, pivot=pivot)
    return (packed, pivots, info) if get_infos else (packed, pivots)


@outside_autocast()
def linalg_lu(A: Tensor, *, pivot: bool = True) -> LuResult:
    """``torch.linalg.lu``: ``P, L, U`` with ``A = P @ L @ U``. ``pivot=False`` (which PyTorch runs on CUDA
    only) factors without row swaps and returns an empty P, as PyTorch."""
    check_matrix("linalg.lu", A, square=False, kernel="lu_cpu", rank_style="size", floating=False)
    packed, _, row_permutation, _, _ = _lu_steps(A, pivot)
    lower, upper = _unpack_lu(packed)
    return LuResult(row_permutation.mT if pivot else A.new_zeros(0), lower, upper)


def _permutation_from_pivots(pivots: Tensor, m: int, like: Tensor) -> Tensor:
    """The row permutation P_rows (P_rows @ A = L U) of 1-based sequential row-swap pivots."""
    targets = pivots.to(dtypes.int64) - 1
    permutation = None
    for j in range(pivots.shape[-1]):
        swap = row_swap(m, j, targets.narrow(-1, j, 1), like)
        permutation = swap if permutation is None else matmul(swap, permutation)
    if permutation is None:  # no pivots (min(m, n) == 0): an identity per matrix, as PyTorch's
        return eye_like(m, like).expand(tuple(like.shape[:-2]) + (m, m))
    return permutation


@outside_autocast()
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):
    """``torch.lu_unpack``: ``P, L, U`` from a packed LU and its pivots (``A = P @ L @ U``)."""
    if LU_pivots.dtype is not dtypes.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.")
    check_matrix("torch.lu_unpack", LU_data, square=False, rank_style="size", floating=False)
    m = LU_data.shape[-2]
    empty = LU_data.new_zeros(0)
    lower, upper = _unpack_lu(LU_data) if unpack_data else (empty, empty)
    permutation = _permutation_from_pivots(LU_pivots, m, LU_data).mT if unpack_pivots else empty
    return LuUnpackResult(permutation, lower, upper)


# ---------------------------------------------------------------- determinants


def _diagonal(A: Tensor) -> Tensor:
    return A.diagonal(0, -2, -1)


def _product_of_columns(x: Tensor) -> Tensor:
    """The product over the last dim as a chain of Mul (its gradient is exact where factors are 0)."""
    if x.shape[-1] == 0:
        return x.sum(-1) + 1.0  # the empty product
    result = x.select(-1, 0)
    for j in range(1, x.shape[-1]):
        result = result * x.select(-1, j)
    return result


@outside_autocast("Det")
def det(A: Tensor) -> Tensor:
    """``torch.linalg.det``: the determinant of each matrix, from its LU factorization.

    Example::

        >>> onnxnn.det(onnxnn.tensor([[2.0, 1.0], [1.0, 3.0]]))
        tensor(5.)
    """
    check_matrix("linalg.det", A, kernel="lu_cpu")
    packed, _, _, signs, _ = _lu_steps(A)
    return _product_of_columns(signs) * _product_of_columns(_diagonal(packed))


@outside_autocast("Det")
def slogdet(A: Tensor) -> SlogdetResult:
    """``torch.linalg.slogdet``: ``(sign, log|det|)``, which does not overflow where ``det`` does.
    A singular matrix gives ``(0, -inf)``. The sign requires grad, as PyTorch's, with a zero gradient
    (``Sign``'s)."""
    check_matrix("linalg.slogdet", A)
    packed, _, _, signs, _ = _lu_steps(A)
    diagonal = _diagonal(packed)
    sign = _product_of_columns(signs) * _product_of_columns(diagonal.sign())
    return SlogdetResult(sign, diagonal.abs().log().sum(-1))


@outside_autocast("Det")
def logdet(A: Tensor) -> Tensor:
    """``torch.logdet``: ``log(det(A))``: NaN where the determinant is negative, -inf where it is 0."""
    check_matrix("logdet", A)
    sign, logabsdet = slogdet(A)
    return where(sign.lt(0), constant_like(float("nan"), A), logabsdet)


# ---------------------------------------------------------------- triangular and general solves


def substitute(T: Tensor, B: Tensor, upper: bool, unit: bool) -> Tensor:
    """``T^-1 B`` for triangular T (..., n, n) and B (..., n, k), one row of the solution per step."""
    n = T.shape[-1]
    if n == 0:  # nothing to solve: T's gradient is empty zeros, as PyTorch's, rather than none
        return with_zero_gradients(B, (T,), "LinalgSolveTriangularBackward0")
    solved: dict = {}
    order = range(n - 1, -1, -1) if upper else range(n)
    for i in order:
        row = B.narrow(-2, i, 1)  # (..., 1, k)
        known = sorted(solved)
        if known:
            coefficients = T.narrow(-2, i, 1)  # (..., 1, n)
            start, length = known[0], len(known)
            x_known = cat([solved[j] for j in known], -2)  # (..., length, k)
            row = row - matmul(coefficients.narrow(-1, start, length), x_known)
        if not unit:
            row = row / T.narrow(-2, i, 1).narrow(-1, i, 1)
        solved[i] = row
    return cat([solved[i] for i in range(n)], -2)


def broadcast_batches(A: Tensor, B: Tensor) -> tuple:
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    if tuple(A.shape[:-2]) != batch:
        A = A.expand(batch + tuple(A.shape[-2:]))
    if tuple(B.shape[:-2]) != batch:
        B = B.expand(batch + tuple(B.shape[-2:]))
    return A, B


@outside_autocast()
def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """``torch.linalg.solve_triangular``: X with ``A X = B`` (``X A = B`` when not ``left``), reading only
    the triangle of A that ``upper`` names (its diagonal taken as ones when ``unitriangular``)."""
    check_matrix("linalg.solve_triangular", A, kernel="triangular_solve_cpu", floating=False)
    check_matrix("linalg.solve_triangular", B, square=False, argument="B")
    if B.dtype is not A.dtype:
        B = B.to(A.dtype)  # as PyTorch's: the result has A's dtype
    if not left:
        return solve_triangular(A.mT, B.mT, upper=not upper, unitriangular=unitriangular).mT
    if A.shape[-1] != B.shape[-2]:
        raise RuntimeError(
            f"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B "
            f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})"
        )
    A, B = broadcast_batches(A, B)
    return substitute(A, B, upper, unitriangular)


@outside_autocast("triangular_solve")
def triangular_solve(
    b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False, unitriangular: bool = False
) -> TriangularSolveResult:
    """``torch.triangular_solve``: ``(X, A)`` with ``op(A) X = b``, ``op`` the transpose when asked."""
    for argument, tensor in (("b", b), ("A", A)):
        if tensor.dim() < 2:
            raise RuntimeError(
                f"torch.triangular_solve: Expected {argument} to have at least 2 dimensions, but it "
                f"has {tensor.dim()} dimensions instead"
            )
    coefficient = A.mT if transpose else A
    solution = solve_triangular(coefficient, b, upper=upper != transpose, unitriangular=unitriangular)
    batch = tuple(solution.shape[:-2])
    return TriangularSolveResult(solution, A.expand(batch + tuple(A.shape[-2:])) if A.shape[:-2] != batch else A)


def _lu_solve_packed(packed: Tensor, row_permutation: Tensor, B: Tensor, adjoint: bool) -> Tensor:
    lower, upper = _unpack_lu(packed)
    if adjoint:  # A^T X = B with A = P^T L U: U^T L^T P X = B
        y = substitute(upper.mT, B, upper=False, unit=False)
        z = substitute(lower.mT, y, upper=True, unit=True)
        return matmul(row_permutation.mT, z)
    y = substitute(lower, matmul(row_permutation, B), upper=False, unit=True)
    return substitute(upper, y, upper=True, unit=False)


def _as_matrix_rhs(A: Tensor, B: Tensor) -> tuple:
    """PyTorch's rule: B is a (batch of) vector(s) when 1-D or when its shape is A's without the last dim."""
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    return (B.unsqueeze(-1), True) if vector else (B, False)


@outside_autocast("linalg_solve")
def linalg_solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """``torch.linalg.solve``: X with ``A X = B`` (``X A = B`` when not ``left``): onnxnn's Solve op (LAPACK on
    the kernels executor, Gauss-Jordan elimination with partial pivoting as standard ONNX elsewhere),
    whose gradient is the closed form ``dB = solve(A^T, G)``, ``dA = -dB X^T``.

    A singular A gives inf/NaN instead of PyTorch's error (the values are not read at the call).

    Example::

        >>> A = onnxnn.tensor([[3.0, 1.0], [1.0, 2.0]])
        >>> onnxnn.linalg.solve(A, onnxnn.tensor([9.0, 8.0]))
        tensor([2., 3.])
    """
    check_matrix("linalg.solve", A, kernel="lu_cpu")
    check_same_dtype("linalg.solve", A, B)
    B, vector = _as_matrix_rhs(A, B)
    if not left:
        # PyTorch's check, a vector B taken as a column: X A = B needs B's columns to be A's
        if B.shape[-1] != A.shape[-1]:
            raise RuntimeError(
                f"linalg.solve: Incompatible shapes of A and B for the equation XA = B "
                f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})"
            )
        if vector:
            raise RuntimeError(
                "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. "
                "In this case linalg.solve is equivalent to B / A.squeeze(-1)"
            )
        return linalg_solve(A.mT, B.mT).mT
    if B.shape[-2] != A.shape[-1]:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
            f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})"
        )
    A, B = broadcast_batches(A, B)
    X = solve(A, B)
    return X.squeeze(-1) if vector else X


@outside_autocast()
def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """``torch.linalg.lu_solve``: solves ``A X = B`` from ``lu_factor(A)`` (``A^T X = B`` when ``adjoint``,
    ``X A = B`` when not ``left``)."""
    check_matrix("linalg.lu_solve", LU, kernel="linalg.lu_solve_cpu")
    if not left:
        return linalg_lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    if B.shape[-2] != LU.shape[-1]:
        raise RuntimeError(
            f"linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B "
            f"({LU.shape[-2]}x{LU.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})"
        )
    LU_b, B_b = broadcast_batches(LU, B)
    permutation = _permutation_from_pivots(pivots, LU.shape[-2], LU)
    return _lu_solve_packed(LU_b, permutation, B_b, adjoint)


@outside_autocast("lu_solve")
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """``torch.lu_solve``: solves ``A x = b`` from ``torch.lu(A)``'s ``(LU_data, LU_pivots)``."""
    return linalg_lu_solve(LU_data, LU_pivots, b)


@outside_autocast("inverse")
def inverse(A: Tensor) -> Tensor:
    """``torch.linalg.inv``: the inverse of each square matrix (inf/NaN for a singular one), as ``solve(A, I)``:
    its gradient is the closed form ``-A^-T G A^-T``."""
    check_matrix("linalg.inv", A)
    return solve(A, eye_like(A.shape[-1], A).expand(tuple(A.shape)), "LinalgInvExBackward0")


@outside_autocast("linalg_inv_ex")
def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
    """``torch.linalg.inv_ex``: the inverse and LAPACK's ``info`` (the first zero pivot, 1-based; 0 if none)."""
    check_matrix("linalg.inv_ex", A)
    info = _lu_steps(A)[4]
    if check_errors:
        raise_for_info(
            info,
            A.dim() > 2,
            lambda prefix, i: (
                f"linalg.inv_ex: {prefix}The diagonal element {i} is zero, the inversion could not be completed "
                "because the input matrix is singular."
            ),
        )
    return InvExResult(solve(A, eye_like(A.shape[-1], A).expand(tuple(A.shape)), "LinalgInvExBackward0"), info)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``torch.linalg.matrix_power``: ``A^n`` by repeated squaring; ``A^0`` is the identity (with a zero
    gradient, as PyTorch's) and a negative n raises :func:`inverse` to ``-n``.

    Example::

        >>> onnxnn.linalg.matrix_power(onnxnn.tensor([[2.0, 0.0], [0.0, 4.0]]), -1)
        tensor([[0.5000, 0.0000],
                [0.0000, 0.2500]])
    """
    if n < 0:
        check_matrix("linalg.matrix_power", A, floating=False, half_precision=True)
        check_matrix("linalg.inv", A)
        return _positive_power(inverse(A), -n)
    result = _positive_power(A, n)
    if n == 0 and grad_wanted(A):
        # The identity, recorded as a function of A whose gradient is zero.
        return where(mask_like(np.ones(tuple(A.shape[-2:])), A), result, A)
    return result
