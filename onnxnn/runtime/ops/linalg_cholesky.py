"""The Cholesky family by elimination: ``linalg.cholesky``/``cholesky_ex``, ``cholesky``,
``cholesky_solve`` and ``cholesky_inverse``, unrolled over the columns as ``linalg_lu.py``'s
factorizations are (its module docstring says how, and why errors become NaN and ``info``).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ._common import Tensor
from .elementwise import where
from .linalg import matmul
from .linalg_lu import (
    broadcast_batches,
    check_matrix,
    constant_like,
    eye_like,
    grad_wanted,
    mask_like,
    raise_for_info,
    substitute,
    symmetric_gradient,
    torch_dtype_name,
    with_gradient_of,
)
from .linalg_solve import solve
from .shape import stack
from ..tensor import outside_autocast

# torch's top-level names; torch.linalg's (linalg_cholesky, cholesky_ex) are read by onnxnn.linalg
__all__ = ["cholesky", "cholesky_inverse", "cholesky_solve"]

CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])


def _cholesky_lower(A: Tensor) -> tuple:
    """The lower Cholesky factor read from A's lower triangle, and LAPACK's ``info`` (the order of the
    first leading minor that is not positive-definite, 0 if none). A non-positive pivot gives NaN."""
    n = A.shape[-1]
    columns: list[Tensor] = []
    info = None
    for j in range(n):
        column = A.select(-1, j)  # (..., n): rows j.. of it are read
        if columns:
            done = stack(columns, -1)  # (..., n, j)
            column = column - matmul(done, done.select(-2, j).unsqueeze(-1)).squeeze(-1)
        pivot = column.select(-1, j).unsqueeze(-1)
        failed = pivot.le(0.0).squeeze(-1) | pivot.isnan().squeeze(-1)
        step_info = where(failed, constant_like(j + 1, A, dtypes.int32), constant_like(0, A, dtypes.int32))
        info = step_info if info is None else where(info.eq(0), step_info, info)
        root = pivot.sqrt()
        columns.append(where(mask_like(np.arange(n) >= j, A), column / root, constant_like(0.0, A)))
    if not columns:
        return A, constant_like(np.zeros(tuple(A.shape[:-2])), A, dtypes.int32)
    return stack(columns, -1), info


def _cholesky_factor(A: Tensor, upper: bool) -> tuple:
    """The lower Cholesky factor and ``info`` of the symmetric matrix read from A's lower triangle (upper,
    when ``upper``: LAPACK's ``potrf`` reads the triangle it returns), with PyTorch's symmetric gradient."""
    A = symmetric_gradient(A, A)
    return _cholesky_lower(A.mT if upper else A)


@outside_autocast("linalg_cholesky_ex")
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:
    """``torch.linalg.cholesky_ex``: the factor and LAPACK's ``info`` (0, or the order of the first leading
    minor that is not positive-definite; the factor then holds NaN)."""
    check_matrix("linalg.cholesky_ex", A, kernel="cholesky_cpu")
    lower, info = _cholesky_factor(A, upper)
    if check_errors:
        raise_for_info(
            info,
            A.dim() > 2,
            lambda prefix, i: (
                f"linalg.cholesky_ex: {prefix}The factorization could not be completed because the input is not "
                f"positive-definite (the leading minor of order {i} is not positive-definite)."
            ),
        )
    return CholeskyExResult(lower.mT if upper else lower, info)


@outside_autocast("linalg_cholesky")
def linalg_cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """``torch.linalg.cholesky``: L with ``A = L L^T`` (``U^T U`` when ``upper``), reading A's lower
    triangle (its upper one when ``upper``, as LAPACK's ``potrf``).

    PyTorch raises "linalg.cholesky: The factorization could not be completed because the input is not
    positive-definite" after reading the values; onnxnn's lazy result holds NaN instead (see
    :func:`cholesky_ex` for the ``info`` that says where). The gradient is PyTorch's: symmetric, the
    same in ``A[i, j]`` and ``A[j, i]`` (half of what the triangle read would get alone).

    Example::

        >>> onnxnn.linalg.cholesky(onnxnn.tensor([[4.0, 2.0], [2.0, 5.0]]))
        tensor([[2., 0.],
                [1., 2.]])
    """
    check_matrix("linalg.cholesky", A, kernel="cholesky_cpu")
    lower, _ = _cholesky_factor(A, upper)
    return lower.mT if upper else lower


@outside_autocast("cholesky")
def cholesky(A: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (deprecated in PyTorch for :func:`linalg.cholesky`, same factor)."""
    check_matrix("cholesky", A, kernel="cholesky_cpu", floating=False)
    lower, _ = _cholesky_factor(A, upper)
    return lower.mT if upper else lower


@outside_autocast("cholesky_solve")
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky_solve``: X with ``(L L^T) X = B`` (``(U^T U) X = B`` when ``upper``), reading the
    factor's triangle.

    The gradient is PyTorch's closed form: ``solve(L L^T, G)`` for B and, for the factor, ``-(G_B X^T +
    X G_B^T) L`` (``-U (...)`` when ``upper``), L taken whole: the other triangle gets a gradient too,
    as if the product ``L L^T`` had been formed from all of L.
    """
    # half_precision=True: every dtype passes here, as the dtypes are checked below in PyTorch's order
    # (the same dtype, then the kernel's NotImplementedError)
    check_matrix(
        "torch.cholesky_solve", B, square=False, argument="b", rank_style="input", floating=False, half_precision=True
    )
    check_matrix("torch.cholesky_solve", L, argument="A", rank_style="input", floating=False, half_precision=True)
    if B.dtype is not L.dtype:
        raise RuntimeError(
            f"Expected b and A to have the same dtype, but found b of type {torch_dtype_name(B.dtype)} "
            f"and A of type {torch_dtype_name(L.dtype)} instead."
        )
    if B.dtype not in (dtypes.float32, dtypes.float64):
        raise NotImplementedError(f"\"cholesky_solve_cpu\" not implemented for '{torch_dtype_name(B.dtype)}'")
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(
            f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-2]} by "
            f"{L.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}"
        )
    L, B = broadcast_batches(L, B)
    lower = L.mT if upper else L
    if not grad_wanted(L, B):
        return _cholesky_substitutions(lower, B)
    X = _cholesky_substitutions(lower.detach(), B.detach())
    # Solve's closed-form gradient through L L^T (all of L) gives PyTorch's; the constant term makes
    # that product the one the substitutions use, tril(L) tril(L)^T, so its solution is X's (it is 0
    # when L is triangular).
    triangle, whole = lower.detach().tril(), lower.detach()
    product = matmul(lower, lower.mT) + (matmul(triangle, triangle.mT) - matmul(whole, whole.mT))
    return with_gradient_of(X, solve(product, B, "CholeskySolveBackward0"))


def _cholesky_substitutions(lower: Tensor, B: Tensor) -> Tensor:
    """``(L L^T)^-1 B`` by two triangular substitutions, reading L's lower triangle."""
    y = substitute(lower, B, upper=False, unit=False)
    return substitute(lower.mT, y, upper=True, unit=False)


@outside_autocast("cholesky_inverse")
def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky_inverse``: ``(L L^T)^-1`` (``(U^T U)^-1`` when ``upper``) from a Cholesky factor,
    with :func:`cholesky_solve`'s gradient (PyTorch's ``-(A^-1 (G + G^T) A^-1) L``)."""
    check_matrix("cholesky_inverse", L, kernel="cholesky_inverse_out_cpu", floating=False)
    return cholesky_solve(eye_like(L.shape[-1], L).expand(tuple(L.shape)), L, upper)
