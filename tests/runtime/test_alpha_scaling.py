"""The ``alpha``/``beta`` factors of add, sub, rsub, index_add and the addmm family, as PyTorch's.

PyTorch promotes the operands first and scales in the result dtype, with ``alpha`` converted to that
dtype (``c10::checked_convert``): int16 + 3 * int8(100) is 300, not int8's wrapped 44. add, sub and
addr also refuse a float factor for an integral result and a bool factor for a non-bool one.
Expected values are Python integer / numpy arithmetic in the result dtype, never onnxnn's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn

T = onnxnn.tensor
EXECUTORS = ["kernels", "onnxruntime"]


@pytest.fixture(params=EXECUTORS)
def executor(request):
    with onnxnn.set_executor(request.param):
        yield request.param


def _wrap(value: int, dtype) -> int:
    """``value`` wrapped into an integer dtype, as its arithmetic does."""
    return int(np.array(value, dtype=np.int64).astype(dtype.numpy_dtype))


def _half(value: float) -> float:
    return float(np.float16(value))


# name -> (computation, expected values, expected dtype)
VALUE_CASES = {
    "int16 + 3 * int8 scales in int16": (
        lambda: T([0], dtype=onnxnn.int16).add(T([100], dtype=onnxnn.int8), alpha=3),
        [3 * 100],
        onnxnn.int16,
    ),
    "int16 add_ in place": (
        lambda: T([0], dtype=onnxnn.int16).add_(T([100], dtype=onnxnn.int8), alpha=3),
        [3 * 100],
        onnxnn.int16,
    ),
    "float32 + 3 * float16 scales in float32": (
        lambda: T([0.0]).add(T([60000.0], dtype=onnxnn.float16), alpha=3),
        [180000.0],
        onnxnn.float32,
    ),
    "float32 sub_ of float16": (
        lambda: T([0.0]).sub_(T([60000.0], dtype=onnxnn.float16), alpha=2),
        [-120000.0],
        onnxnn.float32,
    ),
    "int8 + 2 * bool stays int8": (
        lambda: T([1, 2], dtype=onnxnn.int8).add(T([True, False]), alpha=2),
        [1 + 2 * 1, 2 + 2 * 0],
        onnxnn.int8,
    ),
    "bool + 2 * bool is bool (alpha True)": (
        lambda: T([True, False]).add(T([True, True]), alpha=2),
        [True, True],
        onnxnn.bool,
    ),
    "bool + 0 * bool is the first operand": (lambda: T([False]).add(T([True]), alpha=0), [False], onnxnn.bool),
    "float64 + 0.1 * int in float64": (
        lambda: T([1.0], dtype=onnxnn.float64).add(T([1]), alpha=0.1),
        [1.0 + 0.1],
        onnxnn.float64,
    ),
    "rsub int8, int16 scales in int16": (
        lambda: onnxnn.rsub(T([100], dtype=onnxnn.int8), T([0], dtype=onnxnn.int16), alpha=3),
        [0 - 3 * 100],
        onnxnn.int16,
    ),
    "rsub int8 from a number wraps in int8": (
        lambda: onnxnn.rsub(T([100], dtype=onnxnn.int8), 5, alpha=3),
        [_wrap(5 - 3 * 100, onnxnn.int8)],
        onnxnn.int8,
    ),
    "float16 + number: alpha rounded to float16": (
        lambda: T([0.0], dtype=onnxnn.float16).add(3, alpha=0.1),
        [_half(3 * _half(0.1))],  # the product of two halves is exact in double; rounded once
        onnxnn.float16,
    ),
    "float16 + number: the number rounded to float16 first": (
        lambda: T([0.0], dtype=onnxnn.float16).add(1e5, alpha=1e-3),
        [math.inf],  # 1e5 is float16's inf before it is scaled
        onnxnn.float16,
    ),
    "int8 + number wraps in int8": (
        lambda: T([0], dtype=onnxnn.int8).add(300, alpha=2),
        [_wrap(2 * 300, onnxnn.int8)],
        onnxnn.int8,
    ),
    "int + float number with a float alpha": (lambda: T([0]).add(3.5, alpha=0.5), [3.5 * 0.5], onnxnn.float32),
    "uint8 alpha -129 wraps": (
        lambda: T([1], dtype=onnxnn.uint8).add(T([1], dtype=onnxnn.uint8), alpha=-129),
        [_wrap(1 - 129, onnxnn.uint8)],
        onnxnn.uint8,
    ),
    "float tensor + 0-d tensor alpha": (lambda: T([1.0]).add(T([1.0]), alpha=T(2.0)), [3.0], onnxnn.float32),
    # index_add: alpha converted to input's dtype without add's alpha check (a float alpha truncates).
    "index_add bool alpha 2 is True": (
        lambda: T([True, False]).index_add(0, T([1]), T([True]), alpha=2),
        [True, True],
        onnxnn.bool,
    ),
    "index_add bool alpha 0 is False": (
        lambda: T([False, False]).index_add(0, T([1]), T([True]), alpha=0),
        [False, False],
        onnxnn.bool,
    ),
    "index_add int alpha 0.5 truncates to 0": (
        lambda: T([0, 0]).index_add(0, T([1]), T([3]), alpha=0.5),
        [0, 0],
        onnxnn.int64,
    ),
    "index_add int alpha 1.5 truncates to 1": (
        lambda: T([0, 0]).index_add(0, T([1]), T([3]), alpha=1.5),
        [0, 3],
        onnxnn.int64,
    ),
    "index_add float alpha True is 1": (
        lambda: T([0.0, 0.0]).index_add(0, T([1]), T([3.0]), alpha=True),
        [0.0, 3.0],
        onnxnn.float32,
    ),
    "index_add int8 wraps": (
        lambda: T([0, 0], dtype=onnxnn.int8).index_add(0, T([1]), T([3], dtype=onnxnn.int8), alpha=100),
        [0, _wrap(300, onnxnn.int8)],
        onnxnn.int8,
    ),
    "index_add uint8 alpha -1 is 255": (
        lambda: T([0, 0], dtype=onnxnn.uint8).index_add(0, T([1]), T([3], dtype=onnxnn.uint8), alpha=-1),
        [0, _wrap(3 * 255, onnxnn.uint8)],
        onnxnn.uint8,
    ),
    # addmm family: alpha/beta in the (common) dtype; addr promotes and checks like add.
    "addmm int64 alpha 0.5 is 0": (
        lambda: onnxnn.addmm(onnxnn.zeros(1, 1, dtype=onnxnn.int64), T([[1]]), T([[1]]), alpha=0.5),
        [[0]],
        onnxnn.int64,
    ),
    "addmm int64 beta 1.5 is 1": (
        lambda: onnxnn.addmm(onnxnn.ones(1, 1, dtype=onnxnn.int64), T([[3]]), T([[1]]), beta=1.5),
        [[3 + 1]],
        onnxnn.int64,
    ),
    "addmv int64 alpha 0.5 is 0": (
        lambda: onnxnn.addmv(onnxnn.ones(1, dtype=onnxnn.int64), T([[3]]), T([1]), alpha=0.5),
        [1],
        onnxnn.int64,
    ),
    "baddbmm int64 alpha 0.5 is 0": (
        lambda: onnxnn.baddbmm(onnxnn.ones(1, 1, 1, dtype=onnxnn.int64), T([[[3]]]), T([[[1]]]), alpha=0.5),
        [[[1]]],
        onnxnn.int64,
    ),
    "addmm float16 alpha past float16 is float32's": (
        lambda: onnxnn.addmm(
            onnxnn.ones(1, 1, dtype=onnxnn.float16),
            T([[3.0]], dtype=onnxnn.float16),
            T([[1.0]], dtype=onnxnn.float16),
            alpha=1e5,
        ),
        [[math.inf]],  # 3e5 + 1 computed in float32, rounded once
        onnxnn.float16,
    ),
    "addr int64 + 2 * int8 outer promotes": (
        lambda: onnxnn.addr(
            onnxnn.ones(1, 1, dtype=onnxnn.int64), T([3], dtype=onnxnn.int8), T([1], dtype=onnxnn.int8), alpha=2
        ),
        [[1 + 2 * 3]],
        onnxnn.int64,
    ),
    "addr bool alpha 2 is True": (
        lambda: onnxnn.addr(onnxnn.zeros(1, 1, dtype=onnxnn.bool), T([True]), T([True]), alpha=2),
        [[True]],
        onnxnn.bool,
    ),
}


@pytest.mark.parametrize("name", list(VALUE_CASES))
def test_alpha_scales_in_the_result_dtype(executor, name):
    compute, expected, dtype = VALUE_CASES[name]
    result = compute()
    assert result.dtype == dtype
    assert result.tolist() == expected


# name -> (computation, error type, message fragment)
ERROR_CASES = {
    "float alpha, int result": (
        lambda: T([1]).add(T([1]), alpha=0.5),
        RuntimeError,
        "argument alpha must not be a floating point",
    ),
    "alpha 1.0, int result": (
        lambda: T([1]).add(T([1]), alpha=1.0),
        RuntimeError,
        "argument alpha must not be a floating point",
    ),
    "float alpha, bool result": (
        lambda: T([True]).add(T([True]), alpha=0.5),
        RuntimeError,
        "argument alpha must not be a floating point",
    ),
    "float alpha, int sub": (
        lambda: T([1]).sub(T([1]), alpha=0.5),
        RuntimeError,
        "argument alpha must not be a floating point",
    ),
    "bool alpha, float result": (
        lambda: T([1.0]).add(T([1]), alpha=True),
        RuntimeError,
        "Boolean alpha only supported for Boolean results.",
    ),
    "bool alpha, int + number": (
        lambda: T([0]).add(3, alpha=True),
        RuntimeError,
        "Boolean alpha only supported for Boolean results.",
    ),
    "bool alpha, float sub": (
        lambda: T([1.0]).sub(T([1]), alpha=True),
        RuntimeError,
        "Boolean alpha only supported for Boolean results.",
    ),
    "complex alpha": (lambda: T([1.0]).add(T([1.0]), alpha=1 + 2j), RuntimeError, "must not be a complex number"),
    "float16 alpha past its range": (
        lambda: T([1.0], dtype=onnxnn.float16).add(T([1.0], dtype=onnxnn.float16), alpha=1e5),
        RuntimeError,
        "without overflow",
    ),
    "bfloat16 alpha past its range": (
        lambda: T([1.0], dtype=onnxnn.bfloat16).add(T([1.0], dtype=onnxnn.bfloat16), alpha=1e39),
        RuntimeError,
        "without overflow",
    ),
    "int8 alpha past its range": (
        lambda: T([1], dtype=onnxnn.int8).add(T([1], dtype=onnxnn.int8), alpha=300),
        RuntimeError,
        "without overflow",
    ),
    "alpha past 64 bits": (lambda: T([1]).add(T([1]), alpha=2**70), OverflowError, "int too big to convert"),
    "index_add int8 alpha past its range": (
        lambda: T([0, 0], dtype=onnxnn.int8).index_add(0, T([1]), T([3], dtype=onnxnn.int8), alpha=300),
        RuntimeError,
        "without overflow",
    ),
    "index_add int alpha NaN": (
        lambda: T([0, 0]).index_add(0, T([1]), T([3]), alpha=math.nan),
        RuntimeError,
        "without overflow",
    ),
    "addmm int64 alpha past its range": (
        lambda: onnxnn.addmm(onnxnn.ones(1, 1, dtype=onnxnn.int64), T([[3]]), T([[1]]), alpha=1e30),
        RuntimeError,
        "without overflow",
    ),
    "addmm self and mat2 dtypes": (
        lambda: onnxnn.addmm(
            onnxnn.zeros(1, 1, dtype=onnxnn.int16), T([[100]], dtype=onnxnn.int8), T([[1]], dtype=onnxnn.int8), alpha=3
        ),
        RuntimeError,
        "self and mat2 must have the same dtype, but got Short and Char",
    ),
    "addmm mat1 and mat2 dtypes": (
        lambda: onnxnn.addmm(
            onnxnn.zeros(1, 1, dtype=onnxnn.int16), T([[1]], dtype=onnxnn.int8), T([[1]], dtype=onnxnn.int16)
        ),
        RuntimeError,
        "mat1 and mat2 must have the same dtype, but got Char and Short",
    ),
    "addbmm dtypes": (
        lambda: onnxnn.addbmm(
            onnxnn.ones(1, 1, dtype=onnxnn.int16), T([[[3]]], dtype=onnxnn.int8), T([[[1]]], dtype=onnxnn.int8)
        ),
        RuntimeError,
        "self and mat2 must have the same dtype",
    ),
    "addmv dtypes": (
        lambda: onnxnn.addmv(
            onnxnn.ones(1, dtype=onnxnn.int16), T([[3]], dtype=onnxnn.int8), T([1], dtype=onnxnn.int8)
        ),
        RuntimeError,
        "addmv input tensors must have the same dtype, but got Short, Char, and Char",
    ),
    "baddbmm dtypes": (
        lambda: onnxnn.baddbmm(
            onnxnn.ones(1, 1, 1, dtype=onnxnn.int16), T([[[3]]], dtype=onnxnn.int8), T([[[1]]], dtype=onnxnn.int8)
        ),
        RuntimeError,
        "Input dtypes must be the same",
    ),
    "addr float alpha, int result": (
        lambda: onnxnn.addr(onnxnn.ones(1, 1, dtype=onnxnn.int64), T([3]), T([1]), alpha=0.5),
        RuntimeError,
        "argument alpha must not be a floating point",
    ),
    "addr bool beta, float result": (
        lambda: onnxnn.addr(onnxnn.ones(1, 1), T([3.0]), T([1.0]), beta=True),
        RuntimeError,
        "Boolean beta only supported for Boolean results.",
    ),
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_alpha_refused_as_pytorch_refuses_it(name):
    compute, error, message = ERROR_CASES[name]
    with pytest.raises(error, match=message.replace("(", r"\(")):
        compute()


def test_alpha_gradients_scale_other():
    """d(input - alpha * other) / d other is -alpha; other's gradient keeps other's dtype."""
    x = T([1.0, 2.0], requires_grad=True)
    y = T([3.0, 4.0], dtype=onnxnn.float16, requires_grad=True)
    x.sub(y, alpha=2.5).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    assert y.grad.dtype == onnxnn.float16
    assert y.grad.tolist() == [-2.5, -2.5]
