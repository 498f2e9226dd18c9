"""onnxnn's ``FusedLSTMCell`` and ``FusedLSTMCellGradient`` (runtime/ops/lstm_cell.py) on numpy or CuPy.

Each operation is the one the replaced ops' kernels make, in their order, with the same sigmoid
(``elementwise.sigmoid``), so a cell computes the same bits as its ops did on this executor.
"""

from __future__ import annotations

from ..ir.domains import ONNXNN_DOMAIN
from ..ir.kernel_registry import FLOATING, kernels
from .elementwise import sigmoid

__all__: list[str] = []

_GATES = 4


@kernels.register("FusedLSTMCell", domain=ONNXNN_DOMAIN, types=FLOATING)
def fused_lstm_cell(xp, inputs, attrs):
    input_gates, hidden_gates, c = inputs
    gates = input_gates + hidden_gates
    i, f, cell_block, o = xp.split(gates, _GATES, axis=-1)
    i, f, o = sigmoid(xp, i), sigmoid(xp, f), sigmoid(xp, o)
    g = xp.tanh(cell_block)
    c_new = f * c + i * g
    t = xp.tanh(c_new)
    return [o * t, c_new, i, f, g, o, t]


@kernels.register("FusedLSTMCellGradient", domain=ONNXNN_DOMAIN, types=FLOATING)
def fused_lstm_cell_gradient(xp, inputs, attrs):
    grad_h, grad_c_new, c, i, f, g, o, t = inputs
    one = c.dtype.type(1)
    grad_c = (grad_h * o) * (one - t * t)
    if grad_c_new is not None:
        grad_c = grad_c + grad_c_new
    blocks = [
        ((grad_c * g) * i) * (one - i),
        ((grad_c * c) * f) * (one - f),
        (grad_c * i) * (one - g * g),
        ((grad_h * t) * o) * (one - o),
    ]
    return [xp.concatenate(blocks, axis=-1), grad_c * f]
