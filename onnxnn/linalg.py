"""``onnxnn.linalg``: torch.linalg's functions over onnxnn tensors, with PyTorch's signatures.

Factorizations are unrolled over the (static) matrix size into standard ONNX ops
(``runtime/ops/linalg_lu.py``, ``runtime/ops/linalg_qr.py``): they run on both executors, export to
plain ONNX, and are differentiable. ``solve`` and ``inv`` record onnxnn's ``Solve`` op
(``runtime/ops/linalg_solve.py``): LAPACK on the kernels executor, standard ONNX elsewhere, and
closed-form gradients. Data-dependent errors PyTorch raises after reading the values
(a singular matrix, one that is not positive-definite) become inf/NaN in the lazy result; the
``*_ex`` variants return LAPACK's ``info``.

The singular value and symmetric eigen decompositions (``svd``, ``svdvals``, ``eigh``, ``eigvalsh``,
and ``pinv``, ``matrix_rank``, ``cond``, the 2- and nuclear norms built on them) are cyclic Jacobi
rotations with a fixed number of sweeps (``runtime/ops/linalg_jacobi.py``): they suit small matrices.

Not provided: ``eig``/``eigvals`` (a real matrix's eigenvalues are complex, and onnxnn has no complex
dtypes) and the LDL factorization (``ldl_factor``, ``ldl_solve``: Bunch-Kaufman pivoting on 2x2 blocks).

Example::

    >>> A = onnxnn.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> onnxnn.linalg.solve(A, onnxnn.tensor([2.0, 1.0]))
    tensor([0.5000, 0.0000])
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .errors import LinAlgError
from .ir import dtypes
from .runtime import ops as _ops
from .runtime.ops import linalg_cholesky as _cholesky
from .runtime.ops import linalg_jacobi as _jacobi
from .runtime.ops import linalg_lu as _lu
from .runtime.ops import linalg_qr as _qr
from .runtime.ops.reduce import check_norm_dtype
from .runtime.tensor import Tensor, outside_autocast

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]

SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])

cholesky = _cholesky.linalg_cholesky
cholesky_ex = _cholesky.cholesky_ex
det = _lu.det
slogdet = _lu.slogdet
inv = _lu.inverse
inv_ex = _lu.inv_ex
solve = _lu.linalg_solve
solve_triangular = _lu.solve_triangular
lu = _lu.linalg_lu
lu_factor = _lu.lu_factor
lu_factor_ex = _lu.lu_factor_ex
lu_solve = _lu.linalg_lu_solve
qr = _qr.linalg_qr
householder_product = _qr.householder_product
matrix_exp = _qr.matrix_exp
matmul = _ops.matmul
matrix_power = _lu.matrix_power
svd = _jacobi.linalg_svd
svdvals = _jacobi.svdvals
eigh = _jacobi.eigh
eigvalsh = _jacobi.eigvalsh
pinv = _jacobi.pinv
matrix_rank = _jacobi.matrix_rank

_SVD_ORDERS = (2, -2, "nuc")
_COND_ORDERS = (None, 2, -2, 1, -1, float("inf"), -float("inf"), "fro", "nuc")


def cond(A: Tensor, p=None) -> Tensor:
    """``torch.linalg.cond``: the condition number ``norm(A, p) * norm(inv(A), p)``, as PyTorch computes it.

    p in (None, 2, -2): the ratio of the extreme singular values (then A need not be square).
    ``'nuc'``: ``sum(S) * sum(1 / S)``. 1, -1, inf, -inf, ``'fro'``: the norms of A and of its inverse,
    inf for a singular A (whose inverse PyTorch fills with inf; here: an inverse not all finite) and
    where the product is NaN (``0 * inf``).
    """
    if p not in _COND_ORDERS:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if A.dim() < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if isinstance(p, str):  # PyTorch checks the shape before the emptiness for these two only
        _lu.check_matrix(f"linalg.cond(ord={p})", A)
    if A.numel() == 0:
        return A.new_zeros(tuple(A.shape[:-2]))  # numpy leaves it undefined; PyTorch's is 0
    if p in (None, 2, -2):
        return _jacobi.svd_cond(A, p)
    _lu.check_matrix(f"linalg.cond(ord={p})", A)
    if p == "nuc":
        S = svdvals(A)
        return S.sum(-1) * S.reciprocal().sum(-1)
    inverse = inv(A)
    infinity = A.new_full((), float("inf"))
    inverse = _ops.where(inverse.isfinite().all(-1, keepdim=True).all(-2, keepdim=True), inverse, infinity)
    product = matrix_norm(A, p) * matrix_norm(inverse, p)
    return _ops.where(product.isnan(), infinity, product)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@outside_autocast("linalg_lstsq")
def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> LstsqResult:
    """``torch.linalg.lstsq``: the least-squares solution X of ``A X = B`` (A (..., m, n), B (..., m, k) or
    (..., m)), with PyTorch's CPU drivers:

    - ``'gelsy'`` (the default): Householder QR with column pivoting; the minimum-norm solution over
      the effective rank (the leading diagonal entries of R above ``rcond`` times the first).
    - ``'gelsd'``, ``'gelss'``: the singular value decomposition; the minimum-norm solution over the
      singular values above ``rcond`` times the largest (here both by Jacobi rotations).
    - ``'gels'``: Householder QR, A assumed of full rank (a rank-deficient A gives inf/NaN).

    ``rcond`` defaults to ``eps(A.dtype) * max(m, n)``. As PyTorch's: ``rank`` is computed for
    ``'gelsy'``, ``'gelsd'`` and ``'gelss'``, ``singular_values`` for ``'gelsd'`` and ``'gelss'``, and
    ``residuals`` (the squared residual norm of each column) when m > n with ``'gels'``, or with
    ``'gelsd'``/``'gelss'`` when every matrix has full rank, which reads the ranks: the residuals'
    shape depends on them, where PyTorch synchronizes as well. What is not computed is empty.

    Example::

        >>> A = onnxnn.tensor([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])  # rank 1
        >>> onnxnn.linalg.lstsq(A, onnxnn.tensor([[1.0], [2.0], [3.0]])).solution
        tensor([[0.2000],
                [0.4000]])
    """
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if A.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
            f"dtype {_lu.torch_dtype_name(A.dtype)} and other's dtype {_lu.torch_dtype_name(B.dtype)}"
        )
    if driver not in (None,) + _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    driver = driver or "gelsy"
    vector = B.dim() == A.dim() - 1
    if vector:
        B = B.unsqueeze(-1)
    m, n = A.shape[-2], A.shape[-1]
    if B.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    if rcond is None:
        rcond = float(np.finfo(A.dtype.numpy_dtype).eps) * max(m, n)
    empty = A.new_zeros(0)
    residuals, rank, singular_values = None, empty.long(), empty
    if min(m, n) == 0:  # X = 0; the product keeps the shapes (and a zero gradient)
        X = _ops.matmul(A.mT, B)
        if driver != "gels":
            rank = A.new_zeros(tuple(A.shape[:-2])).long()
        if driver in ("gelsd", "gelss"):
            singular_values = A.new_zeros(tuple(A.shape[:-2]) + (0,))
        if m > n and driver != "gelsy":
            residuals = (B * B).sum(-2)
    elif driver == "gels":
        X, residuals = _qr.full_rank_least_squares(A, B)
    elif driver == "gelsy":
        X, rank = _qr.pivoted_least_squares(A, B, rcond)
    else:
        X, rank, singular_values, full_rank_residuals = _jacobi.svd_least_squares(A, B, rcond, m > n)
        if m > n and bool(rank.eq(n).all()):
            residuals = full_rank_residuals
    return LstsqResult(X.squeeze(-1) if vector else X, empty if residuals is None else residuals, rank, singular_values)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> SolveExResult:
    """``torch.linalg.solve_ex``: :func:`solve` and LAPACK's ``info`` of A's LU factorization (the first
    zero pivot, 1-based; 0 if none)."""
    result = solve(A, B, left=left)
    _, _, info = lu_factor_ex(A, check_errors=check_errors)
    return SolveExResult(result, info)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (default the last)."""
    return _ops.cross(input, other, dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.linalg.diagonal``: :func:`onnxnn.diagonal` with the last two dims as default."""
    return _ops.diagonal(A, offset, dim1, dim2)


@outside_autocast("MatMul")
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """``torch.linalg.vecdot``: the dot product of vectors along ``dim`` (real dtypes: no conjugation)."""
    if not x.dtype.is_floating_point:
        raise RuntimeError(
            "linalg.vecdot: Expected a floating point or complex tensor as input. Got "
            + dtypes.scalar_type_name(x.dtype)
        )
    if x.dtype is not y.dtype:
        raise RuntimeError(
            f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
            f"{dtypes.scalar_type_name(x.dtype)} and y of type {dtypes.scalar_type_name(y.dtype)} instead"
        )
    return (x * y).sum(dim)


def multi_dot(tensors) -> Tensor:
    """``torch.linalg.multi_dot``: the product of matrices; a 1-D first (last) one is a row (column)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first_vector, last_vector = tensors[0].dim() == 1, tensors[-1].dim() == 1
    if first_vector:
        tensors[0] = tensors[0].unsqueeze(0)
    if last_vector:
        tensors[-1] = tensors[-1].unsqueeze(-1)
    for index, tensor in enumerate(tensors):
        if tensor.dim() != 2:
            which = {0: "the first tensor", len(tensors) - 1: "the last tensor"}.get(index)
            if which is not None:
                raise RuntimeError(f"multi_dot(): {which} must be 1D or 2D but got {tensor.dim()}D")
            raise RuntimeError(f"multi_dot(): tensor {index} must be 2D but got {tensor.dim()}D")
    result = tensors[0]
    for tensor in tensors[1:]:
        result = _ops.matmul(result, tensor)
    if first_vector:
        result = result.squeeze(0)
    if last_vector:
        result = result.squeeze(-1)
    return result


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """``torch.linalg.vander``: increasing powers ``x**0 .. x**(N-1)`` of the last dim of x as columns."""
    if x.dim() < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    if x.dtype in (dtypes.bool, dtypes.float16, dtypes.bfloat16):
        raise RuntimeError(
            "linalg.vander supports floating point, complex, and integer tensors, but got "
            + dtypes.scalar_type_name(x.dtype)
        )
    N = x.shape[-1] if N is None else N
    if N < 2:
        raise RuntimeError("N must be greater than 1.")
    if not x.dtype.is_floating_point:
        x = x.to(dtypes.int64)  # PyTorch's powers are a cumulative product: integers in int64
    powers = [x.new_ones(tuple(x.shape)), x]
    for _ in range(2, N):
        powers.append(powers[-1] * x)
    return _ops.stack(powers[:N], -1)


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``torch.linalg.vector_norm``: the ``ord``-norm of x flattened (``dim=None``) or along ``dim``."""
    if dtype is not None:
        check_norm_dtype("linalg.vector_norm", x, dtype)
        x = x.to(dtype)
    return _ops.norm(x, ord, dim, keepdim)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """``torch.linalg.matrix_norm`` over the two dims ``dim``: ``'fro'``; ``1``/``-1``/``inf``/``-inf`` (max/min
    absolute column/row sum); ``2``/``-2``/``'nuc'`` (largest, smallest, sum of the singular values)."""
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    rows, columns = _ops.normalize_axes(list(dim), A.dim())
    if rows == columns:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({rows}, {columns})")
    if dtype is not None:
        check_norm_dtype("linalg.matrix_norm", A, dtype)
        A = A.to(dtype)
    if ord in _SVD_ORDERS:
        return _jacobi.svd_matrix_norm(A, ord, (rows, columns), keepdim)
    if ord == "fro":
        return _ops.norm(A, 2, [rows, columns], keepdim)
    inf = float("inf")
    if ord not in (1, -1, inf, -inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    summed, reduced = (rows, columns) if ord in (1, -1) else (columns, rows)
    sums = A.abs().sum(summed, keepdim=True)
    if ord > 0 and A.shape[reduced] == 0:
        result = sums.sum(reduced, keepdim=True)  # an empty matrix's norm is 0, as PyTorch's
    else:
        result = sums.amax(reduced, keepdim=True) if ord > 0 else sums.amin(reduced, keepdim=True)
    return result if keepdim else result.squeeze((rows, columns) if rows < columns else (columns, rows))


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``torch.linalg.norm``: a vector norm (``dim`` an int, or a 1-D input) or a matrix norm (``dim`` a pair,
    or a 2-D input); with ``ord=None`` and ``dim=None``, the 2-norm of the flattened input."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if dim is None:
        if A.dim() not in (1, 2):
            raise RuntimeError(
                f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.dim()}D."
            )
        dim = tuple(range(A.dim()))
    if len(dim) == 1:
        return vector_norm(A, ord, dim, keepdim, dtype=dtype)
    return matrix_norm(A, ord, dim, keepdim, dtype=dtype)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """``torch.linalg.tensorinv``: the inverse of A seen as a matrix of its first ``ind`` dims by the rest."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    outer, inner = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows = 1
    for size in outer:
        rows *= size
    columns = 1
    for size in inner:
        columns *= size
    if rows != columns:
        raise RuntimeError(
            f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
            f"prod(self.shape[:ind]), but got {columns} != {rows}"
        )
    return inv(A.reshape(rows, columns)).reshape(inner + outer)


def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """``torch.linalg.tensorsolve``: X with ``tensordot(A, X, X.dim()) = B``."""
    if dims is not None:
        dims = [d % A.dim() for d in dims]
        A = A.permute([d for d in range(A.dim()) if d not in dims] + list(dims))
    result_shape = tuple(A.shape[B.dim() :])
    size = 1
    for length in result_shape:
        size *= length
    if B.numel() != size:
        raise RuntimeError(
            f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == other.numel(), "
            f"but got {size} != {B.numel()}"
        )
    return solve(A.reshape(B.numel(), size), B.reshape(-1)).reshape(result_shape)
