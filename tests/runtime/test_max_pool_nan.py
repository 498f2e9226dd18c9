"""A max pool's window holding NaN gives NaN, with the index of its last NaN, on every executor.

PyTorch's max pooling propagates NaN (a diverging network's NaN must not come out of a pool as a
finite number); onnxruntime's kernels skip it, so onnxnn's sessions run the node with NaN flags
beside it (runtime/ops/max_pool_nan.py). Expected values come from a direct numpy pooling
below: a window's value is NaN when it holds one, else its maximum; its index is its last NaN in
row-major order, else its first maximum (PyTorch's CPU kernels).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import onnxnn
from onnxnn.kernels import compiled_pooling
from onnxnn.nn import functional as F
from onnxnn.runtime import sessions

from .test_pooling_ops import output_size

_rng = np.random.default_rng(5)


def window_maximum(taps: list) -> tuple:
    """A window's ``(value, flat index)`` from its ``(value, flat index)`` taps in row-major order: NaN
    at its last NaN where it holds one, else its maximum at the first tap holding it."""
    nans = [flat for value, flat in taps if np.isnan(value)]
    if nans:
        return np.nan, max(nans)
    best = max(value for value, _ in taps)
    return best, next(flat for value, flat in taps if value == best)


def nan_pool_reference(x, kernel, stride, padding=0, dilation=1, ceil_mode=False):
    """(pooled, per-plane indices) of a max pool with the same window on every spatial axis."""
    rank = x.ndim - 2
    spatial = x.shape[2:]
    out = [output_size(size, kernel, stride, dilation, padding, padding, ceil_mode) for size in spatial]
    pooled = np.zeros(x.shape[:2] + tuple(out), x.dtype)
    indices = np.zeros(x.shape[:2] + tuple(out), np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        for position in np.ndindex(*out):
            taps = []
            for offset in np.ndindex(*([kernel] * rank)):
                coord = [position[i] * stride + offset[i] * dilation - padding for i in range(rank)]
                if all(0 <= coord[i] < spatial[i] for i in range(rank)):
                    taps.append((x[(n, c) + tuple(coord)], int(np.ravel_multi_index(coord, spatial))))
            pooled[(n, c) + position], indices[(n, c) + position] = window_maximum(taps)
    return pooled, indices


def with_nans(shape, dtype) -> np.ndarray:
    """Random values with a scattered NaN, a window's worth of NaN, and a NaN beside a larger value."""
    x = _rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[_rng.choice(flat.size, size=max(2, flat.size // 20), replace=False)] = np.nan
    x[(0, 0) + (slice(0, 3),) * (len(shape) - 2)] = np.nan
    x[(-1, -1) + (0,) * (len(shape) - 2)] = np.nan
    x[(-1, -1) + (1,) * (len(shape) - 2)] = 100.0
    return x


POOLS = [
    # id, input shape, max_pool arguments (kernel, stride, padding, dilation, ceil_mode)
    ("1d", (2, 3, 11), (3, 2, 1, 1, False)),
    ("2d", (2, 3, 7, 6), (2, 2, 0, 1, False)),
    ("2d_overlapping_padded", (2, 2, 7, 7), (3, 1, 1, 1, False)),
    ("2d_dilated_ceil_mode", (1, 3, 9, 8), (3, 2, 1, 2, True)),
    ("3d", (1, 2, 4, 5, 4), (2, 2, 0, 1, False)),
]
FUNCTIONS = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
DTYPES = [np.float32, np.float64, np.float16]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels", "auto"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: dtype.__name__)
@pytest.mark.parametrize("case_id, shape, arguments", POOLS, ids=[case[0] for case in POOLS])
def test_a_window_holding_nan_gives_nan_and_its_last_nan(case_id, shape, arguments, dtype, executor):
    kernel, stride, padding, dilation, ceil_mode = arguments
    x = with_nans(shape, dtype)
    expected, expected_indices = nan_pool_reference(x, kernel, stride, padding, dilation, ceil_mode)
    pool = FUNCTIONS[len(shape) - 2]
    with onnxnn.set_executor(executor):
        values = pool(onnxnn.tensor(x), kernel, stride, padding, dilation, ceil_mode).numpy()
        both = pool(onnxnn.tensor(x), kernel, stride, padding, dilation, ceil_mode, return_indices=True)
        values_beside_indices, indices = both[0].numpy(), both[1].numpy()
    assert np.isnan(expected).any() and not np.isnan(expected).all()
    np.testing.assert_array_equal(values, expected)  # NaN where expected, equal elsewhere
    np.testing.assert_array_equal(values_beside_indices, expected)
    np.testing.assert_array_equal(indices, expected_indices)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_the_gradient_reaches_the_last_nan_of_a_window(executor):
    x = with_nans((2, 3, 7, 7), np.float64)
    expected, indices = nan_pool_reference(x, 3, 2, 1)
    weights = _rng.standard_normal(expected.shape)
    expected_gradient = np.zeros_like(x)
    for n, c, *position in np.ndindex(*indices.shape):
        plane = expected_gradient[n, c].reshape(-1)
        plane[indices[(n, c, *position)]] += weights[(n, c, *position)]
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(x, requires_grad=True)
        (F.max_pool2d(input, 3, 2, 1) * onnxnn.tensor(weights)).sum().backward()  # a NaN loss, finite gradients
        gradient = input.grad.numpy()
    np.testing.assert_array_equal(gradient, expected_gradient)  # one term per position: exact


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: dtype.__name__)
def test_a_global_max_pool_holding_nan_gives_nan(dtype, executor):
    x = with_nans((3, 4, 5, 6), dtype)
    x[1, 2] = np.nan  # a plane of NaN alone: onnxruntime's kernel gave the dtype's lowest value
    x[2, 3] = 1.0  # a plane without NaN
    expected = np.where(np.isnan(x).any(axis=(2, 3)), np.nan, np.nanmax(x, axis=(2, 3)))[..., None, None]
    with onnxnn.set_executor(executor):
        pooled = F.adaptive_max_pool2d(onnxnn.tensor(x), 1).numpy()
    np.testing.assert_array_equal(pooled, expected.astype(dtype))


@pytest.mark.parametrize("pool", ["window", "global"])
def test_a_pool_of_a_relu_averages_its_input_for_the_nan_flags(pool, monkeypatch):
    # A ReLU's output is never negative, so its average over a window is NaN only where the window
    # holds NaN: the session averages it without squaring it first. Infinities and values whose sum
    # overflows must still come out as their maximum.
    x = with_nans((2, 3, 9, 9), np.float32)
    x[0, 1, :3, :3] = np.inf
    x[0, 2, :3, :3] = np.float32(3e38)
    x[1, 0, :3, :3] = -np.inf
    x[1, 1, 0, 0], x[1, 1, 0, 1] = np.inf, np.nan
    relu = np.where(np.isnan(x), x, np.maximum(x, 0))
    if pool == "window":
        expected = nan_pool_reference(relu, 3, 2, 1)[0]
    else:
        expected = np.where(np.isnan(relu).any(axis=(2, 3)), np.nan, np.nanmax(relu, axis=(2, 3)))[..., None, None]
    models = []
    original = sessions.create_session
    monkeypatch.setattr(sessions, "create_session", lambda model, *rest: models.append(model) or original(model, *rest))
    with onnxnn.set_executor("onnxruntime"):
        y = F.relu(onnxnn.tensor(x))
        pooled = F.max_pool2d(y, 3, 2, 1) if pool == "window" else F.adaptive_max_pool2d(y, 1)
        np.testing.assert_array_equal(pooled.numpy(), expected)
    assert [node.op_type for model in models for node in model.graph.node if node.op_type == "Mul"] == []


@pytest.mark.parametrize("with_indices", [False, True], ids=["values", "values_and_indices"])
def test_a_session_shared_across_input_sizes_propagates_nan_too(with_indices, monkeypatch):
    # A structure seen at several sizes gets one session for all of them (fastpath/dynamic_shapes.py),
    # built without the lowerings that choose by size: the NaN forms read no size, so it takes them.
    shared = []
    original = sessions.OnnxruntimeExecutor.compile_shared
    monkeypatch.setattr(
        sessions.OnnxruntimeExecutor,
        "compile_shared",
        lambda self, *arguments: shared.append(1) or original(self, *arguments),
    )
    with onnxnn.set_executor("onnxruntime"):
        for length in range(6, 14):
            x = with_nans((2, 3, length, length), np.float32)
            expected, expected_indices = nan_pool_reference(x, 3, 2, 1)
            result = F.max_pool2d(onnxnn.tensor(x), 3, 2, 1, return_indices=with_indices)
            values, indices = result if with_indices else (result, None)
            np.testing.assert_array_equal(values.numpy(), expected)
            if with_indices:
                np.testing.assert_array_equal(indices.numpy(), expected_indices)
    assert shared  # the shared session was built, and gave the same values


def test_an_export_keeps_the_standard_node():
    # As torch.onnx.export writes it, and from_onnx reads it back as one op: the NaN flags are
    # onnxnn's sessions' form only (served by plain onnxruntime, a window's NaN is skipped).
    model = onnxnn.nn.Sequential(onnxnn.nn.MaxPool2d(3, 2, 1), onnxnn.nn.AdaptiveMaxPool2d(1))
    proto = onnxnn.export.to_onnx(model, onnxnn.randn(1, 2, 8, 8))
    assert [node.op_type for node in proto.graph.node] == ["MaxPool", "MaxPool"]


@pytest.mark.parametrize("executor", ["onnxruntime", "auto"])
def test_the_compiled_loop_of_a_large_pool_with_indices_takes_the_last_nan(executor):
    # Large enough for onnxnn's sessions to run the node as kernels/pooling_loops.c (where it built).
    x = with_nans((1, 1, 256, 256), np.float32)
    assert x.size >= compiled_pooling.MIN_ELEMENTS
    expected, expected_indices = nan_pool_reference(x, 2, 2)
    with onnxnn.set_executor(executor):
        values, indices = F.max_pool2d(onnxnn.tensor(x), 2, return_indices=True)
        values, indices = values.numpy(), indices.numpy()
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(indices, expected_indices)


def adaptive_pool_reference(x, sizes):
    """(pooled, per-plane indices) of PyTorch's adaptive max pool: window ``i`` of an axis of length
    ``n`` pooled to ``m`` spans ``[floor(i n / m), ceil((i + 1) n / m))``."""
    spatial = x.shape[2:]
    axes = [[(i * n // m, -(-(i + 1) * n // m)) for i in range(m)] for n, m in zip(spatial, sizes)]
    pooled = np.zeros(x.shape[:2] + tuple(sizes), x.dtype)
    indices = np.zeros(x.shape[:2] + tuple(sizes), np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        for position in np.ndindex(*sizes):
            ranges = [range(*axes[axis][index]) for axis, index in enumerate(position)]
            taps = [
                (x[(n, c) + coord], int(np.ravel_multi_index(coord, spatial))) for coord in itertools.product(*ranges)
            ]
            pooled[(n, c) + position], indices[(n, c) + position] = window_maximum(taps)
    return pooled, indices


ADAPTIVE_POOLS = [
    # id, input shape, output size: windows of uneven lengths that overlap, as gathered windows
    ("1d", (2, 3, 9), (4,)),
    ("2d", (2, 2, 7, 5), (3, 3)),
    ("3d", (1, 2, 5, 4, 3), (2, 3, 2)),
]
ADAPTIVE_FUNCTIONS = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: dtype.__name__)
@pytest.mark.parametrize("case_id, shape, sizes", ADAPTIVE_POOLS, ids=[case[0] for case in ADAPTIVE_POOLS])
def test_an_uneven_adaptive_window_holding_several_nans_names_its_last(case_id, shape, sizes, dtype, executor):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(dtype)
    taps = np.prod([-(-n // m) + 1 for n, m in zip(shape[2:], sizes)])  # at most, per window
    x[rng.random(shape) < 2 / taps] = np.nan  # windows with several NaNs, one, and none
    expected, expected_indices = adaptive_pool_reference(x, sizes)
    with onnxnn.set_executor(executor):
        values, indices = ADAPTIVE_FUNCTIONS[len(sizes)](onnxnn.tensor(x), sizes, return_indices=True)
        values, indices = values.numpy(), indices.numpy()
    assert np.isnan(expected).any() and not np.isnan(expected).all()
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(indices, expected_indices)
