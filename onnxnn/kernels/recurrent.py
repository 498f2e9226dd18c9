"""Recurrent kernels: RNN, LSTM and GRU, by unrolling time over numpy (or CuPy) arrays.

The recurrence itself lives in onnxnn/runtime/recurrence.py, shared with the gradient rules.
"""

from __future__ import annotations

from ..ir.recurrence import unroll
from ..ir.kernel_registry import FLOATING, kernels

__all__: list[str] = []


class _ArrayBackend:
    def __init__(self, xp):
        self.xp = xp

    def activation(self, x, name, alpha, beta):
        xp = self.xp
        if name == "Tanh":
            return xp.tanh(x)
        if name == "Sigmoid":
            # The two-branch form never overflows exp.
            e = xp.exp(-xp.abs(x))
            return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))
        if name == "Relu":
            return xp.maximum(x, 0)
        if name == "Affine":
            return alpha * x + beta
        if name == "LeakyRelu":
            return xp.where(x >= 0, x, alpha * x)
        if name == "ThresholdedRelu":
            return xp.where(x > alpha, x, 0).astype(x.dtype)
        if name == "ScaledTanh":
            return alpha * xp.tanh(beta * x)
        if name == "HardSigmoid":
            return xp.clip(alpha * x + beta, 0, 1)
        if name == "Elu":
            return xp.where(x >= 0, x, alpha * (xp.exp(xp.minimum(x, 0)) - 1))
        if name == "Softsign":
            return x / (1 + xp.abs(x))
        if name == "Softplus":
            return xp.logaddexp(x, 0)
        raise ValueError(f"unsupported activation '{name}'")

    def clip(self, x, bound):
        return self.xp.clip(x, -bound, bound)

    def stack(self, arrays, axis):
        return self.xp.stack(arrays, axis)

    def unstack(self, x):
        return list(x)

    def split(self, x, parts, axis):
        return self.xp.split(x, parts, axis)

    def transpose(self, x, perm):
        return self.xp.transpose(x, perm)

    def mask(self, lengths, t):
        return (lengths > t).reshape(-1, 1)

    def where(self, mask, a, b):
        return self.xp.where(mask, a, b)

    def zeros_like(self, x):
        return self.xp.zeros_like(x)

    def zeros(self, shape, like):
        return self.xp.zeros(shape, dtype=like.dtype)


def _recurrent(op_type):
    def kernel(xp, inputs, attrs):
        results = unroll(_ArrayBackend(xp), op_type, inputs, attrs, attrs.get("_num_outputs", 3))
        dtype = inputs[0].dtype
        return [xp.asarray(result, dtype=dtype, order="C") for result in results]

    kernel.__name__ = kernel.__qualname__ = op_type.lower()
    return kernel


for _op_type in ("RNN", "GRU", "LSTM"):
    kernels.register(_op_type, types=FLOATING)(_recurrent(_op_type))
