"""Conv and ConvTranspose gradients: finite differences, second order, and the weight and input
gradients against their float64 formulas (tap by tap, by columns, and wide layers).

onnxruntime's CPU provider has no float64 kernels for Conv or ConvTranspose, so gradients are checked
in float32 with :func:`check_gradients_float32` (conv_cases.py; wider eps and tolerance; exact for
these linear ops up to rounding). Shape rules, values and errors are in test_conv_ops_values.py.
"""

from __future__ import annotations


import numpy as np
import pytest

import onnxnn
from onnxnn.runtime import ops
from onnxnn.runtime.realization import plan as executor_plan
from onnxnn.runtime.tensor import apply_op

from tolerances import accumulation_bound, assert_within, sum_bound

from .conv_cases import check_gradients_float32

_rng = np.random.default_rng(7)


def randn(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape)


# ---------------------------------------------------------------- gradients

GRADIENT_CASES = [
    # id, op type, attributes, input shape, weight shape, bias size
    ("conv1d_plain", "Conv", {}, (2, 2, 5), (3, 2, 3), 3),
    ("conv1d_stride2_uneven", "Conv", {"strides": [2]}, (1, 2, 6), (2, 2, 3), 2),
    ("conv1d_dilation2_pads", "Conv", {"dilations": [2], "pads": [2, 1]}, (2, 1, 6), (2, 1, 3), 2),
    ("conv2d_stride2_pad1", "Conv", {"strides": [2, 2], "pads": [1, 1, 1, 1]}, (1, 2, 5, 4), (2, 2, 3, 3), 2),
    (
        "conv2d_stride3_pads_not_dividing",
        "Conv",
        {"strides": [3, 2], "pads": [0, 1, 1, 0]},
        (1, 1, 6, 5),
        (2, 1, 2, 2),
        2,
    ),
    ("conv2d_dilation2", "Conv", {"dilations": [2, 2]}, (1, 2, 5, 5), (2, 2, 2, 2), 2),
    ("conv2d_groups2", "Conv", {"group": 2, "pads": [1, 0, 1, 0]}, (2, 4, 3, 3), (4, 2, 2, 2), 4),
    ("conv2d_depthwise", "Conv", {"group": 3, "strides": [2, 2]}, (1, 3, 4, 4), (3, 1, 2, 2), 3),
    ("conv2d_same_upper_stride2", "Conv", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 1, 4, 5), (2, 1, 2, 3), 2),
    ("conv2d_same_lower", "Conv", {"auto_pad": "SAME_LOWER"}, (1, 1, 4, 4), (1, 1, 2, 2), 1),
    (
        "conv3d_stride2_pad1",
        "Conv",
        {"strides": [2, 1, 2], "pads": [1, 0, 0, 1, 1, 0]},
        (1, 2, 3, 3, 4),
        (2, 2, 2, 2, 2),
        2,
    ),
    ("conv_transpose1d_plain", "ConvTranspose", {}, (2, 2, 3), (2, 3, 3), 3),
    (
        "conv_transpose1d_stride2_output_padding",
        "ConvTranspose",
        {"strides": [2], "output_padding": [1], "pads": [1, 1]},
        (1, 2, 4),
        (2, 2, 3),
        2,
    ),
    ("conv_transpose1d_output_shape", "ConvTranspose", {"strides": [2], "output_shape": [10]}, (1, 1, 4), (1, 2, 3), 2),
    (
        "conv_transpose1d_same_upper",
        "ConvTranspose",
        {"strides": [2], "auto_pad": "SAME_UPPER"},
        (1, 1, 3),
        (1, 1, 4),
        1,
    ),
    (
        "conv_transpose2d_stride2_pads",
        "ConvTranspose",
        {"strides": [2, 2], "pads": [1, 0, 0, 1]},
        (1, 2, 3, 3),
        (2, 2, 3, 2),
        2,
    ),
    (
        "conv_transpose2d_groups2_dilation2",
        "ConvTranspose",
        {"group": 2, "dilations": [2, 2]},
        (1, 4, 2, 2),
        (4, 1, 2, 2),
        2,
    ),
    ("conv_transpose3d_stride2", "ConvTranspose", {"strides": [2, 2, 1]}, (1, 2, 2, 2, 2), (2, 1, 2, 2, 2), 1),
    (
        "conv_transpose2d_depthwise_stride3",
        "ConvTranspose",
        {"group": 2, "strides": [3, 3], "output_padding": [2, 1]},
        (1, 2, 2, 2),
        (2, 1, 2, 2),
        2,
    ),
]


@pytest.mark.parametrize(
    "case_id, op_type, attrs, input_shape, weight_shape, bias_size",
    GRADIENT_CASES,
    ids=[case[0] for case in GRADIENT_CASES],
)
def test_gradients_match_finite_differences(case_id, op_type, attrs, input_shape, weight_shape, bias_size):
    # Conv and ConvTranspose are bilinear, so a wide eps is exact up to float32 rounding.
    check_gradients_float32(
        lambda x, w, b: apply_op(op_type, (x, w, b), attrs),
        [randn(*input_shape), randn(*weight_shape), randn(bias_size)],
        eps=0.25,
    )


def test_conv2d_gradient_through_the_tensor_function():
    check_gradients_float32(
        lambda x, w, b: ops.conv2d(x, w, b, stride=2, padding="valid", dilation=(1, 2)),
        [randn(2, 2, 5, 6), randn(3, 2, 2, 2), randn(3)],
        eps=0.25,
    )


def test_second_order_gradient_of_conv():
    # d/dw <d<conv(x, w), c>/dx, u> runs the gradient rule of the ConvTranspose that Conv's backward emitted.
    x0, c, u = randn(1, 2, 5, 5).astype(np.float32), randn(1, 2, 3, 3).astype(np.float32), randn(1, 2, 5, 5)

    def input_gradient_projection(w):
        with onnxnn.enable_grad():  # the finite differences evaluate this under no_grad
            x = onnxnn.tensor(x0, requires_grad=True)
            (grad_x,) = onnxnn.autograd.grad(
                ops.conv2d(x, w, stride=2, padding=1), x, onnxnn.tensor(c), create_graph=True
            )
            return (grad_x * onnxnn.tensor(u.astype(np.float32))).sum().reshape(1)

    check_gradients_float32(input_gradient_projection, [randn(2, 2, 3, 3)], eps=0.25)


def test_weight_gradient_of_a_sum_is_the_sum_of_input_patches():
    x = randn(2, 2, 5, 5).astype(np.float32)
    w = onnxnn.tensor(randn(3, 2, 3, 3).astype(np.float32), requires_grad=True)
    ops.conv2d(onnxnn.tensor(x), w).sum().backward()
    patches = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # (2, 2, 3, 3, 3, 3)
    expected = np.broadcast_to(patches.astype(np.float64).sum(axis=(0, 2, 3)), (3, 2, 3, 3))
    # Each element sums 2 * 3 * 3 input values (times a cotangent of ones).
    assert_within(w.grad.numpy(), expected, sum_bound(patches, axis=(0, 2, 3)) / 2)


def numpy_weight_gradient(x, g, kernel, strides, dilations, pads_begin, pads_end):
    """d<conv(x, w), g>/dw in float64: each tap's strided window of the padded input against ``g``."""
    rank = len(kernel)
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end)))
    result = np.zeros((g.shape[1], x.shape[1]) + tuple(kernel))
    magnitude = np.zeros_like(result)
    for offsets in np.ndindex(*kernel):
        window = padded[
            (slice(None), slice(None))
            + tuple(
                slice(o * d, o * d + (out - 1) * s + 1, s)
                for o, d, s, out in zip(offsets, dilations, strides, g.shape[2:])
            )
        ]
        axes = [0] + list(range(2, 2 + rank))
        result[(slice(None), slice(None)) + offsets] = np.tensordot(g, window, axes=(axes, axes))
        magnitude[(slice(None), slice(None)) + offsets] = np.tensordot(np.abs(g), np.abs(window), axes=(axes, axes))
    return result, magnitude


TAP_GEMM_CASES = [
    # id, input shape, kernel, strides, dilations, pads (begin + end)
    ("conv1d_stride2_pads", (2, 16, 9), (3,), (2,), (1,), (1, 2)),
    ("conv2d_3x3_pad1", (2, 16, 6, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("conv2d_stride2_uneven", (1, 16, 7, 6), (3, 2), (2, 3), (1, 1), (1, 0, 0, 1)),
    ("conv2d_dilation2", (1, 20, 7, 7), (2, 3), (1, 1), (2, 2), (0, 1, 0, 1)),
    ("conv2d_1x1_stride2", (3, 16, 5, 5), (1, 1), (2, 2), (1, 1), (0, 0, 0, 0)),
    ("conv3d_stride2", (1, 16, 4, 5, 4), (2, 2, 3), (2, 1, 2), (1, 1, 1), (0, 1, 1, 1, 0, 1)),
]


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, input_shape, kernel, strides, dilations, pads", TAP_GEMM_CASES, ids=[c[0] for c in TAP_GEMM_CASES]
)
def test_weight_gradient_of_many_channels_is_the_tap_by_tap_formula(
    executor_name, case_id, input_shape, kernel, strides, dilations, pads
):
    # With at least TAP_GEMM_MIN_CHANNELS input channels the rule takes one GEMM per kernel tap:
    # onnxnn's ConvWeightGradient node, its decomposition on onnxruntime and its kernel on the kernels.
    from onnxnn.runtime.ops.conv_gradients import TAP_GEMM_MIN_CHANNELS

    assert input_shape[1] >= TAP_GEMM_MIN_CHANNELS
    rank = len(kernel)
    x = randn(*input_shape).astype(np.float32)
    w = onnxnn.tensor(randn(3, input_shape[1], *kernel).astype(np.float32), requires_grad=True)
    attrs = {"strides": list(strides), "dilations": list(dilations), "pads": list(pads)}
    with onnxnn.set_executor(executor_name):
        y = apply_op("Conv", (onnxnn.tensor(x), w), attrs)
        g = randn(*y.shape).astype(np.float32)
        (y * onnxnn.tensor(g)).sum().backward()
        w.grad.numpy()
    expected, magnitude = numpy_weight_gradient(x, g, kernel, strides, dilations, pads[:rank], pads[rank:])
    terms = input_shape[0] * int(np.prod(y.shape[2:]))
    assert_within(w.grad.numpy(), expected, accumulation_bound(magnitude, terms + 1))


def numpy_input_gradient(g, w, input_spatial, strides, dilations, pads_begin):
    """d<conv(x, w), g>/dx in float64 (and the sum of the terms' magnitudes): each tap's products scattered back."""
    batch, channels = g.shape[0], w.shape[1]
    kernel = w.shape[2:]
    extent = [
        max(size + b, (out - 1) * s + (k - 1) * d + 1)
        for size, b, out, s, k, d in zip(input_spatial, pads_begin, g.shape[2:], strides, kernel, dilations)
    ]
    result, magnitude = np.zeros((batch, channels, *extent)), np.zeros((batch, channels, *extent))
    for offsets in np.ndindex(*kernel):
        taps = (slice(None), slice(None)) + offsets
        target = (slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (out - 1) * s + 1, s) for o, d, s, out in zip(offsets, dilations, strides, g.shape[2:])
        )
        result[target] += np.einsum("nm...,mc->nc...", g, w[taps])
        magnitude[target] += np.einsum("nm...,mc->nc...", np.abs(g), np.abs(w[taps]))
    crop = (slice(None), slice(None)) + tuple(slice(b, b + size) for b, size in zip(pads_begin, input_spatial))
    return result[crop], magnitude[crop]


COLUMN_GEMM_CASES = [
    # id, input shape, weight shape, strides, dilations, pads (begin + end)
    ("3x3_pad1", (2, 3, 5, 4), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("stride2_uneven_pads", (1, 2, 7, 6), (3, 2, 3, 2), (2, 3), (1, 1), (1, 0, 0, 1)),
    ("dilation2", (1, 2, 7, 7), (2, 2, 2, 3), (1, 1), (2, 2), (0, 1, 0, 1)),
    ("stride2_not_reaching_the_end", (2, 2, 6, 6), (3, 2, 3, 3), (2, 2), (1, 1), (0, 0, 0, 0)),
    ("1x1_stride2", (2, 3, 5, 5), (4, 3, 1, 1), (2, 2), (1, 1), (0, 0, 0, 0)),
]


@pytest.mark.parametrize(
    "case_id, input_shape, weight_shape, strides, dilations, pads",
    COLUMN_GEMM_CASES,
    ids=[c[0] for c in COLUMN_GEMM_CASES],
)
def test_input_gradient_by_columns_is_the_scatter_formula(
    case_id, input_shape, weight_shape, strides, dilations, pads, monkeypatch
):
    # A channel product of at least COLUMN_GEMM_MIN_CHANNEL_PRODUCT takes one GEMM and a Col2Im;
    # lowering it sends these small cases there too.
    from onnxnn.runtime.ops import conv_gradients as conv_ops

    monkeypatch.setattr(conv_ops, "COLUMN_GEMM_MIN_CHANNEL_PRODUCT", 1)
    x = onnxnn.tensor(randn(*input_shape).astype(np.float32), requires_grad=True)
    w = randn(*weight_shape).astype(np.float32)
    attrs = {"strides": list(strides), "dilations": list(dilations), "pads": list(pads)}
    y = apply_op("Conv", (x, onnxnn.tensor(w)), attrs)
    g = randn(*y.shape).astype(np.float32)
    (y * onnxnn.tensor(g)).sum().backward()
    assert any(node.op_type == "Col2Im" for node in _recorded_gradient_nodes(x, w, g, attrs))
    expected, magnitude = numpy_input_gradient(g, w.astype(np.float64), input_shape[2:], strides, dilations, pads[:2])
    terms = weight_shape[0] * int(np.prod(weight_shape[2:]))
    assert_within(x.grad.numpy(), expected, accumulation_bound(magnitude, terms))


def _recorded_gradient_nodes(x, w, g, attrs) -> list:
    """The nodes of the pending input gradient of ``<conv(x, w), g>`` (recorded, not run)."""
    x = onnxnn.tensor(x.detach().numpy(), requires_grad=True)
    y = apply_op("Conv", (x, onnxnn.tensor(w)), attrs)
    (gradient,) = onnxnn.autograd.grad((y * onnxnn.tensor(g)).sum(), x)
    return executor_plan([gradient._value]).nodes


def test_input_gradient_of_a_wide_layer_on_a_small_image():
    # 256 x 256 channels reach the column GEMM as they are (resnet's last stage at a small input).
    x = onnxnn.tensor(randn(2, 256, 3, 3).astype(np.float32), requires_grad=True)
    w = (randn(256, 256, 3, 3) / 48).astype(np.float32)
    g = randn(2, 256, 3, 3).astype(np.float32)
    (ops.conv2d(x, onnxnn.tensor(w), padding=1) * onnxnn.tensor(g)).sum().backward()
    expected, magnitude = numpy_input_gradient(g, w.astype(np.float64), (3, 3), (1, 1), (1, 1), (1, 1))
    assert_within(x.grad.numpy(), expected, accumulation_bound(magnitude, 256 * 9))


def test_input_gradient_of_a_wide_pointwise_layer_is_a_transposed_convolution_run_as_a_conv():
    # 1x1, stride 1, no padding: the ConvTranspose (which onnxnn's sessions write as the 1x1 Conv with
    # the weight transposed) beats the column GEMM even past COLUMN_GEMM_MIN_CHANNEL_PRODUCT.
    x = onnxnn.tensor(randn(2, 256, 4, 4).astype(np.float32), requires_grad=True)
    w = (randn(256, 256, 1, 1) / 16).astype(np.float32)
    g = randn(2, 256, 4, 4).astype(np.float32)
    attrs = {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
    op_types = {node.op_type for node in _recorded_gradient_nodes(x, w, g, attrs)}
    assert "ConvTranspose" in op_types and "Col2Im" not in op_types
    with onnxnn.set_executor("onnxruntime"):
        (ops.conv2d(x, onnxnn.tensor(w)) * onnxnn.tensor(g)).sum().backward()
        result = x.grad.numpy()
    expected, magnitude = numpy_input_gradient(g, w.astype(np.float64), (4, 4), (1, 1), (1, 1), (0, 0))
    assert_within(result, expected, accumulation_bound(magnitude, 256))
