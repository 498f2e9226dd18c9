"""The inputs of the PyTorch-parity Tensor function tests (test_tensor_api_ops_forward.py,
test_tensor_api_ops_gradients_errors.py).

``rng`` is the one generator of both test modules, as it was of the module they were split from: the
inputs here draw from it first, then each module's case table on import.
"""

from __future__ import annotations

import numpy as np


EXECUTORS = ("onnxruntime", "kernels")


rng = np.random.default_rng(7)


M = rng.standard_normal((3, 4))


N = rng.standard_normal((4, 5))


C = rng.standard_normal((3, 5))


T = rng.standard_normal((2, 3, 4))


B1, B2 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))


V3, V4, V5 = rng.standard_normal(3), rng.standard_normal(4), rng.standard_normal(5)


P = rng.uniform(0.5, 2.0, (3, 4))  # positive: logs, divisions


Z = np.array([[1.5, 0.0, -2.0, 3.0], [0.5, -1.0, 0.0, 2.0]])  # zeros: cumprod's gradient at zeros


TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [0.0, 0.0, -1.0, 5.0, 5.0]])


I2 = np.array([2, 0, 2])  # repeated index: index_add accumulates


I_COPY = np.array([2, 0])


MASK = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
