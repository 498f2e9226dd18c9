"""numpy formulas shared by the onnxnn.nn.functional tests (test_functional_layers.py,
test_functional_losses.py).
"""

from __future__ import annotations


import numpy as np


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
