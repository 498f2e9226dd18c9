"""Error bounds derived from the arithmetic, so assertions hold on every BLAS and onnxruntime build.

A float sum of ``n`` products computed in any order is within ``gamma(n) * sum |a_i * b_i|`` of the
exact sum, where ``gamma(n) = n * u / (1 - n * u)`` and ``u`` is the unit roundoff of the dtype
(Higham, *Accuracy and Stability of Numerical Algorithms*, section 3.1). Two results computed in
different orders can therefore differ by twice that. These helpers turn that bound into the
``atol`` numpy's assertions take, elementwise.
"""
from __future__ import annotations

import numpy as np


def unit_roundoff(dtype) -> float:
    """Half the distance from 1.0 to the next representable number of ``dtype``."""
    return float(np.finfo(dtype).eps) / 2


def gamma(terms: int, dtype=np.float32) -> float:
    """Higham's gamma_n: the relative error bound of a sum of ``terms`` rounded operations."""
    nu = terms * unit_roundoff(dtype)
    return nu / (1 - nu)


def matmul_bound(a: np.ndarray, b: np.ndarray, *added: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Elementwise bound on how far two float computations of ``a @ b + added...`` may differ.

    Both results may err by ``gamma(k + len(added)) * (|a| @ |b| + sum |added|)`` from the exact
    value, ``k`` being the inner dimension; the bound is twice that.
    """
    a64, b64 = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    magnitude = a64 @ b64
    for term in added:
        magnitude = magnitude + np.abs(np.asarray(term, np.float64))
    return 2 * gamma(a.shape[-1] + len(added), dtype) * magnitude


def assert_close_to_matmul(actual, a, b, *added, dtype=np.float32, then=None) -> None:
    """Assert ``actual`` is ``then(a @ b + added...)`` up to the rounding either computation may do.

    ``then`` must be 1-Lipschitz (relu, identity) for the bound to carry through it.
    """
    exact = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    for term in added:
        exact = exact + np.asarray(term, np.float64)
    if then is not None:
        exact = then(exact)
    bound = matmul_bound(a, b, *added, dtype=dtype)
    error = np.abs(np.asarray(actual, np.float64) - exact)
    worst = np.unravel_index(np.argmax(error - bound), error.shape) if error.size else ()
    assert np.all(error <= bound), (
        f"|actual - exact| exceeds the float rounding bound at {worst}: "
        f"{error[worst]:.3g} > {bound[worst]:.3g}")
