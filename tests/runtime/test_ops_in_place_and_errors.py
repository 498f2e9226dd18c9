"""Tensor methods beyond their values: in-place variants (rebinding the same tensor), random fills,
materialization (``numpy()``, conversion to Python, named tuples, ``allclose``/``equal``), then
PyTorch's errors (types and messages) and a few ops checked one by one (``round(decimals=)``,
``where`` of a condition alone, nuclear norm, comparing with None).

The values of the tensor functions and methods against numpy are in test_ops_against_numpy.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn


_rng = np.random.default_rng(2024)


def f32(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- in-place variants (rebinding)

IN_PLACE = [
    # id, method call, numpy equivalent on the original value
    ("add_", lambda t: t.add_(onnxnn.tensor([1.0, 2.0, 3.0])), lambda x: x + [1, 2, 3]),
    ("add_alpha_scalar", lambda t: t.add_(2.0, alpha=3), lambda x: x + 6),
    ("iadd_operator", lambda t: t.__iadd__(1.5), lambda x: x + 1.5),
    ("sub_", lambda t: t.sub_(onnxnn.tensor([[0.5], [1.0]])), lambda x: x - [[0.5], [1.0]]),
    ("mul_", lambda t: t.mul_(-2), lambda x: x * -2),
    ("div_", lambda t: t.div_(4.0), lambda x: x / 4),
    ("fill_", lambda t: t.fill_(7.0), lambda x: np.full_like(x, 7)),
    ("fill_0d_tensor", lambda t: t.fill_(onnxnn.tensor(2.5)), lambda x: np.full_like(x, 2.5)),
    ("zero_", lambda t: t.zero_(), np.zeros_like),
    (
        "copy_broadcast",
        lambda t: t.copy_(onnxnn.tensor([1.0, 2.0, 3.0])),
        lambda x: np.broadcast_to([1, 2, 3], x.shape),
    ),
    (
        "copy_converts_dtype",
        lambda t: t.copy_(onnxnn.tensor([[1, 2, 3], [4, 5, 6]])),
        lambda x: np.arange(1.0, 7).reshape(2, 3),
    ),
    ("clamp_", lambda t: t.clamp_(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5)),
    ("clamp_min_only", lambda t: t.clamp_(min=0.0), lambda x: np.maximum(x, 0)),
    ("lerp_", lambda t: t.lerp_(onnxnn.ones(2, 3), 0.25), lambda x: x + (1 - x) * 0.25),
    ("addcmul_", lambda t: t.addcmul_(onnxnn.full((2, 3), 2.0), onnxnn.full((3,), 3.0), value=0.5), lambda x: x + 3.0),
]


@pytest.mark.parametrize("name, method, reference", IN_PLACE, ids=[c[0] for c in IN_PLACE])
def test_in_place_rebinds_the_same_tensor(name, method, reference) -> None:
    original = f32(2, 3)
    target = onnxnn.tensor(original)
    alias = target  # another name for the same handle sees the write, as in PyTorch
    version = target._version
    result = method(target)
    assert result is target
    assert target.dtype is onnxnn.float32 and target.shape == (2, 3)
    np.testing.assert_allclose(
        alias.numpy(), np.asarray(reference(original.astype(np.float64)), np.float32), rtol=1e-6, atol=1e-6
    )
    assert target._version > version


FRESH_RESULTS = [
    # id, source values, function that must return a new tensor
    ("cat_of_one", [1.0, 2.0], lambda t: onnxnn.cat([t])),
    ("pow_one", [1.0, 2.0], lambda t: t**1),
    ("floor_of_int", [1, 2], lambda t: t.floor()),
    ("ceil_of_int", [1, 2], lambda t: onnxnn.ceil(t)),
    ("round_of_int", [1, 2], lambda t: t.round()),
    ("trunc_of_int", [1, 2], lambda t: t.trunc()),
    ("clone", [1.0, 2.0], lambda t: t.clone()),
]


@pytest.mark.parametrize("name, values, make", FRESH_RESULTS, ids=[c[0] for c in FRESH_RESULTS])
def test_results_that_are_new_tensors_do_not_alias_the_input(name, values, make) -> None:
    source = onnxnn.tensor(values)
    result = make(source)
    result.add_(10)
    assert source.tolist() == values
    assert result.tolist() == [value + 10 for value in values]


def test_in_place_keeps_the_integer_dtype() -> None:
    counts = onnxnn.tensor([1, 2, 3])
    counts.add_(2).mul_(3)
    assert counts.dtype is onnxnn.int64
    assert counts.tolist() == [9, 12, 15]


@pytest.mark.parametrize(
    "name, fill, mean, std",
    [
        ("normal_", lambda t: t.normal_(2.0, 0.5), 2.0, 0.5),
        ("uniform_", lambda t: t.uniform_(-1.0, 3.0), 1.0, 4.0 / math.sqrt(12.0)),
    ],
)
def test_random_fills_have_the_requested_statistics(name, fill, mean, std) -> None:
    onnxnn.manual_seed(11)
    first = fill(onnxnn.zeros(20000)).numpy().copy()
    assert abs(first.mean() - mean) < 0.03
    assert abs(first.std() - std) < 0.03
    onnxnn.manual_seed(11)
    again = fill(onnxnn.zeros(20000)).numpy()
    np.testing.assert_array_equal(first, again)  # the seed fixes the samples


def test_uniform_stays_in_its_interval() -> None:
    values = onnxnn.empty(5000, dtype=onnxnn.float64).uniform_(-1.0, 3.0).numpy()
    assert values.dtype == np.float64
    assert values.min() >= -1.0 and values.max() < 3.0


# random_() draws from [0, largest]: for a float dtype 2**digits (the significand's bits with the implicit
# one), up to which every integer is exact; for an integer dtype its maximum, as PyTorch's.
RANDOM_BOUNDS = [
    ("float32", 2**24),
    ("float64", 2**53),
    ("float16", 2**11),
    ("bfloat16", 2**8),
    ("uint8", 255),
    ("int8", 127),
    ("int16", 2**15 - 1),
    ("int32", 2**31 - 1),
    ("int64", 2**63 - 1),
    ("bool", 1),
]


@pytest.mark.parametrize("name, largest", RANDOM_BOUNDS, ids=[case[0] for case in RANDOM_BOUNDS])
def test_random_without_bounds_fills_up_to_the_dtypes_largest_integer(name, largest) -> None:
    onnxnn.manual_seed(5)
    filled = onnxnn.empty(100_000, dtype=getattr(onnxnn, name)).random_()
    assert filled.dtype is getattr(onnxnn, name)
    values = [int(value) for value in filled.tolist()]  # Python ints: int64's bound is past float64's integers
    assert min(values) >= 0 and max(values) <= largest
    # 10^5 draws miss the top 0.1% of [0, largest] with probability e^-100, each of up to 2049 values e^-48
    if largest <= 2**11:
        assert set(values) == set(range(largest + 1))
    else:
        assert max(values) >= largest * 0.999


def test_random_from_without_to_fills_up_to_the_dtypes_largest_integer() -> None:
    values = onnxnn.empty(10_000, dtype=onnxnn.int8).random_(100, None).tolist()
    assert set(values) == set(range(100, 128))
    values = onnxnn.empty(10_000, dtype=onnxnn.float16).random_(2040, None).tolist()
    assert set(values) == set(range(2040, 2049))
    assert set(onnxnn.empty(1000).random_(5).tolist()) == set(range(5))  # random_(to): [0, to)


def test_random_without_bounds_refuses_wide_unsigned_dtypes_as_pytorch() -> None:
    with pytest.raises(NotImplementedError, match="\"random_kernel_cpu\" not implemented for 'UInt16'"):
        onnxnn.empty(3, dtype=onnxnn.uint16).random_()


# ---------------------------------------------------------------- materialization


def test_numpy_is_a_read_only_array_of_the_value() -> None:
    data = f32(2, 3)
    array = (onnxnn.tensor(data) * 2).numpy()
    assert isinstance(array, np.ndarray) and array.dtype == np.float32
    np.testing.assert_allclose(array, data * 2)
    with pytest.raises(ValueError):
        array[0, 0] = 1.0


def test_numpy_of_a_tensor_that_requires_grad_raises() -> None:
    x = onnxnn.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"detach\(\)\.numpy\(\)"):
        x.numpy()
    np.testing.assert_array_equal(x.detach().numpy(), [1.0])


@pytest.mark.parametrize(
    "name, convert, expected",
    [
        ("item_float", lambda: onnxnn.tensor([[2.5]]).item(), 2.5),
        ("item_int", lambda: onnxnn.tensor(7).item(), 7),
        ("item_bool", lambda: (onnxnn.tensor([1.0]) > 0).item(), True),
        ("tolist_nested", lambda: onnxnn.tensor([[1, 2], [3, 4]]).tolist(), [[1, 2], [3, 4]]),
        ("tolist_0d", lambda: onnxnn.tensor(1.5).tolist(), 1.5),
        ("asarray", lambda: np.asarray(onnxnn.tensor([1.0, 2.0]) + 1).tolist(), [2.0, 3.0]),
        ("asarray_dtype", lambda: np.asarray(onnxnn.tensor([1.5, 2.5]), dtype=np.int64).tolist(), [1, 2]),
        ("bool_true", lambda: bool(onnxnn.tensor([3.0])), True),
        ("bool_false_0d", lambda: bool(onnxnn.tensor(0)), False),
        ("len", lambda: len(onnxnn.zeros(4, 2)), 4),
        (
            "iteration",
            lambda: [row.tolist() for row in onnxnn.tensor([[1, 2], [3, 4], [5, 6]])],
            [[1, 2], [3, 4], [5, 6]],
        ),
        ("int", lambda: int(onnxnn.tensor([-2.7])), -2),
        ("float", lambda: float(onnxnn.tensor(3)), 3.0),
        ("python_if", lambda: "yes" if onnxnn.tensor(1.0) > 0.5 else "no", "yes"),
    ],
)
def test_conversion_to_python(name, convert, expected) -> None:
    result = convert()
    assert result == expected
    assert type(result) is type(expected)


def test_max_with_dim_returns_a_named_tuple() -> None:
    data = np.float32([[1.0, 5.0, 3.0], [7.0, -1.0, 2.0]])
    result = onnxnn.tensor(data).max(dim=1)
    values, indices = result
    assert result.values is values and result.indices is indices
    assert result[0] is values
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert indices.dtype is onnxnn.int64
    smallest = onnxnn.min(onnxnn.tensor(data), 0, keepdim=True)
    assert smallest.values.tolist() == [[1.0, -1.0, 2.0]] and smallest.indices.tolist() == [[0, 1, 1]]


@pytest.mark.parametrize(
    "name, check, expected",
    [
        ("allclose_true", lambda: onnxnn.allclose(onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([1.0, 2.0 + 1e-7])), True),
        ("allclose_false", lambda: onnxnn.allclose(onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([1.0, 2.1])), False),
        ("allclose_atol", lambda: onnxnn.tensor([1.0]).allclose(onnxnn.tensor([1.05]), atol=0.1), True),
        ("allclose_broadcast", lambda: onnxnn.allclose(onnxnn.ones(2, 3), onnxnn.ones(3)), True),
        ("allclose_nan", lambda: onnxnn.allclose(onnxnn.tensor([float("nan")]), onnxnn.tensor([float("nan")])), False),
        ("allclose_bool", lambda: onnxnn.allclose(onnxnn.tensor([True, False]), onnxnn.tensor([True, False])), True),
        (
            "allclose_equal_nan",
            lambda: onnxnn.allclose(onnxnn.tensor([float("nan")]), onnxnn.tensor([float("nan")]), equal_nan=True),
            True,
        ),
        ("equal_true", lambda: onnxnn.equal(onnxnn.tensor([1, 2]), onnxnn.tensor([1, 2])), True),
        ("equal_values_differ", lambda: onnxnn.equal(onnxnn.tensor([1, 2]), onnxnn.tensor([1, 3])), False),
        ("equal_shapes_differ", lambda: onnxnn.equal(onnxnn.ones(2, 3), onnxnn.ones(3)), False),
    ],
)
def test_allclose_and_equal(name, check, expected) -> None:
    result = check()
    assert type(result) is bool and result is expected


# ---------------------------------------------------------------- errors (PyTorch's types and messages)

ERRORS = [
    (
        "broadcast_mismatch",
        lambda: onnxnn.ones(2, 3) + onnxnn.ones(4),
        RuntimeError,
        r"size of tensor a \(3\) must match the size of tensor b \(4\) at non-singleton dimension 1",
    ),
    ("matmul_2d_mismatch", lambda: onnxnn.ones(3, 4) @ onnxnn.ones(5, 2), RuntimeError, r"3x4 and 5x2"),
    ("matmul_batch_mismatch", lambda: onnxnn.ones(2, 3, 4) @ onnxnn.ones(5, 2), RuntimeError, r"\[2, 3, 4\].*\[5, 2\]"),
    ("matmul_0d", lambda: onnxnn.matmul(onnxnn.tensor(1.0), onnxnn.ones(2)), RuntimeError, r"at least 1D"),
    (
        "item_of_many",
        lambda: onnxnn.ones(2, 3).item(),
        RuntimeError,
        r"a Tensor with 6 elements cannot be converted to Scalar",
    ),
    (
        "bool_of_many",
        lambda: bool(onnxnn.ones(2)),
        RuntimeError,
        r"Boolean value of Tensor with more than one value is ambiguous",
    ),
    ("if_on_many", lambda: 1 if onnxnn.ones(2) > 0 else 0, RuntimeError, r"ambiguous"),
    ("len_of_0d", lambda: len(onnxnn.tensor(1.0)), TypeError, r"len\(\) of a 0-d tensor"),
    ("iterate_0d", lambda: list(onnxnn.tensor(1.0)), TypeError, r"iteration over a 0-d tensor"),
    (
        "sum_bad_dim",
        lambda: onnxnn.ones(2, 3).sum(2),
        IndexError,
        r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
    ),
    ("softmax_bad_dim", lambda: onnxnn.ones(2, 3).softmax(-3), IndexError, r"Dimension out of range"),
    ("transpose_bad_dim", lambda: onnxnn.ones(2, 3).transpose(0, 5), IndexError, r"Dimension out of range"),
    ("cat_bad_dim", lambda: onnxnn.cat([onnxnn.ones(2), onnxnn.ones(2)], 1), IndexError, r"Dimension out of range"),
    ("unsqueeze_bad_dim", lambda: onnxnn.ones(2, 3).unsqueeze(4), IndexError, r"Dimension out of range"),
    (
        "reshape_numel",
        lambda: onnxnn.ones(3, 4).reshape(5, 3),
        RuntimeError,
        r"shape '\[5, 3\]' is invalid for input of size 12",
    ),
    ("view_numel_inferred", lambda: onnxnn.ones(3, 4).view(-1, 5), RuntimeError, r"invalid for input of size 12"),
    (
        "expand_non_singleton",
        lambda: onnxnn.ones(3, 2).expand(3, 4),
        RuntimeError,
        r"expanded size of the tensor \(4\) must match the existing size \(2\)",
    ),
    (
        "cat_0d",
        lambda: onnxnn.cat([onnxnn.ones(2), onnxnn.tensor(1.0)]),
        RuntimeError,
        r"zero-dimensional tensor \(at position 1\) cannot be concatenated",
    ),
    ("norm_of_int", lambda: onnxnn.tensor([3, 4]).norm(), RuntimeError, r"Expected a floating point .* Got Long"),
    (
        "cat_size_mismatch",
        lambda: onnxnn.cat([onnxnn.ones(2, 3), onnxnn.ones(2, 4)]),
        RuntimeError,
        r"Sizes of tensors must match except in dimension 0",
    ),
    (
        "stack_size_mismatch",
        lambda: onnxnn.stack([onnxnn.ones(2), onnxnn.ones(3)]),
        RuntimeError,
        r"stack expects each tensor to be equal size",
    ),
    (
        "narrow_past_the_end",
        lambda: onnxnn.ones(4).narrow(0, 2, 3),
        RuntimeError,
        r"start \(2\) \+ length \(3\) exceeds dimension size \(4\)",
    ),
    ("narrow_start_out_of_range", lambda: onnxnn.ones(4).narrow(0, 5, 0), IndexError, r"start out of range"),
    ("split_sections_sum", lambda: onnxnn.ones(5).split([2, 2]), RuntimeError, r"sum exactly to 5"),
    ("clamp_without_bounds", lambda: onnxnn.ones(2).clamp(), RuntimeError, r"At least one of 'min' or 'max'"),
    ("complex_data", lambda: onnxnn.tensor([1 + 2j]), TypeError, r"complex128"),
    ("to_complex", lambda: onnxnn.ones(2).to(np.complex64), TypeError, r"complex64"),
    ("complex_dtype_argument", lambda: onnxnn.zeros(2, dtype=np.complex128), TypeError, r"complex128"),
    ("string_data", lambda: onnxnn.tensor(np.array(["a"])), TypeError, r"<U1|str"),
    (
        "int_to_negative_power",
        lambda: onnxnn.tensor([2, 3]) ** -1,
        RuntimeError,
        r"Integers to negative integer powers are not allowed",
    ),
    ("mean_of_int", lambda: onnxnn.tensor([1, 2]).mean(), RuntimeError, r"Long"),
    (
        "requires_grad_int",
        lambda: onnxnn.tensor([1, 2], requires_grad=True),
        RuntimeError,
        r"only Tensors of floating point",
    ),
    (
        "div_bad_rounding_mode",
        lambda: onnxnn.ones(2).div_(2.0, rounding_mode="bad"),
        RuntimeError,
        r"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'bad'",
    ),
    ("tril_str_diagonal", lambda: onnxnn.ones(2, 2).tril_("x"), TypeError, r"argument 'diagonal' must be int, not str"),
    ("triu_float_diagonal", lambda: onnxnn.ones(2, 2).triu(1.5), TypeError, r"'diagonal' must be int, not float"),
    # The argument is checked before the rank, as PyTorch's parser checks it before the kernel runs.
    ("tril_str_diagonal_1d", lambda: onnxnn.ones(2).tril_("x"), TypeError, r"'diagonal' must be int, not str"),
]


@pytest.mark.parametrize("name, action, error, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_pytorch(name, action, error, message) -> None:
    with pytest.raises(error, match=message):
        action()


# round(decimals=d), computed as PyTorch does in the tensor's dtype: numpy's float32 steps give the same bits.
ROUND_INPUT = np.array([1.2345, 2.5555, -0.125, 1234.5, 0.5, 0.015, 2.675, -7.45], dtype=np.float32)


def _round_decimals_numpy(x: np.ndarray, decimals: int) -> np.ndarray:
    scale = np.float32(10.0 ** abs(decimals))
    return np.round(x * scale) / scale if decimals > 0 else np.round(x / scale) * scale


@pytest.mark.parametrize("decimals", [3, 2, 1, -1, -2])
@pytest.mark.parametrize("call", ["method", "function", "in place"])
def test_round_to_decimal_places(decimals, call):
    x = onnxnn.tensor(ROUND_INPUT)
    if call == "method":
        result = x.round(decimals=decimals)
    elif call == "function":
        result = onnxnn.round(x, decimals=decimals)
    else:
        result = x.round_(decimals=decimals)
    np.testing.assert_array_equal(result.numpy(), _round_decimals_numpy(ROUND_INPUT, decimals))


def test_round_to_decimal_places_refuses_integers():
    with pytest.raises(NotImplementedError, match="'Long'"):
        onnxnn.tensor([15, 25]).round(decimals=-1)


def test_where_of_a_condition_alone_is_nonzero_as_tuple():
    condition = np.array([[True, False, True], [False, False, True]])
    result = onnxnn.where(onnxnn.tensor(condition))
    assert isinstance(result, tuple) and len(result) == 2
    for axis, expected in zip(result, np.nonzero(condition)):
        np.testing.assert_array_equal(axis.numpy(), expected)


@pytest.mark.parametrize("dim, keepdim", [(None, False), (None, True), ((1, 2), False), ((2, 0), True)])
def test_norm_nuc_is_the_sum_of_singular_values(dim, keepdim):
    array = np.random.default_rng(3).standard_normal((2, 3, 4))
    x = onnxnn.tensor(array[0] if dim is None else array)
    matrices = np.moveaxis(array, dim, (-2, -1)) if dim is not None else array[0]
    expected = np.linalg.svd(matrices, compute_uv=False).sum(-1)
    if keepdim:
        expected = np.expand_dims(expected, (-2, -1) if dim is None else tuple(sorted(dim)))
    result = onnxnn.norm(x, p="nuc", dim=dim, keepdim=keepdim).numpy()
    assert result.shape == np.shape(expected)
    # Jacobi sweeps to float64 rounding: a few dozen roundings per singular value.
    np.testing.assert_allclose(result, expected, rtol=1e-12)


def test_norm_refuses_an_unknown_name():
    with pytest.raises(RuntimeError, match="p must be a number, 'fro' or 'nuc', got 'max'"):
        onnxnn.norm(onnxnn.ones(2, 2), p="max")


def test_comparing_with_none_compares_identities():
    tensor = onnxnn.tensor([1.0, 2.0])
    assert (tensor == None) is False  # noqa: E711  (the comparison under test)
    assert (tensor != None) is True  # noqa: E711
    assert (None == tensor) is False  # noqa: E711
