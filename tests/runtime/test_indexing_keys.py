"""Tensor indexing by key: ``x[key]`` and ``x[key] = v``, their gradients, and the keys they refuse.

Expected values are numpy's ``array[key]`` and in-place assignment for the same key, except for
PyTorch's one documented difference (ints select before advanced indexing), whose cases state the
equivalent numpy expression. Gradients are checked by finite differences in float64.

Gather/scatter, nonzero and the indexing ops' gradient rules are in test_indexing_gather_scatter.py;
index bounds and dtypes of in-place writes and gathers in test_indexing_bounds_and_dtypes.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn.runtime import ops
from onnxnn.runtime.tensor import Tensor


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
