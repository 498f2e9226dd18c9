"""Pooling layers: MaxPool, AvgPool, AdaptiveAvgPool, AdaptiveMaxPool, LPPool, MaxUnpool in 1, 2 and 3 d.

Expected values come from the window-by-window numpy pooling below, written from PyTorch's
documentation: windows start at ``i * stride - padding`` and take every ``dilation``-th element;
ceil_mode keeps a last partial window unless it starts in the end padding; ``count_include_pad``
counts the padding (not ceil_mode's overhang) in the divisor; adaptive windows are
``[floor(i * L / out), ceil((i + 1) * L / out))``; max pooling picks the first maximum in row-major
window order and reports its position flattened per ``(n, c)`` plane. Max pooling is exact; sums of
``k`` terms are held to Higham's ``2 * gamma(k) * sum |x|``. Gradients are checked against float64
finite differences on the kernels executor (onnxruntime's CPU provider has no float64 AveragePool)
and, for the max pools, on onnxruntime too. FractionalMaxPool is in test_fractional_max_pool.py.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx

RNG = np.random.default_rng(21)
EXECUTOR_DTYPES = [("onnxruntime", onnxnn.float32), ("kernels", onnxnn.float32), ("kernels", onnxnn.float64)]
EXECUTOR_DTYPE_IDS = ["onnxruntime-float32", "kernels-float32", "kernels-float64"]


def distinct(*shape) -> np.ndarray:
    """Values without ties (a max pool's choice and its gradient are then unambiguous)."""
    return RNG.permutation(np.prod(shape)).reshape(shape) * 0.25 - np.prod(shape) * 0.125


def _values(out) -> np.ndarray:
    return np.asarray(
        out.detach().float().numpy() if out.dtype in (onnxnn.float16, onnxnn.bfloat16) else out.detach().numpy(),
        dtype=np.float64,
    )


# ---------------------------------------------------------------- numpy references


def _triple(value, rank):
    return list(value) if isinstance(value, (tuple, list)) else [value] * rank


def window_pool(
    x,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    mode="max",
    count_include_pad=True,
    divisor_override=None,
):
    """Pools ``(N, C, *spatial)`` window by window; returns (pooled, per-plane argmax)."""
    rank = x.ndim - 2
    kernel = _triple(kernel_size, rank)
    stride = kernel if stride is None else _triple(stride, rank)
    padding, dilation = _triple(padding, rank), _triple(dilation, rank)
    spatial = x.shape[2:]
    out = []
    for size, k, s, p, d in zip(spatial, kernel, stride, padding, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        length = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (length - 1) * s >= size + p:
            length -= 1
        out.append(length)
    pooled = np.zeros(x.shape[:2] + tuple(out))
    argmax = np.zeros(x.shape[:2] + tuple(out), dtype=np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        for position in np.ndindex(*out):
            values, flat, padded_taps = [], [], 0
            for offset in np.ndindex(*kernel):
                coord = [position[i] * stride[i] + offset[i] * dilation[i] - padding[i] for i in range(rank)]
                if all(-padding[i] <= coord[i] < spatial[i] + padding[i] for i in range(rank)):
                    padded_taps += 1
                if all(0 <= coord[i] < spatial[i] for i in range(rank)):
                    values.append(x[(n, c) + tuple(coord)])
                    flat.append(int(np.ravel_multi_index(coord, spatial)))
            if mode == "max" and not values:  # a window wholly in the padding (possible with dilation)
                pooled[(n, c) + position], argmax[(n, c) + position] = -np.inf, -1
            elif mode == "max":
                best = int(np.argmax(values))
                pooled[(n, c) + position], argmax[(n, c) + position] = values[best], flat[best]
            else:
                divisor = divisor_override or (padded_taps if count_include_pad else len(values))
                pooled[(n, c) + position] = sum(values) / divisor
    return pooled, argmax


def adaptive_pool(x, output_size, mode):
    """PyTorch's adaptive windows [floor(i * L / out), ceil((i + 1) * L / out)) per axis."""
    rank = x.ndim - 2
    sizes = [x.shape[2 + i] if o is None else o for i, o in enumerate(_triple(output_size, rank))]
    pooled = np.zeros(x.shape[:2] + tuple(sizes))
    argmax = np.zeros(x.shape[:2] + tuple(sizes), dtype=np.int64)
    for position in np.ndindex(*sizes):
        bounds = [
            (position[i] * x.shape[2 + i] // sizes[i], -(-(position[i] + 1) * x.shape[2 + i] // sizes[i]))
            for i in range(rank)
        ]
        window = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in bounds)]
        flat_window = window.reshape(x.shape[:2] + (-1,))
        if mode == "max":
            local = np.argmax(flat_window, axis=2)  # the first maximum in row-major order
            pooled[(slice(None), slice(None)) + position] = np.max(flat_window, axis=2)
            coords = np.unravel_index(local, window.shape[2:])
            argmax[(slice(None), slice(None)) + position] = np.ravel_multi_index(
                tuple(coords[i] + bounds[i][0] for i in range(rank)), x.shape[2:]
            )
        else:
            pooled[(slice(None), slice(None)) + position] = flat_window.mean(axis=2)
    return pooled, argmax


def assert_within_sum_rounding(actual, expected, magnitude, terms, dtype=np.float32):
    bound = 2 * gamma(terms + 1, dtype) * magnitude
    assert actual.shape == expected.shape
    assert np.all(np.abs(actual - expected) <= bound), np.abs(actual - expected).max()


# ---------------------------------------------------------------- max pooling

MAX_CASES = [
    # id, class, constructor arguments, input shape
    ("1d", nn.MaxPool1d, {"kernel_size": 3}, (2, 3, 10)),
    (
        "1d_stride_pad_dilation_ceil",
        nn.MaxPool1d,
        {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True},
        (1, 2, 12),
    ),
    ("2d", nn.MaxPool2d, {"kernel_size": 2}, (2, 2, 6, 5)),
    (
        "2d_tuples_ceil",
        nn.MaxPool2d,
        {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "ceil_mode": True},
        (1, 2, 6, 5),
    ),
    ("2d_unbatched_dilated", nn.MaxPool2d, {"kernel_size": 2, "stride": 1, "dilation": (2, 1)}, (3, 5, 4)),
    ("3d", nn.MaxPool3d, {"kernel_size": 2, "stride": (1, 2, 2), "padding": (0, 1, 1)}, (1, 2, 3, 4, 5)),
]


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


# ---------------------------------------------------------------- reprs and state


@pytest.mark.parametrize(
    "layer, text",
    [
        (nn.MaxPool2d(3, stride=2), "MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)"),
        (
            nn.MaxPool1d(2, padding=1, dilation=2, ceil_mode=True, return_indices=True),
            "MaxPool1d(kernel_size=2, stride=2, padding=1, dilation=2, ceil_mode=True)",
        ),
        (
            nn.MaxPool3d((1, 2, 2)),
            "MaxPool3d(kernel_size=(1, 2, 2), stride=(1, 2, 2), padding=0, dilation=1, ceil_mode=False)",
        ),
        (nn.AvgPool1d(3), "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"),
        (nn.AvgPool2d(3, stride=2, divisor_override=2), "AvgPool2d(kernel_size=3, stride=2, padding=0)"),
        (nn.AvgPool3d((2, 2, 1), padding=1), "AvgPool3d(kernel_size=(2, 2, 1), stride=(2, 2, 1), padding=1)"),
        (nn.AdaptiveAvgPool2d((5, None)), "AdaptiveAvgPool2d(output_size=(5, None))"),
        (nn.AdaptiveMaxPool1d(3, return_indices=True), "AdaptiveMaxPool1d(output_size=3)"),
        (nn.LPPool2d(2, 3, stride=2), "LPPool2d(norm_type=2, kernel_size=3, stride=2, ceil_mode=False)"),
        (nn.LPPool1d(1.5, 2), "LPPool1d(norm_type=1.5, kernel_size=2, stride=None, ceil_mode=False)"),
        (nn.MaxUnpool2d(2), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"),
        (
            nn.MaxUnpool3d(2, stride=1, padding=1),
            "MaxUnpool3d(kernel_size=(2, 2, 2), stride=(1, 1, 1), padding=(1, 1, 1))",
        ),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, nn.Module) else None,
)
def test_repr_matches_pytorch(layer, text):
    assert repr(layer) == text
    assert layer.state_dict() == {} or len(layer.state_dict()) == 0
    assert list(layer.parameters()) == []


# ---------------------------------------------------------------- low precision


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize(
    "layer",
    [nn.MaxPool2d(2), nn.AdaptiveMaxPool2d((2, 3)), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(2)],
    ids=lambda layer: type(layer).__name__,
)
def test_low_precision_pooling_forward_and_backward(layer, dtype, executor):
    x = distinct(1, 2, 4, 5) / 8  # small multiples of 1/32: exact in float16 and bfloat16
    xt = onnxnn.tensor(x, dtype=dtype, requires_grad=True)
    with onnxnn.set_executor(executor):
        out = layer(xt)
        out.float().sum().backward()
        actual, grad = _values(out), _values(xt.grad)
    assert out.dtype is dtype and xt.grad.dtype is dtype
    with onnxnn.set_executor("kernels"):
        x64 = onnxnn.tensor(x, requires_grad=True)
        layer(x64).sum().backward()
        expected, expected_grad = _values(layer(x64)), _values(x64.grad)
    u = 2.0**-11 if dtype is onnxnn.float16 else 2.0**-8
    # Max pools select (exact); averages of <= 4 exact terms round once or twice.
    np.testing.assert_array_less(np.abs(actual - expected), 3 * u * np.abs(expected) + 1e-12)
    np.testing.assert_array_less(np.abs(grad - expected_grad), 3 * u * np.abs(expected_grad) + 1e-12)


# ---------------------------------------------------------------- export

EXPORT_CASES = [
    ("max_pool", lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (2, 2, 7, 6), 0),
    ("avg_pool_divisor", lambda: nn.AvgPool2d(2, padding=1, divisor_override=3), (1, 2, 5, 5), 4),
    ("adaptive_avg", lambda: nn.AdaptiveAvgPool2d((3, 2)), (1, 2, 7, 5), 35),
    ("adaptive_max_uneven", lambda: nn.AdaptiveMaxPool2d((3, 2)), (1, 2, 7, 5), 0),
    ("adaptive_max_3d", lambda: nn.AdaptiveMaxPool3d(2), (1, 1, 4, 6, 2), 0),
    ("lp_pool", lambda: nn.LPPool1d(2, 3), (1, 2, 9), 5),
]


@pytest.mark.parametrize("case_id, build, input_shape, terms", EXPORT_CASES, ids=[c[0] for c in EXPORT_CASES])
def test_export_runs_in_plain_onnxruntime_like_the_layer(case_id, build, input_shape, terms):
    layer = build().eval()
    x = onnxnn.tensor(RNG.uniform(0.5, 2.0, input_shape).astype(np.float32))
    proto = to_onnx(layer, x, input_names=["x"], output_names=["y"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {"x": x.numpy()})
    with onnxnn.set_executor("kernels"):
        ours = layer(x).numpy().astype(np.float64)
    # Positive inputs: both computations are within gamma(terms) of the exact value, relatively.
    np.testing.assert_array_less(np.abs(exported - ours), 2 * gamma(terms + 2) * np.abs(ours) + 1e-30)


def test_export_of_max_unpool_with_indices_as_an_input():
    x = distinct(1, 2, 4, 4).astype(np.float32)
    values, indices = F.max_pool2d(onnxnn.tensor(x), 2, return_indices=True)
    proto = to_onnx(nn.MaxUnpool2d(2).eval(), (values, indices), input_names=["v", "i"], output_names=["y"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {"v": values.numpy(), "i": indices.numpy()})
    np.testing.assert_array_equal(exported, nn.MaxUnpool2d(2)(values, indices).numpy())


# ---------------------------------------------------------------- errors in PyTorch's words

ERROR_CASES = [
    (
        "max_pad_too_big",
        lambda: nn.MaxPool2d(2, padding=2)(onnxnn.randn(1, 1, 4, 4)),
        RuntimeError,
        "pad should be at most half of effective kernel size",
    ),
    (
        "avg_pad_too_big",
        lambda: nn.AvgPool1d(2, padding=2)(onnxnn.randn(1, 1, 4)),
        RuntimeError,
        "pad should be at most half of kernel size",
    ),
    (
        "max_rank",
        lambda: nn.MaxPool2d(2)(onnxnn.randn(4, 4)),
        RuntimeError,
        "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input",
    ),
    ("output_too_small", lambda: nn.MaxPool2d(3)(onnxnn.randn(1, 1, 2, 2)), RuntimeError, "Output size is too small"),
    (
        "adaptive_max_rank",
        lambda: nn.AdaptiveMaxPool2d(2)(onnxnn.randn(4, 4)),
        RuntimeError,
        "adaptive_max_pool2d(): Expected 3D or 4D tensor",
    ),
    (
        "adaptive_max_output",
        lambda: nn.AdaptiveMaxPool1d(0)(onnxnn.randn(1, 1, 4)),
        RuntimeError,
        "Expected output_size to be positive",
    ),
    (
        "adaptive_avg_rank",
        lambda: nn.AdaptiveAvgPool3d(2)(onnxnn.randn(1, 4, 4)),
        RuntimeError,
        "adaptive_avg_pool3d(): Expected 4D or 5D tensor",
    ),
    (
        "unpool_output_size",
        lambda: nn.MaxUnpool2d(2)(*F.max_pool2d(onnxnn.randn(1, 1, 4, 4), 2, return_indices=True), output_size=[8, 8]),
        ValueError,
        'invalid output_size "[8, 8]" (dim 0 must be between 2 and 6)',
    ),
    (
        "unpool_output_size_length",
        lambda: nn.MaxUnpool1d(2)(*F.max_pool1d(onnxnn.randn(1, 1, 4), 2, return_indices=True), output_size=[4, 4]),
        ValueError,
        "output_size should be a sequence containing 1 or 3 elements, but it has a length of '2'",
    ),
    (
        "unpool_index_range",
        lambda: F.max_unpool1d(onnxnn.ones(1, 1, 2), onnxnn.tensor([[[0, 9]]]), 2),
        RuntimeError,
        "Found an invalid max index: 9",
    ),
    (
        "unpool_index_shape",
        lambda: F.max_unpool1d(onnxnn.ones(1, 1, 2), onnxnn.tensor([[[0]]]), 2),
        RuntimeError,
        "Expected shape of indices to be same as that of the input tensor",
    ),
]


@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_in_pytorch_words(case_id, call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


# ---------------------------------------------------------------- integer dtypes

INTEGER_MAX_DTYPES = [onnxnn.int8, onnxnn.uint8, onnxnn.int16, onnxnn.int32, onnxnn.int64]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", INTEGER_MAX_DTYPES, ids=str)
@pytest.mark.parametrize("case_id, cls, kwargs, input_shape", MAX_CASES, ids=[c[0] for c in MAX_CASES])
def test_integer_max_pools_pick_the_first_maxima_as_pytorch(case_id, cls, kwargs, input_shape, executor, dtype):
    # PyTorch's CPU max_pool2d/3d (and max_pool1d with indices) take every integer dtype but bool. Few
    # distinct values, so that windows hold ties: the first maximum in row-major window order wins.
    x = RNG.integers(0 if dtype is onnxnn.uint8 else -3, 4, size=input_shape)
    unbatched = len(input_shape) == {nn.MaxPool1d: 2, nn.MaxPool2d: 3, nn.MaxPool3d: 4}[cls]
    expected, expected_indices = window_pool(x[None] if unbatched else x, **kwargs)
    if unbatched:
        expected, expected_indices = expected[0], expected_indices[0]
    with onnxnn.set_executor(executor):
        values, indices = cls(**kwargs, return_indices=True)(onnxnn.tensor(x, dtype=dtype))
        np.testing.assert_array_equal(values.numpy(), expected)
        np.testing.assert_array_equal(indices.numpy(), expected_indices)
        if cls is not nn.MaxPool1d:  # without indices, max_pool1d is PyTorch's float-only kernel
            np.testing.assert_array_equal(cls(**kwargs)(onnxnn.tensor(x, dtype=dtype)).numpy(), expected)
    assert values.dtype is dtype and indices.dtype is onnxnn.int64


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_int64_max_pool_is_exact_past_float64s_integers(executor):
    # Neighbours above 2^53 round to one float64: the maximum and its position must still be exact.
    x = np.array([[[[0, 3, 1, 2], [2, 0, 3, 1], [1, 1, 0, 0]]]], dtype=np.int64) + 2**62
    with onnxnn.set_executor(executor):
        values, indices = F.max_pool2d(onnxnn.tensor(x), (2, 2), 1, padding=1, return_indices=True)
        expected, expected_indices = window_pool(x - 2**62, (2, 2), 1, padding=1)
        np.testing.assert_array_equal(values.numpy(), expected.astype(np.int64) + 2**62)
        np.testing.assert_array_equal(indices.numpy(), expected_indices)


def _truncated_average_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """PyTorch's int64 average: the window sum divided by the divisor with truncation toward zero."""
    sums = window_pool(x, kernel_size, stride, padding, ceil_mode=ceil_mode, mode="avg", divisor_override=1)[0]
    averages = window_pool(np.ones_like(x), kernel_size, stride, padding, ceil_mode=ceil_mode, mode="avg")[0]
    counts = window_pool(
        np.ones_like(x), kernel_size, stride, padding, ceil_mode=ceil_mode, mode="avg", divisor_override=1
    )[0]
    # averages of ones: taps inside / padded taps, so the divisor counting the padding is counts / averages.
    divisor = divisor_override or (np.rint(counts / averages) if count_include_pad else counts)
    return (np.sign(sums) * (np.abs(sums) // divisor)).astype(np.int64)


INT64_AVG_CASES = [
    ("1d", (1, 2, 9), 2, None, 0, False, True, None),
    ("1d_pad_stride", (1, 2, 9), 3, 2, 1, False, True, None),
    ("1d_pad_without_counting_it", (1, 2, 9), 3, 2, 1, False, False, None),
    ("1d_ceil", (1, 2, 9), 2, None, 0, True, True, None),
    ("2d_pad_ceil", (2, 1, 5, 6), (3, 2), (2, 2), (1, 1), True, True, None),
    ("2d_divisor_override", (1, 2, 4, 5), 2, 1, 0, False, True, 3),
    ("3d_pad_without_counting_it", (1, 1, 3, 4, 5), 2, (1, 2, 2), (0, 1, 1), False, False, None),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override",
    INT64_AVG_CASES,
    ids=[c[0] for c in INT64_AVG_CASES],
)
def test_int64_avg_pool_truncates_window_sums_as_pytorch(
    case_id, shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, executor
):
    x = RNG.integers(-9, 10, size=shape)
    rank = len(shape) - 2
    arguments = (kernel, stride, padding, ceil_mode, count_include_pad)
    extra = {} if rank == 1 else {"divisor_override": divisor_override}
    with onnxnn.set_executor(executor):
        pooled = getattr(F, f"avg_pool{rank}d")(onnxnn.tensor(x), *arguments, **extra)
        np.testing.assert_array_equal(pooled.numpy(), _truncated_average_pool(x, *arguments, divisor_override))
    assert pooled.dtype is onnxnn.int64


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_int64_lp_pool_averages_integer_powers_as_pytorch(executor):
    # PyTorch: x ** 2 in int64, its truncated average times the kernel size, then the float root.
    x = onnxnn.tensor([[[-3, -2, 5, -4, 7, 0, -1, -1]]])
    with onnxnn.set_executor(executor):
        pooled = F.lp_pool1d(x, 2, 2)
        np.testing.assert_allclose(pooled.numpy(), np.sqrt([[[12.0, 40.0, 48.0, 2.0]]]), rtol=2**-23)
    assert pooled.dtype is onnxnn.float32


# (call, dtypes it refuses with PyTorch's NotImplementedError): every integer but the ones above.
REFUSED_POOL_DTYPES = [
    ("max_pool1d", lambda x: F.max_pool1d(x, 2), INTEGER_MAX_DTYPES + [onnxnn.bool]),
    ("max_pool1d", lambda x: F.max_pool1d(x, 2, return_indices=True), [onnxnn.bool]),
    ("max_pool2d", lambda x: F.max_pool2d(x.unsqueeze(-1), (2, 1)), [onnxnn.bool]),
    ("max_pool3d", lambda x: F.max_pool3d(x.unsqueeze(-1).unsqueeze(-1), (2, 1, 1)), [onnxnn.bool]),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 2), [d for d in INTEGER_MAX_DTYPES if d is not onnxnn.int64]),
    ("avg_pool2d", lambda x: F.avg_pool2d(x.unsqueeze(-1), (2, 1)), [onnxnn.int32, onnxnn.uint8, onnxnn.bool]),
    ("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 2), INTEGER_MAX_DTYPES + [onnxnn.bool]),
    ("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x.unsqueeze(-1), 1), [onnxnn.int64, onnxnn.bool]),
    ("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 2), [onnxnn.int64, onnxnn.int32, onnxnn.bool]),
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x.unsqueeze(-1).unsqueeze(-1), 1), [onnxnn.int64]),
]
REFUSED_POOL_CASES = [(name, call, dtype) for name, call, refused in REFUSED_POOL_DTYPES for dtype in refused]
_TYPE_NAMES = {"int8": "Char", "uint8": "Byte", "int16": "Short", "int32": "Int", "int64": "Long", "bool": "Bool"}


@pytest.mark.parametrize("name, call, dtype", REFUSED_POOL_CASES, ids=[f"{c[0]}-{c[2]}" for c in REFUSED_POOL_CASES])
def test_pools_refuse_the_dtypes_pytorch_has_no_kernel_for(name, call, dtype):
    x = onnxnn.zeros(1, 2, 4, dtype=dtype)
    with pytest.raises(NotImplementedError, match=f"\"{name}\" not implemented for '{_TYPE_NAMES[dtype.name]}'"):
        call(x)


# ---------------------------------------------------------------- empty dims: only the batch may be empty

_WINDOWED = ["max_pool", "max_pool_indices", "avg_pool", "lp_pool"]


def _pool_call(kind: str, rank: int, x):
    if kind == "max_pool":
        return getattr(F, f"max_pool{rank}d")(x, 2)
    if kind == "max_pool_indices":
        return getattr(F, f"max_pool{rank}d")(x, 2, return_indices=True)[0]
    if kind == "avg_pool":
        return getattr(F, f"avg_pool{rank}d")(x, 2)
    if kind == "lp_pool":
        return getattr(F, f"lp_pool{rank}d")(x, 2.0, 2)
    return getattr(F, f"{kind}{rank}d")(x, 2)  # adaptive_max_pool, adaptive_avg_pool


def _with_empty(rank: int, axis: int, batched: bool) -> tuple:
    shape = [2, 3] + [4] * rank if batched else [3] + [4] * rank
    shape[axis] = 0
    return tuple(shape)


# (kind, rank, shape, PyTorch's message or None where it pools to an empty result). The windowed pools
# refuse every empty dim but a batched input's batch; the adaptive max pools (and adaptive_avg_pool3d)
# every empty dim from dim 1 on, even of an unbatched input; adaptive_avg_pool1d/2d empty spatial dims only.
EMPTY_DIM_CASES = (
    [
        (kind, rank, _with_empty(rank, axis, batched), None if batched and axis == 0 else "windowed")
        for kind in _WINDOWED
        for rank in (1, 2, 3)
        for batched in (True, False)
        for axis in range(rank + 1 + batched)
    ]
    + [
        (kind, rank, _with_empty(rank, axis, batched), None if axis == 0 else "adaptive")
        for kind in ("adaptive_max_pool", "adaptive_avg_pool")
        for rank in (1, 2, 3)
        for batched in (True, False)
        for axis in range(rank + 1 + batched)
        if not (kind == "adaptive_avg_pool" and rank < 3)
    ]
    + [
        ("adaptive_avg_pool", rank, _with_empty(rank, axis, batched), None if axis < 1 + batched else "adaptive")
        for rank in (1, 2)
        for batched in (True, False)
        for axis in range(rank + 1 + batched)
    ]
)
_WINDOWED_MESSAGE = {
    1: r"Expected 2D or 3D \(batch mode\) tensor with optional 0 dim batch size for input, but got:",
    2: r"Expected 3D or 4D \(batch mode\) tensor with optional 0 dim batch size for input, but got:",
    3: r"Expected input's non-batch dimensions to have positive length, but input has a shape of",
}


@pytest.mark.parametrize(
    "kind, rank, shape, refusal",
    EMPTY_DIM_CASES,
    ids=[f"{c[0]}{c[1]}d-{'x'.join(map(str, c[2]))}" for c in EMPTY_DIM_CASES],
)
def test_pools_refuse_empty_non_batch_dims_as_pytorch(kind, rank, shape, refusal):
    x = onnxnn.randn(*shape)
    if refusal is None:
        result = _pool_call(kind, rank, x)
        assert result.shape == shape[: len(shape) - rank] + (2,) * rank and result.numel() == 0
        return
    if refusal == "windowed":
        message = _WINDOWED_MESSAGE[rank]
    else:
        empty_axis = shape.index(0, 1)
        message = (
            rf"{kind}{rank}d\(\): Expected input to have non-zero size for non-batch dimensions, but input has "
            rf"sizes \[{', '.join(map(str, shape))}\] with dimension {empty_axis} being empty"
        )
    with pytest.raises(RuntimeError, match=message):
        _pool_call(kind, rank, x)


# ---------------------------------------------------------------- against PyTorch, where installed

TORCH_CASES = [
    ("MaxPool2d", (), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (2, 2, 7, 6)),
    ("MaxPool3d", (), {"kernel_size": 2, "dilation": (1, 2, 1)}, (1, 2, 3, 5, 4)),
    (
        "AvgPool1d",
        (),
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        (2, 3, 8),
    ),
    (
        "AvgPool2d",
        (),
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "divisor_override": 5},
        (1, 2, 6, 7),
    ),
    ("AvgPool3d", (), {"kernel_size": 2, "ceil_mode": True}, (1, 2, 3, 5, 3)),
    ("AdaptiveAvgPool3d", ((2, 3, None),), {}, (1, 2, 5, 7, 3)),
    ("AdaptiveMaxPool2d", ((3, 4),), {}, (2, 2, 7, 5)),
    ("AdaptiveMaxPool3d", ((2, 1, 3),), {}, (1, 2, 3, 4, 7)),
    ("LPPool1d", (3, 3), {"ceil_mode": True}, (1, 2, 8)),
    ("LPPool2d", (2, 2), {"stride": 1, "ceil_mode": True}, (1, 2, 5, 4)),
    ("LPPool3d", (1, 2), {}, (1, 2, 4, 4, 4)),
]


@pytest.mark.parametrize("name, args, kwargs, input_shape", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_pooling_layer_agrees_with_pytorch(name, args, kwargs, input_shape):
    torch = pytest.importorskip("torch")
    reference = getattr(torch.nn, name)(*args, **kwargs)
    layer = getattr(nn, name)(*args, **kwargs)
    assert repr(layer) == repr(reference)
    x = distinct(*input_shape) / 16 if "LP" not in name else RNG.uniform(0.5, 2.0, input_shape)
    xt = torch.tensor(x, requires_grad=True)
    expected = reference(xt)
    expected.sum().backward()
    xo = onnxnn.tensor(x, requires_grad=True)
    with onnxnn.set_executor("kernels"):
        out = layer(xo)
        out.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_max_pool_and_unpool_indices_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    x = distinct(2, 3, 7, 6)
    expected, expected_indices = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x), (3, 4), return_indices=True)
    values, indices = F.adaptive_max_pool2d(onnxnn.tensor(x), (3, 4), return_indices=True)
    np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
    pooled, pool_indices = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    unpooled = torch.nn.functional.max_unpool2d(pooled, pool_indices, 2, output_size=(7, 6))
    ours = F.max_unpool2d(*F.max_pool2d(onnxnn.tensor(x), 2, return_indices=True), 2, output_size=(7, 6))
    np.testing.assert_array_equal(ours.numpy(), unpooled.numpy())
