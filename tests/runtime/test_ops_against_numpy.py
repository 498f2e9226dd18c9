"""Tensor functions and methods against numpy: values, shapes and dtypes.

Each case maps onnxnn tensors to a result and numpy arrays to the expected array, whose dtype is
the dtype PyTorch gives (references cast explicitly where numpy's promotion differs). float16 and
float64 inputs appear wherever onnxruntime has kernels for the op in that dtype. In-place variants,
random fills, materialization and PyTorch's errors are in test_ops_in_place_and_errors.py.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.dtypes import as_dtype

from tolerances import accumulation_bound, assert_within


_rng = np.random.default_rng(2024)


def f32(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float32)


def f64(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape)


def f16(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float16)


def positive(*shape: int, dtype=np.float32) -> np.ndarray:
    return _rng.uniform(0.5, 2.0, shape).astype(dtype)


def ints(*shape: int, dtype=np.int64, low: int = -9, high: int = 10) -> np.ndarray:
    return _rng.integers(low, high, shape).astype(dtype)


def nonzero_ints(*shape: int, dtype=np.int64) -> np.ndarray:
    values = ints(*shape, dtype=dtype, low=1, high=6)
    return values * _rng.choice(np.array([-1, 1], dtype=dtype), shape)


def bools(*shape: int) -> np.ndarray:
    return _rng.random(shape) > 0.5


class Case(NamedTuple):
    id: str
    function: Callable  # onnxnn tensors -> Tensor or tuple of Tensors
    reference: Callable  # numpy arrays -> array (of PyTorch's result dtype) or list of arrays
    inputs: list


# Elementwise ops and the short chains here (softmax, norms, variances of at most 24 values)
# round at most a few dozen times per element, ulp-accurate functions counted as a few roundings:
# rtol is 2 * gamma(n) for n around 80 (float32: 1e-5 = 168 u; float64: 1e-12 = 9000 u; float16:
# 2e-3 = 4 u, each float16 op rounding once after float32 arithmetic). atol is the same budget
# for results near zero at these inputs' unit scale. Sums of products, where cancellation makes
# a relative tolerance meaningless, are bounded by ACCUMULATING instead.
_TOLERANCE = {
    np.dtype(np.float16): (2e-3, 2e-3),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-12),
}

# Cases summing products of their inputs, and the terms summed into one output element (a mean's
# division counts as one more). Evaluated on |inputs| in float64, their references give each
# element's sum of |terms|: Higham's magnitude for the accumulation bound.
ACCUMULATING = {
    "matmul_2d": 4,
    "matmul_1d_2d": 4,
    "matmul_2d_1d": 4,
    "matmul_1d_1d_is_0d": 4,
    "matmul_batch_broadcast": 4,
    "matmul_float64": 4,
    # (a @ b).sum(1): 3 + 2 terms; (c @ c).sum((0, 1)): 2 + 8 terms; their dot: 2 products. The
    # relative errors of the factors add up, at most 3 + 2 + 2 + 8 + 2 roundings.
    "mm_bmm_dot": 17,
    "sum_all": 24,
    "sum_dim": 3,
    "sum_negative_dim_keepdim": 4,
    "sum_tuple_dims": 8,
    "sum_negative_tuple_keepdim": 8,
    "sum_dtype_argument": 4,
    "mean_all": 25,
    "mean_dim_keepdim": 4,
    "mean_tuple_dims": 9,
}


def assert_tensor_equals(result, expected: np.ndarray, bound=None) -> None:
    """``result`` is a Tensor of ``expected``'s dtype and shape with (close to) its values."""
    expected = np.asarray(expected)
    assert isinstance(result, onnxnn.Tensor), f"expected a Tensor, got {type(result).__name__}"
    assert result.dtype is as_dtype(expected.dtype), f"dtype {result.dtype} != {expected.dtype}"
    assert tuple(result.shape) == expected.shape, f"shape {tuple(result.shape)} != {expected.shape}"
    actual = result.detach().numpy()
    if expected.dtype.kind == "f" and bound is not None:
        assert_within(actual, expected, bound)
    elif expected.dtype.kind == "f":
        rtol, atol = _TOLERANCE[expected.dtype]
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(actual, expected)


def _run(case: Case) -> None:
    result = case.function(*[onnxnn.tensor(array) for array in case.inputs])
    expected = case.reference(*[np.asarray(array) for array in case.inputs])
    if case.id in ACCUMULATING:
        magnitude = case.reference(*[np.abs(np.asarray(array, np.float64)) for array in case.inputs])
        assert_tensor_equals(
            result, expected, accumulation_bound(magnitude, ACCUMULATING[case.id], np.asarray(expected).dtype)
        )
        return
    if isinstance(expected, list):
        assert isinstance(result, tuple) and len(result) == len(expected)
        for part, expected_part in zip(result, expected):
            assert_tensor_equals(part, expected_part)
    else:
        assert_tensor_equals(result, expected)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


ARITHMETIC = [
    Case("add_broadcast", lambda a, b: a + b, lambda a, b: a + b, [f32(3, 1), f32(4)]),
    Case("add_float64", lambda a, b: a + b, lambda a, b: a + b, [f64(2, 3), f64(3)]),
    Case("add_float16", lambda a, b: a + b, lambda a, b: a + b, [f16(2, 3), f16(2, 1)]),
    Case("add_int", lambda a, b: a + b, lambda a, b: a + b, [ints(2, 3), ints(3)]),
    Case("add_scalar", lambda a: a + 2, lambda a: a + np.float32(2), [f32(3)]),
    Case("radd_scalar", lambda a: 2.5 + a, lambda a: np.float32(2.5) + a, [f32(3)]),
    Case("add_alpha", lambda a, b: onnxnn.add(a, b, alpha=3), lambda a, b: a + 3 * b, [f32(3), f32(3)]),
    Case("sub_broadcast", lambda a, b: a - b, lambda a, b: a - b, [f32(2, 1, 3), f32(4, 1)]),
    Case("rsub_scalar", lambda a: 1 - a, lambda a: 1 - a, [ints(4)]),
    Case("sub_alpha_method", lambda a, b: a.sub(b, alpha=2), lambda a, b: a - 2 * b, [f32(3), f32(3)]),
    Case("mul_broadcast", lambda a, b: a * b, lambda a, b: a * b, [f32(2, 3), f32(3)]),
    Case("mul_float16_scalar", lambda a: a * 0.5, lambda a: a * np.float16(0.5), [f16(4)]),
    Case("rmul_int_scalar", lambda a: 3 * a, lambda a: 3 * a, [ints(2, 2)]),
    Case("truediv", lambda a, b: a / b, lambda a, b: a / b, [f32(2, 3), positive(3)]),
    Case(
        "truediv_int_int_is_float",
        lambda a, b: a / b,
        lambda a, b: (a / b).astype(np.float32),
        [ints(5), nonzero_ints(5)],
    ),
    Case("rtruediv_scalar", lambda a: 1 / a, lambda a: np.float32(1) / a, [positive(3)]),
    Case("floordiv_float", lambda a, b: a // b, lambda a, b: np.floor_divide(a, b), [f32(6) * 4, positive(6)]),
    Case(
        "floordiv_int_negative",
        lambda a, b: a // b,
        lambda a, b: a // b,
        [np.array([-7, 7, -8, 9, 0]), np.array([2, -2, 3, 4, -3])],
    ),
    Case("rfloordiv_scalar", lambda a: 7 // a, lambda a: 7 // a, [np.array([2, -3, 4])]),
    Case(
        "floordiv_int64_beyond_float64",
        lambda a, b: a // b,
        lambda a, b: a // b,
        [np.array([2**60 + 3, -(2**60) - 3]), np.array([2, 2])],
    ),
    Case("floordiv_int32_scalar", lambda a: a // -3, lambda a: a // np.int32(-3), [ints(6, dtype=np.int32)]),
    Case(
        "div_trunc_int",
        lambda a, b: onnxnn.div(a, b, rounding_mode="trunc"),
        lambda a, b: np.trunc(a / b).astype(np.int64),
        [np.array([-7, 7, -8, 9]), np.array([2, -2, 3, 4])],
    ),
    Case(
        "div_floor_float",
        lambda a, b: a.div(b, rounding_mode="floor"),
        lambda a, b: np.floor(a / b),
        [f32(5) * 3, positive(5)],
    ),
    Case(
        "div_trunc_float",
        lambda a: onnxnn.div(a, 0.75, rounding_mode="trunc"),
        lambda a: np.trunc(a / np.float32(0.75)),
        [f32(5) * 3],
    ),
    Case("mod_float", lambda a, b: a % b, lambda a, b: np.mod(a, b), [f32(6) * 4, np.float32([1.5, -1.5] * 3)]),
    Case(
        "mod_int_sign_of_divisor",
        lambda a, b: a % b,
        lambda a, b: a % b,
        [np.array([-7, 7, -8, 9]), np.array([2, -2, 3, -4])],
    ),
    Case("rmod_scalar", lambda a: 10 % a, lambda a: 10 % a, [np.array([3, -4, 7])]),
    Case("pow_tensor_tensor", lambda a, b: a**b, lambda a, b: a**b, [positive(2, 3), f32(3)]),
    Case("pow_scalar", lambda a: a**3, lambda a: a**3, [f32(4)]),
    Case("pow_half", lambda a: a**0.5, lambda a: np.sqrt(a), [positive(4)]),
    Case("pow_negative", lambda a: a**-1, lambda a: 1 / a, [positive(4)]),
    Case("pow_int_int", lambda a: a**2, lambda a: a**2, [ints(4)]),
    Case("pow_int_float_one", lambda a: a**1.0, lambda a: a.astype(np.float32), [ints(4)]),
    Case("pow_int_float_exponent", lambda a: a**0.5, lambda a: np.sqrt(a).astype(np.float32), [ints(4, low=0)]),
    Case("rpow_scalar_base", lambda a: 2**a, lambda a: np.float32(2) ** a, [f32(4)]),
    Case("pow_function", lambda a: onnxnn.pow(a, 2), lambda a: a * a, [f64(3)]),
    Case("neg", lambda a: -a, lambda a: -a, [f32(2, 2)]),
    Case("neg_int", lambda a: -a, lambda a: -a, [ints(3)]),
    Case("matmul_2d", lambda a, b: a @ b, lambda a, b: a @ b, [f32(3, 4), f32(4, 2)]),
    Case("matmul_1d_2d", lambda a, b: a @ b, lambda a, b: a @ b, [f32(4), f32(4, 2)]),
    Case("matmul_2d_1d", lambda a, b: a @ b, lambda a, b: a @ b, [f32(3, 4), f32(4)]),
    Case("matmul_1d_1d_is_0d", lambda a, b: a @ b, lambda a, b: np.asarray(a @ b), [f32(4), f32(4)]),
    Case("matmul_batch_broadcast", lambda a, b: a @ b, lambda a, b: a @ b, [f32(2, 1, 3, 4), f32(5, 4, 2)]),
    Case("matmul_float64", lambda a, b: onnxnn.matmul(a, b), lambda a, b: a @ b, [f64(2, 3, 4), f64(4, 5)]),
    Case(
        "matmul_float16",
        lambda a, b: a @ b,
        lambda a, b: (a.astype(np.float32) @ b).astype(np.float16),
        [f16(3, 4), f16(4, 2)],
    ),
    Case(
        "mm_bmm_dot",
        lambda a, b, c: onnxnn.dot(onnxnn.mm(a, b).sum(1), c.bmm(c).sum((0, 1))),
        lambda a, b, c: np.asarray((a @ b).sum(1) @ (c @ c).sum((0, 1))),
        [f32(2, 3), f32(3, 2), f32(4, 2, 2)],
    ),
]

COMPARISONS = [
    Case(f"{name}_{kind}", function, reference, inputs)
    for name, function, reference in [
        ("eq", lambda a, b: a == b, lambda a, b: a == b),
        ("ne", lambda a, b: a != b, lambda a, b: a != b),
        ("lt", lambda a, b: a < b, lambda a, b: a < b),
        ("le", lambda a, b: a <= b, lambda a, b: a <= b),
        ("gt", lambda a, b: a > b, lambda a, b: a > b),
        ("ge", lambda a, b: a >= b, lambda a, b: a >= b),
    ]
    for kind, inputs in [
        ("int_broadcast", [ints(3, 1, low=-2, high=3), ints(4, low=-2, high=3)]),
        ("float_vs_int", [np.float32([0.5, 1.0, 2.0]), np.array([1, 1, 1])]),
        ("float64", [np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])]),
    ]
] + [
    Case("lt_scalar", lambda a: a < 1, lambda a: a < 1, [f32(5)]),
    Case("ge_float_scalar_int_tensor", lambda a: a >= 0.5, lambda a: a >= 0.5, [ints(5)]),
    Case("eq_bool", lambda a, b: a == b, lambda a, b: a == b, [bools(4), bools(4)]),
    Case("lt_bool", lambda a, b: a < b, lambda a, b: a < b, [bools(6), bools(6)]),
    Case("ge_bool_scalar", lambda a: a >= True, lambda a: a >= True, [bools(6)]),
    Case(
        "method_forms",
        lambda a, b: a.eq(b) | a.lt(b).logical_and(a.ne(b)),
        lambda a, b: (a == b) | ((a < b) & (a != b)),
        [ints(6, low=0, high=3), ints(6, low=0, high=3)],
    ),
]

UNARY = [
    Case(f"{name}_{dtype.__name__}", function, reference, [make(dtype)])
    for name, function, reference, make, dtype_list in [
        ("abs", lambda a: a.abs(), np.abs, lambda d: f64(2, 3).astype(d), (np.float32, np.float64, np.float16)),
        ("exp", lambda a: a.exp(), np.exp, lambda d: f64(2, 3).astype(d), (np.float32, np.float64, np.float16)),
        ("log", lambda a: a.log(), np.log, lambda d: positive(2, 3, dtype=d), (np.float32, np.float64, np.float16)),
        (
            "sqrt",
            lambda a: onnxnn.sqrt(a),
            np.sqrt,
            lambda d: positive(4, dtype=d),
            (np.float32, np.float64, np.float16),
        ),
        (
            "relu",
            lambda a: a.relu(),
            lambda a: np.maximum(a, 0),
            lambda d: f64(5).astype(d),
            (np.float32, np.float64, np.float16),
        ),
        ("sigmoid", lambda a: a.sigmoid(), _sigmoid, lambda d: f64(5).astype(d), (np.float32, np.float64, np.float16)),
        ("tanh", lambda a: onnxnn.tanh(a), np.tanh, lambda d: f64(5).astype(d), (np.float32, np.float64, np.float16)),
        # onnxruntime has no float64 LeakyRelu kernel.
        (
            "leaky_relu",
            lambda a: onnxnn.leaky_relu(a, 0.1),
            lambda a: np.where(a > 0, a, a * a.dtype.type(0.1)),
            lambda d: f64(5).astype(d),
            (np.float32, np.float16),
        ),
        ("abs_int", lambda a: abs(a), np.abs, lambda d: ints(5, dtype=d), (np.int64, np.int32)),
        (
            "relu_int",
            lambda a: onnxnn.relu(a),
            lambda a: np.maximum(a, 0),
            lambda d: ints(5, dtype=d),
            (np.int64, np.int32, np.int8, np.uint8),
        ),
    ]
    for dtype in dtype_list
] + [
    Case("exp_int_is_float", lambda a: a.exp(), lambda a: np.exp(a).astype(np.float32), [ints(3, low=0, high=3)]),
    Case("sqrt_int_is_float", lambda a: a.sqrt(), lambda a: np.sqrt(a).astype(np.float32), [ints(3, low=0)]),
    Case("sigmoid_int_is_float", lambda a: a.sigmoid(), lambda a: _sigmoid(a.astype(np.float32)), [ints(3)]),
    Case("clamp_both", lambda a: a.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), [f32(6)]),
    Case("clamp_min_only", lambda a: onnxnn.clamp(a, min=0.0), lambda a: np.maximum(a, 0), [f32(6)]),
    Case("clamp_max_only", lambda a: a.clamp(max=0.25), lambda a: np.minimum(a, np.float32(0.25)), [f32(6)]),
    Case("clamp_int", lambda a: a.clamp(-2, 3), lambda a: np.clip(a, -2, 3), [ints(6)]),
    Case(
        "clamp_int_float_bound", lambda a: a.clamp(max=2.5), lambda a: np.minimum(a, 2.5).astype(np.float32), [ints(6)]
    ),
    Case(
        "clamp_tensor_bounds",
        lambda a, low, high: a.clamp(low, high),
        lambda a, low, high: np.clip(a, low, high),
        [f32(2, 3), np.float32([-0.1, -1.0, 0.0]), np.float32([[0.2], [1.0]])],
    ),
    Case("clip_float64", lambda a: a.clip(-1, 1), lambda a: np.clip(a, -1, 1), [f64(5) * 2]),
    Case("softmax_last", lambda a: a.softmax(-1), lambda a: _softmax(a, -1), [f32(2, 3, 4)]),
    Case("softmax_dim_0", lambda a: onnxnn.softmax(a, 0), lambda a: _softmax(a, 0), [f32(2, 3, 4)]),
    Case("softmax_dim_1_float64", lambda a: a.softmax(1), lambda a: _softmax(a, 1), [f64(2, 3, 4)]),
    Case("softmax_float16", lambda a: a.softmax(-1), lambda a: _softmax(a, -1), [f16(3, 4)]),
    Case("softmax_int_is_float", lambda a: a.softmax(0), lambda a: _softmax(a.astype(np.float32), 0), [ints(4)]),
    Case(
        "softmax_dtype_argument",
        lambda a: a.softmax(-1, dtype=onnxnn.float64),
        lambda a: _softmax(a.astype(np.float64), -1),
        [f32(2, 3)],
    ),
    Case("log_softmax_last", lambda a: a.log_softmax(-1), lambda a: _log_softmax(a, -1), [f32(2, 3, 4)]),
    Case("log_softmax_dim_1_float64", lambda a: onnxnn.log_softmax(a, 1), lambda a: _log_softmax(a, 1), [f64(2, 3, 4)]),
    Case(
        "log_softmax_large_values",
        lambda a: a.log_softmax(0),
        lambda a: _log_softmax(a, 0),
        [np.float32([1000.0, 0.0, -1000.0])],
    ),
    Case(
        "where_broadcast",
        lambda c, a, b: onnxnn.where(c, a, b),
        lambda c, a, b: np.where(c, a, b),
        [bools(3, 1), f32(4), f32(3, 4)],
    ),
    Case(
        "where_scalar_other",
        lambda c, a: onnxnn.where(c, a, 0.0),
        lambda c, a: np.where(c, a, np.float32(0)),
        [bools(5), f32(5)],
    ),
    Case(
        "where_method",
        lambda c, a, b: a.where(c, b),
        lambda c, a, b: np.where(c, a, b),
        [bools(2, 2), ints(2, 2), ints(2)],
    ),
    Case(
        "where_int_and_float",
        lambda c, a, b: onnxnn.where(c, a, b),
        lambda c, a, b: np.where(c, a, b).astype(np.float32),
        [bools(4), ints(4), f32(4)],
    ),
]

REDUCTIONS = [
    Case("sum_all", lambda a: a.sum(), lambda a: np.asarray(a.sum()), [f32(2, 3, 4)]),
    Case("sum_dim", lambda a: a.sum(1), lambda a: a.sum(1), [f32(2, 3, 4)]),
    Case(
        "sum_negative_dim_keepdim",
        lambda a: a.sum(-1, keepdim=True),
        lambda a: a.sum(-1, keepdims=True),
        [f32(2, 3, 4)],
    ),
    Case("sum_tuple_dims", lambda a: onnxnn.sum(a, (0, 2)), lambda a: a.sum((0, 2)), [f32(2, 3, 4)]),
    Case(
        "sum_negative_tuple_keepdim",
        lambda a: a.sum((-1, -3), keepdim=True),
        lambda a: a.sum((0, 2), keepdims=True),
        [f64(2, 3, 4)],
    ),
    Case("sum_int32_is_int64", lambda a: a.sum(0), lambda a: a.sum(0).astype(np.int64), [ints(3, 2, dtype=np.int32)]),
    Case("sum_bool_is_int64", lambda a: a.sum(), lambda a: np.asarray(a.sum(), dtype=np.int64), [bools(7)]),
    Case(
        "sum_dtype_argument",
        lambda a: a.sum(dtype=onnxnn.float64),
        lambda a: np.asarray(a.astype(np.float64).sum()),
        [f32(4)],
    ),
    Case("sum_float16", lambda a: a.sum(0), lambda a: a.sum(0), [f16(3, 2)]),
    Case("sum_0d_over_dim_0", lambda a: a.sum(0), lambda a: a, [np.float32(2.5)]),
    Case("max_0d_over_dim_minus_1", lambda a: a.max(-1, keepdim=True), lambda a: [a, np.asarray(0)], [np.float32(2.5)]),
    Case("mean_all", lambda a: a.mean(), lambda a: np.asarray(a.mean()), [f32(2, 3, 4)]),
    Case("mean_dim_keepdim", lambda a: a.mean(1, keepdim=True), lambda a: a.mean(1, keepdims=True), [f32(2, 3, 4)]),
    Case("mean_tuple_dims", lambda a: onnxnn.mean(a, (-1, 0)), lambda a: a.mean((0, 2)), [f64(2, 3, 4)]),
    Case("mean_float16", lambda a: a.mean(1), lambda a: a.astype(np.float32).mean(1).astype(np.float16), [f16(3, 4)]),
    Case("max_all", lambda a: a.max(), lambda a: np.asarray(a.max()), [f32(3, 4)]),
    Case("max_int", lambda a: onnxnn.max(a), lambda a: np.asarray(a.max()), [ints(3, 4)]),
    Case("max_dim_tuple", lambda a: a.max(1), lambda a: [a.max(1), a.argmax(1)], [f32(3, 4)]),
    Case(
        "max_dim_keepdim",
        lambda a: a.max(-1, keepdim=True),
        lambda a: [a.max(-1, keepdims=True), a.argmax(-1, keepdims=True)],
        [f32(3, 4)],
    ),
    Case("maximum_elementwise_via_max", lambda a, b: onnxnn.max(a, b), np.maximum, [f32(3), f32(3)]),
    Case("min_all", lambda a: a.min(), lambda a: np.asarray(a.min()), [f32(3, 4)]),
    Case("min_dim_tuple", lambda a: onnxnn.min(a, 0), lambda a: [a.min(0), a.argmin(0)], [f64(3, 4)]),
    Case("amax_tuple_dims", lambda a: a.amax((0, 2)), lambda a: a.max((0, 2)), [f32(2, 3, 4)]),
    Case("amin_keepdim", lambda a: a.amin(1, keepdim=True), lambda a: a.min(1, keepdims=True), [f32(2, 3, 4)]),
    Case("argmax_flat", lambda a: a.argmax(), lambda a: np.asarray(a.argmax()), [f32(3, 4)]),
    Case("argmax_dim", lambda a: onnxnn.argmax(a, 1), lambda a: a.argmax(1), [f32(3, 4)]),
    Case(
        "argmax_negative_dim_keepdim",
        lambda a: a.argmax(-1, keepdim=True),
        lambda a: a.argmax(-1, keepdims=True),
        [f32(2, 3, 4)],
    ),
    Case("argmin_flat", lambda a: a.argmin(), lambda a: np.asarray(a.argmin()), [ints(3, 4)]),
    Case("argmin_dim", lambda a: onnxnn.argmin(a, 0), lambda a: a.argmin(0), [f32(3, 4)]),
    Case("prod_all", lambda a: a.prod(), lambda a: np.asarray(a.prod()), [positive(2, 3)]),
    Case(
        "prod_dim_keepdim", lambda a: onnxnn.prod(a, 1, keepdim=True), lambda a: a.prod(1, keepdims=True), [f32(2, 3)]
    ),
    Case("prod_int", lambda a: a.prod(0), lambda a: a.prod(0), [ints(3, 2)]),
    Case(
        "prod_int32_is_int64", lambda a: a.prod(), lambda a: np.asarray(a.prod(), np.int64), [ints(4, dtype=np.int32)]
    ),
    Case("prod_bool_is_int64", lambda a: a.prod(1), lambda a: a.prod(1).astype(np.int64), [bools(3, 2)]),
    Case("var_all_unbiased", lambda a: a.var(), lambda a: np.asarray(a.var(ddof=1)), [f32(3, 4)]),
    Case("var_dim_biased", lambda a: a.var(1, unbiased=False), lambda a: a.var(1), [f32(3, 4)]),
    Case(
        "var_correction_keepdim",
        lambda a: onnxnn.var(a, (0, 1), keepdim=True, correction=2),
        lambda a: a.var((0, 1), ddof=2, keepdims=True),
        [f64(3, 4, 2)],
    ),
    Case("std_all", lambda a: a.std(), lambda a: np.asarray(a.std(ddof=1)), [f32(3, 4)]),
    Case("std_dim", lambda a: onnxnn.std(a, -1), lambda a: a.std(-1, ddof=1), [f64(3, 4)]),
    Case("logsumexp_dim", lambda a: a.logsumexp(1), lambda a: np.log(np.exp(a).sum(1)), [f32(3, 4)]),
    Case(
        "logsumexp_tuple_keepdim",
        lambda a: onnxnn.logsumexp(a, (0, 2), keepdim=True),
        lambda a: np.log(np.exp(a).sum((0, 2), keepdims=True)),
        [f64(2, 3, 4)],
    ),
    # Integers and bools are summed in the default float dtype, as PyTorch's.
    Case(
        "logsumexp_ints",
        lambda a: a.logsumexp(1),
        lambda a: np.log(np.exp(a.astype(np.float32)).sum(1)),
        [ints(3, 4, dtype=np.int8)],
    ),
    Case(
        "logsumexp_bools",
        lambda a: a.logsumexp(0),
        lambda a: np.log(np.exp(a.astype(np.float32)).sum(0)),
        [bools(5, 2)],
    ),
    Case(
        "logsumexp_large_values",
        lambda a: a.logsumexp(0),
        lambda a: np.asarray(1000 + np.log(2), np.float32),
        [np.float32([1000.0, 1000.0])],
    ),
    Case(
        "logsumexp_all_minus_inf",
        lambda a: a.logsumexp(0),
        lambda a: np.asarray(-np.inf, np.float32),
        [np.float32([-np.inf, -np.inf])],
    ),
    Case(
        "logsumexp_plus_inf",
        lambda a: a.logsumexp(-1),
        lambda a: np.float32([np.inf, 1.0 + np.log(2)]),
        [np.float32([[np.inf, 1.0], [1.0, 1.0]])],
    ),
    Case("all_bool", lambda a: a.all(), lambda a: np.asarray(a.all()), [bools(6)]),
    Case("all_dim", lambda a: onnxnn.all(a, 1), lambda a: a.all(1), [bools(3, 4)]),
    Case("all_float_fractions", lambda a: a.all(), lambda a: np.asarray(True), [np.float32([1.0, 0.5, -0.25])]),
    Case(
        "any_float_fractions", lambda a: a.any(1), lambda a: np.array([True, False]), [np.float32([[0, 0.2], [0, 0]])]
    ),
    Case("any_dim_keepdim", lambda a: a.any(0, keepdim=True), lambda a: a.any(0, keepdims=True), [bools(3, 4)]),
    Case("any_int", lambda a: onnxnn.any(a), lambda a: np.asarray(a.any()), [np.array([0, 0, 3])]),
    Case("norm_all", lambda a: a.norm(), lambda a: np.asarray(np.linalg.norm(a)), [f32(3, 4)]),
    Case("norm_dim", lambda a: onnxnn.norm(a, dim=1), lambda a: np.linalg.norm(a, axis=1), [f32(3, 4)]),
    Case(
        "norm_p1_keepdim",
        lambda a: a.norm(1, dim=0, keepdim=True),
        lambda a: np.abs(a).sum(0, keepdims=True),
        [f32(3, 4)],
    ),
    Case("norm_inf", lambda a: a.norm(float("inf")), lambda a: np.asarray(np.abs(a).max()), [f32(3, 4)]),
    Case("norm_p3", lambda a: a.norm(3, dim=-1), lambda a: (np.abs(a) ** 3).sum(-1) ** (1 / 3), [f64(3, 4)]),
    Case(
        "norm_p0_counts_nonzeros",
        lambda a: a.norm(0, dim=1),
        lambda a: np.float32([2, 0]),
        [np.float32([[1.5, 0.0, -2.0], [0.0, 0.0, 0.0]])],
    ),
    Case("norm_minus_inf", lambda a: a.norm(-float("inf")), lambda a: np.asarray(np.abs(a).min()), [f32(3, 4)]),
    Case(
        "norm_fro_float16",
        lambda a: a.norm("fro", dim=(0, 1)),
        lambda a: np.asarray(np.linalg.norm(a.astype(np.float32)), np.float16),
        [f16(3, 4)],
    ),
]

SHAPES = [
    Case("reshape_minus_one", lambda a: a.reshape(-1), lambda a: a.reshape(-1), [f32(2, 3, 4)]),
    Case("reshape_tuple_inferred", lambda a: a.reshape((4, -1)), lambda a: a.reshape(4, -1), [f32(2, 3, 4)]),
    Case("reshape_function", lambda a: onnxnn.reshape(a, (3, 8)), lambda a: a.reshape(3, 8), [ints(2, 3, 4)]),
    Case("view_inferred", lambda a: a.view(-1, 4), lambda a: a.reshape(-1, 4), [f32(2, 3, 4)]),
    Case("view_to_0d", lambda a: a.view(()), lambda a: a.reshape(()), [f32(1, 1)]),
    Case("flatten_all", lambda a: a.flatten(), lambda a: a.reshape(-1), [f32(2, 3, 4)]),
    Case("flatten_from_1", lambda a: a.flatten(1), lambda a: a.reshape(2, 12), [f32(2, 3, 4)]),
    Case("flatten_range", lambda a: onnxnn.flatten(a, 0, 1), lambda a: a.reshape(6, 4), [f32(2, 3, 4)]),
    Case("transpose", lambda a: a.transpose(0, 2), lambda a: a.transpose(2, 1, 0), [f32(2, 3, 4)]),
    Case("transpose_negative", lambda a: onnxnn.transpose(a, -1, -2), lambda a: a.swapaxes(-1, -2), [f32(2, 3, 4)]),
    Case("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [f32(2, 3, 4)]),
    Case("permute_tuple", lambda a: onnxnn.permute(a, (1, -1, 0)), lambda a: a.transpose(1, 2, 0), [ints(2, 3, 4)]),
    Case("T", lambda a: a.T, lambda a: a.T, [f32(2, 3, 4)]),
    Case("mT", lambda a: a.mT, lambda a: a.swapaxes(-1, -2), [f32(2, 3, 4)]),
    Case("t", lambda a: a.t(), lambda a: a.T, [f32(2, 3)]),
    Case("transpose_0d", lambda a: a.transpose(0, -1), lambda a: a, [np.float32(1.5)]),
    Case("squeeze_0d", lambda a: a.squeeze(0), lambda a: a, [np.float32(1.5)]),
    Case("squeeze_all", lambda a: a.squeeze(), lambda a: a.squeeze(), [f32(1, 3, 1, 4)]),
    Case("squeeze_dim", lambda a: a.squeeze(2), lambda a: a.squeeze(2), [f32(1, 3, 1, 4)]),
    Case("squeeze_non_unit_dim_is_noop", lambda a: a.squeeze(1), lambda a: a, [f32(1, 3, 1, 4)]),
    Case("unsqueeze_0", lambda a: a.unsqueeze(0), lambda a: a[None], [f32(3, 4)]),
    Case("unsqueeze_negative", lambda a: onnxnn.unsqueeze(a, -1), lambda a: a[..., None], [f32(3, 4)]),
    Case("expand", lambda a: a.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), [f32(3, 1)]),
    Case("expand_minus_one", lambda a: a.expand(-1, 4), lambda a: np.broadcast_to(a, (3, 4)), [f32(3, 1)]),
    Case("expand_as", lambda a, b: a.expand_as(b), lambda a, b: np.broadcast_to(a, b.shape), [f32(4), f32(2, 4)]),
    Case("repeat", lambda a: a.repeat(2, 3), lambda a: np.tile(a, (2, 3)), [f32(2, 3)]),
    Case("repeat_new_dims", lambda a: a.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2)), [ints(2, 3)]),
    Case("tile_fewer_dims", lambda a: a.tile((2,)), lambda a: np.tile(a, (1, 2)), [f32(2, 3)]),
    Case("flip", lambda a: a.flip(0), lambda a: a[::-1], [f32(3, 4)]),
    Case("flip_dims", lambda a: onnxnn.flip(a, (0, -1)), lambda a: a[::-1, :, ::-1], [ints(2, 3, 4)]),
    Case("cat", lambda a, b: onnxnn.cat([a, b]), lambda a, b: np.concatenate([a, b]), [f32(2, 3), f32(1, 3)]),
    Case(
        "cat_negative_dim",
        lambda a, b, c: onnxnn.cat((a, b, c), -1),
        lambda a, b, c: np.concatenate([a, b, c], -1),
        [f32(2, 1), f32(2, 3), f32(2, 2)],
    ),
    Case(
        "cat_promotes",
        lambda a, b: onnxnn.cat([a, b]),
        lambda a, b: np.concatenate([a, b]).astype(np.float32),
        [ints(2), f32(3)],
    ),
    Case("stack", lambda a, b: onnxnn.stack([a, b]), lambda a, b: np.stack([a, b]), [f32(2, 3), f32(2, 3)]),
    Case(
        "stack_last", lambda a, b: onnxnn.stack([a, b], -1), lambda a, b: np.stack([a, b], -1), [ints(2, 3), ints(2, 3)]
    ),
    Case("split_size", lambda a: a.split(2), lambda a: [a[0:2], a[2:4], a[4:5]], [f32(5, 2)]),
    Case("split_sections", lambda a: onnxnn.split(a, [1, 3], 1), lambda a: [a[:, :1], a[:, 1:]], [f32(2, 4)]),
    Case("chunk_uneven", lambda a: a.chunk(3, -1), lambda a: [a[:, 0:2], a[:, 2:4], a[:, 4:5]], [f32(2, 5)]),
    Case("chunk_function", lambda a: onnxnn.chunk(a, 2), lambda a: [a[:2], a[2:]], [ints(4, 2)]),
    Case("unbind", lambda a: a.unbind(1), lambda a: [a[:, 0], a[:, 1], a[:, 2]], [f32(2, 3)]),
    Case("unbind_function", lambda a: onnxnn.unbind(a), lambda a: [a[0], a[1]], [f32(2, 3)]),
    Case("narrow", lambda a: a.narrow(1, 1, 2), lambda a: a[:, 1:3], [f32(3, 4)]),
    Case("narrow_function_negative_dim", lambda a: onnxnn.narrow(a, -1, 0, 1), lambda a: a[:, :1], [f32(3, 4)]),
    Case("narrow_negative_start", lambda a: a.narrow(0, -2, 2), lambda a: a[-2:], [f32(5)]),
    Case(
        "to_int_truncates", lambda a: a.to(onnxnn.int64), lambda a: a.astype(np.int64), [np.float32([-1.7, 2.9, 0.2])]
    ),
    Case("to_numpy_dtype", lambda a: a.to(np.float64), lambda a: a.astype(np.float64), [f32(3)]),
    Case("to_dtype_keyword", lambda a: a.to(dtype=onnxnn.float16), lambda a: a.astype(np.float16), [f32(3)]),
    Case("to_bool", lambda a: a.to(onnxnn.bool), lambda a: a.astype(bool), [np.float32([0.0, 1.5, -2.0])]),
    Case("float_from_int", lambda a: a.float(), lambda a: a.astype(np.float32), [ints(3)]),
    Case("double", lambda a: a.double(), lambda a: a.astype(np.float64), [f32(3)]),
    Case("half", lambda a: a.half(), lambda a: a.astype(np.float16), [f32(3)]),
    Case("long_int_bool", lambda a: a.long().int().bool(), lambda a: a.astype(np.int64).astype(bool), [f32(4) * 3]),
    Case("detach", lambda a: a.detach(), lambda a: a, [f32(3)]),
    Case("clone", lambda a: a.clone(), lambda a: a, [f16(3)]),
]

ALL_CASES = ARITHMETIC + COMPARISONS + UNARY + REDUCTIONS + SHAPES


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_forward_matches_numpy(case: Case, executor: str) -> None:
    # Both executors, pinned: "auto" gives these small graphs to the kernels alone.
    with onnxnn.set_executor(executor):
        _run(case)


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in ALL_CASES]
    assert len(ids) == len(set(ids))
