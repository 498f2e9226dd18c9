"""Fill values as PyTorch converts them, and a few result dtypes/values of the same fuzz findings.

A fill number becomes the tensor's dtype as c10 converts a Scalar: a bool takes any nonzero (NaN
included), an integer dtype truncates a float and wraps an in-range negative into an unsigned dtype
(uint8 -1 is 255), and refuses a value outside its range. masked_fill and index_fill agree.
Expected values are Python/numpy formulas, never onnxnn's.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import onnxnn

T = onnxnn.tensor
EXECUTORS = ["kernels", "onnxruntime"]


@pytest.fixture(params=EXECUTORS)
def executor(request):
    with onnxnn.set_executor(request.param):
        yield request.param


def _masked_fill(input, value):
    return input.masked_fill(T([True, False]), value)


def _masked_fill_(input, value):
    return input.clone().masked_fill_(T([True, False]), value)


def _index_fill(input, value):
    return input.index_fill(0, T([0]), value)


FILLS = {"masked_fill": _masked_fill, "masked_fill_": _masked_fill_, "index_fill": _index_fill}

# (dtype, original first two elements, fill value, the filled first element)
CONVERSIONS = [
    (onnxnn.bool, [False, True], 0.5, bool(0.5)),
    (onnxnn.bool, [False, True], -0.3, bool(-0.3)),
    (onnxnn.bool, [False, True], math.nan, bool(math.nan)),  # True: NaN is nonzero
    (onnxnn.bool, [True, True], 0.0, False),
    (onnxnn.bool, [False, True], 2, True),
    (onnxnn.uint8, [1, 2], -1, 2**8 - 1),
    (onnxnn.uint8, [1, 2], -255, 1),
    (onnxnn.int8, [1, 2], 2.7, math.trunc(2.7)),
    (onnxnn.int8, [1, 2], -2.7, math.trunc(-2.7)),
    (onnxnn.int16, [1, 2], -(2**15), -(2**15)),
]


@pytest.mark.parametrize("fill", list(FILLS))
@pytest.mark.parametrize("dtype, original, value, expected", CONVERSIONS)
def test_fill_value_converts_as_pytorch(executor, fill, dtype, original, value, expected):
    result = FILLS[fill](T(original, dtype=dtype), value)
    assert result.dtype == dtype
    assert result.tolist() == [expected, original[1]]


OUT_OF_RANGE = [
    (onnxnn.uint8, -256),
    (onnxnn.uint8, 256),
    (onnxnn.uint8, -1.5),  # a float must lie in [0, 255] itself
    (onnxnn.int8, 128),
    (onnxnn.int8, math.nan),
]


@pytest.mark.parametrize("fill", list(FILLS))
@pytest.mark.parametrize("dtype, value", OUT_OF_RANGE)
def test_fill_value_out_of_range_is_refused(fill, dtype, value):
    with pytest.raises(RuntimeError, match="without overflow"):
        FILLS[fill](T([1, 2], dtype=dtype), value)


# ---------------------------------------------------------------- size-0 contractions


@pytest.mark.parametrize(
    "compute, shape",
    [
        (lambda: onnxnn.inner(onnxnn.ones(2, 0), onnxnn.ones(3, 0)), (2, 3)),
        (lambda: onnxnn.inner(onnxnn.ones(0, 2), onnxnn.ones(3, 2)), (0, 3)),
        (lambda: onnxnn.tensordot(onnxnn.ones(2, 0), onnxnn.ones(0, 3), dims=1), (2, 3)),
        (lambda: onnxnn.tensordot(onnxnn.ones(2, 0, 4), onnxnn.ones(0, 4, 3), dims=2), (2, 3)),
    ],
)
def test_empty_contraction_is_zeros(executor, compute, shape):
    """An empty sum is 0 (as matmul with k = 0 gives)."""
    result = compute()
    assert tuple(result.shape) == shape
    assert result.tolist() == np.zeros(shape).tolist()


# ---------------------------------------------------------------- round(decimals) of half dtypes


def _round_in_float32(value: float, decimals: int, dtype) -> float:
    """PyTorch's round_decimals for float16/bfloat16: in float32, rounded once to the dtype."""
    x = np.float32(np.float32(value).astype(dtype))
    scale = np.float32(10.0 ** abs(decimals))
    result = np.round(x * scale) / scale if decimals > 0 else np.round(x / scale) * scale
    return float(np.float32(result).astype(dtype))


@pytest.mark.parametrize(
    "dtype, value, decimals",
    [
        (onnxnn.float16, 60000.0, 2),  # 6e6 is past float16: the scaling must not be in float16
        (onnxnn.float16, 65000.0, -3),
        (onnxnn.float16, 0.125, 2),
        (onnxnn.bfloat16, 0.35, 1),  # 0.3496 * 10 in bfloat16 would round to 3.5 before the round
        (onnxnn.bfloat16, 1234.0, -2),
    ],
)
def test_round_decimals_of_half_dtypes_scales_in_float32(executor, dtype, value, decimals):
    numpy_dtype = np.float16 if dtype == onnxnn.float16 else ml_dtypes.bfloat16
    result = T([value], dtype=dtype).round(decimals=decimals)
    assert result.dtype == dtype
    assert result.tolist() == [_round_in_float32(value, decimals, numpy_dtype)]


# ---------------------------------------------------------------- nanmean / nansum dtypes


@pytest.mark.parametrize(
    "compute, expected, dtype",
    [
        (
            lambda: T([1.0, 2.0], dtype=onnxnn.bfloat16).nanmean(0, dtype=onnxnn.float16),
            (1.0 + 2.0) / 2,
            onnxnn.float16,
        ),
        (lambda: T([1.0, math.nan], dtype=onnxnn.float64).nanmean(dtype=onnxnn.float16), 1.0, onnxnn.float16),
        (lambda: T([1.0, math.nan, 4.0]).nanmean(dtype=onnxnn.float64), (1.0 + 4.0) / 2, onnxnn.float64),
        (lambda: T([0.0, math.nan]).nansum(dtype=onnxnn.bool), False, onnxnn.bool),  # NaN counts as zero
        (lambda: T([0.0, 0.5]).nansum(dtype=onnxnn.bool), True, onnxnn.bool),
        (lambda: T([0, 3]).nansum(dtype=onnxnn.bool), True, onnxnn.bool),
    ],
)
def test_nan_reduction_dtype(executor, compute, expected, dtype):
    result = compute()
    assert result.dtype == dtype
    assert result.item() == expected


def test_nansum_dtype_bool_along_a_dim():
    result = T([[0.0, 0.5], [0.0, math.nan]]).nansum(1, keepdim=True, dtype=onnxnn.bool)
    assert result.tolist() == [[True], [False]]


@pytest.mark.parametrize(
    "compute, message",
    [
        (lambda: T([1, 2]).nanmean(), "expected input to have floating point or complex dtype but got Long"),
        (lambda: T([True]).nanmean(), "expected input to have floating point or complex dtype but got Bool"),
        (lambda: T([1.0, 2.0]).nanmean(dtype=onnxnn.int64), "Optional dtype must be either a floating point"),
    ],
)
def test_nanmean_refuses_integer_dtypes(compute, message):
    with pytest.raises(RuntimeError, match=message):
        compute()
