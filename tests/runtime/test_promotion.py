"""PyTorch's type promotion: the result dtype (and values) of mixed-dtype operations.

The rules (torch's three tiers): dimensioned tensors decide within a category; a zero-dim tensor
or a Python scalar of a higher category (bool < integer < floating) lifts the result, a 0-d
tensor to its own dtype and a Python scalar to the default dtype of its category (int64, the
default float); neither ever widens a result of its own category.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn


def t(values, dtype) -> onnxnn.Tensor:
    return onnxnn.tensor(values, dtype=dtype)


PROMOTIONS = [
    # id, operation, expected dtype, expected values
    ("int64_times_float_scalar", lambda: t([1, 2], onnxnn.int64) * 2.5, onnxnn.float32, [2.5, 5.0]),
    ("int64_plus_int_scalar", lambda: t([1, 2], onnxnn.int64) + 3, onnxnn.int64, [4, 5]),
    ("int32_plus_int_scalar_stays_int32", lambda: t([1, 2], onnxnn.int32) + 5, onnxnn.int32, [6, 7]),
    ("int32_plus_big_int_scalar", lambda: 2**20 + t([1], onnxnn.int32), onnxnn.int32, [2**20 + 1]),
    ("int64_plus_huge_int_scalar", lambda: t([1], onnxnn.int64) + 2**40, onnxnn.int64, [2**40 + 1]),
    ("int32_plus_int64_tensor", lambda: t([1, 2], onnxnn.int32) + t([10, 20], onnxnn.int64), onnxnn.int64, [11, 22]),
    ("uint8_plus_int8", lambda: t([200, 1], onnxnn.uint8) + t([-1, -2], onnxnn.int8), onnxnn.int16, [199, -1]),
    ("int8_plus_uint8", lambda: t([-1], onnxnn.int8) + t([255], onnxnn.uint8), onnxnn.int16, [254]),
    ("uint8_plus_int16", lambda: t([250], onnxnn.uint8) + t([10], onnxnn.int16), onnxnn.int16, [260]),
    ("uint8_plus_int_scalar_wraps", lambda: t([250], onnxnn.uint8) + 10, onnxnn.uint8, [4]),
    ("float16_plus_float_scalar", lambda: t([1.5], onnxnn.float16) + 1.0, onnxnn.float16, [2.5]),
    ("float16_times_int_tensor", lambda: t([1.5], onnxnn.float16) * t([2], onnxnn.int64), onnxnn.float16, [3.0]),
    ("float16_plus_float32_tensor", lambda: t([1.5], onnxnn.float16) + t([1.0], onnxnn.float32), onnxnn.float32, [2.5]),
    ("float32_plus_float64_tensor", lambda: t([1.0], onnxnn.float32) + t([0.5], onnxnn.float64), onnxnn.float64, [1.5]),
    (
        "float32_plus_float64_0d",
        lambda: t([1.0, 2.0], onnxnn.float32) + t(0.5, onnxnn.float64),
        onnxnn.float32,
        [1.5, 2.5],
    ),
    ("float64_0d_plus_float16", lambda: t(0.5, onnxnn.float64) + t([1.0], onnxnn.float16), onnxnn.float16, [1.5]),
    (
        "int64_plus_float64_0d",
        lambda: t([1, 2, 3], onnxnn.int64) + t(0.5, onnxnn.float64),
        onnxnn.float64,
        [1.5, 2.5, 3.5],
    ),
    ("int32_times_float16_0d", lambda: t([2], onnxnn.int32) * t(1.5, onnxnn.float16), onnxnn.float16, [3.0]),
    ("int32_plus_int64_0d", lambda: t([1, 2], onnxnn.int32) + t(7, onnxnn.int64), onnxnn.int32, [8, 9]),
    ("uint8_plus_int64_0d", lambda: t([1], onnxnn.uint8) + t(7, onnxnn.int64), onnxnn.uint8, [8]),
    ("0d_float32_plus_0d_float64", lambda: t(1.0, onnxnn.float32) + t(2.0, onnxnn.float64), onnxnn.float64, 3.0),
    ("0d_int_times_float_scalar", lambda: t(3, onnxnn.int64) * 0.5, onnxnn.float32, 1.5),
    (
        "bool_plus_bool",
        lambda: t([True, False, False], onnxnn.bool) + t([True, True, False], onnxnn.bool),
        onnxnn.bool,
        [True, True, False],
    ),
    (
        "bool_times_bool",
        lambda: t([True, False, True], onnxnn.bool) * t([True, True, False], onnxnn.bool),
        onnxnn.bool,
        [True, False, False],
    ),
    ("bool_plus_int_scalar", lambda: t([True, False], onnxnn.bool) + 1, onnxnn.int64, [2, 1]),
    ("bool_plus_bool_scalar", lambda: t([True, False], onnxnn.bool) + True, onnxnn.bool, [True, True]),
    ("bool_times_float_scalar", lambda: t([True, False], onnxnn.bool) * 2.5, onnxnn.float32, [2.5, 0.0]),
    ("bool_plus_int32_tensor", lambda: t([True, False], onnxnn.bool) + t([1, 1], onnxnn.int32), onnxnn.int32, [2, 1]),
    ("bool_divided_by_bool", lambda: t([True], onnxnn.bool) / t([True], onnxnn.bool), onnxnn.float32, [1.0]),
    ("int_true_division", lambda: t([1, 3], onnxnn.int64) / t([2, 2], onnxnn.int64), onnxnn.float32, [0.5, 1.5]),
    ("int32_true_division_by_scalar", lambda: t([3], onnxnn.int32) / 2, onnxnn.float32, [1.5]),
    ("float16_true_division_by_int", lambda: t([3.0], onnxnn.float16) / t([2], onnxnn.int64), onnxnn.float16, [1.5]),
    ("int_floor_division", lambda: t([7, -7], onnxnn.int64) // 2, onnxnn.int64, [3, -4]),
    ("int32_floor_division_by_float", lambda: t([7], onnxnn.int32) // 2.0, onnxnn.float32, [3.0]),
    ("int_remainder_float_scalar", lambda: t([7], onnxnn.int64) % 2.5, onnxnn.float32, [2.0]),
    ("int_power_float_scalar", lambda: t([4], onnxnn.int64) ** 0.5, onnxnn.float32, [2.0]),
    ("int_power_int_scalar", lambda: t([3], onnxnn.int32) ** 2, onnxnn.int32, [9]),
    ("float_scalar_power_int_tensor", lambda: 2.0 ** t([3], onnxnn.int64), onnxnn.float32, [8.0]),
    ("int_matmul_int", lambda: t([[1, 2]], onnxnn.int64) @ t([[3], [4]], onnxnn.int64), onnxnn.int64, [[11]]),
    (
        "float32_matmul_float64",
        lambda: t([[1.0]], onnxnn.float32) @ t([[2.0]], onnxnn.float64),
        onnxnn.float64,
        [[2.0]],
    ),
    (
        "int_maximum_float",
        lambda: onnxnn.maximum(t([1, 5], onnxnn.int64), t([2.5, 2.5], onnxnn.float32)),
        onnxnn.float32,
        [2.5, 5.0],
    ),
    (
        "where_int_and_float_scalar",
        lambda: onnxnn.where(t([True, False], onnxnn.bool), t([1, 2], onnxnn.int64), 0.5),
        onnxnn.float32,
        [1.0, 0.5],
    ),
    (
        "where_float16_and_int_scalar",
        lambda: onnxnn.where(t([False], onnxnn.bool), t([1.5], onnxnn.float16), 0),
        onnxnn.float16,
        [0.0],
    ),
    ("where_two_scalars", lambda: onnxnn.where(t([True, False], onnxnn.bool), 1.0, 0.0), onnxnn.float32, [1.0, 0.0]),
    ("cat_int32_int64", lambda: onnxnn.cat([t([1], onnxnn.int32), t([2], onnxnn.int64)]), onnxnn.int64, [1, 2]),
    (
        "cat_int_float16",
        lambda: onnxnn.cat([t([1], onnxnn.int64), t([0.5], onnxnn.float16)]),
        onnxnn.float16,
        [1.0, 0.5],
    ),
    ("int_eq_float_scalar", lambda: t([2, 3], onnxnn.int64) == 2.5, onnxnn.bool, [False, False]),
    (
        "int_lt_float_tensor",
        lambda: t([2, 3], onnxnn.int32) < t([2.5, 2.5], onnxnn.float64),
        onnxnn.bool,
        [True, False],
    ),
    ("float16_ge_int_scalar", lambda: t([1.0, 3.0], onnxnn.float16) >= 2, onnxnn.bool, [False, True]),
    ("uint8_ne_int8", lambda: t([255], onnxnn.uint8) != t([-1], onnxnn.int8), onnxnn.bool, [True]),
    ("clamp_int_with_float_bound", lambda: t([1, 5], onnxnn.int64).clamp(max=2.5), onnxnn.float32, [1.0, 2.5]),
    ("add_numpy_float_scalar", lambda: t([1], onnxnn.int32) + np.float64(0.5), onnxnn.float32, [1.5]),
    ("add_numpy_int_scalar", lambda: t([1], onnxnn.int32) + np.int64(2), onnxnn.int32, [3]),
]


@pytest.mark.parametrize("name, operation, dtype, values", PROMOTIONS, ids=[p[0] for p in PROMOTIONS])
def test_result_dtype_follows_pytorch(name, operation, dtype, values) -> None:
    result = operation()
    assert result.dtype is dtype, f"{name}: {result.dtype} != {dtype}"
    np.testing.assert_allclose(np.asarray(result.numpy(), dtype=np.float64), np.asarray(values, dtype=np.float64))


def test_python_floats_follow_the_default_dtype() -> None:
    previous = onnxnn.get_default_dtype()
    onnxnn.set_default_dtype(onnxnn.float64)
    try:
        assert (t([1, 2], onnxnn.int64) * 2.5).dtype is onnxnn.float64
        assert (t([1], onnxnn.int64) / t([2], onnxnn.int64)).dtype is onnxnn.float64
        assert (t([1.0], onnxnn.float32) * 2.5).dtype is onnxnn.float32  # same category: no widening
    finally:
        onnxnn.set_default_dtype(previous)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (onnxnn.uint8, onnxnn.int8, onnxnn.int16),
        (onnxnn.int32, onnxnn.int64, onnxnn.int64),
        (onnxnn.bool, onnxnn.uint8, onnxnn.uint8),
        (onnxnn.int64, onnxnn.float16, onnxnn.float16),
        (onnxnn.float16, onnxnn.bfloat16, onnxnn.float32),
        (onnxnn.bfloat16, onnxnn.float64, onnxnn.float64),
        (onnxnn.float32, onnxnn.float32, onnxnn.float32),
    ],
)
def test_promote_types_is_symmetric_table(a, b, expected) -> None:
    assert onnxnn.promote_types(a, b) is expected
    assert onnxnn.promote_types(b, a) is expected


@pytest.mark.parametrize(
    "name, operation, message",
    [
        (
            "sub_two_bools",
            lambda: t([True], onnxnn.bool) - t([False], onnxnn.bool),
            r"two bool tensors is not supported",
        ),
        ("sub_bool_and_int", lambda: t([True], onnxnn.bool) - 1, r"with a bool tensor is not supported"),
        ("neg_bool", lambda: -t([True], onnxnn.bool), r"on a bool tensor is not supported"),
    ],
)
def test_bool_subtraction_and_negation_raise(name, operation, message) -> None:
    with pytest.raises(RuntimeError, match=message):
        operation()


def test_abs_of_bool_is_refused_when_called_and_sign_and_sgn_of_bool_are_itself() -> None:
    flags = t([True, False], onnxnn.bool)
    with pytest.raises(NotImplementedError, match="abs"):
        flags.abs()
    with pytest.raises(NotImplementedError, match="abs"):
        flags.clone().abs_()
    for signs in (flags.sign(), flags.sgn(), onnxnn.sgn(flags)):  # sgn: the complex-aware sign
        assert signs.dtype is onnxnn.bool and signs.tolist() == [True, False]
