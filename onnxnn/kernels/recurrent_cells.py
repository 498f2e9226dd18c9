"""onnxnn's fused LSTM and GRU cells and their gradients (runtime/ops/recurrent_cells.py) on numpy or CuPy.

Each operation is the one the replaced ops' kernels make, in their order, with the same sigmoid
(``elementwise.sigmoid``), so a cell computes the same bits as its ops did on this executor.
"""

from __future__ import annotations

from ..ir.domains import ONNXNN_DOMAIN
from ..ir.kernel_registry import FLOATING, kernels
from .elementwise import sigmoid

__all__: list[str] = []


def _sigmoid_gradient(grad, s, one):
    return (grad * s) * (one - s)


def _tanh_gradient(grad, t, one):
    return grad * (one - t * t)


@kernels.register("FusedLSTMCell", domain=ONNXNN_DOMAIN, types=FLOATING)
def fused_lstm_cell(xp, inputs, attrs):
    input_gates, hidden_gates, c = inputs
    gates = input_gates + hidden_gates
    i, f, cell_block, o = xp.split(gates, 4, axis=-1)
    i, f, o = sigmoid(xp, i), sigmoid(xp, f), sigmoid(xp, o)
    g = xp.tanh(cell_block)
    c_new = f * c + i * g
    t = xp.tanh(c_new)
    return [o * t, c_new, i, f, g, o, t]


@kernels.register("FusedLSTMCellGradient", domain=ONNXNN_DOMAIN, types=FLOATING)
def fused_lstm_cell_gradient(xp, inputs, attrs):
    grad_h, grad_c_new, c, i, f, g, o, t = inputs
    one = c.dtype.type(1)
    grad_c = _tanh_gradient(grad_h * o, t, one)
    if grad_c_new is not None:
        grad_c = grad_c + grad_c_new
    blocks = [
        _sigmoid_gradient(grad_c * g, i, one),
        _sigmoid_gradient(grad_c * c, f, one),
        _tanh_gradient(grad_c * i, g, one),
        _sigmoid_gradient(grad_h * t, o, one),
    ]
    return [xp.concatenate(blocks, axis=-1), grad_c * f]


@kernels.register("FusedGRUCell", domain=ONNXNN_DOMAIN, types=FLOATING)
def fused_gru_cell(xp, inputs, attrs):
    input_gates, hidden_gates, h = inputs
    input_r, input_z, input_n = xp.split(input_gates, 3, axis=-1)
    hidden_r, hidden_z, hidden_n = xp.split(hidden_gates, 3, axis=-1)
    r, z = sigmoid(xp, input_r + hidden_r), sigmoid(xp, input_z + hidden_z)
    n = xp.tanh(input_n + r * hidden_n)
    return [n + z * (h - n), r, z, n, hidden_n]


@kernels.register("FusedGRUCellGradient", domain=ONNXNN_DOMAIN, types=FLOATING)
def fused_gru_cell_gradient(xp, inputs, attrs):
    grad_h_new, h, r, z, n, hidden_n = inputs
    one = h.dtype.type(1)
    grad_h = grad_h_new * z
    grad_n = _tanh_gradient(grad_h_new - grad_h, n, one)
    grad_r = _sigmoid_gradient(grad_n * hidden_n, r, one)
    grad_z = _sigmoid_gradient(grad_h_new * (h - n), z, one)
    return [
        xp.concatenate([grad_r, grad_z, grad_n], axis=-1),
        xp.concatenate([grad_r, grad_z, grad_n * r], axis=-1),
        grad_h,
    ]
