"""The linear algebra tests' matrices, numpy references and tolerance (test_linalg_decompositions_forward.py,
test_linalg_decompositions_gradients_errors.py).

Tolerances come from the backward stability of the algorithms (Higham, chapters 9, 10 and 19): LU with
partial pivoting, Cholesky and Householder QR compute the exact result of a matrix perturbed by
``gamma(c n) * growth * |A|``, so a computed solution or inverse is within ``cond(A)`` times that of the
exact one, relative to its own magnitude. The test matrices are diagonally dominant or made
well-conditioned (cond < 50, growth <= 2); ``_bound`` spells the bound out, doubled because
numpy's LAPACK result carries an error of its own.

``rng`` is the one generator of both test modules, as it was of the module they were split from: the
matrices here draw from it first, then each module's case table on import, then the tests.
"""

from __future__ import annotations

import numpy as np
from tolerances import gamma

import onnxnn

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
