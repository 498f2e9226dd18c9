"""Tensor indexing: ``x[key]``, ``x[key] = v``, gather/scatter, nonzero, and their gradient rules.

Expected values are numpy's ``array[key]`` and in-place assignment for the same key, except for
PyTorch's one documented difference (ints select before advanced indexing), whose cases state the
equivalent numpy expression. Gradients are checked by finite differences in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn.runtime import ops
from onnxnn.runtime.tensor import Tensor, apply_op

BASE = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
MASK_FULL = BASE % 3 == 0
MASK_ROWS = np.array([True, False, True])
MASK_PLANE = (BASE[:, :, 0] % 10) < 5
MASK_LAST = np.array([False, True, True, False, True])
ALL_FALSE = np.zeros(3, dtype=bool)

# (id, key): each compared with numpy's BASE[key]. numpy arrays in a key are also tried as onnxnn
# tensors (realized and pending) by the tests below; lists stay lists.
GETITEM_CASES = [
    ("int", 1),
    ("negative_int", -1),
    ("two_ints", (0, -2)),
    ("all_ints_scalar", (2, 3, 4)),
    ("numpy_integer", np.int64(2)),
    ("slice_start", slice(1, None)),
    ("slice_step", slice(None, None, 2)),
    ("slice_negative_bounds", (slice(None), slice(1, -1))),
    ("slice_from_end", slice(-2, None)),
    ("slice_empty", slice(2, 1)),
    ("slice_past_end", (slice(None), slice(1, 100, 3))),
    ("slices_every_dim", (slice(0, 2), slice(1, 4, 2), slice(None, None, 4))),
    ("ellipsis_int", (Ellipsis, 1)),
    ("ellipsis_only", Ellipsis),
    ("empty_tuple", ()),
    ("none", None),
    ("none_ellipsis_none", (None, Ellipsis, None)),
    ("int_none_ellipsis_slice", (1, None, Ellipsis, slice(None, None, 3))),
    ("slice_none_int", (slice(None), None, 2)),
    ("int_array_repeated", np.array([2, 0, 2])),
    ("int_array_negative", np.array([-1, 0])),
    ("int_array_2d", np.array([[0, 1], [2, 2]])),
    ("list", [2, 1]),
    ("empty_list", []),
    ("array_second_dim", (slice(None), np.array([3, 0]))),
    ("ellipsis_array", (Ellipsis, np.array([4, 0, 1]))),
    ("two_arrays_adjacent", (np.array([0, 2]), np.array([1, 3]))),
    ("two_arrays_separated", (np.array([0, 2]), slice(None), np.array([1, 3]))),
    ("arrays_broadcast_inner", (slice(None), np.array([[0], [3]]), np.array([1, 2, 4]))),
    ("three_arrays_broadcast", (np.array([[0], [2]]), np.array([1, 3]), np.array([4]))),
    ("arrays_separated_by_none", (None, np.array([0, 1]), None, np.array([2, 3]))),
    ("step_slice_then_array", (slice(None, None, 2), [1], slice(1, None, 2))),
    ("mask_full", MASK_FULL),
    ("mask_rows", MASK_ROWS),
    ("mask_plane", MASK_PLANE),
    ("mask_after_slice", (slice(1, None), MASK_FULL[0])),
    ("mask_after_ellipsis", (Ellipsis, MASK_LAST)),
    ("mask_all_false", ALL_FALSE),
    ("mask_list", [True, True, False]),
    ("mask_with_array", (MASK_ROWS, np.array([1, 2]))),
    ("none_mask_none", (None, MASK_PLANE, None)),
    ("bool_true", True),
    ("bool_false", False),
    ("ellipsis_true", (Ellipsis, True)),
    ("true_with_array", (True, np.array([0, 2]))),
    ("slice_bool_none", (slice(1, 3), False, None)),
]

# PyTorch applies ints before advanced indices, so they never count as separated advanced indices
# (numpy would move the index dims first): (id, key, the same selection written for numpy).
PYTORCH_ONLY_CASES = [
    ("int_slice_array", (1, slice(None), [0, 2]), lambda a: a[1][:, [0, 2]]),
    ("int_slice_mask", (0, slice(None), MASK_LAST), lambda a: a[0][:, MASK_LAST]),
    ("array_slice_int", ([2, 0], slice(None), -1), lambda a: a[:, :, -1][[2, 0]]),
]


def _convert_key(key, form: str):
    """Replaces numpy arrays in ``key`` by onnxnn tensors: realized ones or still-pending ones."""

    def convert(item):
        if not isinstance(item, np.ndarray) or form == "numpy":
            return item
        if item.dtype == np.bool_:
            tensor = onnxnn.tensor(item)
            return tensor if form == "tensor" else ops.ne(onnxnn.tensor(item.astype(np.int64)), 0)
        tensor = onnxnn.tensor(item, dtype=onnxnn.int32 if form == "int32" else onnxnn.int64)
        return tensor if form in ("tensor", "int32") else tensor + 0

    if isinstance(key, tuple):
        return tuple(convert(item) for item in key)
    return convert(key)


def _has_array(key) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(item, np.ndarray) and item.ndim for item in items)


KEY_FORMS = [
    (name, key, form)
    for name, key in GETITEM_CASES
    for form in (["numpy", "tensor", "pending", "int32"] if _has_array(key) else ["numpy"])
]


def recorded_op_types(tensor: Tensor) -> set[str]:
    """The op types of the pending graph behind ``tensor``."""
    found, stack = set(), [tensor._value]
    while stack:
        value = stack.pop()
        if value is None or value.node is None:
            continue
        found.add(value.node.op_type)
        stack.extend(value.node.inputs)
    return found


# ---------------------------------------------------------------- getitem


@pytest.mark.parametrize("name, key, form", KEY_FORMS, ids=[f"{n}-{f}" for n, _, f in KEY_FORMS])
def test_getitem_matches_numpy(name, key, form):
    result = onnxnn.tensor(BASE)[_convert_key(key, form)]
    expected = BASE[key]
    assert tuple(result.shape) == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("name, key, numpy_equivalent", PYTORCH_ONLY_CASES, ids=[c[0] for c in PYTORCH_ONLY_CASES])
def test_getitem_ints_select_before_advanced_indexing(name, key, numpy_equivalent):
    result = onnxnn.tensor(BASE)[key]
    np.testing.assert_array_equal(result.numpy(), numpy_equivalent(BASE))


def test_getitem_zero_dim_integer_tensor_selects_like_an_int():
    result = onnxnn.tensor(BASE)[onnxnn.tensor([2]).reshape(()), :, [0, 1]]
    np.testing.assert_array_equal(result.numpy(), BASE[2][:, [0, 1]])


def test_list_holding_slices_is_a_tuple():
    np.testing.assert_array_equal(onnxnn.tensor(BASE)[[slice(None), 1]].numpy(), BASE[:, 1])


@pytest.mark.parametrize(
    "key, op_types",
    [
        ((1, slice(None, None, 2)), {"Slice", "Reshape"}),
        ((slice(1, None), None), {"Slice", "Reshape"}),
        (np.array([2, 0]), {"Gather"}),
        (MASK_FULL, {"GatherND"}),
        ((np.array([0, 2]), slice(None), np.array([1, 3])), {"Transpose", "GatherND"}),
    ],
    ids=["basic", "basic_new_axis", "one_array", "full_mask", "separated_arrays"],
)
def test_getitem_records_slice_reshape_or_gather(key, op_types):
    assert recorded_op_types(onnxnn.tensor(BASE)[key]) == op_types


def test_getitem_mask_realizes_into_known_indices():
    x = onnxnn.tensor(BASE)
    selected = x[x > 40]  # a pending mask: realized at record time, the result's length is known
    assert tuple(selected.shape) == (19,)
    np.testing.assert_array_equal(selected.numpy(), BASE[BASE > 40])


@pytest.mark.parametrize(
    "key, grad_fn",
    [
        (0, "SelectBackward0"),
        (slice(1, None), "SliceBackward0"),
        (None, "UnsqueezeBackward0"),
        ([0, 2], "IndexBackward0"),
        (MASK_FULL, "IndexBackward0"),
        (Ellipsis, "AliasBackward0"),
    ],
)
def test_getitem_grad_fn_names(key, grad_fn):
    x = onnxnn.tensor(BASE, requires_grad=True)
    assert x[key].grad_fn.name() == grad_fn


GRADIENT_KEYS = [
    ("int", (1, -1)),
    ("slices_with_steps", (slice(None, None, 2), slice(1, None), slice(0, 5, 3))),
    ("none_ellipsis", (None, Ellipsis, 2)),
    ("repeated_array", np.array([2, 0, 2, 2])),
    ("separated_arrays", (np.array([0, 2, 0]), slice(None), np.array([1, 3, 1]))),
    ("adjacent_broadcast", (slice(None), np.array([[0], [3]]), np.array([1, 2, 1]))),
    ("mask_full", MASK_FULL),
    ("mask_partial", (Ellipsis, MASK_LAST)),
    ("bool", (slice(1, None), True)),
]
GRADIENT_FORMS = [
    (name, key, form)
    for name, key in GRADIENT_KEYS
    for form in (["numpy", "pending"] if _has_array(key) else ["numpy"])
]


@pytest.mark.parametrize("name, key, form", GRADIENT_FORMS, ids=[f"{n}-{f}" for n, _, f in GRADIENT_FORMS])
def test_getitem_gradient(name, key, form):
    rng = np.random.default_rng(1)
    check_gradients(lambda x: x[_convert_key(key, form)], [rng.standard_normal((3, 4, 5))])


# ---------------------------------------------------------------- setitem

# (id, key, value): a float, or the shape of a random value tensor broadcastable to BASE[key].
SETITEM_CASES = [
    ("int_scalar", 1, 7.5),
    ("negative_int_full_value", -1, (4, 5)),
    ("int_broadcast_value", (slice(None), 2), (5,)),
    ("ellipsis_slice", (Ellipsis, slice(1, 3)), (3, 4, 2)),
    ("step_slice_scalar", slice(None, None, 2), -1.0),
    ("none_int", (None, 1), (4, 5)),
    ("leading_ones_value", 0, (1, 1, 4, 5)),
    ("array", np.array([2, 0]), (2, 4, 5)),
    ("negative_array", np.array([-1, 0]), (4, 5)),
    ("two_arrays_broadcast_value", (slice(None), np.array([3, 1]), np.array([0, 4])), (2,)),
    ("separated_arrays", (np.array([0, 2]), slice(None), np.array([1, 3])), (2, 4)),
    ("mask_full_scalar", MASK_FULL, 3.0),
    ("mask_full_values", MASK_FULL, (int(MASK_FULL.sum()),)),
    ("mask_rows_scalar", MASK_ROWS, 0.0),
    ("mask_rows_broadcast", MASK_ROWS, (4, 5)),
    ("mask_last_dim", (Ellipsis, MASK_LAST), (3, 4, 1)),
    ("mask_list_scalar", [False, True, True], 2.0),
    ("bool_true", True, (4, 5)),
    ("empty_slice", slice(2, 1), 9.0),
    ("zero_dim_value", (1, 2), ()),
]
SETITEM_FORMS = [
    (name, key, value, form)
    for name, key, value in SETITEM_CASES
    for form in (["numpy", "tensor", "pending"] if _has_array(key) else ["numpy"])
]


def _value(spec, seed: int = 2):
    if isinstance(spec, float):
        return spec, spec
    array = np.random.default_rng(seed).standard_normal(spec)
    return onnxnn.tensor(array).reshape(spec), array


@pytest.mark.parametrize("name, key, value, form", SETITEM_FORMS, ids=[f"{c[0]}-{c[3]}" for c in SETITEM_FORMS])
def test_setitem_matches_numpy(name, key, value, form):
    value, value_array = _value(value)
    x = onnxnn.tensor(BASE)
    version = x._version
    x[_convert_key(key, form)] = value
    expected = BASE.copy()
    expected[key] = value_array
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x._version == version + 1


def test_setitem_ints_select_before_advanced_indexing():
    x = onnxnn.tensor(BASE)
    x[1, :, [0, 2]] = onnxnn.tensor([[1.0, 2.0]] * 4, dtype=onnxnn.float64)
    expected = BASE.copy()
    expected[1][:, [0, 2]] = [[1.0, 2.0]] * 4
    np.testing.assert_array_equal(x.numpy(), expected)


def test_setitem_mask_with_scalar_is_a_lazy_where():
    x = onnxnn.tensor(BASE)
    mask = x > 30  # pending: a masked fill needs no realized mask, unlike x[mask] on the right-hand side
    x[mask] = -1.0
    assert mask._value.data is None
    assert x._value.node.op_type == "Where"
    np.testing.assert_array_equal(x.numpy(), np.where(BASE > 30, -1.0, BASE))


def test_setitem_converts_value_to_tensor_dtype():
    x = onnxnn.tensor(np.arange(6).reshape(2, 3))
    x[0, 1:] = 2.7
    x[1] = onnxnn.tensor([True, False, True])
    assert x.dtype is onnxnn.int64
    np.testing.assert_array_equal(x.numpy(), [[0, 2, 2], [1, 0, 1]])


SETITEM_GRADIENT_CASES = [
    ("int", 1, (4, 5)),
    ("slice_step_broadcast", (slice(None, None, 2), slice(1, 3)), (1, 2, 5)),
    ("array", np.array([2, 0]), (4, 5)),
    ("separated_arrays", (np.array([0, 2]), slice(None), np.array([1, 3])), (2, 4)),
    ("mask", MASK_FULL, (int(MASK_FULL.sum()),)),
    ("mask_scalar_tensor", MASK_PLANE, ()),
]


@pytest.mark.parametrize("name, key, value_shape", SETITEM_GRADIENT_CASES, ids=[c[0] for c in SETITEM_GRADIENT_CASES])
def test_setitem_gradient_to_base_and_value(name, key, value_shape):
    rng = np.random.default_rng(3)

    def assign(x, value):
        y = x * 1.0  # a non-leaf: assignment rebinds it
        y[key] = value.reshape(value_shape)
        return y * y

    # A 0-d value travels as shape (1,) and is reshaped inside (0-d arrays are awkward for gradcheck).
    check_gradients(assign, [rng.standard_normal((3, 4, 5)), rng.standard_normal(value_shape or (1,))])


def test_setitem_gradient_with_pending_index():
    rng = np.random.default_rng(4)
    index = onnxnn.tensor([2, 0]) + 0

    def assign(x, value):
        y = x.clone()
        y[:, index] = value
        return y

    check_gradients(assign, [rng.standard_normal((3, 4)), rng.standard_normal((3, 1))])


def test_setitem_on_leaf_requiring_grad_raises_unless_no_grad():
    x = onnxnn.tensor(BASE, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x[0] = 1.0
    with onnxnn.no_grad():
        x[0] = 1.0
    assert x.is_leaf and x.requires_grad
    np.testing.assert_array_equal(x.detach().numpy()[0], np.ones((4, 5)))


def test_setitem_after_save_fails_backward():
    x = onnxnn.tensor(BASE, requires_grad=True)
    y = x * 2.0
    z = y * y  # saves y
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@pytest.mark.parametrize(
    "key, value, error, message",
    [
        (5, 1.0, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
        (0, onnxnn.ones(3, dtype=onnxnn.float64), RuntimeError, r"shape mismatch: value tensor of shape \[3\] cannot"),
        (MASK_ROWS, onnxnn.ones(2, 4, 3, dtype=onnxnn.float64), RuntimeError, "shape mismatch"),
        (np.array([True, False]), 1.0, IndexError, "The shape of the mask"),
        (0, [1.0, 2.0], TypeError, "can't assign a list"),
        (([0, 1], [0, 1, 2]), 1.0, IndexError, "shape mismatch: indexing tensors could not be broadcast"),
        ("a", 1.0, TypeError, "new\\(\\): invalid data type 'str'"),
    ],
    ids=["out_of_bounds", "value_shape", "mask_value_shape", "mask_shape", "list_value", "index_broadcast", "string"],
)
def test_setitem_bad_input_leaves_tensor_unchanged(key, value, error, message):
    x = onnxnn.tensor(BASE)
    version = x._version
    with pytest.raises(error, match=message):
        x[key] = value
    assert x._version == version
    np.testing.assert_array_equal(x.numpy(), BASE)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "shape, key, error, message",
    [
        ((3,), 5, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
        ((3, 4), (slice(None), -5), IndexError, "index -5 is out of bounds for dimension 1 with size 4"),
        ((3,), [0, 3], IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
        ((3,), onnxnn.tensor([-4]), IndexError, "index -4 is out of bounds for dimension 0 with size 3"),
        ((2, 2), (0, 0, 0), IndexError, "too many indices for tensor of dimension 2"),
        ((2, 2), (Ellipsis, 0, Ellipsis), IndexError, "an index can only have a single ellipsis"),
        ((3, 4), np.ones((3, 3), dtype=bool), IndexError, r"The shape of the mask \[3, 3\] at index 1 does not match"),
        ((3, 4), onnxnn.tensor([True, False]), IndexError, "The shape of the mask"),
        ((3,), slice(None, None, -1), ValueError, "step must be greater than zero"),
        (
            (3,),
            onnxnn.tensor([0.0, 1.0]),
            IndexError,
            "tensors used as indices must be long, int, byte or bool tensors",
        ),
        ((3,), [0.5], IndexError, "tensors used as indices must be long, int, byte or bool tensors"),
        ((3,), "a", TypeError, "new\\(\\): invalid data type 'str'"),
        ((3,), (0, "a"), TypeError, "invalid data type 'str'"),
        ((3,), [0, "a"], TypeError, "invalid data type 'str'"),
        ((3,), 1.5, IndexError, r"only integers, slices .* \(got float\)"),
        ((3, 4), ([0, 1], [0, 1, 2]), IndexError, "shape mismatch: indexing tensors could not be broadcast"),
    ],
    ids=[
        "int",
        "negative_int",
        "list",
        "tensor",
        "too_many",
        "two_ellipses",
        "mask_shape",
        "mask_tensor_shape",
        "negative_step",
        "float_tensor",
        "float_list",
        "string",
        "string_in_tuple",
        "string_in_list",
        "float",
        "broadcast",
    ],
)
def test_getitem_errors(shape, key, error, message):
    x = onnxnn.zeros(*shape)
    with pytest.raises(error, match=message):
        x[key]


# ---------------------------------------------------------------- gather / scatter family

MATRIX = np.arange(12, dtype=np.float64).reshape(3, 4)


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
