"""``Tensor.view(dtype)`` reads the same bytes as another dtype, as numpy's ``ndarray.view`` does."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

VALUES = np.array([[1.0, -2.0, 0.5, 3.25], [-0.0, 7.0, -1.5, 1e-3]], dtype=np.float32)

# (source array, target dtype name): the expected result is numpy's view of the same bytes.
CASES = [
    (VALUES, "int32"),
    (VALUES, "float16"),  # the last dimension doubles
    (VALUES, "int8"),
    (VALUES, "uint8"),
    (VALUES, "float64"),  # the last dimension halves
    (VALUES.astype(np.float16), "int16"),
    (VALUES.astype(np.float16), "float32"),
    (np.arange(-4, 4, dtype=np.int64).reshape(2, 4), "float64"),
    (np.array([[0, 1, 1, 0]], dtype=np.uint8), "bool"),
    (np.array([[0, 1, 1, 0]], dtype=np.uint8), "int32"),
]


@pytest.mark.parametrize("array, name", CASES, ids=[f"{array.dtype}-{name}" for array, name in CASES])
def test_view_reads_the_same_bytes(array, name):
    target = getattr(onnxnn, name)
    result = onnxnn.tensor(array).view(target)
    expected = array.view(target.numpy_dtype)
    assert result.dtype is target and tuple(result.shape) == expected.shape
    np.testing.assert_array_equal(result.numpy().view(np.uint8), expected.view(np.uint8))


def test_a_pending_tensor_is_computed_then_read():
    x = onnxnn.tensor(VALUES) * 2.0
    np.testing.assert_array_equal(x.view(onnxnn.int32).numpy(), (VALUES * np.float32(2.0)).view(np.int32))


def test_the_same_dtype_is_the_tensor_itself_and_no_gradient_flows_otherwise():
    x = onnxnn.tensor(VALUES, requires_grad=True)
    assert x.view(onnxnn.float32) is x
    assert not x.view(onnxnn.float16).requires_grad  # PyTorch's view(dtype) carries none either


@pytest.mark.parametrize(
    "array, name, message",
    [
        (np.float32(1.0), "float16", "self.dim\\(\\) cannot be 0 to view Float as Half \\(different element sizes\\)"),
        (np.ones(3, np.float32), "float64", "self.size\\(-1\\) must be divisible by 2 to view Float as Double"),
        (np.ones((2, 2), np.uint8), "int32", "self.size\\(-1\\) must be divisible by 4 to view Byte as Int"),
    ],
)
def test_sizes_that_do_not_divide_are_refused(array, name, message):
    with pytest.raises(RuntimeError, match=message):
        onnxnn.tensor(array).view(getattr(onnxnn, name))
