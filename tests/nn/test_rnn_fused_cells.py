"""Training LSTM and GRU cells as one node each, and one for each cell's gradient (runtime/ops/recurrent_cells.py).

The nodes replace the ten or more ops of a cell's forward and the twenty of its backward with the
same arithmetic, so they must give the ops' results: bit for bit on onnxnn's kernels (numpy
computes each operation the same way wherever its operands lie), and within the recurrence's
rounding bound on onnxruntime, whose float64 Exp rounds differently in its vector loop and its
scalar tail, which the sigmoid over every gate block at once shifts. The gradients are also checked
against finite differences, to the second order, where a backward recorded for differentiation
takes the formulas as ops.
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

# module, its cell module, the cell's node and its gradient's node
CELLS = {
    "lstm": (nn.LSTM, nn.LSTMCell, "FusedLSTMCell", "FusedLSTMCellGradient"),
    "gru": (nn.GRU, nn.GRUCell, "FusedGRUCell", "FusedGRUCellGradient"),
}


def _pending_ops(*tensors) -> list:
    return [node.op_type for node in plan([tensor._value for tensor in tensors], include_shared=False).nodes]


def _network(name: str, dtype, **kwargs):
    onnxnn.manual_seed(0)
    return CELLS[name][0](3, 4, **kwargs).to(dtype)


def _final_state(name: str, states):
    return states[1] if name == "lstm" else states  # the LSTM's cell state, the GRU's hidden state


@pytest.mark.parametrize("name", CELLS)
def test_a_training_network_records_one_node_per_cell_and_one_per_cells_gradient(name):
    _, _, cell_op, gradient_op = CELLS[name]
    module = _network(name, onnxnn.float32)
    output, states = module(onnxnn.randn(5, 2, 3))
    assert _pending_ops(output).count(cell_op) == 5
    loss = output.sum() + _final_state(name, states).sum()
    (grad,) = onnxnn.autograd.grad(loss, [module.weight_hh_l0], retain_graph=True)
    assert _pending_ops(grad).count(gradient_op) == 5
    (differentiable,) = onnxnn.autograd.grad(output.sum(), [module.weight_hh_l0], create_graph=True)
    assert gradient_op not in _pending_ops(differentiable)


@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
def test_half_precision_cells_keep_their_ops(name, dtype):
    output, _ = _network(name, dtype)(onnxnn.randn(2, 1, 3, dtype=dtype))
    assert CELLS[name][2] not in _pending_ops(output)


def _run(name, module, x_array, cotangent, read_final_state: bool, fused: bool, monkeypatch):
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(rnn, "fuses_cell", lambda *operands: False)
        x = onnxnn.tensor(x_array, requires_grad=True)
        output, states = module(x)
        loss = (output * onnxnn.tensor(cotangent)).sum()
        if read_final_state:
            loss = loss + (_final_state(name, states) ** 2).sum()
        module.zero_grad()
        loss.backward()
        gradients = [x.grad.numpy()] + [parameter.grad.numpy() for parameter in module.parameters()]
        return output.detach().numpy(), gradients


CONFIGURATIONS = {
    "one-layer": {},
    "two-layer-bidirectional": {"num_layers": 2, "bidirectional": True},
    "no-bias": {"bias": False},
}


def _inputs(module, dtype):
    x = RNG.standard_normal((6, 3, 3)).astype(dtype.numpy_dtype)
    directions = 2 if module.bidirectional else 1
    width = directions * (getattr(module, "proj_size", 0) or 4)
    return x, RNG.standard_normal((6, 3, width)).astype(dtype.numpy_dtype)


@pytest.mark.parametrize("read_final_state", [False, True])
@pytest.mark.parametrize(
    "name, configuration",
    [(name, configuration) for name in CELLS for configuration in CONFIGURATIONS] + [("lstm", "projected")],
)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
def test_the_nodes_give_their_ops_results_bit_for_bit_on_the_kernels(
    dtype, name, configuration, read_final_state, monkeypatch
):
    kwargs = {"proj_size": 2} if configuration == "projected" else CONFIGURATIONS[configuration]
    module = _network(name, dtype, **kwargs)
    x, cotangent = _inputs(module, dtype)
    with onnxnn.set_executor("kernels"):
        fused = _run(name, module, x, cotangent, read_final_state, True, monkeypatch)
        ops = _run(name, module, x, cotangent, read_final_state, False, monkeypatch)
    np.testing.assert_array_equal(fused[0], ops[0])
    for fused_gradient, ops_gradient in zip(fused[1], ops[1]):
        np.testing.assert_array_equal(fused_gradient, ops_gradient)


@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
def test_the_nodes_give_their_ops_outputs_on_onnxruntime(name, dtype, monkeypatch):
    module = _network(name, dtype, num_layers=2)
    x, cotangent = _inputs(module, dtype)
    with onnxnn.set_executor("onnxruntime"):
        fused, _ = _run(name, module, x, cotangent, False, True, monkeypatch)
        ops, _ = _run(name, module, x, cotangent, False, False, monkeypatch)
    state = {key: value.detach().numpy().astype(np.float64) for key, value in module.state_dict().items()}
    # Each is within the recurrence's bound of the exact values (rnn_cases.py), so within twice it of the other.
    bound = 2 * recurrence_atol(state, x, 6, 2, dtype.numpy_dtype)
    np.testing.assert_allclose(fused, ops, rtol=0, atol=bound)


def _cell_loss(name, cell, x, h, c=None):
    if name == "lstm":
        new_h, new_c = cell(x, (h, c))
        return (new_h * new_h).sum() + (new_c * new_h).sum()
    new_h = cell(x, h)
    return (new_h * new_h * h).sum()


def _first_gradient(name, cell, arrays, create_graph: bool = False):
    """d loss / d inputs, flattened; recorded for differentiation with ``create_graph``."""
    leaves = [onnxnn.tensor(array, requires_grad=True) for array in arrays]
    grads = onnxnn.autograd.grad(_cell_loss(name, cell, *leaves), leaves, create_graph=create_graph)
    return leaves, onnxnn.cat([grad.reshape(-1) for grad in grads])


@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_cells_gradients_match_finite_differences_to_the_second_order(name, executor):
    cell = CELLS[name][1](3, 4).double()
    arrays = [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4))]
    if name == "lstm":
        arrays.append(RNG.standard_normal((2, 4)))

    def outputs(*inputs):
        result = cell(inputs[0], tuple(inputs[1:]) if name == "lstm" else inputs[1])
        return onnxnn.cat([t.reshape(-1) for t in (result if name == "lstm" else (result,))])

    with onnxnn.set_executor(executor):
        check_gradients(outputs, arrays)
        # The first gradient recorded for differentiation takes the formulas as ops, whose own
        # gradient reaches the node's saved outputs: its product with a direction, against central
        # differences of the first gradient (float64: eps^2 truncation, 1e-16 / eps rounding).
        leaves, gradient = _first_gradient(name, cell, arrays, create_graph=True)
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
                    values.append(float(np.sum(_first_gradient(name, cell, arrays)[1].numpy() * direction)))
                array[index] = original
                expected[index] = (values[0] - values[1]) / (2 * eps)
            np.testing.assert_allclose(product.numpy(), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "op_type, shapes, message",
    [
        ("FusedLSTMCell", [(2, 16), (2, 16)], "takes 3 inputs"),
        ("FusedLSTMCell", [(2, 16), (2, 12), (2, 4)], "hidden_gates must be float32 of shape [2, 16]"),
        ("FusedLSTMCell", [(2, 16), (2, 16), (2, 4, 1)], "the state must be a floating [batch, hidden] tensor"),
        ("FusedLSTMCell", [(3, 16), (3, 16), (2, 4)], "input_gates must be float32 of shape [2, 16]"),
        ("FusedGRUCell", [(2, 16), (2, 16), (2, 4)], "input_gates must be float32 of shape [2, 12]"),
        ("FusedLSTMCellGradient", [(2, 4)] * 7, "takes 8 inputs"),
        ("FusedLSTMCellGradient", [(2, 4)] * 6 + [(2, 3), (2, 4)], "O must be float32 of shape [2, 4]"),
        ("FusedGRUCellGradient", [(2, 4)] * 5 + [(4, 2)], "HN must be float32 of shape [2, 4]"),
    ],
)
def test_bad_cell_nodes_are_refused_naming_the_input(op_type, shapes, message):
    inputs = tuple(onnxnn.zeros(shape) for shape in shapes)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        apply_op(op_type, inputs, None, None, domain="ai.onnxnn")
