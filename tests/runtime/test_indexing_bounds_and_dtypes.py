"""Index bounds and dtypes of indexing writes and gathers: advanced assignment of another dtype, known
out-of-range indices of in-place writes (raised at the call, leaving the tensor readable), negative
indices counted from the end, and gather/scatter with 0-d inputs or indices.

Errors match PyTorch's types and messages. ``x[key]`` and ``x[key] = v`` are in
test_indexing_keys.py; the indexing ops' values and gradients in test_indexing_gather_scatter.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

from .indexing_cases import MATRIX


# Advanced-index assignment takes a tensor only of the destination's dtype (PyTorch's index_put_
# refuses a cast, which would round a float value into an int tensor), except through one mask with
# a one-element value, which PyTorch writes as masked_fill does. (id, assignment, accepted).
ROWS = np.array([True, False])
INDEX_PUT_DTYPE_CASES = [
    ("float_into_int", lambda x: x.long().__setitem__(onnxnn.tensor([0]), onnxnn.tensor([1.5])), False),
    (
        "double_into_float",
        lambda x: x.__setitem__(onnxnn.tensor([0]), onnxnn.tensor([1.0], dtype=onnxnn.float64)),
        False,
    ),
    ("list_index_0d_int", lambda x: x.__setitem__([0, 1], onnxnn.tensor(3)), False),
    (
        "mask_many_values",
        lambda x: x.__setitem__(onnxnn.tensor(ROWS)[:, None].expand(2, 3), onnxnn.tensor([1, 2, 3])),
        False,
    ),
    ("mask_and_index", lambda x: x.__setitem__((onnxnn.tensor(ROWS), [0]), onnxnn.tensor(1)), False),
    ("accumulate_mask", lambda x: x.index_put_((onnxnn.tensor(ROWS),), onnxnn.tensor(1), accumulate=True), False),
    ("accumulate_index", lambda x: x.index_put_((onnxnn.tensor([0]),), onnxnn.tensor([1]), accumulate=True), False),
    ("masked_scatter", lambda x: x.masked_scatter_(onnxnn.tensor(ROWS)[:, None], onnxnn.tensor([1, 2, 3])), False),
    ("put", lambda x: x.put_(onnxnn.tensor([0]), onnxnn.ones(1, dtype=onnxnn.float64)), False),
    ("0d_integer_index_is_basic", lambda x: x.__setitem__(onnxnn.tensor(1), onnxnn.tensor([3, 4, 5])), True),
    ("mask_and_slice_0d", lambda x: x.__setitem__((onnxnn.tensor(ROWS), slice(None)), onnxnn.tensor(3)), True),
    ("mask_one_element", lambda x: x.__setitem__((onnxnn.tensor(ROWS),), onnxnn.tensor([3])), True),
    (
        "slice_then_mask",
        lambda x: x.__setitem__(
            (slice(None), onnxnn.tensor([True, False, True])), onnxnn.tensor([[3]], dtype=onnxnn.float64)
        ),
        True,
    ),
    ("python_bool_key", lambda x: x.__setitem__(True, onnxnn.tensor(3)), True),
    ("index_put_mask_0d", lambda x: x.index_put_((onnxnn.tensor(ROWS),), onnxnn.tensor(3)), True),
]


@pytest.mark.parametrize(
    "assign, accepted", [c[1:] for c in INDEX_PUT_DTYPE_CASES], ids=[c[0] for c in INDEX_PUT_DTYPE_CASES]
)
def test_advanced_assignment_of_another_dtype(assign, accepted):
    x = onnxnn.zeros(2, 3)
    if accepted:
        assign(x)
        assert x.dtype == onnxnn.float32 and 3.0 in x.numpy()
        return
    with pytest.raises(RuntimeError, match=r"same dtype|dtypes match|same dtypes"):
        assign(x)
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 3), np.float32))  # left unchanged


# ---------------------------------------------------------------- known out-of-range indices of in-place writes

# (id, in-place write on a (3, 4) float64 tensor, PyTorch's error type, its message). Each index is
# known when the op is recorded, so the op must raise at the call: recording the scatter would leave
# the tensor failing on every later read.
IN_PLACE_INDEX_REFUSALS = [
    (
        "index_fill",
        lambda x: x.index_fill_(0, onnxnn.tensor([0, 9]), -1.0),
        IndexError,
        "index 9 is out of bounds for dimension 0 with size 3",
    ),
    (
        "index_fill_tensor_value",
        lambda x: x.index_fill_(1, onnxnn.tensor([4]), onnxnn.tensor(-1.0, dtype=onnxnn.float64)),
        IndexError,
        "index 4 is out of bounds for dimension 1 with size 4",
    ),
    (
        "index_fill_below_minus_size",
        lambda x: x.index_fill_(0, onnxnn.tensor([-4]), -1.0),
        IndexError,
        "index -4 is out of bounds for dimension 0 with size 3",
    ),
    ("index_fill_0d_index", lambda x: x.index_fill_(0, onnxnn.tensor(3), -1.0), IndexError, "index 3 is out of bounds"),
    (
        "index_fill_int32",
        lambda x: x.index_fill_(0, onnxnn.tensor([0], dtype=onnxnn.int32), -1.0),
        IndexError,
        r"index_fill_\(\): Expected dtype int64 for index",
    ),
    (
        "index_fill_2d_index",
        lambda x: x.index_fill_(0, onnxnn.tensor([[0]]), -1.0),
        RuntimeError,
        "Index has to be a vector/scalar",
    ),
    (
        "put",
        lambda x: x.put_(onnxnn.tensor([0, 99]), onnxnn.ones(2, dtype=onnxnn.float64)),
        IndexError,
        r"out of range: tried to access index 99 on a tensor of 12 elements\.",
    ),
    (
        "put_below_minus_numel",
        lambda x: x.put_(onnxnn.tensor([-13]), onnxnn.ones(1, dtype=onnxnn.float64)),
        IndexError,
        "tried to access index -13 on a tensor of 12 elements",
    ),
    (
        "put_accumulate",
        lambda x: x.put_(onnxnn.tensor([12]), onnxnn.ones(1, dtype=onnxnn.float64), accumulate=True),
        IndexError,
        "tried to access index 12 on a tensor of 12 elements",
    ),
    (
        "put_int32",
        lambda x: x.put_(onnxnn.tensor([0], dtype=onnxnn.int32), onnxnn.ones(1, dtype=onnxnn.float64)),
        RuntimeError,
        r"put_\(\): Expected a long tensor for index, but got Int",
    ),
    (
        "index_put_accumulate",
        lambda x: x.index_put_((onnxnn.tensor([0, 9]),), onnxnn.tensor(1.0, dtype=onnxnn.float64), accumulate=True),
        IndexError,
        "index 9 is out of bounds for dimension 0 with size 3",
    ),
    (
        "index_put_accumulate_second_dim",
        lambda x: x.index_put_(
            (onnxnn.tensor([0]), onnxnn.tensor([-5])), onnxnn.tensor(1.0, dtype=onnxnn.float64), accumulate=True
        ),
        IndexError,
        "index -5 is out of bounds for dimension 1 with size 4",
    ),
    (
        "index_put_accumulate_int32",
        lambda x: x.index_put_(
            (onnxnn.tensor([7], dtype=onnxnn.int32),), onnxnn.tensor(1.0, dtype=onnxnn.float64), accumulate=True
        ),
        IndexError,
        "index 7 is out of bounds for dimension 0 with size 3",
    ),
    (
        "scatter_int32",
        lambda x: x.scatter_(1, onnxnn.tensor([[9]], dtype=onnxnn.int32), 1.0),
        RuntimeError,
        "index 9 is out of bounds for dimension 1 with size 4",
    ),
    (
        "scatter_add_int32",
        lambda x: x.scatter_add_(1, onnxnn.tensor([[-1]], dtype=onnxnn.int32), onnxnn.ones(1, 1, dtype=onnxnn.float64)),
        RuntimeError,
        "index -1 is out of bounds for dimension 1 with size 4",
    ),
    (
        "scatter_reduce_int32",
        lambda x: x.scatter_reduce_(
            0, onnxnn.tensor([[3]], dtype=onnxnn.int32), onnxnn.ones(1, 1, dtype=onnxnn.float64), "sum"
        ),
        RuntimeError,
        "index 3 is out of bounds for dimension 0 with size 3",
    ),
    (
        "view_index_fill",
        lambda x: x[0].index_fill_(0, onnxnn.tensor([7]), -1.0),
        IndexError,
        "index 7 is out of bounds for dimension 0 with size 4",
    ),
]


@pytest.mark.parametrize(
    "name, write, error, message", IN_PLACE_INDEX_REFUSALS, ids=[c[0] for c in IN_PLACE_INDEX_REFUSALS]
)
def test_a_known_bad_index_raises_at_the_in_place_call_and_leaves_the_tensor_readable(name, write, error, message):
    x = onnxnn.tensor(MATRIX)
    with pytest.raises(error, match=message):
        write(x)
    np.testing.assert_array_equal(x.numpy(), MATRIX)


def test_a_parameter_written_with_a_bad_index_still_runs_and_saves(tmp_path):
    layer = onnxnn.nn.Linear(3, 2)
    weight = layer.weight.detach().numpy().copy()
    with onnxnn.no_grad(), pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        layer.weight.index_fill_(0, onnxnn.tensor([5]), 0.0)
    expected = weight.sum(1) + layer.bias.detach().numpy()  # 3 float32 terms: a few eps apart at most
    np.testing.assert_allclose(layer(onnxnn.ones(1, 3)).detach().numpy()[0], expected, rtol=4 * 2.0**-23)
    onnxnn.save(layer.state_dict(), tmp_path / "layer.safetensors")


# (id, in-place write with a negative index in [-size, 0), the numpy write it equals): these count
# from the end, once (an index in [-2 size, -size) is refused above, not moved to another row).
NEGATIVE_IN_PLACE_WRITES = [
    ("index_fill", lambda x: x.index_fill_(0, onnxnn.tensor([-1, -3]), -1.0), lambda a: a.__setitem__([2, 0], -1.0)),
    (
        "index_fill_tensor_value",
        lambda x: x.index_fill_(1, onnxnn.tensor([-4]), onnxnn.tensor(-1.0, dtype=onnxnn.float64)),
        lambda a: a.__setitem__((slice(None), 0), -1.0),
    ),
    (
        "put",
        lambda x: x.put_(onnxnn.tensor([-12, -1]), onnxnn.tensor([5.0, 6.0], dtype=onnxnn.float64)),
        lambda a: a.reshape(-1).__setitem__([0, 11], [5.0, 6.0]),
    ),
    (
        "put_accumulate",
        lambda x: x.put_(onnxnn.tensor([-12]), onnxnn.tensor([5.0], dtype=onnxnn.float64), accumulate=True),
        lambda a: np.add.at(a.reshape(-1), [0], 5.0),
    ),
    (
        "index_put_accumulate",
        lambda x: x.index_put_(
            (onnxnn.tensor([-3, -3]), onnxnn.tensor([-4, 3])), onnxnn.tensor(1.0, dtype=onnxnn.float64), accumulate=True
        ),
        lambda a: np.add.at(a, ([0, 0], [0, 3]), 1.0),
    ),
]


@pytest.mark.parametrize("executor", ("onnxruntime", "kernels"))
@pytest.mark.parametrize(
    "name, write, expected", NEGATIVE_IN_PLACE_WRITES, ids=[c[0] for c in NEGATIVE_IN_PLACE_WRITES]
)
def test_negative_indices_of_in_place_writes_count_from_the_end(executor, name, write, expected):
    x = onnxnn.tensor(MATRIX)
    write(x)
    reference = MATRIX.copy()
    expected(reference)
    with onnxnn.set_executor(executor):
        np.testing.assert_array_equal(x.numpy(), reference)


@pytest.mark.parametrize(
    "write, expected",
    [
        (lambda x: x.scatter_(0, onnxnn.tensor(0), 2.0), 2.0),
        (lambda x: x.scatter_(0, onnxnn.tensor([0]), onnxnn.tensor([3.0])), 3.0),
        (lambda x: x.scatter_add_(0, onnxnn.tensor(0), onnxnn.tensor(3.0)), 4.0),
    ],
    ids=["value", "tensor", "add"],
)
def test_scatter_into_a_0d_tensor_writes_its_one_element(write, expected):
    x = onnxnn.tensor(1.0)
    write(x)
    assert x.shape == () and x.item() == expected


# PyTorch gathers from a 0-d input, or with a 0-d index, as if it were 1-D of one element; the result
# has the index's shape. (input, dim, index, expected numpy result)
ZERO_DIM_GATHERS = {
    "0-d from 0-d": (np.float32(5.0), 0, np.int64(0), np.float32(5.0)),
    "0-d from 0-d, dim -1": (np.float32(5.0), -1, np.int64(0), np.float32(5.0)),
    "0-d int32 index": (np.int64(7), 0, np.int32(0), np.int64(7)),
    "1-D from 0-d": (np.float32(5.0), 0, np.array([0, 0, 0]), np.full(3, 5.0, np.float32)),
    "empty from 0-d": (np.float32(5.0), 0, np.zeros(0, np.int64), np.zeros(0, np.float32)),
    "0-d from 1-D": (np.array([5.0, 6.0], np.float32), 0, np.int64(1), np.float32(6.0)),
}


@pytest.mark.parametrize("case", ZERO_DIM_GATHERS)
def test_gather_with_a_0d_input_or_index(case):
    input, dim, index, expected = ZERO_DIM_GATHERS[case]
    result = onnxnn.tensor(input).gather(dim, onnxnn.tensor(index))
    assert result.shape == np.shape(expected)
    np.testing.assert_array_equal(result.numpy(), expected)
    assert result.numpy().dtype == np.asarray(expected).dtype


@pytest.mark.parametrize(
    "input, index, message",
    [
        (5.0, 1, "index 1 is out of bounds for dimension 0 with size 1"),
        (5.0, -1, "index -1 is out of bounds for dimension 0 with size 1"),
        ([5.0, 6.0], -1, "index -1 is out of bounds for dimension 0 with size 2"),
        (5.0, [[0]], "Index tensor must have the same number of dimensions as input tensor"),
    ],
)
def test_gather_with_a_0d_input_or_index_checks_the_index(input, index, message):
    with pytest.raises(RuntimeError, match=message):
        onnxnn.tensor(input).gather(0, onnxnn.tensor(index))


def test_gather_from_a_0d_tensor_passes_the_gradient():
    x = onnxnn.tensor(5.0, requires_grad=True)
    x.gather(0, onnxnn.tensor([0, 0])).sum().backward()
    assert x.grad.shape == () and x.grad.item() == 2.0


def test_scatter_into_a_0d_tensor_checks_the_index():
    x = onnxnn.tensor(1.0)
    with pytest.raises(RuntimeError, match="index 1 is out of bounds for dimension 0 with size 1"):
        x.scatter_(0, onnxnn.tensor(1), 2.0)
    assert x.item() == 1.0


def test_take_refuses_a_known_index_out_of_range_with_pytorch_index_error():
    with pytest.raises(IndexError, match=r"out of range: tried to access index 12 on a tensor of 12 elements\."):
        onnxnn.tensor(MATRIX).take(onnxnn.tensor([0, 12]))
