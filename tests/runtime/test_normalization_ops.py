"""Normalization ops: LayerNormalization, GroupNormalization, InstanceNormalization, LRN, BatchNormalization
and Dropout nodes, and PyTorch's layer_norm / group_norm / instance_norm / local_response_norm.

Expected values come from numpy formulas below and from the ONNX backend node cases shipped with
the ``onnx`` package. LayerNormalization, GroupNormalization, BatchNormalization and Dropout run in
float64 in onnxruntime (float64 finite differences); InstanceNormalization and LRN only in float32.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import TRANSCENDENTAL_ULPS, assert_within, gamma, normalization_bound, rtol_for

import onnxnn
from onnxnn.runtime import ops
from onnxnn.runtime.realization import realize
from onnxnn.runtime.tensor import apply_op

from .conv_cases import check_gradients_float32, onnx_node_cases, replay_node

_rng = np.random.default_rng(5)


def randn(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape)


def normalize(x: np.ndarray, axes: tuple, eps: float) -> np.ndarray:
    mean = x.mean(axis=axes, keepdims=True)
    variance = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps)


def lrn_reference(x: np.ndarray, size: int, alpha: float, beta: float, k: float, before: int, after: int):
    """x / (k + alpha / size * sum of x^2 over channels [c - before, c + after])^beta."""
    squares = np.pad(x * x, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    energy = sum(squares[:, offset : offset + x.shape[1]] for offset in range(before + after + 1))
    return x / (k + alpha / size * energy) ** beta


# ---------------------------------------------------------------- the ONNX spec's node cases

RANDOM_DROPOUT_CASES = (
    "test_training_dropout",
    "test_training_dropout_default",
    "test_training_dropout_mask",
    "test_training_dropout_default_mask",  # masks from onnxruntime's own generator
    "test_dropout_random_old",
)  # the opset-7 ratio attribute

NODE_CASES = (
    onnx_node_cases("layernormalization", "LayerNormalization")
    + onnx_node_cases("batch_normalization", "BatchNormalization")
    + onnx_node_cases("instance_normalization", "InstanceNormalization")
    + onnx_node_cases("groupnormalization", "GroupNormalization")
    + onnx_node_cases("lrn", "LRN")
    + onnx_node_cases("dropout", "Dropout", skip=RANDOM_DROPOUT_CASES)
)


@pytest.mark.parametrize("node, inputs, outputs", NODE_CASES)
def test_onnx_backend_node_case(node, inputs, outputs):
    for actual, expected in zip(replay_node(node, inputs), outputs):
        # Stored results of onnx's reference implementation, summed in its own order: onnx's
        # backend-test rtol (1e-3, far above 2 gamma(n) for these cases' few dozen terms).
        np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5)


def test_random_dropout_node_keeps_and_scales_by_its_mask():
    x = randn(4, 5)
    output, mask = apply_op("Dropout", (onnxnn.tensor(x), onnxnn.tensor(0.25), onnxnn.tensor(True)))
    realize([output._value, mask._value])  # each run of the node draws a new mask
    assert mask.dtype == onnxnn.bool
    np.testing.assert_allclose(output.numpy(), np.where(mask.numpy(), x / 0.75, 0.0))


# ---------------------------------------------------------------- layer_norm


@pytest.mark.parametrize(
    "input_shape, normalized_shape, affine, eps",
    [
        ((2, 3, 4), [4], True, 1e-5),
        ((2, 3, 4), (3, 4), True, 1e-5),
        ((5, 6), (6,), False, 1e-3),
        ((2, 2, 3, 2), [2, 3, 2], True, 0.1),
    ],
)
def test_layer_norm_matches_numpy(input_shape, normalized_shape, affine, eps):
    x = randn(*input_shape)
    trailing = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    weight, bias = (randn(*trailing), randn(*trailing)) if affine else (None, None)
    result = ops.layer_norm(
        onnxnn.tensor(x),
        normalized_shape,
        None if weight is None else onnxnn.tensor(weight),
        None if bias is None else onnxnn.tensor(bias),
        eps,
    )
    expected = normalize(x, tuple(range(x.ndim - len(trailing), x.ndim)), eps)
    if affine:
        expected = expected * weight + bias
    # float64, at most 12 values normalized: normalization_bound's float64 budget is ~1e-14; the
    # constants leave two orders of magnitude more, and a wrong formula is off by O(1).
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6, atol=1e-9)
    assert result.dtype == onnxnn.float64


LAYER_NORM_GRADIENT_CASES = [
    ("last_axis", lambda x, w, b: ops.layer_norm(x, [4], w, b), [randn(2, 3, 4), randn(4), randn(4)]),
    ("last_two_axes", lambda x, w, b: ops.layer_norm(x, [3, 4], w, b), [randn(2, 3, 4), randn(3, 4), randn(3, 4)]),
    ("without_bias", lambda x, w: ops.layer_norm(x, [5], w), [randn(3, 5), randn(5)]),
    (
        "node_axis1_broadcast_scale",
        lambda x, w, b: apply_op("LayerNormalization", (x, w, b), {"axis": 1}, num_outputs=1),
        [randn(2, 3, 2), randn(2), randn(3, 2)],
    ),
]


@pytest.mark.parametrize(
    "case_id, function, inputs", LAYER_NORM_GRADIENT_CASES, ids=[case[0] for case in LAYER_NORM_GRADIENT_CASES]
)
def test_layer_norm_gradient_matches_finite_differences(case_id, function, inputs):
    check_gradients(function, inputs)


def test_layer_normalization_mean_and_inv_std_outputs_are_differentiable():
    def weighted_outputs(x, w):
        y, mean, inv_std = apply_op("LayerNormalization", (x, w), {"axis": -1})
        return (y * 0.5).sum(-1) + mean.to(x.dtype).reshape(-1) * 2.0 + inv_std.to(x.dtype).reshape(-1) * 3.0

    # Mean and InvStdDev are float32 (stash_type=1), so the differences need a wider step.
    check_gradients(weighted_outputs, [randn(3, 4), randn(4)], eps=1e-3, rtol=1e-3, atol=1e-4)


def _numpy_layer_norm_gradients(x, weight, cotangent, eps):
    """d sum(layer_norm(x) * cotangent) / d(x, weight, bias) over the last axis, in float64."""
    mean = x.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    x_hat = (x - mean) * inv_std
    g_hat = cotangent * weight
    grad_x = inv_std * (g_hat - g_hat.mean(-1, keepdims=True) - x_hat * (g_hat * x_hat).mean(-1, keepdims=True))
    return grad_x, (cotangent * x_hat).reshape(-1, x.shape[-1]).sum(0), cotangent.reshape(-1, x.shape[-1]).sum(0)


def test_float32_layer_norm_trains_from_the_nodes_own_statistics():
    rng = np.random.default_rng(5)
    x, weight, bias, cotangent = (rng.standard_normal(shape) for shape in [(4, 6, 8), (8,), (8,), (4, 6, 8)])
    tensors = [onnxnn.tensor(a.astype(np.float32), requires_grad=True) for a in (x, weight, bias)]
    output = ops.layer_norm(tensors[0], [8], tensors[1], tensors[2])
    assert output._value.node.num_outputs == 3  # Mean and InvStdDev kept for the gradient
    (output * onnxnn.tensor(cotangent.astype(np.float32))).sum().backward()
    # float32 rounding of 8-term means and of the inputs, amplified by at most a few unit-scale factors.
    for tensor, expected in zip(tensors, _numpy_layer_norm_gradients(x, weight, cotangent, 1e-5)):
        np.testing.assert_allclose(tensor.grad.numpy(), expected, rtol=1e-4, atol=1e-4)
    with onnxnn.no_grad():
        assert ops.layer_norm(tensors[0], [8], tensors[1], tensors[2])._value.node.num_outputs == 1


# ---------------------------------------------------------------- group_norm and instance_norm


@pytest.mark.parametrize("input_shape, groups", [((2, 4, 3), 2), ((1, 6, 2, 2), 3), ((3, 4), 4)])
def test_group_norm_matches_numpy(input_shape, groups):
    x, weight, bias = randn(*input_shape), randn(input_shape[1]), randn(input_shape[1])
    result = ops.group_norm(onnxnn.tensor(x), groups, onnxnn.tensor(weight), onnxnn.tensor(bias), eps=1e-5)
    grouped = x.reshape(input_shape[0], groups, -1)
    expected = normalize(grouped, (2,), 1e-5).reshape(input_shape)
    expected = expected * weight.reshape((1, -1) + (1,) * (x.ndim - 2)) + bias.reshape((1, -1) + (1,) * (x.ndim - 2))
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("input_shape, groups", [((2, 4, 3), 2), ((1, 6, 2, 2), 3), ((2, 3, 2), 1)])
def test_group_norm_gradient_matches_finite_differences(input_shape, groups):
    check_gradients(
        lambda x, w, b: ops.group_norm(x, groups, w, b),
        [randn(*input_shape), randn(input_shape[1]), randn(input_shape[1])],
    )


def test_instance_norm_matches_numpy_and_updates_running_statistics():
    x, weight, bias = randn(2, 3, 4, 5).astype(np.float32), randn(3).astype(np.float32), randn(3).astype(np.float32)
    running_mean, running_var = onnxnn.zeros(3), onnxnn.ones(3)
    result = ops.instance_norm(
        onnxnn.tensor(x), running_mean, running_var, onnxnn.tensor(weight), onnxnn.tensor(bias), momentum=0.1, eps=1e-5
    )
    x64 = x.astype(np.float64)
    normalized = normalize(x64, (2, 3), 1e-5)
    w, b = weight.reshape(1, 3, 1, 1).astype(np.float64), bias.reshape(1, 3, 1, 1).astype(np.float64)
    # The scale and shift add a product and a sum to the normalized values' own bound.
    assert_within(
        result.numpy(),
        normalized * w + b,
        np.abs(w) * normalization_bound(x64, (2, 3), 1e-5) + 2 * gamma(2) * (np.abs(normalized * w) + np.abs(b)),
    )
    # Statistics over 20 values per instance, averaged over 2 instances, then blended with
    # momentum: 20 + 2 + 3 roundings relative to the magnitudes summed (the variance's squares
    # and a centered or E[x^2] - mean^2 form included through mean(x^2) + mean^2).
    mean_scale = 0.1 * np.abs(x64).mean(axis=(2, 3)).mean(0)
    assert_within(running_mean.numpy(), 0.1 * x64.mean(axis=(2, 3)).mean(0), 2 * gamma(25) * mean_scale)
    var_scale = 0.1 * (20 / 19) * ((x64**2).mean(axis=(2, 3)) + x64.mean(axis=(2, 3)) ** 2).mean(0) + 0.9
    assert_within(running_var.numpy(), 0.9 + 0.1 * x64.var(axis=(2, 3), ddof=1).mean(0), 2 * gamma(28) * var_scale)


def test_instance_norm_with_running_statistics_instead_of_input_statistics():
    x = randn(2, 3, 4).astype(np.float32)
    mean, variance = randn(3).astype(np.float32), np.abs(randn(3)).astype(np.float32) + 0.5
    result = ops.instance_norm(onnxnn.tensor(x), onnxnn.tensor(mean), onnxnn.tensor(variance), use_input_stats=False)
    shift = mean.reshape(1, 3, 1).astype(np.float64)
    spread = np.sqrt(variance.reshape(1, 3, 1).astype(np.float64) + 1e-5)
    expected = (x - shift) / spread
    # A subtraction, a sum, a square root and a division (or a product with the reciprocal), each
    # relative to |x| + |mean| over the spread.
    assert_within(result.numpy(), expected, 2 * gamma(4 + TRANSCENDENTAL_ULPS) * (np.abs(x) + np.abs(shift)) / spread)


@pytest.mark.parametrize("input_shape", [(2, 3, 5), (1, 2, 3, 3)])
def test_instance_normalization_gradient_matches_finite_differences(input_shape):
    check_gradients_float32(
        lambda x, w, b: apply_op("InstanceNormalization", (x, w, b), {"epsilon": 1e-3}),
        [randn(*input_shape), randn(input_shape[1]), randn(input_shape[1])],
        eps=1e-2,
        rtol=2e-2,
        atol=3e-3,
    )


def test_instance_norm_in_float64_matches_numpy_and_finite_differences():
    x, weight, bias = randn(2, 3, 4), randn(3), randn(3)
    result = ops.instance_norm(onnxnn.tensor(x), weight=onnxnn.tensor(weight), bias=onnxnn.tensor(bias))
    expected = normalize(x, (2,), 1e-5) * weight.reshape(1, 3, 1) + bias.reshape(1, 3, 1)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10, atol=1e-12)
    check_gradients(lambda x, w, b: ops.instance_norm(x, weight=w, bias=b), [x, weight, bias])


# ---------------------------------------------------------------- local response normalization


@pytest.mark.parametrize(
    "input_shape, size",
    [
        ((2, 5, 3, 3), 3),  # one ONNX LRN node: the windows agree for odd sizes
        ((2, 6, 2, 3), 4),  # PyTorch's window for even sizes is ONNX's mirrored
        ((2, 5, 4), 3),  # 3-D inputs, which onnxruntime's LRN kernel does not take
        ((1, 4, 2, 2, 2), 2),
    ],
)
def test_local_response_norm_matches_pytorch_formula(input_shape, size):
    x = randn(*input_shape).astype(np.float32)
    result = ops.local_response_norm(onnxnn.tensor(x), size, alpha=0.3, beta=0.75, k=2.0)
    expected = lrn_reference(x.astype(np.float64), size, 0.3, 0.75, 2.0, size // 2, (size - 1) // 2)
    # x / (k + alpha / size * sum of `size` squares) ** beta: positive terms only, so a relative
    # bound: the window's squares and sum, the scaling and k, a power (exp and log: ulps each),
    # the division.
    np.testing.assert_allclose(result.numpy(), expected, rtol=rtol_for(size + 4 + 2 * TRANSCENDENTAL_ULPS), atol=0)


def test_local_response_norm_in_float64_matches_pytorch_formula():
    x = randn(2, 5, 2, 2)
    result = ops.local_response_norm(onnxnn.tensor(x), 3, alpha=0.3, beta=0.75, k=2.0)
    np.testing.assert_allclose(result.numpy(), lrn_reference(x, 3, 0.3, 0.75, 2.0, 1, 1), rtol=1e-12)


def test_lrn_gradient_matches_finite_differences():
    check_gradients_float32(
        lambda x: apply_op("LRN", (x,), {"size": 3, "alpha": 0.5, "beta": 0.75, "bias": 2.0}),
        [randn(2, 4, 2, 2)],
        eps=1e-2,
        rtol=2e-2,
        atol=2e-3,
    )


def test_local_response_norm_gradient_through_elementwise_ops():
    check_gradients(lambda x: ops.local_response_norm(x, 2, alpha=0.5, beta=0.75, k=2.0), [randn(2, 4, 3)])


# ---------------------------------------------------------------- BatchNormalization nodes


def _batch_norm_node(training: bool):
    attrs = {"epsilon": 1e-3, "training_mode": 1} if training else {"epsilon": 1e-3}

    def function(x, scale, bias, mean, variance):
        # onnxruntime insists on all three outputs (Y and the running statistics) in training mode.
        outputs = apply_op("BatchNormalization", (x, scale, bias, mean, variance), attrs)
        return outputs[0] if training else outputs

    return function


def test_batch_normalization_inference_gradient_matches_finite_differences():
    inputs = [randn(2, 3, 2, 2), randn(3), randn(3), randn(3), np.abs(randn(3)) + 0.5]
    check_gradients(_batch_norm_node(False), inputs, requires_grad=[True, True, True, False, False])


def test_batch_normalization_training_gradient_matches_finite_differences():
    # nn_ops.py's rule hands training_mode=1 nodes to normalization.batch_normalization_training_grad.
    inputs = [randn(3, 2, 2, 2), randn(2), randn(2), randn(2), np.abs(randn(2)) + 0.5]
    check_gradients(_batch_norm_node(True), inputs, requires_grad=[True, True, True, False, False])


# ---------------------------------------------------------------- Dropout nodes


def test_dropout_node_in_inference_is_the_identity_with_a_full_mask():
    x = onnxnn.tensor(randn(3, 4), requires_grad=True)
    output, mask = apply_op("Dropout", (x, onnxnn.tensor(0.5)))
    assert mask.numpy().all()
    (output * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 2.0))


@pytest.mark.parametrize("with_mask_output", [True, False], ids=["mask_output", "no_mask_output"])
def test_dropout_node_in_training_scales_the_kept_gradients(with_mask_output):
    x = onnxnn.tensor(np.abs(randn(6, 5)) + 0.1, requires_grad=True)
    outputs = apply_op(
        "Dropout",
        (x, onnxnn.tensor(0.4, dtype=onnxnn.float64), onnxnn.tensor(True)),
        num_outputs=2 if with_mask_output else 1,
    )
    output = outputs[0] if with_mask_output else outputs
    output.backward(onnxnn.ones(6, 5, dtype=onnxnn.float64))
    kept = output.detach().numpy() != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.6)


def test_dropout_node_gradient_matches_finite_differences_when_nothing_drops():
    check_gradients(
        lambda x: apply_op(
            "Dropout", (x, onnxnn.tensor(0.0, dtype=onnxnn.float64), onnxnn.tensor(True)), num_outputs=1
        ),
        [randn(3, 4)],
    )


# ---------------------------------------------------------------- errors in PyTorch's words

ERROR_CASES = [
    (
        "layer_norm_shape",
        lambda: ops.layer_norm(onnxnn.zeros(2, 3), [4]),
        RuntimeError,
        "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[2, 3]",
    ),
    (
        "layer_norm_weight",
        lambda: ops.layer_norm(onnxnn.zeros(2, 4), [4], onnxnn.ones(3)),
        RuntimeError,
        "Expected weight to be of same shape as normalized_shape, but got weight of shape [3] and "
        "normalized_shape = [4]",
    ),
    (
        "group_norm_groups",
        lambda: ops.group_norm(onnxnn.zeros(2, 5, 3), 2),
        RuntimeError,
        "Expected number of channels in input to be divisible by num_groups, but got input of shape [2, 5, 3] and "
        "num_groups=2",
    ),
    (
        "local_response_norm_rank",
        lambda: ops.local_response_norm(onnxnn.zeros(2, 3), 2),
        ValueError,
        "Expected 3D or higher dimensionality input (got 2 dimensions)",
    ),
    (
        "instance_norm_without_running_statistics",
        lambda: ops.instance_norm(onnxnn.zeros(2, 3, 4), use_input_stats=False),
        RuntimeError,
        "Expected running_mean and running_var to be defined when use_input_stats is false",
    ),
    # PyTorch batch-normalizes (1, N * C, ...) with the statistics repeated N times: its counts are
    # N times the channels' and the tensors', running statistics first, then weight and bias.
    (
        "instance_norm_running_mean_size",
        lambda: ops.instance_norm(onnxnn.zeros(2, 3, 4), onnxnn.zeros(4), onnxnn.ones(4)),
        RuntimeError,
        "running_mean should contain 6 elements not 8",
    ),
    (
        "instance_norm_running_mean_size_with_running_statistics",
        lambda: ops.instance_norm(onnxnn.zeros(2, 3, 4), onnxnn.zeros(4), onnxnn.ones(4), use_input_stats=False),
        RuntimeError,
        "running_mean should contain 6 elements not 8",
    ),
    (
        "instance_norm_running_var_size",
        lambda: ops.instance_norm(onnxnn.zeros(2, 3, 4), onnxnn.zeros(3), onnxnn.ones(2)),
        RuntimeError,
        "running_var should contain 6 elements not 4",
    ),
    (
        "instance_norm_running_var_alone_of_another_size",
        lambda: ops.instance_norm(onnxnn.zeros(1, 3, 4), None, onnxnn.ones(6)),
        RuntimeError,
        "running_var should contain 3 elements not 6",
    ),
    (
        "instance_norm_running_statistics_before_weight",
        lambda: ops.instance_norm(onnxnn.zeros(2, 3, 4), onnxnn.zeros(1), onnxnn.ones(1), onnxnn.ones(5)),
        RuntimeError,
        "running_mean should contain 6 elements not 2",
    ),
    (
        "instance_norm_weight_size",
        lambda: ops.instance_norm(onnxnn.zeros(2, 3, 4), weight=onnxnn.ones(4)),
        RuntimeError,
        "weight should contain 6 elements not 8",
    ),
    (
        "instance_norm_bias_size",
        lambda: ops.instance_norm(onnxnn.zeros(2, 3, 4), bias=onnxnn.ones(4)),
        RuntimeError,
        "bias should contain 6 elements not 8",
    ),
    (
        "layer_normalization_node_scale",
        lambda: apply_op("LayerNormalization", (onnxnn.zeros(2, 4), onnxnn.ones(3))),
        RuntimeError,
        "LayerNormalization: Scale of shape [3] does not broadcast to the normalized shape [4]",
    ),
]


@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[case[0] for case in ERROR_CASES])
def test_errors_in_pytorch_words(case_id, call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)


# ---------------------------------------------------------------- LpNormalization, MeanVarianceNormalization
# Nodes imported models contain: forward values from ONNX's backend cases (its reference
# implementation), gradients from finite differences in float64 on onnxnn's kernels (onnxruntime
# has no float64 LpNormalization or MeanVarianceNormalization kernels).

IMPORTED_NORMALIZATION_CASES = onnx_node_cases("lpnormalization", "LpNormalization")


@pytest.mark.parametrize("node, inputs, outputs", IMPORTED_NORMALIZATION_CASES)
def test_imported_normalization_node_case(node, inputs, outputs):
    with onnxnn.set_executor("kernels"):
        for actual, expected in zip(replay_node(node, inputs), outputs):
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_mean_variance_normalization_matches_onnx_definition():
    x = randn(2, 3, 2, 2).astype(np.float32)
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    expected = (x - mean) / (np.sqrt((x * x).mean(axis=(0, 2, 3), keepdims=True) - mean * mean) + 1e-9)
    with onnxnn.set_executor("kernels"):
        actual = apply_op("MeanVarianceNormalization", (onnxnn.tensor(x),)).numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


IMPORTED_GRADIENT_CASES = [
    ("lp_p2_last", "LpNormalization", {}, [randn(3, 4)]),
    ("lp_p1_axis0", "LpNormalization", {"p": 1, "axis": 0}, [randn(3, 4)]),
    ("lp_p2_axis1", "LpNormalization", {"p": 2, "axis": 1}, [randn(2, 3, 2)]),
    ("mvn_default_axes", "MeanVarianceNormalization", {}, [randn(2, 3, 2, 2)]),
    ("mvn_axis1", "MeanVarianceNormalization", {"axes": [1]}, [randn(2, 3, 2)]),
]


@pytest.mark.parametrize(
    "case_id, op_type, attrs, inputs", IMPORTED_GRADIENT_CASES, ids=[case[0] for case in IMPORTED_GRADIENT_CASES]
)
def test_imported_normalization_gradient_matches_finite_differences(case_id, op_type, attrs, inputs):
    with onnxnn.set_executor("kernels"):
        check_gradients(lambda *operands: apply_op(op_type, operands, attrs), inputs)


def test_lp_normalization_of_a_zero_vector_is_zero_with_zero_gradient():
    x = onnxnn.tensor(np.array([[0.0, 0.0], [3.0, 4.0]]), requires_grad=True)
    with onnxnn.set_executor("kernels"):
        y = apply_op("LpNormalization", (x,), {"axis": 1})
        y.backward(onnxnn.ones(2, 2, dtype=onnxnn.float64))
    np.testing.assert_allclose(y.detach().numpy(), [[0, 0], [0.6, 0.8]], rtol=1e-15)
    np.testing.assert_array_equal(x.grad.numpy()[0], [0.0, 0.0])


def test_imported_rms_normalization_trains_through_its_function_body():
    # RMSNormalization (opset 23) is newer than onnxnn's opset 21: the importer runs its ONNX body
    # (statistics in float64 with stash_type DOUBLE; the default stashes them in float32).
    from onnx import TensorProto, helper, numpy_helper

    from onnxnn.import_ import from_onnx

    scale = randn(4)
    graph = helper.make_graph(
        [helper.make_node("RMSNormalization", ["x", "scale"], ["y"], epsilon=0.25, stash_type=TensorProto.DOUBLE)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3, 4])],
        initializer=[numpy_helper.from_array(scale, "scale")],
    )
    module = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]))
    x = randn(3, 4)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 0.25) * scale
    np.testing.assert_allclose(module(onnxnn.tensor(x)).detach().numpy(), expected, rtol=1e-12)
    check_gradients(module, [x])


# A group whose mean is large against its spread: onnxruntime's GroupNormalization (ONNX's function
# body, E[x^2] - E[x]^2 in float32) cancelled there (36% off, or NaN); the variance is taken of the
# centered values. The bound: the float32 mean of n values errs by gamma(n + 1) |mean|, which the
# centered values carry, divided by the standard deviation; four times that covers the rest.
OFFSET_GROUPS = [
    ("two_values", np.array([[10.0, 10.001]], np.float32)),
    ("four_values_near_100", (100 + 0.01 * np.array([[[1.0], [-1.0], [0.5], [-0.25]]])).astype(np.float32)),
]


def _one_group_normalized(x: np.ndarray) -> tuple[np.ndarray, float]:
    """The exact normalization of ``x`` as one group per sample (float64), and the bound above."""
    x64 = x.astype(np.float64).reshape(x.shape[0], 1, -1)
    std = np.sqrt(x64.var(axis=2, keepdims=True) + 1e-5)
    expected = ((x64 - x64.mean(axis=2, keepdims=True)) / std).reshape(x.shape)
    return expected, 4 * gamma(x64.shape[2] + 1, np.float32) * np.abs(x64).max() / std.min()


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("x", [case[1] for case in OFFSET_GROUPS], ids=[case[0] for case in OFFSET_GROUPS])
def test_group_norm_of_a_group_far_from_zero(executor, x):
    expected, bound = _one_group_normalized(x)
    with onnxnn.set_executor(executor):
        result = ops.group_norm(onnxnn.tensor(x), 1).numpy()
    np.testing.assert_allclose(result, expected, rtol=0, atol=bound)


def test_an_exported_group_norm_serves_a_group_far_from_zero():
    import onnxruntime

    from onnxnn.export import to_onnx

    x = OFFSET_GROUPS[0][1]
    proto = to_onnx(onnxnn.nn.GroupNorm(1, 1).eval(), (onnxnn.tensor(x[:, None, :]),), input_names=["x"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (served,) = session.run(None, {"x": x[:, None, :]})
    expected, bound = _one_group_normalized(x)
    np.testing.assert_allclose(served[:, 0, :], expected, rtol=0, atol=bound)
