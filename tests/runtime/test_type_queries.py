"""``result_type``, ``can_cast``, ``typename`` and ``is_nonzero``: PyTorch's answers about types.

result_type follows PyTorch's documented promotion: dimensioned tensors decide within a category,
a zero-dimensional tensor or a number only when of a higher category (bool < integer < float),
numbers alone give the default dtypes. can_cast allows narrowing within a category, never a lower
category.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import onnxnn


def _t(dtype, ndim=1):
    return onnxnn.zeros([2] * ndim, dtype=dtype)


@pytest.mark.parametrize(
    "tensor, other, expected",
    [
        (_t(onnxnn.int32), 1.0, onnxnn.float32),
        (_t(onnxnn.int32), 1, onnxnn.int32),  # a number of the same category never widens
        (_t(onnxnn.float16), 1.0, onnxnn.float16),
        (_t(onnxnn.uint8), _t(onnxnn.int8, 0), onnxnn.uint8),  # a 0-d tensor of the same category: no say
        (_t(onnxnn.uint8), _t(onnxnn.int8), onnxnn.int16),
        (_t(onnxnn.int64, 0), _t(onnxnn.float16, 0), onnxnn.float16),
        (_t(onnxnn.float16), _t(onnxnn.float64, 0), onnxnn.float16),
        (_t(onnxnn.bool), _t(onnxnn.int32, 0), onnxnn.int32),
        (_t(onnxnn.bfloat16), _t(onnxnn.float16), onnxnn.float32),
        (2, 3.0, onnxnn.float32),
        (True, 2, onnxnn.int64),
        (np.float64(1.0), 2, onnxnn.float32),
        (True, False, onnxnn.bool),
    ],
)
def test_result_type_is_the_dtype_of_the_arithmetic(tensor, other, expected):
    assert onnxnn.result_type(tensor, other) is expected
    assert onnxnn.result_type(other, tensor) is expected
    if isinstance(tensor, onnxnn.Tensor):
        assert (tensor + other).dtype is expected


def test_result_type_refuses_what_is_neither_tensor_nor_number():
    with pytest.raises(TypeError, match=r"expected a Tensor or a Number .* \(str, int\)"):
        onnxnn.result_type("a", 2)


_ORDER = [onnxnn.bool, onnxnn.uint8, onnxnn.int8, onnxnn.int64, onnxnn.float16, onnxnn.bfloat16, onnxnn.float64]
_CATEGORY = {onnxnn.bool: 0, onnxnn.uint8: 1, onnxnn.int8: 1, onnxnn.int64: 1}


@pytest.mark.parametrize("source", _ORDER, ids=str)
@pytest.mark.parametrize("target", _ORDER, ids=str)
def test_can_cast_never_lowers_the_category(source, target):
    assert onnxnn.can_cast(source, target) is (_CATEGORY.get(source, 2) <= _CATEGORY.get(target, 2))


@pytest.mark.parametrize(
    "arguments, name", [((onnxnn.float32, 3), "'to' (position 2)"), (("float", onnxnn.int8), "'from_' (position 1)")]
)
def test_can_cast_takes_dtypes_only(arguments, name):
    with pytest.raises(TypeError, match=re.escape(f"argument {name} must be onnxnn.dtype")):
        onnxnn.can_cast(*arguments)


@pytest.mark.parametrize(
    "obj, expected",
    [
        (onnxnn.zeros(1), "onnxnn.FloatTensor"),
        (onnxnn.zeros(1, dtype=onnxnn.int64), "onnxnn.LongTensor"),
        (onnxnn.zeros(1, dtype=onnxnn.float16), "onnxnn.HalfTensor"),
        (3.0, "float"),
        (None, "NoneType"),
        (np.zeros(1), "numpy.ndarray"),
        (onnxnn.nn.Linear, "onnxnn.nn.modules.linear.Linear"),  # a class names itself
        (onnxnn.nn.Linear(1, 1), "onnxnn.nn.modules.linear.Linear"),
        (len, "len"),
    ],
)
def test_typename(obj, expected):
    assert onnxnn.typename(obj) == expected


@pytest.mark.parametrize("values, expected", [([1.5], True), ([0.0], False), ([[-0.0]], False), ([7], True)])
def test_is_nonzero_of_one_element(values, expected):
    assert onnxnn.is_nonzero(onnxnn.tensor(values)) is expected


@pytest.mark.parametrize("values, message", [([], "with no values"), ([1, 2], "with more than one value")])
def test_is_nonzero_and_bool_refuse_other_sizes(values, message):
    for call in (onnxnn.is_nonzero, bool):
        with pytest.raises(RuntimeError, match=f"Boolean value of Tensor {message} is ambiguous"):
            call(onnxnn.tensor(values))
