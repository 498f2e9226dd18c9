"""The kernel of onnxnn's ``BinaryCrossEntropy`` op (runtime/ops/binary_cross_entropy.py).

One pass per op of the op's decomposition, in its order, so that both executors compute the same
loss: ``-(T * max(log(X), -100) + (1 - T) * max(log1p(-X), -100))``, log1p as Kahan's compensated
``log(u) * (-X / (u - 1))`` with ``u = 1 - X`` (``-X`` where u rounds to 1).
"""

from __future__ import annotations

import numpy as np

from ..ir.domains import ONNXNN_DOMAIN
from ..ir.kernel_registry import FLOATING, kernels

__all__: list[str] = []


@kernels.register("BinaryCrossEntropy", domain=ONNXNN_DOMAIN, types=FLOATING)
def binary_cross_entropy(xp, inputs, attrs):
    x, t = inputs
    one, floor = x.dtype.type(1), x.dtype.type(-100)
    log_x = xp.maximum(xp.log(x), floor)
    u = one - x
    negated = -x
    with np.errstate(divide="ignore", invalid="ignore"):
        compensated = xp.log(u) * (negated / (u - one))
    log_one_minus_x = xp.maximum(xp.where(u == one, negated, compensated), floor)
    return [-(t * log_x + (one - t) * log_one_minus_x)]
