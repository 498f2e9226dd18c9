"""Indexing ops on both executors against numpy formulas: values, gradients and the errors PyTorch raises.

What a differential sweep against PyTorch found, kept as tables: scatter_reduce's amax/amin propagate
NaN (onnxruntime's ScatterElements max/min drops it), index tensors of dtypes PyTorch refuses,
index_put_'s argument checks, split/flip/narrow arguments refused when recorded (not only when a graph
runs, and on both executors), and index_select's out-of-range error catchable as either of the types
PyTorch raises. Gradients are checked against the formula of each op for a random upstream gradient
(``(out * w).sum()``), in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4, 5))


@pytest.fixture(params=EXECUTORS)
def executor(request):
    with onnxnn.set_executor(request.param):
        yield request.param


def _tensor_key(key):
    """``key`` with each numpy array as an onnxnn tensor (the path PyTorch users take)."""
    if isinstance(key, tuple):
        return tuple(_tensor_key(item) for item in key)
    if isinstance(key, np.ndarray):
        return onnxnn.tensor(key)
    return key


def _unbroadcast(gradient: np.ndarray, shape: tuple) -> np.ndarray:
    """``gradient`` summed down to ``shape`` (the gradient of a value broadcast to it)."""
    while gradient.ndim > len(shape):
        gradient = gradient.sum(0)
    gradient = gradient.reshape((1,) * (len(shape) - gradient.ndim) + gradient.shape)  # value's leading 1s
    axes = tuple(axis for axis, size in enumerate(shape) if size == 1 and gradient.shape[axis] != 1)
    return gradient.sum(axes, keepdims=True).reshape(shape)


# ------------------------------------------------------------------ getitem / setitem, values and grads

# Keys where numpy's indexing is PyTorch's (no int beside separated index arrays).
GETITEM_KEYS = [
    ("ints", (1, -2)),
    ("slices_steps", (slice(None, None, 2), slice(1, None, 3))),
    ("none_ellipsis", (None, Ellipsis, None, 1)),
    ("mask_full", X > 0),
    ("mask_partial", X[:, :, 0] > 0),
    ("mask_0d_true", np.array(True)),
    ("mask_0d_false", np.array(False)),
    ("duplicates", np.array([0, 2, 0, -1])),
    ("broadcast_pair", (np.array([[0], [2]]), np.array([1, 3, -1]))),
    ("separated", (np.array([0, 2]), slice(None), np.array([1, 4]))),
    ("adjacent_after_slice", (slice(None), np.array([0, 3]), np.array([1, 4]))),
    ("empty_index", np.array([], dtype=np.int64)),
    ("index_0d", np.array(1)),
    ("int32_index", np.array([2, 0], dtype=np.int32)),
    ("mask_then_slice", (np.array([True, False, True]), slice(1, 3))),
]


@pytest.mark.parametrize("key", [key for _, key in GETITEM_KEYS], ids=[name for name, _ in GETITEM_KEYS])
def test_getitem_values_and_gradient(executor, key):
    x = onnxnn.tensor(X, requires_grad=True)
    out = x[_tensor_key(key)]
    expected = X[key]
    np.testing.assert_array_equal(out.detach().numpy(), expected)
    w = RNG.standard_normal(expected.shape)
    (out * onnxnn.tensor(w)).sum().backward()
    grad = np.zeros_like(X)
    np.add.at(grad, key, w)  # repeated positions accumulate
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-12, atol=1e-12)


# (name, key with unique positions, value shape or None for a Python number)
SETITEM_CASES = [
    ("int_number", 0, None),
    ("slice_step_broadcast", (slice(None, None, 2), slice(1, None, 3)), (2, 1, 5)),
    ("mask_number", X > 0, None),
    ("mask_partial_broadcast", np.array([True, False, True]), (5,)),
    ("index_pair", (np.array([0, 1, 2]), np.array([3, 0, 1])), (3, 5)),
    ("separated", (np.array([0, 2]), slice(None), np.array([1, 4])), (2, 4)),
    ("leading_ones_value", (slice(None), 0), (1, 1, 5)),
    ("index_0d_value", np.array([2, 0]), ()),
]


@pytest.mark.parametrize(
    "key, value_shape", [case[1:] for case in SETITEM_CASES], ids=[case[0] for case in SETITEM_CASES]
)
def test_setitem_values_and_gradients(executor, key, value_shape):
    x = onnxnn.tensor(X, requires_grad=True)
    value = 2.5 if value_shape is None else RNG.standard_normal(value_shape)
    v = value if value_shape is None else onnxnn.tensor(value, requires_grad=True)
    y = x.clone()
    y[_tensor_key(key)] = v
    expected = X.copy()
    target_shape = expected[key].shape
    expected[key] = np.asarray(value).reshape(np.asarray(value).shape[-len(target_shape) :] if target_shape else ())
    np.testing.assert_array_equal(y.detach().numpy(), expected)
    w = RNG.standard_normal(X.shape)
    (y * onnxnn.tensor(w)).sum().backward()
    kept = np.ones_like(X)
    kept[key] = 0.0
    np.testing.assert_allclose(x.grad.numpy(), w * kept, rtol=1e-12, atol=1e-12)
    if value_shape is not None:
        np.testing.assert_allclose(v.grad.numpy(), _unbroadcast(w[key], value_shape), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ scatter_reduce / index_reduce with NaN

_NUMPY_REDUCTIONS = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}


def _scatter_reduce(x, dim, index, src, reduce, include_self):
    """PyTorch's scatter_reduce, element by element: each target's own value (where ``include_self``)
    and the values scattered into it, reduced by numpy (whose max and min propagate NaN)."""
    out = x.copy()
    groups: dict[tuple, list] = {}
    for position in np.ndindex(index.shape):
        target = list(position)
        target[dim] = index[position]
        groups.setdefault(tuple(target), []).append(src[position])
    for target, values in groups.items():
        values = ([x[target]] if include_self else []) + values
        out[target] = _NUMPY_REDUCTIONS[reduce](values)
    return out


X_NAN = RNG.standard_normal((4, 5))
X_NAN[0, 1] = X_NAN[2, 3] = np.nan
SRC_NAN = RNG.standard_normal((2, 5))
SRC_NAN[1, 2] = SRC_NAN[0, 4] = np.nan
INDEX = np.array([[0, 2, 2, 0, 3], [2, 0, 2, 1, 3]])


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin", "sum", "prod", "mean"])
def test_scatter_reduce_nan(executor, reduce, include_self):
    out = onnxnn.tensor(X_NAN).scatter_reduce(
        0, onnxnn.tensor(INDEX), onnxnn.tensor(SRC_NAN), reduce, include_self=include_self
    )
    expected = _scatter_reduce(X_NAN, 0, INDEX, SRC_NAN, reduce, include_self)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_index_reduce_nan(executor, reduce, dtype):
    source = np.array([[np.nan, 1.0], [2.0, 3.0], [4.0, np.nan]])
    x = np.array([[0.0, 5.0], [np.nan, 0.5], [1.0, 1.0]])
    out = onnxnn.tensor(x, dtype=dtype).index_reduce(
        0, onnxnn.tensor([0, 2, 2]), onnxnn.tensor(source, dtype=dtype), reduce
    )
    expected = _scatter_reduce(x, 0, np.array([[0, 0], [2, 2], [2, 2]]), source, reduce, True)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, equal_nan=True)


def test_scatter_reduce_amax_gradient_without_nan(executor):
    """The NaN propagation adds nodes after the max: the gradient still reaches each maximum."""
    x = onnxnn.tensor(np.array([[1.0, 5.0], [3.0, 0.0]]), requires_grad=True)
    src = onnxnn.tensor(np.array([[4.0, 2.0], [2.0, 7.0]]), requires_grad=True)
    out = x.scatter_reduce(0, onnxnn.tensor([[0, 0], [1, 1]]), src, "amax")
    w = np.array([[1.5, -2.0], [0.25, 3.0]])
    (out * onnxnn.tensor(w)).sum().backward()
    # maxima: [0,0] src 4, [0,1] self 5, [1,0] self 3, [1,1] src 7
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, -2.0], [0.25, 0.0]])
    np.testing.assert_allclose(src.grad.numpy(), [[1.5, 0.0], [0.0, 3.0]])


def test_scatter_gradient_of_a_larger_src(executor):
    """Only src's leading index-shaped block is read; the rest gets zero gradient (PyTorch's backward
    fails here, with a gradient of the index's shape)."""
    x = onnxnn.tensor(X[0], requires_grad=True)
    src = onnxnn.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    index = np.array([[3, 1]])
    w = RNG.standard_normal((4, 5))
    (x.scatter(1, onnxnn.tensor(index), src) * onnxnn.tensor(w)).sum().backward()
    expected = np.zeros((4, 5))
    expected[0, :2] = w[0, index[0]]
    np.testing.assert_allclose(src.grad.numpy(), expected, rtol=1e-12)


# ------------------------------------------------------------------ index_put_

MATRIX = np.arange(20.0).reshape(4, 5)


def test_index_put_uint8_index_is_a_mask_with_accumulate(executor):
    """A uint8 index is PyTorch's (deprecated) mask, with accumulate too (it was taken as positions)."""
    mask = np.array([1, 0, 1, 1], dtype=np.uint8)
    out = onnxnn.tensor(MATRIX).index_put_(
        (onnxnn.tensor(mask),), onnxnn.tensor(1.0, dtype=onnxnn.float64), accumulate=True
    )
    np.testing.assert_array_equal(out.numpy(), MATRIX + mask[:, None])


ONE = onnxnn.tensor(1.0)
# (name, indices, values, error, message)
INDEX_PUT_ERRORS = [
    ("bare_tensor", onnxnn.tensor([1, 2]), ONE, TypeError, "tuple of Tensors"),
    ("none_element", (None, onnxnn.tensor([1])), ONE, TypeError, "element 0"),
    ("list_element", ([1],), ONE, TypeError, "element 0"),
    ("number_values", (onnxnn.tensor([1]),), 1.0, TypeError, "'values'"),
    ("float_index", (onnxnn.tensor([0.0]),), ONE, IndexError, "long, int"),
    ("int8_index", (onnxnn.tensor([0], dtype=onnxnn.int8),), ONE, IndexError, "long, int"),
    ("no_index", (), ONE, RuntimeError, "at least one"),
]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize(
    "indices, values, error, match", [case[1:] for case in INDEX_PUT_ERRORS], ids=[case[0] for case in INDEX_PUT_ERRORS]
)
def test_index_put_refuses(indices, values, error, match, accumulate):
    x = onnxnn.zeros(4, 5)
    with pytest.raises(error, match=match):
        x.index_put_(indices, values, accumulate=accumulate)
    np.testing.assert_array_equal(x.numpy(), np.zeros((4, 5)))  # nothing changed


# ------------------------------------------------------------------ index tensor dtypes, index_select's error


@pytest.mark.parametrize("dtype", [onnxnn.int8, onnxnn.int16])
@pytest.mark.parametrize("write", [False, True])
def test_index_tensor_dtypes_refused(dtype, write):
    x = onnxnn.zeros(3, 4)
    index = onnxnn.tensor([0, 1], dtype=dtype)
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        if write:
            x[index] = 1.0
        else:
            x[index]


@pytest.mark.parametrize("error", [IndexError, RuntimeError])
@pytest.mark.parametrize("dim, index", [(0, [4]), (1, [5]), (1, [-1])])
def test_index_select_out_of_range_is_both_types(error, dim, index):
    """PyTorch raises IndexError or RuntimeError for it, depending on the kernel it picks."""
    with pytest.raises(error, match="index out of range in self"):
        onnxnn.zeros(4, 5).index_select(dim, onnxnn.tensor(index))


# ------------------------------------------------------------------ split / flip / narrow arguments

# Each raises when called, before any graph runs (onnxruntime refused some only when running, and
# onnxnn's kernels not at all).
RECORD_TIME_ERRORS = [
    ("split_negative_size", lambda x: x.split([5, -1]), RuntimeError, "non-negative"),
    ("flip_same_dim", lambda x: x.flip(0, -2), RuntimeError, "appears multiple times"),
    ("flip_same_dim_0d", lambda x: x[0, 0].flip((0, -1)), RuntimeError, "appears multiple times"),
    ("narrow_float_tensor_start", lambda x: x.narrow(1, onnxnn.tensor(2.0), 2), RuntimeError, "0-dim integral"),
    ("narrow_1d_tensor_start", lambda x: x.narrow(1, onnxnn.tensor([2]), 2), RuntimeError, "0-dim integral"),
    ("narrow_float_start", lambda x: x.narrow(0, 1.0, 2), TypeError, "must be ints"),
    ("narrow_float_length", lambda x: x.narrow(0, 1, 2.0), TypeError, "must be ints"),
]


@pytest.mark.parametrize(
    "call, error, match", [case[1:] for case in RECORD_TIME_ERRORS], ids=[case[0] for case in RECORD_TIME_ERRORS]
)
def test_refused_when_recorded(executor, call, error, match):
    with pytest.raises(error, match=match):
        call(onnxnn.tensor(MATRIX))


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda x: onnxnn.narrow(x, 1, onnxnn.tensor(-2), 2), MATRIX[:, 3:5]),
        (lambda x: onnxnn.split(x, split_size_or_sections=3)[1], MATRIX[3:]),
        (lambda x: onnxnn.split(x, split_size_or_sections=[1, 4], dim=1)[1], MATRIX[:, 1:]),
    ],
    ids=["narrow_0d_tensor_start", "split_keyword_size", "split_keyword_sections"],
)
def test_argument_forms(executor, call, expected):
    np.testing.assert_array_equal(call(onnxnn.tensor(MATRIX)).numpy(), expected)


# ---------------------------------------------------------------- roll's shifts as PyTorch's int arguments


@pytest.mark.parametrize(
    "shifts, dims, numpy_shifts",
    [
        (lambda: onnxnn.tensor(2), 1, 2),  # a 0-d integer tensor is an int
        (lambda: onnxnn.tensor([1]), 1, 1),  # so is an integer tensor of one element
        (lambda: onnxnn.tensor(True), 1, 1),
        (lambda: np.int64(-1), 0, -1),
        (lambda: (1, onnxnn.tensor(2)), (0, 1), (1, 2)),
    ],
)
def test_roll_takes_shifts_as_pytorch_does(executor, shifts, dims, numpy_shifts):
    x = X[0]
    got = onnxnn.tensor(x).roll(shifts(), dims).numpy()
    np.testing.assert_array_equal(got, np.roll(x, numpy_shifts, dims))


@pytest.mark.parametrize(
    "shifts, dims, error",
    [
        ((), (), RuntimeError),  # "`shifts` required"
        ([], None, RuntimeError),
        (1.0, 0, TypeError),
        (True, 0, TypeError),
        (lambda: onnxnn.tensor(1.0), 0, TypeError),
        (lambda: onnxnn.tensor([1, 2]), 0, TypeError),
    ],
)
def test_roll_refuses_shifts_as_pytorch_does(shifts, dims, error):
    with pytest.raises(error):
        onnxnn.tensor(X[0]).roll(shifts() if callable(shifts) else shifts, dims)
