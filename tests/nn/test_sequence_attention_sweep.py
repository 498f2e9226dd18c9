"""Dtype contract of the recurrent cells (``RNNCell``, ``LSTMCell``, ``GRUCell``), as PyTorch's.

- A cell multiplies its input by ``weight_ih`` and its hidden state ``h`` by ``weight_hh``: an input
  or ``h`` of another dtype than the weights (float64, float16 or an integer input against float32
  weights, or float32 against float64 weights) raises PyTorch's RuntimeError "mat1 and mat2 must
  have the same dtype", batched or unbatched, instead of promoting silently.
- The LSTM cell state ``c`` is only added into the new cell state, so a ``c`` of another floating
  dtype is accepted; the step is then ``c' = f * c + i * g``, ``h' = o * tanh(c')`` (PyTorch's gate
  order input, forget, cell, output) with the gates in the input's dtype.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn import nn

EXECUTORS = ("onnxruntime", "kernels")
INPUT, HIDDEN = 3, 4

# (cell, module dtype, input dtype, hidden dtype or None, batched)
MISMATCHES = [
    ("RNNCell", "float32", "float64", None, True),
    ("RNNCell", "float32", "float32", "float64", True),
    ("RNNCell", "float32", "int64", None, True),
    ("RNNCell", "float64", "float32", None, False),
    ("GRUCell", "float32", "float64", None, True),
    ("GRUCell", "float32", "float32", "float16", True),
    ("GRUCell", "float32", "float32", "float64", False),
    ("LSTMCell", "float32", "float64", None, True),
    ("LSTMCell", "float32", "float32", "float64", True),
    ("LSTMCell", "float64", "float32", None, False),
]


def _cell_input(dtype: str, batched: bool) -> onnxnn.Tensor:
    shape = (2, INPUT) if batched else (INPUT,)
    return onnxnn.tensor(np.ones(shape).astype(dtype))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("cell_name, module_dtype, input_dtype, hidden_dtype, batched", MISMATCHES)
def test_cell_refuses_operand_of_another_dtype(executor, cell_name, module_dtype, input_dtype, hidden_dtype, batched):
    cell = getattr(nn, cell_name)(INPUT, HIDDEN, dtype=getattr(onnxnn, module_dtype))
    x = _cell_input(input_dtype, batched)
    hx = None
    if hidden_dtype is not None:
        shape = (2, HIDDEN) if batched else (HIDDEN,)
        h = onnxnn.tensor(np.zeros(shape, dtype=hidden_dtype))
        c = onnxnn.tensor(np.zeros(shape, dtype=input_dtype))
        hx = (h, c) if cell_name == "LSTMCell" else h
    with onnxnn.set_executor(executor), pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
        cell(x, hx)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("cell_dtype", ["float64", "float16"])
def test_lstm_cell_accepts_cell_state_of_another_dtype(executor, cell_dtype):
    rng = np.random.default_rng(0)
    cell = nn.LSTMCell(INPUT, HIDDEN)
    x = rng.standard_normal((2, INPUT)).astype(np.float32)
    h = rng.standard_normal((2, HIDDEN)).astype(np.float32)
    c = rng.standard_normal((2, HIDDEN)).astype(cell_dtype)
    with onnxnn.set_executor(executor):
        h_new, c_new = cell(onnxnn.tensor(x), (onnxnn.tensor(h), onnxnn.tensor(c)))
        h_new, c_new = h_new.detach().numpy(), c_new.detach().numpy()
    weights = {name: p.detach().numpy().astype(np.float64) for name, p in cell.named_parameters()}
    gates = x @ weights["weight_ih"].T + weights["bias_ih"] + h @ weights["weight_hh"].T + weights["bias_hh"]
    in_gate, forget_gate, cell_gate, out_gate = np.split(gates, 4, axis=1)
    expected_c = _sigmoid(forget_gate) * c.astype(np.float64) + _sigmoid(in_gate) * np.tanh(cell_gate)
    expected_h = _sigmoid(out_gate) * np.tanh(expected_c)
    # float32 gates over INPUT + HIDDEN terms: a few float32 eps of rounding.
    tolerance = 64 * np.finfo(np.float32).eps
    np.testing.assert_allclose(c_new, expected_c, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(h_new, expected_h, rtol=tolerance, atol=tolerance)
