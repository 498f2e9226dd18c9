"""Indexing ops: index_select, gather, take, scatter and scatter_add, masked_select, nonzero, and the
gradient rules of the ONNX indexing ops.

Expected values are numpy's (``take_along_axis``, boolean masks, ``nonzero``); gradients are checked
by finite differences in float64. PyTorch's refusals (negative indices, a source or index of another
dtype) are checked with its error types. ``x[key]`` and ``x[key] = v`` are in test_indexing_keys.py;
index bounds of in-place writes and 0-d gathers in test_indexing_bounds_and_dtypes.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn.runtime import ops
from onnxnn.runtime.tensor import Tensor, apply_op

from .indexing_cases import MATRIX


# ---------------------------------------------------------------- gather / scatter family


def test_index_select():
    x = onnxnn.tensor(MATRIX)
    np.testing.assert_array_equal(onnxnn.index_select(x, 1, onnxnn.tensor([3, 0, 3])).numpy(), MATRIX[:, [3, 0, 3]])
    np.testing.assert_array_equal(x.index_select(-2, onnxnn.tensor([2])).numpy(), MATRIX[[-1]])
    with pytest.raises(IndexError, match="index out of range in self"):
        onnxnn.index_select(x, 0, onnxnn.tensor([3]))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        onnxnn.index_select(x, 0, onnxnn.tensor([[0]]))


def test_gather_matches_take_along_axis():
    index = np.array([[0, 2, 1, 0], [2, 2, 0, 1]])
    result = onnxnn.gather(onnxnn.tensor(MATRIX), 0, onnxnn.tensor(index))
    np.testing.assert_array_equal(result.numpy(), np.take_along_axis(MATRIX, index, 0))
    smaller = np.array([[3], [0]])  # index may be smaller than input away from dim, as in PyTorch
    np.testing.assert_array_equal(onnxnn.tensor(MATRIX).gather(1, onnxnn.tensor(smaller)).numpy(), [[3.0], [4.0]])


@pytest.mark.parametrize(
    "index, message",
    [
        (np.array([0, 1]), "Index tensor must have the same number of dimensions as input tensor"),
        (np.array([[0], [4]]), "index 4 is out of bounds for dimension 1 with size 4"),
        (np.zeros((4, 1), dtype=np.int64), "Size does not match at dimension 0"),
    ],
)
def test_gather_errors(index, message):
    with pytest.raises(RuntimeError, match=message):
        onnxnn.gather(onnxnn.tensor(MATRIX), 1, onnxnn.tensor(index))


# PyTorch refuses a negative index in these (index -1 as "no class" must not read the last one).
NEGATIVE_INDEX_REFUSALS = [
    ("gather", lambda x: x.gather(1, onnxnn.tensor([[0, -1]])), RuntimeError, "index -1 is out of bounds"),
    ("index_select", lambda x: x.index_select(1, onnxnn.tensor([-1])), IndexError, "index out of range in self"),
    (
        "index_add",
        lambda x: x.index_add(1, onnxnn.tensor([-1]), onnxnn.ones(3, 1, dtype=onnxnn.float64)),
        RuntimeError,
        "index -1 is out of bounds for dimension 1 with size 4",
    ),
    (
        "index_copy",
        lambda x: x.index_copy(1, onnxnn.tensor([-2]), onnxnn.ones(3, 1, dtype=onnxnn.float64)),
        IndexError,
        r"index_copy_\(\): index -2 is out of bounds",
    ),
    ("scatter", lambda x: x.scatter(1, onnxnn.tensor([[-1]]), 5.0), RuntimeError, "index -1 is out of bounds"),
    (
        "scatter_add",
        lambda x: x.scatter_add(1, onnxnn.tensor([[-1]]), onnxnn.ones(1, 1, dtype=onnxnn.float64)),
        RuntimeError,
        "index -1 is out of bounds",
    ),
    (
        "scatter_reduce",
        lambda x: x.scatter_reduce(0, onnxnn.tensor([[-3]]), x, "amax"),
        RuntimeError,
        "index -3 is out of bounds for dimension 0 with size 3",
    ),
]


@pytest.mark.parametrize(
    "name, program, error, message", NEGATIVE_INDEX_REFUSALS, ids=[c[0] for c in NEGATIVE_INDEX_REFUSALS]
)
def test_negative_indices_are_refused_where_pytorch_refuses_them(name, program, error, message):
    x = onnxnn.tensor(MATRIX)
    with pytest.raises(error, match=message):
        program(x)


# PyTorch refuses a source of another dtype in these (a float64 source would be rounded silently).
SOURCE_DTYPE_REFUSALS = [
    ("scatter", lambda x, s: x.scatter(1, onnxnn.tensor([[0]]), s), "Expected self.dtype to be equal to src.dtype"),
    ("scatter_add", lambda x, s: x.scatter_add(1, onnxnn.tensor([[0]]), s), "Expected self.dtype"),
    ("scatter_reduce", lambda x, s: x.scatter_reduce(1, onnxnn.tensor([[0]]), s, "sum"), "Expected self.dtype"),
    (
        "index_add",
        lambda x, s: x.index_add(0, onnxnn.tensor([0]), s.expand(1, 4)),
        r"index_add_\(\): self \(Float\) and source \(Double\) must have the same scalar type",
    ),
    (
        "index_copy",
        lambda x, s: x.index_copy(0, onnxnn.tensor([0]), s.expand(1, 4)),
        r"index_copy_\(\): self and source expected to have the same dtype, but got \(self\) Float",
    ),
]


@pytest.mark.parametrize("name, program, message", SOURCE_DTYPE_REFUSALS, ids=[c[0] for c in SOURCE_DTYPE_REFUSALS])
def test_a_source_of_another_dtype_is_refused(name, program, message):
    x = onnxnn.zeros(3, 4)
    with pytest.raises(RuntimeError, match=message):
        program(x, onnxnn.ones(1, 1, dtype=onnxnn.float64))


# PyTorch's gather and scatter kernels take an int32 or int64 index: a float one (which onnxruntime
# would accept as its value truncated) or a narrower integer one is refused.
INDEX_DTYPE_PROGRAMS = {
    "scatter_reduce": lambda x, i: x.scatter_reduce(1, i, onnxnn.ones(1, 2), "sum"),
    "scatter_reduce_": lambda x, i: x.scatter_reduce_(1, i, onnxnn.ones(1, 2), "amax", include_self=False),
    "scatter": lambda x, i: x.scatter(1, i, onnxnn.ones(1, 2)),
    "scatter_value": lambda x, i: x.scatter_(1, i, 1.0),
    "scatter_add": lambda x, i: x.scatter_add(1, i, onnxnn.ones(1, 2)),
    "gather": lambda x, i: x.gather(1, i),
    "index_select": lambda x, i: x.index_select(1, i.reshape(-1)),
    "take_along_dim_flat": lambda x, i: onnxnn.take_along_dim(x, i),  # a gather of the flattened input
}
REFUSED_INDEX_DTYPES = [onnxnn.float32, onnxnn.float64, onnxnn.int16, onnxnn.uint8]


@pytest.mark.parametrize("dtype", REFUSED_INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("name", INDEX_DTYPE_PROGRAMS)
def test_an_index_of_another_dtype_is_refused(name, dtype):
    x = onnxnn.zeros(2, 2)
    with pytest.raises(RuntimeError, match=r"\(\): Expected dtype int32/int64 for index"):
        INDEX_DTYPE_PROGRAMS[name](x, onnxnn.tensor([[0, 1]], dtype=dtype))
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 2)))


@pytest.mark.parametrize(
    "name, program",
    [
        ("scatter_add", lambda x, i: x.scatter_add(1, i, onnxnn.ones(1, 2))),
        ("scatter_add_", lambda x, i: x.scatter_add_(1, i, onnxnn.ones(1, 2))),
        ("function", lambda x, i: onnxnn.scatter_add(x, 1, i, onnxnn.ones(1, 2))),
    ],
)
def test_scatter_add_names_the_scatter_family_in_its_index_errors_as_pytorch(name, program):
    x = onnxnn.zeros(2, 2)
    for dtype in (onnxnn.int16, onnxnn.float32):
        with pytest.raises(RuntimeError, match=r"^scatter\(\): Expected dtype int32/int64 for index$"):
            program(x, onnxnn.tensor([[0, 1]], dtype=dtype))
    with pytest.raises(TypeError, match=r"^scatter_add\(\): argument 'index' \(position 2\) must be Tensor, not list$"):
        program(x, [[0, 1]])


def test_take_and_take_along_dim_along_a_dim_take_int64_indices_only_as_pytorch():
    x = onnxnn.tensor(MATRIX)
    for dtype, name in ((onnxnn.int32, "Int"), (onnxnn.uint8, "Byte"), (onnxnn.float32, "Float")):
        index = onnxnn.tensor([[0], [1], [2]], dtype=dtype)
        with pytest.raises(RuntimeError, match=rf"^take\(\): Expected a long tensor for index, but got {name}$"):
            x.take(index)
        with pytest.raises(RuntimeError, match=rf"^take\(\): Expected a long tensor for index, but got {name}$"):
            onnxnn.take(x, index)
        message = rf"^torch\.take_along_dim\(\): dtype of indices should be Long but got {name}$"
        with pytest.raises(RuntimeError, match=message):
            onnxnn.take_along_dim(x, index, 1)
        with pytest.raises(RuntimeError, match=message):
            x.take_along_dim(index, dim=-1)
    with pytest.raises(TypeError, match=r"^take_along_dim\(\): argument 'indices' \(position 2\) must be Tensor"):
        onnxnn.take_along_dim(x, [0])


def test_take_along_dim_without_a_dim_is_a_gather_of_the_flattened_input():
    # PyTorch's input.view(-1).gather(0, indices.view(-1)): int32 indices too, negative ones refused.
    x = onnxnn.tensor(MATRIX)
    flat = onnxnn.take_along_dim(x, onnxnn.tensor([[5], [11]], dtype=onnxnn.int32))
    np.testing.assert_array_equal(flat.numpy(), [5.0, 11.0])
    with pytest.raises(RuntimeError, match=r"^index -1 is out of bounds for dimension 0 with size 12$"):
        onnxnn.take_along_dim(x, onnxnn.tensor([0, -1]))


def test_take_and_take_along_dim_count_negative_indices_from_the_end():
    x = onnxnn.tensor(MATRIX)
    np.testing.assert_array_equal(x.take(onnxnn.tensor([-1, -12])).numpy(), [11.0, 0.0])
    indices = np.array([[-1], [0], [-4]])
    result = ops.take_along_dim(x, onnxnn.tensor(indices), dim=1)
    np.testing.assert_array_equal(result.numpy(), np.take_along_axis(MATRIX, indices % 4, 1))


def test_take_and_take_along_dim():
    np.testing.assert_array_equal(ops.take(onnxnn.tensor(MATRIX), onnxnn.tensor([[11, 0]])).numpy(), [[11.0, 0.0]])
    indices = np.array([[1], [3], [0]])
    result = ops.take_along_dim(onnxnn.tensor(MATRIX), onnxnn.tensor(indices), dim=1)
    np.testing.assert_array_equal(result.numpy(), np.take_along_axis(MATRIX, indices, 1))
    broadcast = ops.take_along_dim(onnxnn.tensor(MATRIX), onnxnn.tensor([[2, 0]]), dim=1)  # index rows broadcast
    np.testing.assert_array_equal(broadcast.numpy(), MATRIX[:, [2, 0]])
    flat = ops.take_along_dim(onnxnn.tensor(MATRIX), onnxnn.tensor([5, 1]))
    np.testing.assert_array_equal(flat.numpy(), [5.0, 1.0])


def test_scatter_and_scatter_add():
    index = np.array([[0, 2, 1, 0], [1, 0, 2, 2]])
    src = np.arange(100, 112, dtype=np.float64).reshape(3, 4)  # only the index-shaped block is read
    result = ops.scatter(onnxnn.zeros(3, 4, dtype=onnxnn.float64), 0, onnxnn.tensor(index), onnxnn.tensor(src))
    expected = np.zeros((3, 4))
    np.put_along_axis(expected, index, src[:2], 0)
    np.testing.assert_array_equal(result.numpy(), expected)
    filled = ops.scatter(onnxnn.zeros(3, 4), 1, onnxnn.tensor([[3], [0], [1]]), value=5.0)
    np.testing.assert_array_equal(filled.numpy(), [[0, 0, 0, 5], [5, 0, 0, 0], [0, 5, 0, 0]])
    repeated = np.array([[0, 0, 0, 0], [0, 0, 1, 1]])
    added = ops.scatter_add(onnxnn.ones(2, 4, dtype=onnxnn.float64), 0, onnxnn.tensor(repeated), onnxnn.tensor(src))
    expected = np.ones((2, 4))
    for row, column in np.ndindex(repeated.shape):
        expected[repeated[row, column], column] += src[row, column]
    np.testing.assert_array_equal(added.numpy(), expected)


def test_masked_select_broadcasts():
    mask = np.array([True, False, False, True])
    result = ops.masked_select(onnxnn.tensor(MATRIX), onnxnn.tensor(mask))
    np.testing.assert_array_equal(result.numpy(), MATRIX[:, mask].reshape(-1))
    np.testing.assert_array_equal(
        onnxnn.tensor(MATRIX).masked_select(onnxnn.tensor(MATRIX > 6)).numpy(), MATRIX[MATRIX > 6]
    )


def test_nonzero():
    data = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    x = onnxnn.tensor(data) * 1.0  # pending: nonzero realizes it
    result = ops.nonzero(x)
    assert result.dtype is onnxnn.int64
    np.testing.assert_array_equal(result.numpy(), np.argwhere(data))
    rows, columns = ops.nonzero(x, as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), [0, 1, 1])
    np.testing.assert_array_equal(columns.numpy(), [1, 0, 2])
    np.testing.assert_array_equal(ops.argwhere(onnxnn.tensor([0, 3, 0, 4])).numpy(), [[1], [3]])


def test_nonzero_node_from_imported_graphs():
    data = np.array([[0, 1, 0], [2, 0, 3]])
    result = apply_op("NonZero", (onnxnn.tensor(data) + 0,))
    assert tuple(result.shape) == (2, 3)
    np.testing.assert_array_equal(result.numpy(), np.array(np.nonzero(data)))


FUNCTION_GRADIENTS = [
    ("index_select", lambda x: onnxnn.index_select(x, 1, onnxnn.tensor([3, 0, 3]))),
    ("gather", lambda x: onnxnn.gather(x, 1, onnxnn.tensor([[0, 0], [3, 1], [2, 2]]))),
    ("take_along_dim", lambda x: ops.take_along_dim(x, onnxnn.tensor([[1], [0], [1]]), 1)),
    ("take", lambda x: ops.take(x, onnxnn.tensor([[0, 11], [11, 5]]))),
    ("masked_select", lambda x: ops.masked_select(x, onnxnn.tensor([True, False, True, True]))),
]


@pytest.mark.parametrize("name, function", FUNCTION_GRADIENTS, ids=[c[0] for c in FUNCTION_GRADIENTS])
def test_function_gradients(name, function):
    check_gradients(function, [np.random.default_rng(5).standard_normal((3, 4))])


@pytest.mark.parametrize(
    "name, function",
    [
        ("scatter", lambda x, src: ops.scatter(x, 0, onnxnn.tensor([[2, 0, 1, 1]]), src)),
        ("scatter_add", lambda x, src: ops.scatter_add(x, 1, onnxnn.tensor([[0, 0], [3, 0], [1, 1]]), src)),
    ],
    ids=["scatter", "scatter_add"],
)
def test_scatter_function_gradients(name, function):
    rng = np.random.default_rng(6)
    check_gradients(function, [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))])


# ---------------------------------------------------------------- gradient rules of the ONNX ops


def _constant(array) -> Tensor:
    return onnxnn.tensor(np.asarray(array, dtype=np.int64))


OP_GRADIENTS = [
    ("Gather_axis1_2d_indices", 1, lambda x: apply_op("Gather", (x, _constant([[0, -1], [2, 0]])), {"axis": 1})),
    ("Gather_axis0_repeated", 1, lambda x: apply_op("Gather", (x, _constant([2, 2, 0])), {"axis": 0})),
    ("Gather_scalar_index", 1, lambda x: apply_op("Gather", (x, _constant(-1)), {"axis": -1})),
    (
        "GatherElements",
        1,
        lambda x: apply_op("GatherElements", (x, _constant([[1, 1, 0, 3], [0, 0, 2, 2]])), {"axis": 1}),
    ),
    ("GatherND", 1, lambda x: apply_op("GatherND", (x, _constant([[0, 1], [2, 3], [0, 1]])))),
    ("GatherND_rows", 1, lambda x: apply_op("GatherND", (x, _constant([[2], [0]])))),
    ("ScatterND", 2, lambda x, u: apply_op("ScatterND", (x, _constant([[0, 1], [2, -1]]), u[0, :2]))),
    (
        "ScatterND_add_repeated",
        2,
        lambda x, u: apply_op("ScatterND", (x, _constant([[1], [1]]), u[:2]), {"reduction": "add"}),
    ),
    (
        "ScatterElements",
        2,
        lambda x, u: apply_op("ScatterElements", (x, _constant([[2, 0, 1, 0]]), u[:1]), {"axis": 0}),
    ),
    (
        "ScatterElements_add_repeated",
        2,
        lambda x, u: apply_op(
            "ScatterElements", (x, _constant([[1, 1, 1], [0, -1, 0]]), u[:2, :3]), {"axis": 1, "reduction": "add"}
        ),
    ),
]


@pytest.mark.parametrize("name, arity, function", OP_GRADIENTS, ids=[c[0] for c in OP_GRADIENTS])
def test_op_gradient_rules(name, arity, function):
    rng = np.random.default_rng(7)
    check_gradients(function, [rng.standard_normal((3, 4)) for _ in range(arity)])
