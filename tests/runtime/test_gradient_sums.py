"""The gradients a value gets from its several uses are summed as one product over their rows where
each is a row product ``a_i^T b_i`` and that pays, and as one sum over their rows where each is a
sum of a matrix's rows (runtime/gradient_sums.py): a weight and a bias read at every step of a
recurrence. Specification: the sum's value (against float64 within its rounding), the nodes
recorded, and where the plain sum stays.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from tolerances import assert_within, gamma
from recorded_graphs import pending_op_types


def _shared_weight_gradient(rows: int, uses: int, inner: int = 16, outer: int = 24, create_graph: bool = False):
    """``sum_i (x_i W) * c_i`` for ``uses`` inputs of ``rows`` rows: W's gradient and the float64 one."""
    rng = np.random.default_rng(rows * 100 + uses)
    xs = [rng.standard_normal((rows, inner)).astype(np.float32) for _ in range(uses)]
    cs = [rng.standard_normal((rows, outer)).astype(np.float32) for _ in range(uses)]
    weight = onnxnn.tensor(rng.standard_normal((inner, outer)).astype(np.float32), requires_grad=True)
    # Under create_graph the inputs need gradients too, so that W's gradient has a history.
    inputs = [onnxnn.tensor(x, requires_grad=create_graph) for x in xs]
    loss = sum(((x @ weight) * onnxnn.tensor(c)).sum() for x, c in zip(inputs, cs))
    (gradient,) = onnxnn.autograd.grad(loss, [weight], create_graph=create_graph)
    expected = sum(x.astype(np.float64).T @ c.astype(np.float64) for x, c in zip(xs, cs))
    magnitude = sum(np.abs(x.astype(np.float64)).T @ np.abs(c.astype(np.float64)) for x, c in zip(xs, cs))
    return gradient, expected, gamma(rows * uses + uses) * magnitude


@pytest.mark.parametrize("uses", [2, 16])
def test_a_weight_read_by_products_over_few_rows_gets_one_product_over_all_of_them(uses):
    gradient, expected, bound = _shared_weight_gradient(rows=4, uses=uses)
    recorded = pending_op_types(gradient)
    assert recorded.count("Gemm") == 1 and "Add" not in recorded and recorded.count("Concat") == 2
    assert_within(gradient.numpy(), expected, bound)


def test_products_over_many_rows_keep_their_sum():
    # 2 x 512 rows of 16 + 24 columns copied would cost more than one sum of a 16 x 24 result saves.
    gradient, expected, bound = _shared_weight_gradient(rows=512, uses=2)
    recorded = pending_op_types(gradient)
    assert recorded.count("Gemm") == 2 and "Concat" not in recorded and "Add" in recorded
    assert_within(gradient.numpy(), expected, bound)


def test_a_backward_recorded_for_differentiation_keeps_the_sum_and_differentiates():
    gradient, expected, bound = _shared_weight_gradient(rows=4, uses=3, create_graph=True)
    assert "Concat" not in pending_op_types(gradient)
    assert_within(gradient.detach().numpy(), expected, bound)
    assert gradient.requires_grad


def test_other_gradients_of_a_shared_value_are_added_in_order():
    x = onnxnn.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    weight = onnxnn.tensor(np.ones((3, 2), np.float32))
    loss = (x @ weight).sum() + (x * x).sum() + x.exp().sum()
    (gradient,) = onnxnn.autograd.grad(loss, [x])
    assert "Concat" not in pending_op_types(gradient)
    values = np.arange(6, dtype=np.float64).reshape(2, 3)
    assert_within(gradient.numpy(), 2 + 2 * values + np.exp(values), gamma(8) * (2 + 2 * values + np.exp(values)))


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_a_recurrent_layers_hidden_weight_and_bias_get_one_product_and_one_sum_over_every_step(mode):
    onnxnn.manual_seed(0)
    layer = getattr(onnxnn.nn, mode)(8, 16)
    output, _ = layer(onnxnn.randn(12, 3, 8))
    output.square().sum().backward()
    # W_hh's gradient: one Gemm of the 12 steps' rows (3 each), in W_hh's layout; b_hh's: one row sum.
    product = layer.weight_hh_l0.grad._value.node
    assert product.op_type == "Gemm" and [value.node.op_type for value in product.inputs] == ["Concat", "Concat"]
    assert [value.shape[0] for value in product.inputs] == [36, 36]
    row_sum = layer.bias_hh_l0.grad._value.node
    assert row_sum.op_type == "ReduceSum" and row_sum.inputs[0].node.op_type == "Concat"
    assert row_sum.inputs[0].shape[0] == 36


def _shared_bias_gradient(uses: int, rows: int = 3, columns: int = 8):
    """``sum_i (x_i + b) * c_i`` for ``uses`` inputs of ``rows`` rows: b's gradient and the float64 one."""
    rng = np.random.default_rng(uses)
    xs = [rng.standard_normal((rows, columns)).astype(np.float32) for _ in range(uses)]
    cs = [rng.standard_normal((rows, columns)).astype(np.float32) for _ in range(uses)]
    bias = onnxnn.tensor(rng.standard_normal(columns).astype(np.float32), requires_grad=True)
    loss = sum(((onnxnn.tensor(x) + bias) * onnxnn.tensor(c)).sum() for x, c in zip(xs, cs))
    (gradient,) = onnxnn.autograd.grad(loss, [bias])
    stacked = np.concatenate(cs).astype(np.float64)
    return gradient, stacked.sum(0), gamma(rows * uses) * np.abs(stacked).sum(0)


@pytest.mark.parametrize("uses, one_sum", [(3, False), (4, True), (16, True)])
def test_a_bias_added_at_many_uses_gets_one_sum_over_their_rows(uses, one_sum):
    # From four uses on, one ReduceSum of the rows concatenated (a Concat) replaces a ReduceSum and an
    # Add per use; fewer keep their sum.
    gradient, expected, bound = _shared_bias_gradient(uses)
    recorded = pending_op_types(gradient)
    if one_sum:
        assert recorded.count("ReduceSum") == 1 and recorded.count("Concat") == 1 and "Add" not in recorded
    else:
        assert recorded.count("ReduceSum") == uses and "Concat" not in recorded
    assert_within(gradient.numpy(), expected, bound)
