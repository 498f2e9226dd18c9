"""Shape ops at their edges, as PyTorch 2.13 behaves there.

- ``cat`` skips a legacy empty 1-D tensor (shape ``(0,)``) among N-D tensors, and gives it a zero
  gradient of its shape (not None).
- ``combinations(x, r)`` with ``r`` above ``x``'s length is an empty ``(0, r)`` result still connected
  to ``x``: ``x`` gets a zero gradient.
- ``tensordot`` takes ``dims`` as an int, a pair of lists, or a tensor (one element: an int; two rows:
  the pair); it refuses dims lists of two lengths, operands of two dtypes, a dim named twice and
  contracted sizes that differ, and sums a contracted dim of size 1 on one side over the other.
- ``masked_scatter`` broadcasts ``input`` and ``mask`` together (the result has their common shape).
- ``block_diag()`` of no tensors is a ``(1, 0)`` tensor of the default dtype.
- ``mT``, ``mH`` and ``adjoint()`` return a 0-d tensor unchanged and refuse a 1-D one (RuntimeError
  naming the attribute); ``H`` accepts 0-d and 2-D tensors only.
- ``cross``/``linalg.cross``: operands of one rank and one dtype, length 3 along ``dim`` in both
  before broadcasting; bool refused (NotImplementedError); the default dim is ``input``'s first of
  size 3.
- ``einsum`` refuses a malformed equation with a RuntimeError naming the problem: a character other
  than a letter, a stray or second ``...``, too few or too many operands, subscript counts that do
  not match an operand's rank, an output subscript repeated or in no operand, and sizes of one
  subscript that neither agree nor broadcast. Sublist subscripts 0-25 are A-Z and 26-51 a-z, so an
  implicit output lists them in that order. An uppercase subscript beside ``...`` keeps its meaning.

Expected values are hand-derived; each case runs on both executors.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")


def _arange(*shape, dtype=np.float32):
    return onnxnn.tensor(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def _cat_with_empty():
    matrix = onnxnn.ones(2, 3, requires_grad=True)
    empty = onnxnn.zeros(0, requires_grad=True)
    result = onnxnn.cat([matrix, empty, matrix])
    result.sum().backward()
    return result, [matrix.grad, empty.grad]


def _cat_with_empty_of_other_dtype():
    matrix = onnxnn.ones(2, 3, dtype=onnxnn.float64, requires_grad=True)
    empty = onnxnn.zeros(0, requires_grad=True)
    result = onnxnn.cat([empty, matrix])
    result.sum().backward()
    return result, [matrix.grad, empty.grad]


def _combinations_too_long():
    x = onnxnn.tensor([0.0, 1.0, 2.0], requires_grad=True)
    result = onnxnn.combinations(x, 4)
    result.sum().backward()
    return result, [x.grad]


def _tensordot_broadcast_gradient():
    a = onnxnn.tensor([[0.0], [3.0]], requires_grad=True)
    b = _arange(3, 4).requires_grad_()
    result = onnxnn.tensordot(a, b, dims=([1], [0]))
    result.sum().backward()
    return result, [a.grad, b.grad]


def _masked_scatter_broadcast_input():
    x = onnxnn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    mask = onnxnn.tensor([[True, False, True], [False, True, True]])
    source = onnxnn.arange(10.0, requires_grad=True)
    result = x.masked_scatter(mask, source)
    (result * _arange(2, 3)).sum().backward()
    return result, [x.grad, source.grad]


# name -> (run: () -> (result, gradients), expected result, expected gradients)
GRADIENT_CASES = {
    # Rows of ones stacked: the empty tensor adds nothing; each matrix element is used twice.
    "cat_skips_empty": (_cat_with_empty, np.ones((4, 3)), [np.full((2, 3), 2.0), np.zeros(0)]),
    "cat_skips_empty_promoted": (_cat_with_empty_of_other_dtype, np.ones((2, 3)), [np.ones((2, 3)), np.zeros(0)]),
    "combinations_r_above_n": (_combinations_too_long, np.zeros((0, 4)), [np.zeros(3)]),
    # a's size-1 dim sums b's rows: row i of the result is a[i] * (b[0] + b[1] + b[2]) = a[i] * [12, 15, 18, 21];
    # d(sum)/da[i] = 12 + 15 + 18 + 21 = 66; d(sum)/db[k, j] = a[0] + a[1] = 3.
    "tensordot_size_one_sums": (
        _tensordot_broadcast_gradient,
        np.array([[0.0] * 4, [36.0, 45.0, 54.0, 63.0]]),
        [np.full((2, 1), 66.0), np.full((3, 4), 3.0)],
    ),
    # x broadcast to (2, 3); the true positions, row-major, take source[0..3]. The weight w = arange(6)
    # reaches x where the mask is false ((0, 1): w=1 onto x[1]; (1, 0): w=3 onto x[0]) and source[k]
    # at its k-th true position: w = 0, 2, 4, 5.
    "masked_scatter_broadcasts_input": (
        _masked_scatter_broadcast_input,
        np.array([[0.0, 2.0, 1.0], [1.0, 2.0, 3.0]]),
        [np.array([3.0, 1.0, 0.0]), np.array([0.0, 2.0, 4.0, 5.0] + [0.0] * 6)],
    ),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
def test_values_and_gradients(name, executor):
    run, expected, expected_gradients = GRADIENT_CASES[name]
    with onnxnn.set_executor(executor):
        result, gradients = run()
        assert tuple(result.shape) == expected.shape
        np.testing.assert_array_equal(result.detach().numpy(), expected)
        for gradient, wanted in zip(gradients, expected_gradients):
            assert gradient is not None
            assert tuple(gradient.shape) == wanted.shape
            np.testing.assert_array_equal(gradient.numpy(), wanted)


A = np.arange(6.0, dtype=np.float32).reshape(2, 3)
B = np.arange(12.0, dtype=np.float32).reshape(3, 4)

# name -> (run: () -> Tensor, expected value)
VALUE_CASES = {
    "tensordot_dims_0d_tensor": (lambda: onnxnn.tensordot(_arange(2, 3), _arange(3, 4), dims=onnxnn.tensor(1)), A @ B),
    "tensordot_dims_one_element": (
        lambda: onnxnn.tensordot(_arange(2, 3), _arange(3, 4), dims=onnxnn.tensor([1])),
        A @ B,
    ),
    "tensordot_dims_two_rows": (
        lambda: onnxnn.tensordot(_arange(2, 3), _arange(3, 4), dims=onnxnn.tensor([[1], [0]])),
        A @ B,
    ),
    # b's size-1 dim: a's row sums times b's only row.
    "tensordot_size_one_on_second": (
        lambda: onnxnn.tensordot(_arange(2, 3), _arange(1, 4), dims=([1], [0])),
        A.sum(1, keepdims=True) * np.arange(4.0),
    ),
    "block_diag_of_nothing": (lambda: onnxnn.block_diag(), np.zeros((1, 0), dtype=np.float32)),
    "mT_of_0d": (lambda: onnxnn.tensor(2.0).mT, np.float32(2.0)),
    "mH_of_0d": (lambda: onnxnn.tensor(2.0).mH, np.float32(2.0)),
    "adjoint_of_0d": (lambda: onnxnn.tensor(2.0).adjoint(), np.float32(2.0)),
    "adjoint_function_of_0d": (lambda: onnxnn.adjoint(onnxnn.tensor(2.0)), np.float32(2.0)),
    "mT_of_batch": (lambda: _arange(2, 2, 3).mT, np.arange(12.0).reshape(2, 2, 3).swapaxes(1, 2)),
    # cross's default dim: input's first of size 3 (dim 1 here), other broadcast along dim 0.
    "cross_default_dim_of_input": (
        lambda: onnxnn.cross(onnxnn.tensor([[1.0, 0.0, 0.0]]), onnxnn.tensor([[0.0, 1.0, 0.0]] * 3)),
        np.array([[0.0, 0.0, 1.0]] * 3),
    ),
    "cross_int64": (
        lambda: onnxnn.linalg.cross(onnxnn.tensor([1, 2, 3]), onnxnn.tensor([4, 5, 6])),
        np.array([-3, 6, -3]),
    ),
    # Sublist subscripts 0 -> A and 30 -> e: the implicit output is "Ae" (A-Z before a-z).
    "einsum_sublist_implicit_order": (lambda: onnxnn.einsum(_arange(2, 3), [30, 0]), A.T),
    # An operand's own uppercase letter beside "...": Z indexes the batch, "..." the trailing dim.
    "einsum_uppercase_beside_ellipsis": (
        lambda: onnxnn.einsum("Zi...,Z...->Z...", _arange(2, 3, 4), _arange(2, 4)),
        np.einsum("zik,zk->zk", np.arange(24.0).reshape(2, 3, 4), np.arange(8.0).reshape(2, 4)),
    ),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", sorted(VALUE_CASES))
def test_values(name, executor):
    run, expected = VALUE_CASES[name]
    with onnxnn.set_executor(executor):
        result = run()
        assert tuple(result.shape) == np.shape(expected)
        np.testing.assert_array_equal(result.numpy(), expected)


def _ones(*shapes, dtype=None):
    return [onnxnn.ones(shape, dtype=dtype) for shape in shapes]


# name -> (call, error type, message fragment)
ERROR_CASES = {
    "mT_of_1d": (lambda: onnxnn.ones(3).mT, RuntimeError, "tensor.mT is only supported on matrices"),
    "mH_of_1d": (lambda: onnxnn.ones(3).mH, RuntimeError, "tensor.mH is only supported on matrices"),
    "adjoint_of_1d": (lambda: onnxnn.ones(3).adjoint(), RuntimeError, "tensor.adjoint() is only supported"),
    "adjoint_function_of_1d": (lambda: onnxnn.adjoint(onnxnn.ones(3)), RuntimeError, "Got 1-D tensor."),
    "H_of_1d": (lambda: onnxnn.ones(3).H, RuntimeError, "tensor.H is only supported on matrices (2-D tensors)"),
    "H_of_3d": (lambda: onnxnn.ones(2, 2, 3).H, RuntimeError, "consider using tensor.mH"),
    "tensordot_float_dims": (lambda: onnxnn.tensordot(*_ones((2, 3), (3, 4)), dims=1.5), RuntimeError, "dims=1.5"),
    "tensordot_negative_tensor": (
        lambda: onnxnn.tensordot(*_ones((2, 3), (3, 4)), dims=onnxnn.tensor(-1)),
        RuntimeError,
        "tensordot expects dims >= 0",
    ),
    "tensordot_too_many_dims": (
        lambda: onnxnn.tensordot(*_ones((2, 3), (3, 4)), dims=3),
        RuntimeError,
        "tensordot expects dims < ndim_a or ndim_b, but got dims=3",
    ),
    "tensordot_three_rows": (
        lambda: onnxnn.tensordot(*_ones((2, 3), (3, 4)), dims=onnxnn.tensor([0, 1, 1])),
        AssertionError,
        "dims tensor must have size 2 in first dimension, got 3",
    ),
    "tensordot_lengths": (
        lambda: onnxnn.tensordot(*_ones((2, 3), (3, 4)), dims=([1, 0], [0])),
        RuntimeError,
        "both dimension lists should have same length",
    ),
    "tensordot_dtypes": (
        lambda: onnxnn.tensordot(onnxnn.ones(2, 3), onnxnn.ones(3, 4, dtype=onnxnn.float64), dims=1),
        RuntimeError,
        "both inputs should have same dtype",
    ),
    "tensordot_dim_twice": (
        lambda: onnxnn.tensordot(*_ones((3, 3), (3, 3)), dims=([0, 1], [1, -1])),
        RuntimeError,
        "dim 1 appears multiple times in the list of dims",
    ),
    "tensordot_sizes_name_given_dims": (
        lambda: onnxnn.tensordot(*_ones((2, 3), (3, 4)), dims=([-1], [-1])),
        RuntimeError,
        "first has size 3 in dim -1 and second has size 4 in dim -1",
    ),
    "masked_scatter_in_place_grows": (
        lambda: onnxnn.ones(3).masked_scatter_(onnxnn.ones(2, 3, dtype=onnxnn.bool), onnxnn.ones(6)),
        RuntimeError,
        "",
    ),
    "cross_bool": (
        lambda: onnxnn.cross(*_ones((2, 3), (2, 3), dtype=onnxnn.bool), dim=1),
        NotImplementedError,
        "\"cross\" not implemented for 'Bool'",
    ),
    "cross_dtypes": (
        lambda: onnxnn.linalg.cross(onnxnn.tensor([1, 2, 3]), onnxnn.tensor([4.0, 5.0, 6.0])),
        RuntimeError,
        "expected scalar type Long but found Float",
    ),
    "cross_ranks": (
        lambda: onnxnn.linalg.cross(*_ones((3,), (2, 3))),
        RuntimeError,
        "linalg.cross: inputs must have the same number of dimensions.",
    ),
    "cross_length_before_broadcast": (
        lambda: onnxnn.linalg.cross(*_ones((2, 1), (2, 3))),
        RuntimeError,
        "linalg.cross: inputs dimension -1 must have length 3. Got 1 and 3",
    ),
    "cross_0d": (
        lambda: onnxnn.linalg.cross(*_ones((), ())),
        IndexError,
        "Dimension specified as -1 but tensor has no dimensions",
    ),
    "einsum_no_operands": (lambda: onnxnn.einsum("i->i"), ValueError, "at least one operand"),
    "einsum_sublist_out_of_range": (
        lambda: onnxnn.einsum(onnxnn.ones(2, 3), [0, 60], [1]),
        ValueError,
        "not within the valid range [0, 52)",
    ),
    "einsum_sublist_output_twice": (
        lambda: onnxnn.einsum(onnxnn.ones(2, 3), [0, 1], [1, 1]),
        RuntimeError,
        "output subscript B appears more than once in the output",
    ),
}

# Bad equations: (equation, operand shapes, message fragment); each a RuntimeError.
BAD_EQUATIONS = [
    ("i1,j->ij", [(2, 3), (3,)], "invalid subscript given at index 1 in the equation string"),
    ("ij-i", [(2, 3)], "invalid subscript given at index 2"),
    ("ij->i->j", [(2, 3)], "invalid subscript given at index 5"),
    ("ij->i", [(2, 3), (3,)], "more operands were provided than specified in the equation"),
    ("ij,jk->ik", [(2, 3)], "fewer operands were provided than specified in the equation"),
    ("ijk->i", [(2, 3)], "the number of subscripts in the equation (3) does not match the number of dimensions (2)"),
    ("...ij->i", [(2,)], "the number of subscripts in the equation (2) is more than the number of dimensions (1)"),
    ("ij->ii", [(2, 3)], "output subscript i appears more than once in the output"),
    ("ij->k", [(2, 3)], "output subscript k does not appear in the equation for any input operand"),
    ("....->", [(2, 3)], "found '.' for operand 0 for which an ellipsis was already found"),
    ("i...j...->", [(2, 3)], "found '.' for operand 0 for which an ellipsis was already found"),
    ("i..j->", [(2, 3)], "found '.' for operand 0 that is not part of any ellipsis"),
    ("ij->....", [(2, 3)], "found '.' for output but an ellipsis (...) was already found"),
    ("ij->i..", [(2, 3)], "found '.' for output that is not part of any ellipsis (...)"),
    ("ii->i", [(2, 3)], "subscript i is repeated for operand 0 but the sizes don't match, 3 != 2"),
    (
        "i,i->i",
        [(2,), (3,)],
        "subscript i has size 3 for operand 1 which does not broadcast with previously seen size 2",
    ),
    ("...,...->...", [(2, 3), (4, 3)], "dimension 0 covered by ellipsis in operand 1has size 4"),
]
for equation, shapes, fragment in BAD_EQUATIONS:
    ERROR_CASES[f"einsum {equation} {shapes}"] = (
        lambda equation=equation, shapes=shapes: onnxnn.einsum(equation, *_ones(*shapes)),
        RuntimeError,
        fragment,
    )


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_errors(name):
    call, error, fragment = ERROR_CASES[name]
    with pytest.raises(error) as raised:
        call().numpy()
    assert fragment in str(raised.value)
