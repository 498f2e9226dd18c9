"""In-place writes whose gradients a differential sweep against PyTorch found wrong: a leaf copied into
a tensor, and ``index_fill`` of a tensor value at repeated indices. Expected gradients from the
formulas of the functions written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

VIEWS = {
    "column": lambda y: y[:, 1],
    "select": lambda y: y.select(1, 1),
    "transposed_row": lambda y: y.t()[1],
    "row_prefix": lambda y: y[0, :3],
}


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_a_leaf_copied_into_a_view_takes_the_gradient_of_what_it_became(view):
    # loss = sum(y * y) with y's written elements equal to s: d loss / d s = 2 s, and x keeps 2 x
    # only where it was not overwritten.
    x = onnxnn.ones(3, 4, requires_grad=True)
    s = onnxnn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    view(y).copy_(s)
    (y * y).sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), 2 * np.array([1.0, 2.0, 3.0]))
    written = np.zeros((3, 4), bool)
    view_of_mask = view(onnxnn.tensor(np.arange(12).reshape(3, 4)))
    written.reshape(-1)[view_of_mask.numpy().reshape(-1)] = True
    np.testing.assert_array_equal(x.grad.numpy(), np.where(written, 0.0, 2.0))


def test_a_leaf_copied_whole_keeps_the_target_in_the_graph():
    w = onnxnn.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = onnxnn.ones(2, 2, requires_grad=True) * 1
    y.copy_(w)
    assert y.requires_grad
    z = onnxnn.zeros(3, 2)
    z[1].copy_(w[0])
    (y.sum() + (z * z).sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1.0 + 2 * 1.0, 1.0 + 2 * 2.0], [1.0, 1.0]])


@pytest.mark.parametrize("index", [[0, 2, 0], [0, 2, 2], [1, 1, 1, 1], []])
def test_index_fill_of_a_tensor_value_counts_each_filled_element_once(index):
    x = onnxnn.zeros(3, 2, requires_grad=True)
    v = onnxnn.tensor(7.5, requires_grad=True)
    out = x.index_fill(0, onnxnn.tensor(index, dtype=onnxnn.int64), v)
    weights = np.arange(6.0).reshape(3, 2)
    (out * onnxnn.tensor(weights)).sum().backward()
    rows = sorted(set(index))
    filled = np.zeros((3, 2), bool)
    filled[rows] = True
    np.testing.assert_array_equal(out.detach().numpy(), np.where(filled, 7.5, 0.0))
    assert v.grad.item() == weights[filled].sum()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(filled, 0.0, weights))


def test_a_dividend_changed_in_place_after_a_division_by_a_constant_is_not_needed():
    # z = y / 2 keeps no y for its gradient (PyTorch's saves it only for the divisor's gradient).
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = y / 2.0
    y.mul_(2)
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.5])
    w = onnxnn.tensor([3.0, 4.0], requires_grad=True)
    y = x * 1
    z = y / w
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@pytest.mark.parametrize("dtype", [onnxnn.int64, onnxnn.int32])
def test_a_0d_integer_tensor_index_makes_a_view(dtype):
    # PyTorch reads a 0-d integer tensor index as an int: basic indexing, so writes show in the base.
    x = onnxnn.arange(12.0).reshape(3, 4)
    row = onnxnn.tensor(1, dtype=dtype)
    x[row].mul_(10)
    x[row + 1, 1:].zero_()
    expected = np.arange(12.0).reshape(3, 4)
    expected[1] *= 10
    expected[2, 1:] = 0
    np.testing.assert_array_equal(x.numpy(), expected)


FILLS = {
    "zero_": lambda y: y.zero_(),
    "fill_": lambda y: y.fill_(1.5),
    "copy_constant": lambda y: y.copy_(onnxnn.full((2, 3), 1.5)),
}


@pytest.mark.parametrize("fill", FILLS.values(), ids=FILLS.keys())
def test_a_tensor_in_the_graph_overwritten_by_a_constant_stays_in_it(fill):
    # PyTorch keeps it requiring grad (FillBackward0): the old history gets zeros, not an error.
    x = onnxnn.ones(2, 3, requires_grad=True)
    y = x * 2
    fill(y)
    assert y.requires_grad
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    z = x * 2
    row = z[0]
    row.fill_(1.0)
    assert row.requires_grad
    (z * z).sum().backward()
    # Row 0 is now the constant 1; row 1 is still 2x, whose square's gradient is 8x.
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0, 0.0], [8.0, 8.0, 8.0]])


@pytest.mark.parametrize(
    "write, expected_grad",
    [
        (lambda y: y.mul_(3), [12.0, 12.0, 12.0]),  # y = 6x: d(y*y)/dy = 2y
        (lambda y: y.__setitem__(0, 5.0), [10.0, 4.0, 4.0]),
        (lambda y: y.add_(1).add_(1), [8.0, 8.0, 8.0]),
    ],
    ids=["mul_", "setitem", "two writes"],
)
def test_a_retained_gradient_is_the_written_values(write, expected_grad):
    # PyTorch retains the gradient of the tensor as it is when backward runs, after its writes.
    x = onnxnn.ones(3, requires_grad=True)
    y = x * 2
    y.retain_grad()
    write(y)
    (y * y).sum().backward()
    assert y.retains_grad
    np.testing.assert_array_equal(y.grad.numpy(), expected_grad)


# PyTorch's copy_ takes a Tensor, or a number it wraps in one; a list or an array is refused, not converted.
NON_TENSOR_SOURCES = {
    "list": ([1.0, 2.0], "list"),
    "tuple": ((1.0, 2.0), "tuple"),
    "array": (np.ones(2), "ndarray"),
    "0-d array": (np.array(2.0), "ndarray"),
}


@pytest.mark.parametrize("source", NON_TENSOR_SOURCES)
def test_copy_refuses_a_source_that_is_not_a_tensor(source):
    value, type_name = NON_TENSOR_SOURCES[source]
    target = onnxnn.zeros(2)
    with pytest.raises(
        TypeError, match=f"copy_\\(\\): argument 'other' \\(position 1\\) must be Tensor, not {type_name}"
    ):
        target.copy_(value)
    np.testing.assert_array_equal(target.numpy(), [0.0, 0.0])


@pytest.mark.parametrize("number, expected", [(1.5, 1.5), (2, 2.0), (True, 1.0), (np.float32(2.5), 2.5)])
def test_copy_broadcasts_a_number(number, expected):
    np.testing.assert_array_equal(onnxnn.zeros(2).copy_(number).numpy(), [expected, expected])
