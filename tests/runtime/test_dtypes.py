"""dtypes: every dtype of DESIGN.md round-trips and computes; unsupported ones are refused clearly."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import onnxnn

from tolerances import TRANSCENDENTAL_ULPS, assert_within, ulps

ALL = [
    onnxnn.float32,
    onnxnn.float64,
    onnxnn.float16,
    onnxnn.bfloat16,
    onnxnn.int64,
    onnxnn.int32,
    onnxnn.int16,
    onnxnn.int8,
    onnxnn.uint8,
    onnxnn.bool,
    onnxnn.uint16,
    onnxnn.uint32,
    onnxnn.uint64,
]


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
def test_each_dtype_round_trips_through_a_graph(dtype):
    source = np.array([[0, 1, 2], [3, 1, 0]])
    x = onnxnn.tensor(source, dtype=dtype)
    assert x.dtype is dtype
    y = x.reshape(3, 2).transpose(0, 1)  # computed by onnxruntime
    assert y.dtype is dtype
    expected = source.astype(dtype.numpy_dtype).reshape(3, 2).T
    np.testing.assert_array_equal(y.numpy().astype(np.float64), expected.astype(np.float64))


@pytest.mark.parametrize(
    "dtype, numpy_dtype",
    [(onnxnn.float16, np.float16), (onnxnn.bfloat16, ml_dtypes.bfloat16), (onnxnn.float64, np.float64)],
)
def test_low_and_high_precision_arithmetic_rounds_per_op(dtype, numpy_dtype):
    a = np.array([0.1, 1.7, -2.3, 3.14159])
    b = np.array([2.5, -0.3, 0.7, 1.1])
    result = ((onnxnn.tensor(a, dtype=dtype) * onnxnn.tensor(b, dtype=dtype)).exp()).numpy()
    # Each op rounds to the dtype: the product, then the exponential (computed wider, then rounded).
    product = (a.astype(numpy_dtype) * b.astype(numpy_dtype)).astype(numpy_dtype)
    expected = np.exp(product.astype(np.float64)).astype(numpy_dtype)
    assert result.dtype == np.dtype(numpy_dtype)
    # The product rounds the same way in both. float16/bfloat16: the exponential, computed wider by
    # an ulp-accurate kernel and rounded once more, may land one ulp of the dtype away (double
    # rounding); float64: numpy's and onnxruntime's exp differ by a few float64 ulps.
    count = TRANSCENDENTAL_ULPS if dtype is onnxnn.float64 else 1
    assert_within(result.astype(np.float64), expected.astype(np.float64), ulps(expected, count, numpy_dtype))


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
def test_float64_to_float16_rounds_through_float32_as_pytorch(executor):
    # 1 + 2**-11 + 2**-40 rounds to float32's 1 + 2**-11, a float16 tie that goes to even (1.0); a
    # single rounding would give 1 + 2**-10.
    values = np.asarray([1 + 2**-11 + 2**-40, -(1 + 3 * 2**-11 - 2**-40), 1e-8], np.float64)
    expected = values.astype(np.float32).astype(np.float16)
    with onnxnn.set_executor(executor):
        actual = onnxnn.tensor(values).half().numpy()
    np.testing.assert_array_equal(actual, expected)
    assert actual[0] != values.astype(np.float16)[0]


def test_dtype_conversions_and_names():
    x = onnxnn.tensor([1.5, -2.5])
    assert x.half().dtype is onnxnn.float16 and x.double().dtype is onnxnn.float64
    assert x.bfloat16().float().dtype is onnxnn.float32
    assert x.long().tolist() == [1, -2]
    assert onnxnn.float is onnxnn.float32 and onnxnn.long is onnxnn.int64 and onnxnn.half is onnxnn.float16
    assert repr(onnxnn.float64) == "onnxnn.float64"
    assert x.type() == "onnxnn.FloatTensor"


@pytest.mark.parametrize("bad", [np.complex64, "complex128", np.dtype("U3"), object])
def test_a_dtype_onnx_cannot_hold_is_a_type_error(bad):
    with pytest.raises(TypeError, match="unsupported dtype"):
        onnxnn.zeros(2, dtype=bad)


def test_complex_data_is_refused_naming_the_dtype():
    with pytest.raises(TypeError, match="complex128"):
        onnxnn.tensor([1 + 2j])


@pytest.mark.parametrize("wide", [onnxnn.uint16, onnxnn.uint32, onnxnn.uint64], ids=lambda d: d.name)
def test_wide_unsigned_types_compute_alone_and_refuse_promotion_like_pytorch(wide):
    x = onnxnn.tensor([1, 2, 40000], dtype=wide)
    assert (x + x).dtype is wide and (x * 3).dtype is wide
    np.testing.assert_array_equal((x + x).numpy(), np.array([2, 4, 80000]).astype(wide.numpy_dtype))
    with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64 types is not supported"):
        x + onnxnn.tensor([1, 2, 3])


@pytest.mark.parametrize(
    "name, expected",
    [
        ("onnxnn.DoubleTensor", onnxnn.float64),
        ("torch.IntTensor", onnxnn.int32),  # code ported from PyTorch names its types
        ("torch.BFloat16Tensor", onnxnn.bfloat16),
        ("torch.BoolTensor", onnxnn.bool),
    ],
)
def test_type_casts_to_a_type_name(name, expected):
    cast = onnxnn.tensor([1.5, 0.0]).type(name)
    assert cast.dtype is expected and cast.type().endswith(name.split(".")[1])


def test_type_refuses_an_unknown_type_name():
    with pytest.raises(RuntimeError, match="invalid type: 'torch.FooTensor'"):
        onnxnn.tensor([1.0]).type("torch.FooTensor")
