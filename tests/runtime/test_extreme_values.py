"""Functions at the ends of the float range: no overflow where the result is representable, and
PyTorch's infinities where it is not. Expectations are numpy's ``hypot`` and Python's ``math.lgamma``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn

EXECUTORS = ["onnxruntime", "kernels"]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hypot_neither_overflows_nor_underflows(executor, dtype):
    # Squares of 1e38 overflow float32 and of 3e-39 underflow it; C's hypot (PyTorch's) does neither.
    a = np.array([1e38, -1e38, 3.0, 0.0, 0.0, np.inf, np.nan, np.nan, -np.inf, 1e-30, 3e-39, -7.5], dtype)
    b = np.array([3.0, 1e38, 4.0, 0.0, -2.0, np.nan, np.inf, 1.0, 2.0, 1e-30, 4e-39, 0.25], dtype)
    with onnxnn.set_executor(executor):
        result = onnxnn.hypot(onnxnn.tensor(a), onnxnn.tensor(b)).numpy()
    # A product, a square root and a sum of two terms: a few units of rounding.
    np.testing.assert_allclose(result, np.hypot(a, b), rtol=4 * np.finfo(dtype).eps, atol=0)


def _lgamma(value: float) -> float:
    if math.isnan(value):
        return math.nan
    if math.isinf(value):
        return math.inf  # lgamma(+-inf) is +inf in PyTorch and C
    try:
        return math.lgamma(value)
    except ValueError:  # a pole
        return math.inf


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lgamma_at_the_ends_of_the_range(executor, dtype):
    tiny = float(np.finfo(dtype).smallest_subnormal)
    values = [np.inf, -np.inf, -1e38, -3.0, 0.0, tiny, -tiny, 1e-38, 1e-31, -1e-31, 1e30, np.nan]
    x = np.array(values, dtype)
    with onnxnn.set_executor(executor):
        result = onnxnn.lgamma(onnxnn.tensor(x)).numpy()
    expected = np.array([_lgamma(float(v)) for v in x])
    # Near zero lgamma is -log|x| to rounding; elsewhere these are poles and infinities.
    np.testing.assert_allclose(result, expected.astype(dtype), rtol=4 * np.finfo(dtype).eps, atol=0)
