"""``onnxnn.testing.make_tensor``: PyTorch's value ranges per dtype, its bound handling and errors, and
reproducible draws from onnxnn's generator."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import onnxnn
from onnxnn.testing import make_tensor

# (dtype, inclusive low, exclusive high) of the defaults: PyTorch's table, clamped to the dtype.
INTEGER_DEFAULTS = [
    (onnxnn.bool, 0, 2),
    (onnxnn.uint8, 0, 10),
    (onnxnn.uint16, 0, 10),
    (onnxnn.uint32, 0, 10),
    (onnxnn.uint64, 0, 10),
    (onnxnn.int8, -9, 10),
    (onnxnn.int16, -9, 10),
    (onnxnn.int32, -9, 10),
    (onnxnn.int64, -9, 10),
]
FLOATING = [onnxnn.float16, onnxnn.bfloat16, onnxnn.float32, onnxnn.float64]


def values(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy()).astype(np.float64)


@pytest.mark.parametrize("dtype, low, high", INTEGER_DEFAULTS, ids=lambda v: getattr(v, "name", str(v)))
def test_integral_defaults_draw_every_value_of_the_range(dtype, low, high):
    drawn = make_tensor(2000, dtype=dtype, device="cpu")
    assert drawn.dtype is dtype
    # 2000 draws over at most 19 values: each is missed with probability (18/19)**2000 < 1e-46.
    assert set(values(drawn).astype(np.int64).tolist()) == set(range(low, high))


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
def test_floating_defaults_fill_the_half_open_range(dtype):
    drawn = values(make_tensor(4000, dtype=dtype, device="cpu"))
    assert drawn.min() >= -9 and drawn.max() < 9
    # Uniform on [-9, 9): each end's unit interval is missed with probability (17/18)**4000 ~ 1e-100.
    assert drawn.min() < -8 and drawn.max() > 8


def test_reduced_precision_draws_never_round_up_to_high():
    # float16 has 1024 values in [0.5, 1): draws just below 1 would round to it without the clamp.
    for dtype in (onnxnn.float16, onnxnn.bfloat16):
        drawn = values(make_tensor(50_000, dtype=dtype, device="cpu", low=0.5, high=1.0))
        assert drawn.max() < 1.0 and drawn.min() >= 0.5


@pytest.mark.parametrize(
    "dtype, low, high, expected",
    [
        (onnxnn.uint8, -5, 300, (0, 255)),  # clamped to the dtype's range
        (onnxnn.int8, -0.5, 2.5, (0, 2)),  # both integral bounds rounded up (high exclusive)
        (onnxnn.int8, None, 3, (-9, 2)),
    ],
)
def test_integral_bounds_are_clamped_and_rounded(dtype, low, high, expected):
    drawn = values(make_tensor(3000, dtype=dtype, device="cpu", low=low, high=high))
    assert drawn.min() >= expected[0] and drawn.max() <= expected[1]


@pytest.mark.parametrize("dtype, low, high", [(onnxnn.float16, -1e6, 1e6), (onnxnn.float32, -math.inf, math.inf)])
def test_floating_bounds_beyond_the_dtype_are_clamped_to_finite_values(dtype, low, high):
    drawn = values(make_tensor(1000, dtype=dtype, device="cpu", low=low, high=high))
    finite_max = float(ml_dtypes.finfo(dtype.numpy_dtype).max)
    assert np.isfinite(drawn).all() and np.abs(drawn).max() <= finite_max
    assert np.abs(drawn).max() > finite_max / 2  # the whole range is used, not a corner of it


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"dtype": onnxnn.int64, "requires_grad": True}, ValueError, "`requires_grad=True` is not supported"),
        ({"dtype": onnxnn.int32, "low": 5, "high": 1}, ValueError, "`low` must be less than `high`, but got 5 >= 1"),
        ({"dtype": onnxnn.int32, "low": 1, "high": 1}, ValueError, "`low` must be less than `high`"),
        ({"dtype": onnxnn.float32, "low": math.nan}, ValueError, "`low` and `high` cannot be NaN"),
        (
            {"dtype": onnxnn.uint8, "low": 300, "high": 400},
            ValueError,
            "The value interval specified by `low` and `high` is [300, 400), but onnxnn.uint8 only supports [0, 256)",
        ),
        (
            {"dtype": onnxnn.float32, "noncontiguous": True, "memory_format": onnxnn.contiguous_format},
            ValueError,
            "The parameters `noncontiguous` and `memory_format` are mutually exclusive",
        ),
        ({"dtype": onnxnn.quint8}, TypeError, "The requested dtype 'onnxnn.quint8' is not supported"),
    ],
)
def test_errors(kwargs, error, message):
    with pytest.raises(error) as raised:
        make_tensor(2, 3, device="cpu", **kwargs)
    assert str(raised.value).startswith(message)


def test_low_equal_to_high_warns_and_fills_with_it():
    with pytest.warns(FutureWarning, match="low==high"):
        drawn = make_tensor(4, dtype=onnxnn.float32, device="cpu", low=2.5, high=2.5)
    np.testing.assert_array_equal(values(drawn), np.full(4, 2.5))


@pytest.mark.parametrize(
    "dtype, low, high, replacement",
    [
        (onnxnn.bool, None, None, 1.0),
        (onnxnn.int16, 0, 2, 1.0),
        # float16 draws below its least subnormal (6e-8) over two round to zero.
        (onnxnn.float16, 0.0, 1e-7, float(np.finfo(np.float16).tiny)),
    ],
)
def test_exclude_zero_replaces_zeros(dtype, low, high, replacement):
    onnxnn.manual_seed(0)
    plain = values(make_tensor(1000, dtype=dtype, device="cpu", low=low, high=high))
    onnxnn.manual_seed(0)
    excluded = values(make_tensor(1000, dtype=dtype, device="cpu", low=low, high=high, exclude_zero=True))
    assert (plain == 0).any() and not (excluded == 0).any()
    np.testing.assert_array_equal(excluded, np.where(plain == 0, replacement, plain))


@pytest.mark.parametrize("shape", [(2, 3), ((2, 3),), ([2, 3],), (onnxnn.Size([2, 3]),)], ids=str)
def test_shape_as_integers_or_one_sequence(shape):
    assert make_tensor(*shape, dtype=onnxnn.float32, device="cpu").shape == (2, 3)


def test_scalar_shape():
    assert make_tensor(dtype=onnxnn.float32, device="cpu").shape == ()
    assert make_tensor((), dtype=onnxnn.float32, device="cpu").shape == ()


def test_manual_seed_repeats_the_draw_and_requires_grad_makes_a_leaf():
    onnxnn.manual_seed(3)
    first = make_tensor(5, dtype=onnxnn.float64, device="cpu", requires_grad=True)
    onnxnn.manual_seed(3)
    again = make_tensor(5, dtype=onnxnn.float64, device="cpu")
    assert first.requires_grad and first.is_leaf and not again.requires_grad
    np.testing.assert_array_equal(values(first), values(again))


def test_noncontiguous_keeps_every_other_element_of_a_doubled_draw():
    onnxnn.manual_seed(1)
    strided = make_tensor(3, 4, dtype=onnxnn.float32, device="cpu", noncontiguous=True)
    onnxnn.manual_seed(1)
    doubled = make_tensor(3, 8, dtype=onnxnn.float32, device="cpu")
    assert strided.shape == (3, 4)
    np.testing.assert_array_equal(values(strided), values(doubled)[:, 1::2])


def test_memory_format_keeps_shape_and_values():
    onnxnn.manual_seed(2)
    channels_last = make_tensor(1, 2, 3, 3, dtype=onnxnn.float32, device="cpu", memory_format=onnxnn.channels_last)
    onnxnn.manual_seed(2)
    plain = make_tensor(1, 2, 3, 3, dtype=onnxnn.float32, device="cpu")
    np.testing.assert_array_equal(values(channels_last), values(plain))
