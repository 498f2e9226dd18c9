"""Pooling layers: MaxPool, AvgPool, AdaptiveAvgPool, AdaptiveMaxPool, LPPool, MaxUnpool in 1, 2 and 3 d,
their values and gradients.

Expected values come from the window-by-window numpy pooling of pooling_cases.py, written from
PyTorch's documentation. Max pooling is exact; sums of ``k`` terms are held to Higham's
``2 * gamma(k) * sum |x|``. Gradients are checked against float64 finite differences on the kernels
executor (onnxruntime's CPU provider has no float64 AveragePool) and, for the max pools, on
onnxruntime too. Reprs, low precision, export, errors, integer dtypes, empty dims and the comparison
with PyTorch are in test_pooling_dtypes_export_errors.py; FractionalMaxPool is in
test_fractional_max_pool.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .pooling_cases import (
    EXECUTOR_DTYPES,
    EXECUTOR_DTYPE_IDS,
    MAX_CASES,
    RNG,
    _triple,
    adaptive_pool,
    assert_within_sum_rounding,
    distinct,
    window_pool,
)

# ---------------------------------------------------------------- max pooling


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize("case_id, cls, kwargs, input_shape", MAX_CASES, ids=[c[0] for c in MAX_CASES])
def test_max_pool_layer_picks_window_maxima_and_their_positions(case_id, cls, kwargs, input_shape, executor, dtype):
    x = distinct(*input_shape)
    unbatched = len(input_shape) == {nn.MaxPool1d: 2, nn.MaxPool2d: 3, nn.MaxPool3d: 4}[cls]
    expected, expected_indices = window_pool(x[None] if unbatched else x, **kwargs)
    if unbatched:
        expected, expected_indices = expected[0], expected_indices[0]
    with onnxnn.set_executor(executor):
        pooled = cls(**kwargs)(onnxnn.tensor(x, dtype=dtype))
        values, indices = cls(**kwargs, return_indices=True)(onnxnn.tensor(x, dtype=dtype))
        np.testing.assert_array_equal(pooled.numpy(), expected)
        np.testing.assert_array_equal(values.numpy(), expected)
        np.testing.assert_array_equal(indices.numpy(), expected_indices)
    assert indices.dtype is onnxnn.int64


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case_id, cls, kwargs, input_shape", MAX_CASES[1::2], ids=[c[0] for c in MAX_CASES[1::2]])
def test_max_pool_gradients_match_finite_differences(case_id, cls, kwargs, input_shape, executor):
    with onnxnn.set_executor(executor):
        check_gradients(cls(**kwargs), [distinct(*input_shape)])


WINDOWS_IN_PADDING = [
    # id, kwargs, input shape: a dilated window's taps straddle the input, both in the padding
    ("1d", {"kernel_size": 2, "stride": 3, "padding": 1, "dilation": 2}, (2, 2, 1)),
    ("1d_longer", {"kernel_size": 2, "stride": 1, "padding": 1, "dilation": 3}, (1, 3, 2)),
    ("2d_one_axis", {"kernel_size": 2, "stride": 1, "padding": (1, 0), "dilation": (2, 1)}, (1, 2, 1, 3)),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case_id, kwargs, input_shape", WINDOWS_IN_PADDING, ids=[c[0] for c in WINDOWS_IN_PADDING])
def test_a_window_wholly_in_the_padding_is_minus_infinity_and_routes_no_gradient(
    case_id, kwargs, input_shape, executor
):
    x = distinct(*input_shape)
    expected, argmax = window_pool(x, **kwargs)
    assert np.isneginf(expected).any()
    weights = RNG.standard_normal(expected.shape)
    expected_gradient = np.zeros(x.shape)
    for n, c, *position in np.ndindex(*expected.shape):
        if argmax[(n, c, *position)] >= 0:
            plane = expected_gradient[n, c].reshape(-1)
            plane[argmax[(n, c, *position)]] += weights[(n, c, *position)]
    pool = F.max_pool1d if len(input_shape) == 3 else F.max_pool2d
    with onnxnn.set_executor(executor):
        tensor = onnxnn.tensor(x, requires_grad=True)
        pooled = pool(tensor, **kwargs)
        values, _ = pool(onnxnn.tensor(x), return_indices=True, **kwargs)
        (pooled.clamp(min=-1e300) * onnxnn.tensor(weights)).sum().backward()
        np.testing.assert_array_equal(pooled.detach().numpy(), expected)
        np.testing.assert_array_equal(values.numpy(), expected)
        np.testing.assert_array_equal(tensor.grad.numpy(), expected_gradient)


# ---------------------------------------------------------------- average pooling

AVG_CASES = [
    ("1d", nn.AvgPool1d, {"kernel_size": 3}, (2, 3, 10)),
    (
        "1d_pad_ceil_exclude_pad",
        nn.AvgPool1d,
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        (1, 2, 8),
    ),
    (
        "2d_pad_ceil_include_pad",
        nn.AvgPool2d,
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        (1, 2, 6, 7),
    ),
    (
        "2d_divisor_override",
        nn.AvgPool2d,
        {"kernel_size": (2, 3), "padding": (1, 1), "divisor_override": 4},
        (2, 2, 5, 5),
    ),
    ("2d_unbatched", nn.AvgPool2d, {"kernel_size": 2}, (3, 4, 4)),
    (
        "3d_divisor_override_ceil",
        nn.AvgPool3d,
        {"kernel_size": 2, "stride": 2, "ceil_mode": True, "divisor_override": 3},
        (1, 2, 3, 5, 4),
    ),
    (
        "3d_exclude_pad",
        nn.AvgPool3d,
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        (1, 1, 4, 5, 3),
    ),
]


def _avg_expected(kwargs, x, unbatched):
    pooled, _ = window_pool(x[None] if unbatched else x, mode="avg", **kwargs)
    return pooled[0] if unbatched else pooled


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize("case_id, cls, kwargs, input_shape", AVG_CASES, ids=[c[0] for c in AVG_CASES])
def test_avg_pool_layer_averages_windows(case_id, cls, kwargs, input_shape, executor, dtype):
    if executor == "onnxruntime" and dtype is onnxnn.float64:
        pytest.skip("onnxruntime's CPU provider has no float64 AveragePool")
    rank = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}[cls]
    unbatched = len(input_shape) == rank + 1
    x = RNG.standard_normal(input_shape).astype(dtype.numpy_dtype)
    with onnxnn.set_executor(executor):
        actual = cls(**kwargs)(onnxnn.tensor(x)).numpy()
    expected = _avg_expected(kwargs, x.astype(np.float64), unbatched)
    magnitude = _avg_expected(kwargs, np.abs(x.astype(np.float64)), unbatched)
    terms = int(np.prod(_triple(kwargs["kernel_size"], rank)))
    assert_within_sum_rounding(actual, expected, magnitude, terms + 1, dtype.numpy_dtype)


@pytest.mark.parametrize("case_id, cls, kwargs, input_shape", AVG_CASES[1::2], ids=[c[0] for c in AVG_CASES[1::2]])
def test_avg_pool_gradients_match_finite_differences(case_id, cls, kwargs, input_shape):
    with onnxnn.set_executor("kernels"):
        check_gradients(cls(**kwargs), [RNG.standard_normal(input_shape)])


# ---------------------------------------------------------------- adaptive pooling

ADAPTIVE_CASES = [
    # id, rank, output size, input shape
    ("1d_uneven", 1, 3, (2, 3, 7)),
    ("1d_even", 1, 4, (1, 2, 8)),
    ("2d_uneven", 2, (3, 2), (2, 2, 7, 5)),
    ("2d_one", 2, 1, (1, 3, 4, 5)),
    ("2d_none_keeps_size", 2, (4, None), (1, 2, 6, 3)),
    ("2d_unbatched_upsampling", 2, (5, 3), (2, 3, 2)),
    ("3d_uneven", 3, (2, 3, 2), (1, 2, 3, 5, 4)),
    ("3d_even", 3, 2, (1, 1, 4, 4, 2)),
]
ADAPTIVE_AVG = {1: nn.AdaptiveAvgPool1d, 2: nn.AdaptiveAvgPool2d, 3: nn.AdaptiveAvgPool3d}
ADAPTIVE_MAX = {1: nn.AdaptiveMaxPool1d, 2: nn.AdaptiveMaxPool2d, 3: nn.AdaptiveMaxPool3d}


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize("case_id, rank, output_size, input_shape", ADAPTIVE_CASES, ids=[c[0] for c in ADAPTIVE_CASES])
def test_adaptive_avg_pool_averages_pytorchs_windows(case_id, rank, output_size, input_shape, executor, dtype):
    unbatched = len(input_shape) == rank + 1
    x = RNG.standard_normal(input_shape).astype(dtype.numpy_dtype)
    x64 = x.astype(np.float64)[None] if unbatched else x.astype(np.float64)
    expected, _ = adaptive_pool(x64, output_size, "avg")
    magnitude, _ = adaptive_pool(np.abs(x64), output_size, "avg")
    with onnxnn.set_executor(executor):
        actual = ADAPTIVE_AVG[rank](output_size)(onnxnn.tensor(x)).numpy()
    if unbatched:
        expected, magnitude = expected[0], magnitude[0]
    terms = int(np.prod(input_shape[-rank:]))  # a window holds at most the whole input
    assert_within_sum_rounding(actual, expected, magnitude, terms + 1, dtype.numpy_dtype)


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize(
    "case_id, rank, output_size, input_shape", [c for c in ADAPTIVE_CASES if "uneven" in c[0]], ids=str
)
def test_adaptive_avg_pool_spreads_nan_and_inf_only_to_the_windows_holding_them(
    case_id, rank, output_size, input_shape, executor, dtype
):
    x = RNG.standard_normal(input_shape)
    flat = x.reshape(-1)
    flat[[1, 7]], flat[-3], flat[-5] = np.nan, np.inf, -np.inf  # one window may sum inf and -inf: nan
    x = x.astype(dtype.numpy_dtype)
    expected, _ = adaptive_pool(x.astype(np.float64), output_size, "avg")
    with onnxnn.set_executor(executor):
        actual = ADAPTIVE_AVG[rank](output_size)(onnxnn.tensor(x)).numpy()
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(actual) * np.sign(actual), np.isinf(expected) * np.sign(expected))
    finite = np.isfinite(expected)
    magnitude, _ = adaptive_pool(np.where(np.isfinite(x), np.abs(x), 0).astype(np.float64), output_size, "avg")
    assert finite.any() and not finite.all()
    assert_within_sum_rounding(
        actual[finite], expected[finite], magnitude[finite], int(np.prod(input_shape[-rank:])) + 1, dtype.numpy_dtype
    )


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize("case_id, rank, output_size, input_shape", ADAPTIVE_CASES, ids=[c[0] for c in ADAPTIVE_CASES])
def test_adaptive_max_pool_picks_first_maxima_of_pytorchs_windows(
    case_id, rank, output_size, input_shape, executor, dtype
):
    unbatched = len(input_shape) == rank + 1
    x = distinct(*input_shape)
    expected, expected_indices = adaptive_pool(x[None] if unbatched else x, output_size, "max")
    if unbatched:
        expected, expected_indices = expected[0], expected_indices[0]
    with onnxnn.set_executor(executor):
        values, indices = ADAPTIVE_MAX[rank](output_size, return_indices=True)(onnxnn.tensor(x, dtype=dtype))
        np.testing.assert_array_equal(values.numpy(), expected)
        np.testing.assert_array_equal(indices.numpy(), expected_indices)
        np.testing.assert_array_equal(ADAPTIVE_MAX[rank](output_size)(onnxnn.tensor(x, dtype=dtype)).numpy(), expected)


def test_adaptive_max_pool_keeps_the_first_of_tied_maxima():
    x = np.array([[[1.0, 3.0, 3.0, 0.0, 3.0, 3.0, 2.0]]])  # windows [0, 3), [2, 5), [4, 7)
    values, indices = F.adaptive_max_pool1d(onnxnn.tensor(x), 3, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), [[[3.0, 3.0, 3.0]]])
    np.testing.assert_array_equal(indices.numpy(), [[[1, 2, 4]]])


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, rank, output_size, input_shape", ADAPTIVE_CASES[::2], ids=[c[0] for c in ADAPTIVE_CASES[::2]]
)
def test_adaptive_pool_gradients_match_finite_differences(case_id, rank, output_size, input_shape, executor):
    with onnxnn.set_executor(executor):
        check_gradients(ADAPTIVE_MAX[rank](output_size), [distinct(*input_shape)])
    with onnxnn.set_executor("kernels"):  # onnxruntime has no float64 AveragePool
        check_gradients(ADAPTIVE_AVG[rank](output_size), [RNG.standard_normal(input_shape)])


# ---------------------------------------------------------------- power-average pooling

LP_CASES = [
    ("1d_p2", nn.LPPool1d, (2, 3), {}, (2, 2, 9)),
    ("1d_p1_strided", nn.LPPool1d, (1, 3), {"stride": 2}, (1, 2, 8)),
    ("2d_p3", nn.LPPool2d, (3, (2, 3)), {"stride": (1, 2)}, (1, 2, 5, 7)),
    ("2d_unbatched_p2_5", nn.LPPool2d, (2.5, 2), {}, (2, 4, 4)),
    ("3d_p2", nn.LPPool3d, (2, 2), {}, (1, 2, 4, 4, 2)),
]


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize("case_id, cls, args, kwargs, input_shape", LP_CASES, ids=[c[0] for c in LP_CASES])
def test_lp_pool_is_the_p_norm_of_each_window(case_id, cls, args, kwargs, input_shape, executor, dtype):
    if executor == "onnxruntime" and dtype is onnxnn.float64:
        pytest.skip("onnxruntime's CPU provider has no float64 AveragePool")
    p, kernel = args
    rank = {nn.LPPool1d: 1, nn.LPPool2d: 2, nn.LPPool3d: 3}[cls]
    unbatched = len(input_shape) == rank + 1
    x = RNG.uniform(0.5, 2.0, input_shape).astype(dtype.numpy_dtype)  # PyTorch's x ** p needs x >= 0 for fractional p
    x64 = x.astype(np.float64)[None] if unbatched else x.astype(np.float64)
    kernel = _triple(kernel, rank)
    sums, _ = window_pool(x64**p, kernel, kwargs.get("stride"), mode="avg")
    expected = (sums * np.prod(kernel)) ** (1 / p)
    with onnxnn.set_executor(executor):
        actual = cls(*args, **kwargs)(onnxnn.tensor(x)).numpy()
    if unbatched:
        expected = expected[0]
    # Positive terms: the window sum errs by gamma(k + 2) relatively (power, sum, average, rescale),
    # and the 1/p-th root shrinks a relative error by p before adding its own rounding.
    terms = int(np.prod(kernel)) + 4
    relative = 2 * gamma(terms, dtype.numpy_dtype) * max(1.0, 1 / p) + 4 * gamma(1, dtype.numpy_dtype) * p
    np.testing.assert_array_less(np.abs(actual - expected), relative * expected + 1e-300)


def test_lp_pool_gradients_match_finite_differences():
    with onnxnn.set_executor("kernels"):
        check_gradients(nn.LPPool2d(2, 2, stride=1), [RNG.uniform(0.5, 2.0, (1, 2, 3, 4))])
        check_gradients(nn.LPPool1d(3, 2), [RNG.uniform(0.5, 2.0, (1, 2, 6))])


# ---------------------------------------------------------------- max unpooling

UNPOOL_CASES = [
    # id, rank, kernel, stride, padding, input shape, output_size
    ("1d", 1, 2, None, 0, (2, 2, 8), None),
    ("1d_odd_output_size", 1, 2, None, 0, (1, 2, 9), [9]),
    ("2d_strided_padded", 2, 3, 2, 1, (1, 2, 6, 5), [6, 5]),
    ("2d_output_size_with_channels", 2, 2, None, 0, (2, 1, 5, 7), [2, 1, 5, 7]),
    ("2d_unbatched", 2, 2, None, 0, (3, 4, 4), None),
    ("3d", 3, 2, None, 0, (1, 2, 4, 4, 2), None),
]
MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
MAX_UNPOOL = {1: nn.MaxUnpool1d, 2: nn.MaxUnpool2d, 3: nn.MaxUnpool3d}


def unpool_reference(values, indices, spatial):
    planes = values.reshape(-1, int(np.prod(values.shape[-len(spatial) :])))
    flat_indices = indices.reshape(planes.shape)
    out = np.zeros((planes.shape[0], int(np.prod(spatial))))
    for plane in range(planes.shape[0]):
        out[plane, flat_indices[plane]] = planes[plane]
    return out.reshape(values.shape[: -len(spatial)] + tuple(spatial))


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize(
    "case_id, rank, kernel, stride, padding, input_shape, output_size", UNPOOL_CASES, ids=[c[0] for c in UNPOOL_CASES]
)
def test_max_unpool_puts_maxima_back_and_zeros_elsewhere(
    case_id, rank, kernel, stride, padding, input_shape, output_size, executor, dtype
):
    x = distinct(*input_shape)
    with onnxnn.set_executor(executor):
        values, indices = MAX_POOL[rank](onnxnn.tensor(x, dtype=dtype), kernel, stride, padding, return_indices=True)
        unpool = MAX_UNPOOL[rank](kernel, stride, padding)
        actual = unpool(values, indices, output_size=output_size).numpy()
    pooled = values.numpy().astype(np.float64)
    spatial = (
        input_shape[-rank:]
        if output_size is not None
        else [
            (size - 1) * s - 2 * padding + kernel
            for size, s in zip(pooled.shape[-rank:], _triple(stride or kernel, rank))
        ]
    )
    np.testing.assert_array_equal(actual, unpool_reference(pooled, indices.numpy(), list(spatial)[-rank:]))


def test_max_unpool_gradients_match_finite_differences():
    x = distinct(1, 2, 4, 6)
    values, indices = F.max_pool2d(onnxnn.tensor(x), 2, return_indices=True)
    for executor in ("onnxruntime", "kernels"):
        with onnxnn.set_executor(executor):
            check_gradients(lambda v: F.max_unpool2d(v, indices, 2), [values.numpy().astype(np.float64)])


@pytest.mark.parametrize(
    "with_indices, plain, args",
    [
        (F.max_pool1d_with_indices, F.max_pool1d, (3, 2, 1)),
        (F.max_pool2d_with_indices, F.max_pool2d, (2,)),
        (F.max_pool3d_with_indices, F.max_pool3d, (2, 1)),
        (F.adaptive_max_pool1d_with_indices, F.adaptive_max_pool1d, (3,)),
        (F.adaptive_max_pool2d_with_indices, F.adaptive_max_pool2d, ((3, 2),)),
        (F.adaptive_max_pool3d_with_indices, F.adaptive_max_pool3d, (2,)),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_with_indices_forms_always_return_values_and_indices(with_indices, plain, args):
    rank = int(plain.__name__[-2])
    x = onnxnn.tensor(distinct(*((1, 2) + (5,) * rank)))
    values, indices = with_indices(x, *args)
    expected_values, expected_indices = plain(x, *args, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), expected_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
