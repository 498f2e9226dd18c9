"""The inputs and runner of the statistics and out-of-place write tests
(test_tensor_api_stats_exact_and_gradients.py, test_tensor_api_stats_within_rounding.py).

``rng`` is the one generator of the inputs here and of the exact cases' table, as it was in the module
the tests were split from. ``_run`` records a function on one executor and returns its value.
"""

from __future__ import annotations


import numpy as np

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")


rng = np.random.default_rng(11)


M = rng.standard_normal((3, 4))


N = rng.standard_normal((4, 5))


S = rng.standard_normal((3, 3))


X1, X2 = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))


INTS = np.array([3, 1, 3, 0, 5, 1, 3])


W = rng.uniform(0.5, 2.0, 7)


DISTINCT = np.random.default_rng(5).permutation(12).reshape(3, 4) * 0.41 - 2


AWAY_FROM_ZERO = rng.uniform(0.5, 1.5, (3, 4)) * np.where(rng.random((3, 4)) < 0.5, -1, 1)


REPEATS = np.array([[1.0, 2.0, 2.0, 3.0, 3.0], [4.0, 4.0, 1.0, 1.0, 0.0]])


NANS = np.array([1.0, np.nan, -2.0, np.nan, 0.5])


def _np_scatter_reduce(x, index, src, reduce, include_self):
    out = x.copy()
    touched = {}
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            touched.setdefault((int(index[i, j]), j), []).append(src[i, j])
    for (r, c), values in touched.items():
        pool = ([x[r, c]] if include_self else []) + values
        out[r, c] = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min, "mean": np.mean}[reduce](pool)
    return out


SCATTER_INDEX = np.array([[0, 2, 1, 0], [0, 0, 2, 1]])


SCATTER_SRC = rng.standard_normal((2, 4))


IDX_ROWS, IDX_COLS = np.array([0, 2, 0]), np.array([1, 3, 1])


def _run(executor, function, arrays, dtype):
    with onnxnn.set_executor(executor):
        tensors = [onnxnn.tensor(a, dtype=dtype) if a.dtype.kind == "f" else onnxnn.tensor(a) for a in arrays]
        return np.asarray(function(*tensors).numpy())
