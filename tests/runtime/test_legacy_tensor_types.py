"""PyTorch's legacy typed tensor classes (``onnxnn.FloatTensor``, ...): calls make tensors of their
dtype, ``isinstance`` tests the dtype, ``Tensor.type`` converts to them."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

CLASSES = [
    (onnxnn.BFloat16Tensor, onnxnn.bfloat16),
    (onnxnn.BoolTensor, onnxnn.bool),
    (onnxnn.ByteTensor, onnxnn.uint8),
    (onnxnn.CharTensor, onnxnn.int8),
    (onnxnn.DoubleTensor, onnxnn.float64),
    (onnxnn.FloatTensor, onnxnn.float32),
    (onnxnn.HalfTensor, onnxnn.float16),
    (onnxnn.IntTensor, onnxnn.int32),
    (onnxnn.LongTensor, onnxnn.int64),
    (onnxnn.ShortTensor, onnxnn.int16),
]
IDS = [cls.__name__ for cls, _ in CLASSES]


@pytest.mark.parametrize("cls, dtype", CLASSES, ids=IDS)
def test_sizes_make_a_zero_filled_tensor_of_the_dtype(cls, dtype):
    for made in (cls(2, 3), cls(onnxnn.Size([2, 3]))):
        assert type(made) is onnxnn.Tensor and made.dtype is dtype and made.shape == (2, 3)
        assert not made.numpy().astype(np.float64).any()
    assert cls().shape == (0,) and cls().dtype is dtype


@pytest.mark.parametrize("cls, dtype", CLASSES, ids=IDS)
def test_data_is_converted_to_the_dtype(cls, dtype):
    made = cls([1, 0, 1])  # a list is data, not sizes
    assert made.dtype is dtype
    np.testing.assert_array_equal(made.numpy().astype(np.float64), [1, 0, 1])


@pytest.mark.parametrize("cls, dtype", CLASSES, ids=IDS)
def test_isinstance_tests_the_dtype_and_type_converts(cls, dtype):
    assert isinstance(onnxnn.zeros(2, dtype=dtype), cls)
    other = onnxnn.float64 if dtype is not onnxnn.float64 else onnxnn.float32
    assert not isinstance(onnxnn.zeros(2, dtype=other), cls)
    assert not isinstance(np.zeros(2), cls)
    assert onnxnn.zeros(2, dtype=other).type(cls).dtype is dtype


def test_a_tensor_of_the_dtype_passes_through_and_others_are_refused():
    x = onnxnn.ones(2)
    assert onnxnn.FloatTensor(x) is x
    with pytest.raises(TypeError, match="expected DoubleTensor .*got a tensor of dtype float32"):
        onnxnn.DoubleTensor(x)
    with pytest.raises(TypeError, match="takes sizes"):
        onnxnn.FloatTensor([1.0], [2.0])


def test_long_tensor_truncates_floats_and_the_class_prints_as_onnxnns():
    np.testing.assert_array_equal(onnxnn.LongTensor([1.5, 2.7, -1.5]).numpy(), [1, 2, -1])
    assert repr(onnxnn.FloatTensor) == "<class 'onnxnn.FloatTensor'>"
    assert onnxnn.ones(2).type() == "onnxnn.FloatTensor"
