"""Pooling: MaxPool, AveragePool, LpPool, the global pools, and PyTorch's pooling functions.

Expected values come from a direct numpy pooling written below (PyTorch's window rules: ceil_mode
never starts a window in the end padding; with count_include_pad the divisor counts padding but not
ceil_mode's overhang), from PyTorch-exported models in onnx's test data, and from the ONNX backend
cases of the global pools. MaxPool runs in float64 in onnxruntime, so its gradients use the float64
``check_gradients``; the other pools only run in float32 there (see conv_cases.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import accumulation_bound, assert_within

import onnxnn
from onnxnn.nn import functional as F
from onnxnn.runtime import ops
from onnxnn.runtime.tensor import apply_op

from .conv_cases import (
    check_gradients_float32,
    onnx_node_cases,
    pytorch_converted_cases,
    replay_node,
    replay_pytorch_converted,
)


def output_size(size, kernel, stride, dilation, pad_begin, pad_end, ceil_mode):
    span = size + pad_begin + pad_end - dilation * (kernel - 1) - 1
    if not ceil_mode:
        return span // stride + 1
    out = int(np.ceil(span / stride)) + 1
    return out - 1 if (out - 1) * stride >= size + pad_begin else out


def pool_reference(
    x,
    kernel,
    strides=None,
    pads_begin=None,
    pads_end=None,
    dilations=None,
    ceil_mode=False,
    mode="max",
    count_include_pad=True,
):
    """Returns (pooled, per-plane argmax indices) computed window by window."""
    rank = x.ndim - 2
    spatial = x.shape[2:]
    strides = strides or list(kernel)
    dilations = dilations or [1] * rank
    pads_begin = pads_begin or [0] * rank
    pads_end = pads_end if pads_end is not None else pads_begin
    out = [
        output_size(spatial[i], kernel[i], strides[i], dilations[i], pads_begin[i], pads_end[i], ceil_mode)
        for i in range(rank)
    ]
    pooled = np.zeros(x.shape[:2] + tuple(out))
    indices = np.zeros(x.shape[:2] + tuple(out), dtype=np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        for position in np.ndindex(*out):
            values, flat, padded_taps = [], [], 0
            for offset in np.ndindex(*kernel):
                coord = [position[i] * strides[i] + offset[i] * dilations[i] - pads_begin[i] for i in range(rank)]
                if all(-pads_begin[i] <= coord[i] < spatial[i] + pads_end[i] for i in range(rank)):
                    padded_taps += 1
                if all(0 <= coord[i] < spatial[i] for i in range(rank)):
                    values.append(x[(n, c) + tuple(coord)])
                    flat.append(int(np.ravel_multi_index(coord, spatial)))
            if mode == "max":
                best = int(np.argmax(values))  # the first maximum, as PyTorch and onnxruntime pick
                pooled[(n, c) + position], indices[(n, c) + position] = values[best], flat[best]
            else:
                pooled[(n, c) + position] = sum(values) / (padded_taps if count_include_pad else len(values))
    return pooled, indices


_rng = np.random.default_rng(11)


def distinct(*shape: int) -> np.ndarray:
    """Values without ties (spaced 0.1 apart at least), so every window has one maximum."""
    return _rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0


def randn(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape)


# ---------------------------------------------------------------- max_pool*d / avg_pool*d against numpy

MAX_POOL_CASES = [
    # id, function, input shape, arguments, reference arguments
    ("1d_kernel3", ops.max_pool1d, (2, 3, 9), {"kernel_size": 3}, {"kernel": [3]}),
    (
        "1d_overlapping_dilated_padded",
        ops.max_pool1d,
        (1, 2, 10),
        {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2},
        {"kernel": [3], "strides": [2], "pads_begin": [1], "dilations": [2]},
    ),
    ("2d_kernel2", ops.max_pool2d, (2, 2, 6, 4), {"kernel_size": 2}, {"kernel": [2, 2]}),
    (
        "2d_overlapping_padded",
        ops.max_pool2d,
        (1, 2, 5, 5),
        {"kernel_size": 3, "stride": 1, "padding": 1},
        {"kernel": [3, 3], "strides": [1, 1], "pads_begin": [1, 1]},
    ),
    (
        "2d_ceil_mode",
        ops.max_pool2d,
        (1, 1, 5, 7),
        {"kernel_size": 2, "ceil_mode": True},
        {"kernel": [2, 2], "ceil_mode": True},
    ),
    (
        "2d_ceil_mode_drops_window_in_padding",
        ops.max_pool2d,
        (1, 1, 5, 5),
        {"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel": [2, 2], "strides": [2, 2], "pads_begin": [1, 1], "ceil_mode": True},
    ),
    (
        "2d_rectangular",
        ops.max_pool2d,
        (1, 2, 7, 6),
        {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)},
        {"kernel": [3, 2], "strides": [2, 1], "pads_begin": [1, 0], "dilations": [1, 2]},
    ),
    (
        "3d_kernel2",
        ops.max_pool3d,
        (1, 2, 4, 4, 5),
        {"kernel_size": 2, "stride": (2, 2, 1)},
        {"kernel": [2, 2, 2], "strides": [2, 2, 1]},
    ),
]


@pytest.mark.parametrize(
    "case_id, function, input_shape, kwargs, reference", MAX_POOL_CASES, ids=[case[0] for case in MAX_POOL_CASES]
)
def test_max_pool_matches_numpy(case_id, function, input_shape, kwargs, reference):
    x = distinct(*input_shape).astype(np.float32)
    values, indices = function(onnxnn.tensor(x), return_indices=True, **kwargs)
    expected_values, expected_indices = pool_reference(x, mode="max", **reference)
    assert tuple(values.shape) == expected_values.shape
    np.testing.assert_array_equal(values.numpy(), expected_values)  # a maximum is one of the inputs: exact
    np.testing.assert_array_equal(indices.numpy(), expected_indices)
    assert indices.dtype == onnxnn.int64
    np.testing.assert_array_equal(function(onnxnn.tensor(x), **kwargs).numpy(), expected_values)


AVG_POOL_CASES = [
    # id, function, input shape, arguments, reference arguments
    ("1d_kernel2", ops.avg_pool1d, (2, 3, 8), {"kernel_size": 2}, {"kernel": [2]}),
    (
        "1d_padded_excluding_pad",
        ops.avg_pool1d,
        (1, 2, 7),
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel": [3], "strides": [2], "pads_begin": [1], "count_include_pad": False},
    ),
    ("2d_kernel2", ops.avg_pool2d, (2, 2, 4, 6), {"kernel_size": 2}, {"kernel": [2, 2]}),
    (
        "2d_padded_including_pad",
        ops.avg_pool2d,
        (1, 2, 5, 5),
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel": [3, 3], "strides": [2, 2], "pads_begin": [1, 1]},
    ),
    (
        "2d_padded_excluding_pad",
        ops.avg_pool2d,
        (1, 2, 5, 5),
        {"kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": False},
        {"kernel": [3, 3], "strides": [1, 1], "pads_begin": [1, 1], "count_include_pad": False},
    ),
    (
        "2d_ceil_mode_partial_window",
        ops.avg_pool2d,
        (1, 1, 5, 5),
        {"kernel_size": 2, "ceil_mode": True},
        {"kernel": [2, 2], "ceil_mode": True},
    ),
    (
        "2d_ceil_mode_padded",
        ops.avg_pool2d,
        (1, 1, 6, 7),
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel": [3, 3], "strides": [2, 2], "pads_begin": [1, 1], "ceil_mode": True},
    ),
    ("3d_kernel2", ops.avg_pool3d, (1, 1, 4, 4, 4), {"kernel_size": 2}, {"kernel": [2, 2, 2]}),
]


@pytest.mark.parametrize(
    "case_id, function, input_shape, kwargs, reference", AVG_POOL_CASES, ids=[case[0] for case in AVG_POOL_CASES]
)
def test_avg_pool_matches_numpy(case_id, function, input_shape, kwargs, reference):
    x = randn(*input_shape).astype(np.float32)
    result = function(onnxnn.tensor(x), **kwargs)
    expected, _ = pool_reference(x, mode="avg", **reference)
    assert tuple(result.shape) == expected.shape
    # A window's sum and the division by its count: the average of |x| over the same windows is
    # the magnitude.
    magnitude, _ = pool_reference(np.abs(x), mode="avg", **reference)
    assert_within(result.numpy(), expected, accumulation_bound(magnitude, math.prod(reference["kernel"]) + 1))


def window_sums(x, kernel, stride, padding, ceil_mode):
    """Sum of each 2-D window over the zero-padded input (ceil_mode's overhang counts as zeros)."""
    out = [output_size(x.shape[2 + i], kernel[i], stride, 1, padding, padding, ceil_mode) for i in range(2)]
    padded = np.pad(x, [(0, 0), (0, 0)] + [(padding, padding + kernel[i]) for i in range(2)])
    sums = np.zeros(x.shape[:2] + tuple(out))
    for i, j in np.ndindex(*out):
        window = padded[:, :, i * stride : i * stride + kernel[0], j * stride : j * stride + kernel[1]]
        sums[:, :, i, j] = window.sum(axis=(2, 3))
    return sums


@pytest.mark.parametrize(
    "kernel, stride, padding, ceil_mode, divisor",
    [
        (2, 2, 0, False, 3),
        (3, 2, 1, True, 2),
    ],
)
def test_avg_pool2d_divisor_override_divides_window_sums(kernel, stride, padding, ceil_mode, divisor):
    x = randn(1, 2, 6, 5).astype(np.float32)
    result = ops.avg_pool2d(onnxnn.tensor(x), kernel, stride, padding, ceil_mode, divisor_override=divisor)
    expected = window_sums(x, [kernel, kernel], stride, padding, ceil_mode) / divisor
    magnitude = window_sums(np.abs(x), [kernel, kernel], stride, padding, ceil_mode) / divisor
    assert_within(result.numpy(), expected, accumulation_bound(magnitude, kernel * kernel + 1))


def test_unbatched_input_pools_each_channel():
    x = distinct(3, 4, 4).astype(np.float32)
    result = ops.max_pool2d(onnxnn.tensor(x), 2)
    assert result.shape == (3, 2, 2)
    np.testing.assert_allclose(result.numpy(), pool_reference(x[None], [2, 2])[0][0])


@pytest.mark.parametrize(
    "input_shape, output_size",
    [
        ((2, 3, 5, 7), 1),
        ((1, 2, 6, 4), (3, 2)),
        ((1, 2, 5, 7), (3, 4)),  # overlapping windows of uneven sizes
        ((1, 2, 5, 6), (None, 4)),
    ],
)
def test_adaptive_avg_pool2d_uses_pytorch_windows(input_shape, output_size):
    x = randn(*input_shape).astype(np.float32)
    result = ops.adaptive_avg_pool2d(onnxnn.tensor(x), output_size)
    sizes = (output_size, output_size) if isinstance(output_size, int) else output_size
    sizes = [input_shape[2 + i] if s is None else s for i, s in enumerate(sizes)]
    expected = np.zeros(input_shape[:2] + tuple(sizes))
    magnitude = np.zeros_like(expected)
    height, width = input_shape[2:]
    for i, j in np.ndindex(*sizes):
        rows = slice(i * height // sizes[0], -(-(i + 1) * height // sizes[0]))
        cols = slice(j * width // sizes[1], -(-(j + 1) * width // sizes[1]))
        expected[:, :, i, j] = x[:, :, rows, cols].astype(np.float64).mean(axis=(2, 3))
        magnitude[:, :, i, j] = np.abs(x[:, :, rows, cols]).astype(np.float64).mean(axis=(2, 3))
    assert_within(result.numpy(), expected, accumulation_bound(magnitude, height * width + 1))


@pytest.mark.parametrize("output_size", [1, (2, 3)])
def test_adaptive_avg_pool2d_in_float64_uses_averaging_matrices(output_size):
    x = randn(1, 2, 4, 6)
    result = ops.adaptive_avg_pool2d(onnxnn.tensor(x), output_size)
    rows, cols = (1, 1) if output_size == 1 else output_size
    expected = x.reshape(1, 2, rows, 4 // rows, cols, 6 // cols).mean(axis=(3, 5))
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-12)
    assert result.dtype == onnxnn.float64


def test_adaptive_avg_pool_records_the_global_pool_for_one_by_one_outputs():
    result = ops.adaptive_avg_pool2d(onnxnn.ones(1, 2, 3, 3), (1, 1))
    assert result._value.node.op_type == "GlobalAveragePool"
    assert ops.adaptive_avg_pool1d(onnxnn.ones(1, 2, 6), 3)._value.node.op_type == "AveragePool"


# ---------------------------------------------------------------- ONNX node semantics


def same_pads(size, kernel, stride, upper):
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + kernel - size)
    small, large = total // 2, total - total // 2
    return (small, large) if upper else (large, small)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("dilation", [1, 2])
def test_auto_pad_resolves_to_spec_pads(op_type, auto_pad, dilation):
    # SAME padding is sized for the undilated kernel (onnxruntime's reading; the dilated kernel then
    # yields fewer than ceil(size / stride) outputs).
    x = distinct(1, 2, 7, 6).astype(np.float32)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": auto_pad, "dilations": [dilation, dilation]}
    if auto_pad == "VALID":
        pads_begin = pads_end = [0, 0]
    else:
        rows = same_pads(7, 3, 2, auto_pad == "SAME_UPPER")
        cols = same_pads(6, 2, 2, auto_pad == "SAME_UPPER")
        pads_begin, pads_end = [rows[0], cols[0]], [rows[1], cols[1]]
    mode = "max" if op_type == "MaxPool" else "avg"
    expected, _ = pool_reference(
        x, [3, 2], [2, 2], pads_begin, pads_end, [dilation, dilation], mode=mode, count_include_pad=False
    )
    (actual,) = replay_node(_node(op_type, attrs), [x])
    if mode == "max":  # a maximum is one of the inputs: exact
        np.testing.assert_array_equal(actual, expected)
    else:
        magnitude, _ = pool_reference(
            np.abs(x), [3, 2], [2, 2], pads_begin, pads_end, [dilation, dilation], mode=mode, count_include_pad=False
        )
        assert_within(actual, expected, accumulation_bound(magnitude, 3 * 2 + 1))


def _node(op_type, attrs, outputs=("y",)):
    import onnx.helper

    return onnx.helper.make_node(op_type, ["x"], list(outputs), **attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_count_over_the_whole_tensor(storage_order):
    x = distinct(2, 3, 4, 5).astype(np.float32)
    node = _node(
        "MaxPool", {"kernel_shape": [2, 2], "strides": [2, 1], "storage_order": storage_order}, outputs=("y", "indices")
    )
    values, indices = replay_node(node, [x])
    expected, plane_indices = pool_reference(x, [2, 2], [2, 1])
    rows, cols = np.unravel_index(plane_indices, (4, 5))
    within = cols * 4 + rows if storage_order else rows * 5 + cols
    offsets = (np.arange(6).reshape(2, 3, 1, 1)) * 20
    np.testing.assert_allclose(values, expected)
    np.testing.assert_array_equal(indices, within + offsets)


@pytest.mark.parametrize(
    "node, inputs, outputs",
    onnx_node_cases("globalaveragepool", "GlobalAveragePool") + onnx_node_cases("globalmaxpool", "GlobalMaxPool"),
)
def test_onnx_backend_node_case(node, inputs, outputs):
    for actual, expected in zip(replay_node(node, inputs), outputs):
        # Stored results of onnx's reference implementation: onnx's backend-test rtol.
        np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("directory", pytorch_converted_cases(("MaxPool", "AvgPool"), {"MaxPool", "AveragePool"}))
def test_pytorch_exported_model(directory):
    replay_pytorch_converted(directory)


# ---------------------------------------------------------------- gradients

MAX_POOL_GRADIENT_CASES = [
    ("1d_kernel2", {"kernel_shape": [2], "strides": [2]}, (2, 2, 6)),
    ("1d_overlapping_dilated", {"kernel_shape": [2], "strides": [1], "dilations": [2], "pads": [1, 1]}, (1, 2, 6)),
    ("2d_overlapping_padded", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}, (1, 2, 4, 4)),
    ("2d_ceil_mode", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (1, 1, 5, 5)),
    ("2d_same_upper", {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}, (1, 1, 5, 4)),
    ("2d_column_major_indices", {"kernel_shape": [2, 2], "storage_order": 1}, (1, 2, 3, 3)),
]


@pytest.mark.parametrize("with_indices", [False, True], ids=["values_only", "with_indices_output"])
@pytest.mark.parametrize(
    "case_id, attrs, input_shape", MAX_POOL_GRADIENT_CASES, ids=[case[0] for case in MAX_POOL_GRADIENT_CASES]
)
def test_max_pool_gradient_matches_finite_differences(case_id, attrs, input_shape, with_indices):
    outputs = 2 if with_indices else 1
    check_gradients(
        lambda x: (
            apply_op("MaxPool", (x,), attrs, num_outputs=outputs)[0]
            if with_indices
            else apply_op("MaxPool", (x,), attrs, num_outputs=1)
        ),
        [distinct(*input_shape)],
    )


def test_max_pool_gradient_routes_ties_to_the_first_maximum():
    x = onnxnn.ones(1, 1, 2, 4, requires_grad=True)
    ops.max_pool2d(x, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[[[1, 0, 1, 0], [0, 0, 0, 0]]]])


def test_max_pool_gradient_adds_where_windows_share_the_maximum():
    x = onnxnn.tensor([[[0.0, 5.0, 1.0, 2.0]]], requires_grad=True)
    ops.max_pool1d(x, 2, stride=1).sum().backward()  # windows (0,5), (5,1), (1,2)
    np.testing.assert_array_equal(x.grad.numpy(), [[[0, 2, 0, 1]]])


AVERAGE_POOL_GRADIENT_CASES = [
    ("1d_kernel2", {"kernel_shape": [2], "strides": [2]}, (2, 2, 6)),
    ("1d_dilated_padded", {"kernel_shape": [2], "dilations": [2], "pads": [1, 1]}, (1, 2, 6)),
    ("2d_padded_including_pad", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}, (1, 2, 4, 4)),
    ("2d_padded_excluding_pad", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (1, 2, 4, 4)),
    ("2d_ceil_mode", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (1, 1, 5, 5)),
    (
        "2d_ceil_mode_padded_including_pad",
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1, "count_include_pad": 1},
        (1, 1, 6, 5),
    ),
    ("2d_same_lower", {"kernel_shape": [3, 2], "strides": [2, 1], "auto_pad": "SAME_LOWER"}, (1, 1, 5, 4)),
]


@pytest.mark.parametrize(
    "case_id, attrs, input_shape", AVERAGE_POOL_GRADIENT_CASES, ids=[case[0] for case in AVERAGE_POOL_GRADIENT_CASES]
)
def test_average_pool_gradient_matches_finite_differences(case_id, attrs, input_shape):
    check_gradients_float32(lambda x: apply_op("AveragePool", (x,), attrs), [randn(*input_shape)], eps=0.25)


@pytest.mark.parametrize(
    "case_id, function",
    [
        ("global_average", lambda x: apply_op("GlobalAveragePool", (x,))),
        ("global_max", lambda x: apply_op("GlobalMaxPool", (x,))),
        ("lp_pool_p2", lambda x: apply_op("LpPool", (x,), {"kernel_shape": [2, 2], "strides": [1, 1]})),
        (
            "lp_pool_p3_padded",
            lambda x: apply_op("LpPool", (x,), {"kernel_shape": [2, 2], "p": 3, "pads": [1, 0, 0, 1]}),
        ),
        ("avg_pool2d_divisor_override_ceil", lambda x: ops.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3)),
    ],
)
def test_float32_pool_gradients_match_finite_differences(case_id, function):
    check_gradients_float32(function, [distinct(1, 2, 3, 3)])


@pytest.mark.parametrize("output_size", [(2, 3), 3])
def test_adaptive_avg_pool_gradient_with_uneven_windows(output_size):
    # Uneven windows are matrix products, which onnxruntime runs in float64.
    check_gradients(lambda x: ops.adaptive_avg_pool2d(x, output_size), [randn(1, 2, 4, 5)])


# ---------------------------------------------------------------- ceil_mode's dropped last window

# ceil_mode drops a last window that would start in the end padding (PyTorch, onnxruntime's kernels);
# ONNX's shape inference, which onnxruntime runs on every graph, kept it, so a pooled tensor meeting
# a tensor of its true size in one graph (the gradient's divisors, or the weights below) failed with
# "Incompatible dimensions". Each case drops a window on some axis; the 2-d one keeps a partial window
# on its other axis.
CEIL_MODE_DROPPED_WINDOW_CASES = [
    # id, input shape, kernel, stride, padding, count_include_pad
    ("1d_kernel2_stride3_padded", (1, 2, 4), [2], [3], [1], True),
    ("1d_kernel1_stride3_excluding_pad", (1, 2, 5), [1], [3], [0], False),
    ("1d_kernel4_stride4_padded", (1, 2, 7), [4], [4], [1], True),
    ("2d_one_axis_drops_one_keeps_a_partial_window", (1, 2, 4, 6), [2, 3], [3, 2], [1, 1], False),
    ("3d_kernel1_stride2", (1, 1, 4, 5, 3), [1, 1, 1], [2, 2, 2], [0, 0, 0], True),
]
AVG_POOLS = {1: ops.avg_pool1d, 2: ops.avg_pool2d, 3: ops.avg_pool3d}


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, input_shape, kernel, stride, padding, count_include_pad",
    CEIL_MODE_DROPPED_WINDOW_CASES,
    ids=[case[0] for case in CEIL_MODE_DROPPED_WINDOW_CASES],
)
def test_avg_pool_ceil_mode_dropping_a_window(
    executor, case_id, input_shape, kernel, stride, padding, count_include_pad
):
    dtype = np.float32 if executor == "onnxruntime" else np.float64  # onnxruntime pools float32 only
    reference = {
        "kernel": kernel,
        "strides": stride,
        "pads_begin": padding,
        "ceil_mode": True,
        "count_include_pad": count_include_pad,
    }
    x = randn(*input_shape)
    expected, _ = pool_reference(x, mode="avg", **reference)
    weights = randn(*expected.shape)
    # Pooling is linear: the gradient of sum(pooled * weights) is J^T weights, J's columns the
    # pooled basis vectors; |J| with |x| and |weights| gives the magnitudes of the sums.
    columns = [pool_reference(unit.reshape(input_shape), mode="avg", **reference)[0] for unit in np.eye(x.size)]
    jacobian = np.stack([column.reshape(-1) for column in columns], axis=1)
    expected_gradient = (jacobian.T @ weights.reshape(-1)).reshape(input_shape)
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(x.astype(dtype), requires_grad=True)
        pooled = AVG_POOLS[len(kernel)](input, kernel, stride, padding, True, count_include_pad)
        weighted = pooled * onnxnn.tensor(weights.astype(dtype))
        weighted.sum().backward()
        # Read inside the executor's scope: values are computed when read.
        value, gradient = weighted.detach().numpy(), input.grad.numpy()
    terms = math.prod(kernel) + 1
    magnitude = (np.abs(jacobian) @ np.abs(x).reshape(-1)).reshape(expected.shape) * np.abs(weights)
    assert_within(value, expected * weights, accumulation_bound(magnitude, terms, dtype))
    gradient_magnitude = (np.abs(jacobian).T @ np.abs(weights).reshape(-1)).reshape(input_shape)
    assert_within(gradient, expected_gradient, accumulation_bound(gradient_magnitude, terms, dtype))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_lp_and_max_pool_ceil_mode_dropping_a_window(executor):
    # Length 6, kernel 2, stride 3: windows [0, 1] and [3, 4]; a third would start at 6, past the end.
    dtype = np.float32 if executor == "onnxruntime" else np.float64
    x = randn(1, 2, 6)
    weights = randn(1, 2, 2)
    windows = np.stack([x[..., 0:2], x[..., 3:5]], axis=2)  # (1, 2, 2 windows, 2 taps)
    norms = np.sqrt((windows**2).sum(axis=-1))
    norm_gradient = np.zeros_like(x)
    norm_gradient[..., [0, 1, 3, 4]] = (windows * (weights / norms)[..., None]).reshape(1, 2, 4)
    maxima, indices = pool_reference(x, [2], strides=[3], ceil_mode=True)
    max_gradient = np.zeros_like(x)
    for n, c, window in np.ndindex(*indices.shape):
        max_gradient[n, c, indices[n, c, window]] += weights[n, c, window]
    with onnxnn.set_executor(executor):
        for pool, expected, expected_gradient in [
            (lambda t: F.lp_pool1d(t, 2, 2, 3, ceil_mode=True), norms, norm_gradient),
            (lambda t: ops.max_pool1d(t, 2, 3, ceil_mode=True), maxima, max_gradient),
        ]:
            input = onnxnn.tensor(x.astype(dtype), requires_grad=True)
            weighted = pool(input) * onnxnn.tensor(weights.astype(dtype))
            weighted.sum().backward()
            tolerance = 8 * np.finfo(dtype).eps
            np.testing.assert_allclose(weighted.detach().numpy(), expected * weights, rtol=tolerance, atol=tolerance)
            np.testing.assert_allclose(input.grad.numpy(), expected_gradient, rtol=tolerance, atol=tolerance)


# ---------------------------------------------------------------- errors in PyTorch's words

ERROR_CASES = [
    (
        "max_pad_too_large",
        lambda: ops.max_pool2d(onnxnn.zeros(1, 1, 5, 5), 2, padding=2),
        RuntimeError,
        "pad should be at most half of effective kernel size",
    ),
    (
        "max_pad_within_the_dilated_kernel_but_not_the_kernel",
        lambda: ops.max_pool1d(onnxnn.zeros(1, 1, 5), 2, stride=1, padding=2, dilation=3),
        RuntimeError,
        "pad should be smaller than or equal to half of kernel size, but got pad=[2] and kernel_size=[2]",
    ),
    (
        "avg_pad_too_large",
        lambda: ops.avg_pool2d(onnxnn.zeros(1, 1, 5, 5), 3, padding=2),
        RuntimeError,
        "pad should be at most half of kernel size, but got pad=[2, 2] and kernel_size=[3, 3]",
    ),
    (
        "output_too_small",
        lambda: ops.max_pool2d(onnxnn.zeros(1, 3, 2, 2), 3),
        RuntimeError,
        "Given input size: (3x2x2). Calculated output size: (3x0x0). Output size is too small",
    ),
    (
        "input_rank",
        lambda: ops.max_pool2d(onnxnn.zeros(2, 3), 2),
        RuntimeError,
        "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got: [2, 3]",
    ),
    (
        "kernel_tuple_length",
        lambda: ops.max_pool2d(onnxnn.zeros(1, 1, 4, 4), (2, 2, 2)),
        RuntimeError,
        "max_pool2d: kernel_size must either be a single int, or a tuple of two ints",
    ),
    (
        "zero_stride",
        lambda: ops.avg_pool2d(onnxnn.zeros(1, 1, 4, 4), 2, stride=0),
        RuntimeError,
        "stride should be greater than zero",
    ),
    (
        "zero_divisor",
        lambda: ops.avg_pool2d(onnxnn.zeros(1, 1, 4, 4), 2, divisor_override=0),
        RuntimeError,
        "divisor must be not zero",
    ),
    (
        "adaptive_output_size_length",
        lambda: ops.adaptive_avg_pool2d(onnxnn.zeros(1, 1, 4, 4), (2, 2, 2)),
        RuntimeError,
        "adaptive_avg_pool2d: output_size must be 2",
    ),
    (
        "node_without_kernel_shape",
        lambda: apply_op("MaxPool", (onnxnn.zeros(1, 1, 4, 4),), {}),
        RuntimeError,
        "MaxPool: kernel_shape None must give one size per spatial axis",
    ),
]


@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[case[0] for case in ERROR_CASES])
def test_errors_in_pytorch_words(case_id, call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)
