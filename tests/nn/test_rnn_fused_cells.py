"""A training LSTM's cells as one node each: ``FusedLSTMCell`` and its gradient (runtime/ops/lstm_cell.py).

The nodes replace the ten ops of a cell's forward and the twenty-two of its backward with the same
arithmetic, so they must give the ops' results: bit for bit on onnxnn's kernels (numpy computes each
operation the same way wherever its operands lie), and within the recurrence's rounding bound on
onnxruntime, whose float64 Exp rounds differently in its vector loop and its scalar tail, which
the sigmoid over all four gate blocks at once shifts. The gradients are also checked against
finite differences, to the second order, where a backward recorded for differentiation takes the
formulas as ops.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn import nn
from onnxnn.ir.plan import plan
from onnxnn.nn.modules import rnn
from onnxnn.runtime.tensor import apply_op

from .rnn_cases import RNG, recurrence_atol

FUSED, GRADIENT = "FusedLSTMCell", "FusedLSTMCellGradient"


def _pending_ops(*tensors) -> list:
    return [node.op_type for node in plan([tensor._value for tensor in tensors], include_shared=False).nodes]


def _lstm(dtype, **kwargs):
    onnxnn.manual_seed(0)
    return nn.LSTM(3, 4, **kwargs).to(dtype)


def test_a_training_lstm_records_one_node_per_cell_and_one_per_cells_gradient():
    module = _lstm(onnxnn.float32)
    output, (_, c_n) = module(onnxnn.randn(5, 2, 3))
    assert _pending_ops(output).count(FUSED) == 5
    (grad,) = onnxnn.autograd.grad((output.sum() + c_n.sum()), [module.weight_hh_l0], retain_graph=True)
    assert _pending_ops(grad).count(GRADIENT) == 5
    (differentiable,) = onnxnn.autograd.grad(output.sum(), [module.weight_hh_l0], create_graph=True)
    assert GRADIENT not in _pending_ops(differentiable)


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
def test_half_precision_cells_keep_their_ops(dtype):
    output, _ = _lstm(dtype)(onnxnn.randn(2, 1, 3, dtype=dtype))
    assert FUSED not in _pending_ops(output)


def _run(module, x_array, cotangent, read_c_n: bool, fused: bool, monkeypatch):
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(rnn, "fuses_lstm_cell", lambda *operands: False)
        x = onnxnn.tensor(x_array, requires_grad=True)
        output, (_, c_n) = module(x)
        loss = (output * onnxnn.tensor(cotangent)).sum()
        if read_c_n:
            loss = loss + (c_n * c_n).sum()
        module.zero_grad()
        loss.backward()
        gradients = [x.grad.numpy()] + [parameter.grad.numpy() for parameter in module.parameters()]
        return output.detach().numpy(), gradients


CONFIGURATIONS = {
    "one-layer": {},
    "two-layer-bidirectional": {"num_layers": 2, "bidirectional": True},
    "projected": {"proj_size": 2},
}


@pytest.mark.parametrize("read_c_n", [False, True])
@pytest.mark.parametrize("configuration", CONFIGURATIONS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
def test_the_nodes_give_their_ops_results_bit_for_bit_on_the_kernels(dtype, configuration, read_c_n, monkeypatch):
    module = _lstm(dtype, **CONFIGURATIONS[configuration])
    x = RNG.standard_normal((6, 3, 3)).astype(dtype.numpy_dtype)
    directions = 2 if module.bidirectional else 1
    cotangent = RNG.standard_normal((6, 3, directions * (module.proj_size or 4))).astype(dtype.numpy_dtype)
    with onnxnn.set_executor("kernels"):
        fused = _run(module, x, cotangent, read_c_n, True, monkeypatch)
        ops = _run(module, x, cotangent, read_c_n, False, monkeypatch)
    np.testing.assert_array_equal(fused[0], ops[0])
    for fused_gradient, ops_gradient in zip(fused[1], ops[1]):
        np.testing.assert_array_equal(fused_gradient, ops_gradient)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
def test_the_nodes_give_their_ops_outputs_on_onnxruntime(dtype, monkeypatch):
    module = _lstm(dtype, num_layers=2)
    x = RNG.standard_normal((6, 3, 3)).astype(dtype.numpy_dtype)
    cotangent = RNG.standard_normal((6, 3, 4)).astype(dtype.numpy_dtype)
    with onnxnn.set_executor("onnxruntime"):
        fused, _ = _run(module, x, cotangent, False, True, monkeypatch)
        ops, _ = _run(module, x, cotangent, False, False, monkeypatch)
    state = {name: value.detach().numpy().astype(np.float64) for name, value in module.state_dict().items()}
    # Each is within the recurrence's bound of the exact values (rnn_cases.py), so within twice it of the other.
    bound = 2 * recurrence_atol(state, x, 6, 2, dtype.numpy_dtype)
    np.testing.assert_allclose(fused, ops, rtol=0, atol=bound)


def _cell_loss(cell, x, h, c):
    new_h, new_c = cell(x, (h, c))
    return (new_h * new_h).sum() + (new_c * new_h).sum()


def _first_gradient(cell, arrays, create_graph: bool = False):
    """d loss / d (x, h, c), flattened; recorded for differentiation with ``create_graph``."""
    leaves = [onnxnn.tensor(array, requires_grad=True) for array in arrays]
    grads = onnxnn.autograd.grad(_cell_loss(cell, *leaves), leaves, create_graph=create_graph)
    return leaves, onnxnn.cat([grad.reshape(-1) for grad in grads])


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_cells_gradients_match_finite_differences_to_the_second_order(executor):
    cell = nn.LSTMCell(3, 4).double()
    arrays = [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4)), RNG.standard_normal((2, 4))]
    with onnxnn.set_executor(executor):
        check_gradients(lambda x, h, c: onnxnn.cat([t.reshape(-1) for t in cell(x, (h, c))]), arrays)
        # The first gradient recorded for differentiation takes the formulas as ops, whose own
        # gradient reaches the node's saved activations: its product with a direction, against
        # central differences of the first gradient (float64: eps^2 truncation, 1e-16 / eps rounding).
        leaves, gradient = _first_gradient(cell, arrays, create_graph=True)
        direction = RNG.standard_normal(gradient.shape)
        products = onnxnn.autograd.grad((gradient * onnxnn.tensor(direction)).sum(), leaves)
        eps = 1e-6
        for array, product in zip(arrays, products):
            expected = np.zeros_like(array)
            for index in np.ndindex(*array.shape):
                original = array[index]
                values = []
                for shifted in (original + eps, original - eps):
                    array[index] = shifted
                    values.append(float(np.sum(_first_gradient(cell, arrays)[1].numpy() * direction)))
                array[index] = original
                expected[index] = (values[0] - values[1]) / (2 * eps)
            np.testing.assert_allclose(product.numpy(), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "op_type, shapes, message",
    [
        (FUSED, [(2, 16), (2, 16)], "takes 3 inputs"),
        (FUSED, [(2, 16), (2, 12), (2, 4)], "hidden_gates must be float32 of shape [2, 16]"),
        (FUSED, [(2, 16), (2, 16), (2, 4, 1)], "the cell state must be a floating [batch, hidden] tensor"),
        (FUSED, [(3, 16), (3, 16), (2, 4)], "input_gates must be float32 of shape [2, 16]"),
        (GRADIENT, [(2, 4)] * 7, "takes 8 inputs"),
        (GRADIENT, [(2, 4)] * 6 + [(2, 3), (2, 4)], "O must be float32 of shape [2, 4]"),
    ],
)
def test_bad_cell_nodes_are_refused_naming_the_input(op_type, shapes, message):
    inputs = tuple(onnxnn.zeros(shape) for shape in shapes)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        apply_op(op_type, inputs, None, None, domain="ai.onnxnn")
