"""PyTorch's semantics of layers at edges a differential sweep found: flatten's argument checks, float64
LayerNorm gradients, mixed-dtype BatchNorm, ConvTranspose with output_padding past the stride on
onnxruntime, activation gradients at NaN, empty batches, EmbeddingBag on empty input, float64 nearest
upsampling's source indices, and the errors PyTorch raises. Expectations from numpy formulas, finite
differences and PyTorch's documented rules.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.kernels import compiled_convolutions, compiled_normalization
from gradcheck import check_gradients

EXECUTORS = ["kernels", "onnxruntime"]


# ---------------------------------------------------------------- flatten


@pytest.mark.parametrize(
    "call",
    [
        lambda x: nn.Flatten(2, 1)(x),
        lambda x: onnxnn.flatten(x, 2, 1),
        lambda x: x.flatten(2, 1),
        lambda x: x.flatten(-1, 1),
    ],
    ids=["module", "function", "method", "negative_start"],
)
def test_flatten_with_start_after_end_raises(call):
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        call(onnxnn.zeros(2, 3, 4))


def test_flatten_of_a_0d_tensor_takes_dims_0_and_minus_1_only():
    # PyTorch wraps both dims against a 0-d tensor's range [-1, 0] first: flatten() gives shape (1,),
    # nn.Flatten()'s default start_dim=1 is out of range.
    scalar = onnxnn.tensor(1.5)
    for dims in [(), (0, -1), (0, 0), (-1, 0)]:
        result = onnxnn.flatten(scalar, *dims)
        assert tuple(result.shape) == (1,) and result.tolist() == [1.5]
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1"):
        nn.Flatten()(scalar)
    with pytest.raises(IndexError):
        scalar.flatten(0, 1)


def test_flatten_of_one_dim_keeps_the_shape():
    assert tuple(onnxnn.zeros(2, 3, 4).flatten(1, 1).shape) == (2, 3, 4)
    assert tuple(onnxnn.zeros(2, 3, 4).flatten(1, -2).shape) == (2, 3, 4)


# ---------------------------------------------------------------- LayerNorm in float64


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("eps", [0.5, 2.0**-10, 1e-5])
def test_float64_layer_norm_gradients_keep_float64_accuracy(executor, eps):
    # eps = 0.5 and 2**-10 are exact in float32, so the one-node form runs; its statistics outputs
    # are float32 (stash_type=1), and a gradient from them would be off by ~1e-7.
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((6, 32)), rng.standard_normal((6, 32))
    weight, bias = rng.standard_normal(32), rng.standard_normal(32)
    centered = x - x.mean(-1, keepdims=True)
    inverse_std = 1 / np.sqrt((centered**2).mean(-1, keepdims=True) + eps)
    x_hat = centered * inverse_std
    g_hat = g * weight
    expected_x = inverse_std * (g_hat - g_hat.mean(-1, keepdims=True) - x_hat * (g_hat * x_hat).mean(-1, keepdims=True))
    with onnxnn.set_executor(executor):
        inputs = onnxnn.tensor(x, requires_grad=True)
        module = nn.LayerNorm(32, eps=eps).double()
        module.weight.data = onnxnn.tensor(weight)
        module.bias.data = onnxnn.tensor(bias)
        output = module(inputs)
        (output * onnxnn.tensor(g)).sum().backward()
        np.testing.assert_allclose(output.detach().numpy(), x_hat * weight + bias, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(inputs.grad.numpy(), expected_x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(module.weight.grad.numpy(), (g * x_hat).sum(0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(module.bias.grad.numpy(), g.sum(0), rtol=1e-12, atol=1e-12)


def test_float64_layer_norm_passes_finite_differences_with_a_float32_exact_eps():
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal(5)]
    check_gradients(lambda x, w, b: F.layer_norm(x, [5], w, b, eps=0.25), arrays, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------- BatchNorm on 16-bit input, float32 parameters


@pytest.mark.parametrize("dtype, tolerance", [(onnxnn.float16, 1e-2), (onnxnn.bfloat16, 6e-2)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_with_float32_parameters_keeps_a_16_bit_input_dtype(dtype, tolerance, training):
    # PyTorch's mixed-type batch_norm: the output in the input's dtype, the running statistics and the
    # parameters' gradients in float32.
    rng = np.random.default_rng(2)
    module = nn.BatchNorm2d(3).train(training)
    weight, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    module.weight.data = onnxnn.tensor(weight)
    module.bias.data = onnxnn.tensor(bias)
    inputs = onnxnn.tensor(rng.standard_normal((2, 3, 4, 4)).astype(np.float32)).to(dtype).requires_grad_()
    output = module(inputs)
    assert output.dtype is dtype
    assert module.running_mean.dtype is onnxnn.float32 and module.running_var.dtype is onnxnn.float32
    x = inputs.detach().to(onnxnn.float32).numpy().astype(np.float64)
    if training:
        mean, variance = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    else:
        mean, variance = np.zeros((1, 3, 1, 1)), np.ones((1, 3, 1, 1))
    expected = (x - mean) / np.sqrt(variance + 1e-5) * weight.reshape(1, 3, 1, 1) + bias.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(output.detach().to(onnxnn.float32).numpy(), expected, rtol=tolerance, atol=tolerance)
    output.to(onnxnn.float32).sum().backward()
    assert inputs.grad.dtype is dtype
    assert module.weight.grad.dtype is onnxnn.float32 and module.bias.grad.dtype is onnxnn.float32
    np.testing.assert_allclose(module.bias.grad.numpy(), np.full(3, 32.0), rtol=tolerance)


# ---------------------------------------------------------------- ConvTranspose with output_padding >= stride


def _conv_transpose_reference(x, w, bias, stride, padding, output_padding, dilation):
    """PyTorch's conv_transpose (groups=1): each input position adds ``x * w`` at ``i * stride + k * dilation
    - padding``; ``output_padding`` extends the end."""
    rank = x.ndim - 2
    kernel = w.shape[2:]
    output = [
        (size - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
        for size, k in zip(x.shape[2:], kernel)
    ]
    canvas = np.zeros(x.shape[:1] + w.shape[1:2] + tuple(o + 2 * padding for o in output))
    for offset in itertools.product(*(range(k) for k in kernel)):
        contribution = np.einsum("nc...,co->no...", x, w[(slice(None), slice(None)) + offset])
        target = tuple(
            slice(k * dilation, k * dilation + (size - 1) * stride + 1, stride) for k, size in zip(offset, x.shape[2:])
        )
        canvas[(slice(None), slice(None)) + target] += contribution
    result = canvas[(slice(None), slice(None)) + tuple(slice(padding, padding + o) for o in output)]
    return result + bias.reshape((1, -1) + (1,) * rank)


def _conv_transpose_input_gradient(g, w, input_spatial, stride, padding, dilation):
    """The adjoint of ``_conv_transpose_reference`` in x: each input position reads ``g * w`` back."""
    rank = g.ndim - 2
    padded = np.zeros(g.shape[:2] + tuple(s + 2 * padding + 2 * dilation * k for s, k in zip(g.shape[2:], w.shape[2:])))
    padded[(slice(None), slice(None)) + tuple(slice(padding, padding + s) for s in g.shape[2:])] = g
    gradient = np.zeros((g.shape[0], w.shape[0]) + tuple(input_spatial))
    for offset in itertools.product(*(range(k) for k in w.shape[2:])):
        source = tuple(
            slice(k * dilation, k * dilation + (size - 1) * stride + 1, stride)
            for k, size in zip(offset, input_spatial)
        )
        gradient += np.einsum(
            "no...,co->nc...", padded[(slice(None), slice(None)) + source], w[(slice(None), slice(None)) + offset]
        )
    assert rank == len(input_spatial)
    return gradient


CONV_TRANSPOSE_CASES = [
    # (stride, padding, output_padding, dilation): output_padding >= stride, < dilation (PyTorch's bound)
    (1, 0, 1, 2),
    (1, 1, 1, 2),
    (2, 0, 2, 3),
    (2, 1, 2, 3),
    (1, 0, 2, 3),
    (2, 2, 3, 4),
]


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("stride, padding, output_padding, dilation", CONV_TRANSPOSE_CASES)
def test_conv_transpose_with_output_padding_past_the_stride_runs_on_onnxruntime(
    rank, with_bias, stride, padding, output_padding, dilation
):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3) + (5,) * rank).astype(np.float32)
    w = rng.standard_normal((3, 4) + (3,) * rank).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    expected = _conv_transpose_reference(
        x.astype(np.float64),
        w.astype(np.float64),
        bias if with_bias else np.zeros(4),
        stride,
        padding,
        output_padding,
        dilation,
    )
    function = getattr(F, f"conv_transpose{rank}d")
    with onnxnn.set_executor("onnxruntime"):
        inputs = onnxnn.tensor(x, requires_grad=True)
        output = function(
            inputs,
            onnxnn.tensor(w),
            onnxnn.tensor(bias) if with_bias else None,
            stride,
            padding,
            output_padding,
            1,
            dilation,
        )
        np.testing.assert_allclose(output.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
        g = rng.standard_normal(expected.shape).astype(np.float32)
        output.backward(onnxnn.tensor(g))
        expected_gradient = _conv_transpose_input_gradient(
            g.astype(np.float64), w.astype(np.float64), x.shape[2:], stride, padding, dilation
        )
        np.testing.assert_allclose(inputs.grad.numpy(), expected_gradient, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("stride, padding, output_padding, dilation", CONV_TRANSPOSE_CASES)
def test_conv_transpose_with_output_padding_past_the_stride_gradients(stride, padding, output_padding, dilation):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((1, 2, 3)), rng.standard_normal((2, 2, 3)), rng.standard_normal(2)]
    check_gradients(lambda x, w, b: F.conv_transpose1d(x, w, b, stride, padding, output_padding, 1, dilation), arrays)
    expected = _conv_transpose_reference(*arrays, stride, padding, output_padding, dilation)
    output = F.conv_transpose1d(*(onnxnn.tensor(a) for a in arrays), stride, padding, output_padding, 1, dilation)
    np.testing.assert_allclose(output.numpy(), expected, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------- activation gradients at NaN

SPECIAL_INPUTS = np.array([np.nan, 1.0, -1.0, np.inf, -np.inf, 0.0, -0.0, -3.0, 3.0, -4.0, 2.5])
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _derivative(name: str, x: np.ndarray) -> np.ndarray:
    """PyTorch's backward formulas (threshold_backward, elu_backward, hardswish_backward,
    hardsigmoid_backward): the comparison picks the branch, so a NaN takes the one its comparison fails to."""
    with np.errstate(invalid="ignore", over="ignore"):
        if name == "relu":  # x <= 0 ? 0 : g
            return np.where(x <= 0, 0.0, 1.0)
        if name == "elu":  # x <= 0 ? g * alpha * exp(x) : g
            return np.where(x <= 0, np.exp(x), 1.0)
        if name == "selu":
            return np.where(x <= 0, SELU_SCALE * SELU_ALPHA * np.exp(x), SELU_SCALE)
        if name == "celu":  # alpha 0.5: x <= 0 ? g * exp(x / alpha) : g
            return np.where(x <= 0, np.exp(x / 0.5), 1.0)
        if name == "hardswish":  # x <= -3 ? 0 : x < 3 ? g * (x / 3 + 1 / 2) : g
            return np.where(x <= -3, 0.0, np.where(x < 3, x / 3 + 0.5, 1.0))
        assert name == "hardsigmoid"  # -3 < x < 3 ? g / 6 : 0
        return np.where((x > -3) & (x < 3), 1 / 6, 0.0)


ACTIVATIONS = {
    "relu": nn.ReLU(),
    "elu": nn.ELU(),
    "selu": nn.SELU(),
    "celu": nn.CELU(0.5),
    "hardswish": nn.Hardswish(),
    "hardsigmoid": nn.Hardsigmoid(),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_gradients_follow_pytorch_at_nan_and_the_kinks(executor, dtype, name):
    with onnxnn.set_executor(executor):
        inputs = onnxnn.tensor(SPECIAL_INPUTS.astype(dtype), requires_grad=True)
        ACTIVATIONS[name](inputs).sum().backward()
        # float32's rtol: Elu's rule reads exp(x) - 1 back from the output, exp(-4) ~ 0.018 to within an ulp of 1.
        rtol = 2e-5 if dtype is np.float32 else 1e-12
        np.testing.assert_allclose(inputs.grad.numpy(), _derivative(name, SPECIAL_INPUTS), rtol=rtol, atol=0)


def _relu_output_with_specials(size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    y = np.maximum(rng.standard_normal(size), 0).astype(np.float32)
    y[:5] = [np.nan, 0.0, -0.0, np.inf, 1.0]
    return y, rng.standard_normal(size).astype(np.float32)


# Activations whose gradient is one node reading their output (ReluGradient, HardtanhGradient), and
# their bounds: PyTorch's threshold_backward and hardtanh_backward give 0 where the input is at or
# beyond a bound, else the gradient, NaN included.
CLAMPING = {
    "relu": (F.relu, (0.0, None)),
    "relu6": (F.relu6, (0.0, 6.0)),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.5), (-0.5, 0.5)),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("size", [11, 1 << 17], ids=["small", "compiled_loop_size"])
@pytest.mark.parametrize("name", CLAMPING)
def test_a_clamping_activations_gradient_follows_pytorch_at_nan_and_the_bounds(executor, size, name):
    # The numpy kernels, the compiled loops and the decompositions alike.
    function, (low, high) = CLAMPING[name]
    x, g = _relu_output_with_specials(size)
    x = x * np.float32(8) - np.float32(2)  # values beyond either bound
    x[:8] = [np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, low, low if high is None else high]
    with onnxnn.set_executor(executor):
        inputs = onnxnn.tensor(x, requires_grad=True)
        function(inputs).backward(onnxnn.tensor(g))
        outside = x <= low if high is None else (x <= low) | (x >= high)
        np.testing.assert_array_equal(inputs.grad.numpy(), np.where(outside, np.float32(0), g))


@pytest.mark.skipif(not compiled_normalization.available(), reason="the compiled loops are not built")
@pytest.mark.parametrize("build", compiled_convolutions.BUILDS)
def test_the_compiled_relu_gradient_loops_pass_nan(build):
    # ReLU's gradient loop and batch normalization's gradient loop masking G by a ReLU output R: 0 where
    # R <= 0, else G, in every build of the library.
    if not compiled_convolutions.use_build(build):
        pytest.skip(f"this CPU does not run the {build} build")
    try:
        y, g = _relu_output_with_specials(1 << 17)
        relu = compiled_normalization.RELU_BOUNDS
        np.testing.assert_array_equal(
            compiled_normalization.activation_gradient(g, y, relu), np.where(y <= 0, np.float32(0), g)
        )
        rng = np.random.default_rng(7)
        x = rng.standard_normal((4, 2, 8, 9)).astype(np.float32)
        scale, bias = np.ones(2, np.float32), np.zeros(2, np.float32)
        output, mean, variance = compiled_normalization.batch_norm_training(x, scale, bias, 1e-5)
        relu_output = np.maximum(output, 0)
        relu_output.reshape(-1)[:5] = [np.nan, 0.0, -0.0, np.inf, 1.0]
        g = rng.standard_normal(x.shape).astype(np.float32)
        masked = np.where(relu_output <= 0, np.float32(0), g)
        folded = compiled_normalization.batch_norm_training_gradient(
            g, x, scale, mean, variance, 1e-5, activation_output=relu_output, bounds=relu
        )
        expected = compiled_normalization.batch_norm_training_gradient(masked, x, scale, mean, variance, 1e-5)
        for one, other in zip(folded, expected):
            np.testing.assert_array_equal(one, other)
    finally:
        compiled_convolutions.use_build(None)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("shape", [(2, 3, 4, 4), (8, 3, 64, 64)], ids=["small", "compiled_loop_size"])
def test_batch_norm_then_relu_passes_the_gradient_of_a_nan_channel_to_its_bias(executor, shape):
    # A NaN in channel 0 makes its whole normalized output NaN: ReLU passes g there (PyTorch's
    # threshold_backward), so the bias, whose gradient is the sum of what reaches it, gets sum(g).
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    g = rng.standard_normal(shape).astype(np.float32)
    with onnxnn.set_executor(executor):
        module = nn.BatchNorm2d(3)
        inputs = onnxnn.tensor(x, requires_grad=True)
        output = F.relu(module(inputs))
        (output * onnxnn.tensor(g)).sum().backward()
        bias_gradient = module.bias.grad.numpy()
    np.testing.assert_allclose(bias_gradient[0], g[:, 0].astype(np.float64).sum(), rtol=1e-4)
    assert np.isfinite(bias_gradient[1:]).all()


# ---------------------------------------------------------------- empty batches

EMPTY_BATCH_CASES = [
    # (module, input shape, PyTorch's output shape)
    (lambda: nn.Conv2d(3, 2, 2), (0, 3, 4, 4), (0, 2, 3, 3)),
    (lambda: nn.Conv1d(3, 2, 2), (0, 3, 5), (0, 2, 4)),
    (lambda: nn.ConvTranspose1d(3, 2, 2), (0, 3, 4), (0, 2, 5)),
    (lambda: nn.ConvTranspose2d(3, 2, 3, 2, 1, 1), (0, 3, 4, 4), (0, 2, 8, 8)),
    (lambda: nn.MaxPool2d(2), (0, 3, 4, 4), (0, 3, 2, 2)),
    (lambda: nn.MaxPool1d(2, return_indices=True), (0, 3, 4), (0, 3, 2)),
    (lambda: nn.AvgPool2d(2), (0, 3, 4, 4), (0, 3, 2, 2)),
    (lambda: nn.LPPool2d(2, 2), (0, 3, 4, 4), (0, 3, 2, 2)),
    (lambda: nn.Unfold(2), (0, 3, 4, 4), (0, 12, 9)),
    (lambda: nn.GroupNorm(2, 4), (0, 4, 3), (0, 4, 3)),
    (lambda: nn.GroupNorm(1, 3), (0, 3, 4, 4), (0, 3, 4, 4)),
    (lambda: nn.Upsample(scale_factor=2.0), (0, 3, 4, 5), (0, 3, 8, 10)),
    (lambda: nn.Upsample(scale_factor=1.5, mode="bilinear"), (0, 3, 4, 5), (0, 3, 6, 7)),
    (lambda: nn.Upsample(size=(3, 3), mode="area"), (0, 3, 4, 5), (0, 3, 3, 3)),
    (lambda: nn.Fold((3, 3), 2), (0, 4, 4), (0, 1, 3, 3)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("make, shape, expected", EMPTY_BATCH_CASES)
def test_an_empty_batch_gives_empty_outputs_and_zero_parameter_gradients(executor, make, shape, expected):
    module = make()
    with onnxnn.set_executor(executor):
        inputs = onnxnn.zeros(shape, requires_grad=True)
        output = module(inputs)
        output = output[0] if isinstance(output, tuple) else output
        assert tuple(output.shape) == expected and output.detach().numpy().shape == expected
        output.sum().backward()
        assert inputs.grad.numpy().shape == shape
        for name, parameter in module.named_parameters():
            np.testing.assert_array_equal(parameter.grad.numpy(), np.zeros(parameter.shape), err_msg=name)


def test_interpolating_no_channels_raises_as_pytorch():
    with pytest.raises(
        RuntimeError, match=r"Non-empty 4D data tensor expected but got a tensor with sizes \[3, 0, 4, 5\]"
    ):
        F.interpolate(onnxnn.zeros(3, 0, 4, 5), scale_factor=2.0)
    assert tuple(F.interpolate(onnxnn.zeros(3, 0, 4, 5), size=(2, 2), mode="area").shape) == (3, 0, 2, 2)


# ---------------------------------------------------------------- EmbeddingBag on empty input


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize(
    "indices, offsets, bags",
    [([], [0, 0], 2), ([], [0], 1), (np.zeros((3, 0), np.int64), None, 3), (np.zeros((0, 2), np.int64), None, 0)],
    ids=["two_empty_bags", "one_empty_bag", "three_empty_rows", "no_rows"],
)
def test_embedding_bag_on_empty_input_stays_in_the_graph(executor, mode, indices, offsets, bags):
    # PyTorch: zeros of (bags, D), a grad_fn, and a zero weight gradient (NaN rows do not leak into it).
    module = nn.EmbeddingBag(10, 3, mode=mode)
    weight = module.weight.detach().numpy().copy()
    weight[0] = np.nan
    module.weight.data = onnxnn.tensor(weight)
    with onnxnn.set_executor(executor):
        output = module(
            onnxnn.tensor(np.asarray(indices, np.int64)), None if offsets is None else onnxnn.tensor(offsets)
        )
        assert output.requires_grad and output.grad_fn is not None
        np.testing.assert_array_equal(output.detach().numpy(), np.zeros((bags, 3), np.float32))
        output.sum().backward()
        np.testing.assert_array_equal(module.weight.grad.numpy(), np.zeros((10, 3), np.float32))


# ---------------------------------------------------------------- nearest upsampling of float64


def _nearest_index(size: int, out_size: int, factor: float, exact: bool, double: bool) -> np.ndarray:
    """PyTorch's source index: ``scale = 1 / factor`` in the kernel's type (double for its general kernel
    on float64, float otherwise), ``i * scale`` (``(i + 0.5) * scale`` for nearest-exact, in double)
    rounded to float, then floored."""
    scale = np.float64(1 / factor) if double else np.float32(1 / factor)
    positions = np.arange(out_size)
    if exact:
        source = (positions + 0.5) * np.float64(scale)
    else:
        source = positions.astype(np.float64 if double else np.float32) * scale
    return np.minimum(np.floor(source.astype(np.float32)).astype(np.int64), size - 1)


@pytest.mark.parametrize("mode, factor, position", [("nearest", 2.3, 69), ("nearest-exact", 1.15, 34)])
@pytest.mark.parametrize(
    "dtype, shape, double",
    [
        (np.float64, (1, 1, 33), True),
        (np.float32, (1, 1, 33), False),
        (np.float64, (1, 1, 33, 100), True),  # 2-D, outputs past 128 rows and columns together
        (np.float64, (1, 1, 33, 10), False),  # 2-D, small outputs: PyTorch's channels-last kernel, in float
        (np.float64, (1, 1, 33, 2, 2), True),
    ],
    ids=["1d_float64", "1d_float32", "2d_float64_large", "2d_float64_small", "3d_float64"],
)
def test_nearest_upsampling_reads_pytorchs_source_index(mode, factor, position, dtype, shape, double):
    exact = mode == "nearest-exact"
    values = np.broadcast_to(np.arange(33, dtype=dtype).reshape((1, 1, 33) + (1,) * (len(shape) - 3)), shape)
    factors = (factor,) + (1.0,) * (len(shape) - 3)
    output = F.interpolate(onnxnn.tensor(np.ascontiguousarray(values)), scale_factor=factors, mode=mode).numpy()
    index = _nearest_index(33, int(33 * factor), factor, exact, double)
    column = output.reshape(output.shape[:3] + (-1,))[0, 0, :, 0]
    np.testing.assert_array_equal(column, index.astype(dtype))
    # The position the sweep found: double arithmetic reads 30, float's 29.
    assert column[position] == (30 if double else 29)


# ---------------------------------------------------------------- PyTorch's errors


def test_instance_norm_with_one_spatial_element_raises_when_using_input_statistics():
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        nn.InstanceNorm1d(4)(onnxnn.ones(2, 4, 1))
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        F.instance_norm(onnxnn.ones(2, 4, 1, 1))
    # Running statistics need no spatial extent.
    module = nn.InstanceNorm1d(4, track_running_stats=True).eval()
    assert tuple(module(onnxnn.ones(2, 4, 1)).shape) == (2, 4, 1)


@pytest.mark.parametrize("training", [True, False])
def test_instance_norm_with_running_statistics_of_another_channel_count_names_them(training):
    module = nn.InstanceNorm1d(8, track_running_stats=True).train(training)
    # PyTorch's words: its (1, N * C, L) batch norm gets the 8 running means repeated N = 2 times.
    with pytest.warns(UserWarning, match="does not match num_features"):
        with pytest.raises(RuntimeError, match="running_mean should contain 12 elements not 16"):
            module(onnxnn.randn(2, 6, 5))
    np.testing.assert_array_equal(module.running_mean.numpy(), np.zeros(8, np.float32))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize(
    "shape, pad, message",
    [
        ((1, 0, 4, 4), (1, 1, 1, 1), r"Expected 3D or 4D \(batch mode\)"),
        ((1, 0, 4), (1, 1), r"Expected 2D or 3D \(batch mode\)"),
        ((0, 4), (1, 1), r"Expected 2D or 3D \(batch mode\)"),
        ((1, 0, 2, 4, 4), (1,) * 6, r"Expected 4D or 5D \(batch mode\)"),
    ],
)
def test_reflect_and_replicate_padding_refuse_empty_non_batch_dims(mode, shape, pad, message):
    with pytest.raises(RuntimeError, match=message):
        F.pad(onnxnn.zeros(shape), pad, mode=mode)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_reflect_and_replicate_padding_take_an_empty_batch(mode):
    assert tuple(F.pad(onnxnn.zeros(0, 3, 4, 4), (1, 1, 1, 1), mode=mode).shape) == (0, 3, 6, 6)


def test_relu_of_bool_raises():
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        nn.ReLU()(onnxnn.tensor([True, False]))
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        onnxnn.tensor([True]).relu()


def test_conv_transpose_takes_no_padding_mode():
    with pytest.raises(TypeError, match="must be tuple of ints"):
        nn.ConvTranspose2d(2, 2, 3, padding="same")(onnxnn.ones(1, 2, 4, 4))
    with pytest.raises(TypeError, match="must be tuple of ints, not str"):
        F.conv_transpose1d(onnxnn.ones(1, 2, 4), onnxnn.ones(2, 2, 3), None, 1, "valid")


def test_embedding_bag_index_out_of_range_is_a_runtime_error():
    with pytest.raises(
        RuntimeError, match=r"Index 1 of input takes value 11 which is not in the valid range \[0, 10\)"
    ):
        nn.EmbeddingBag(10, 3)(onnxnn.tensor([1, 11]), onnxnn.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"Index 2 of input takes value -1"):
        nn.EmbeddingBag(10, 3)(onnxnn.tensor([[1, 2], [-1, 3]]))
    with pytest.raises(IndexError):  # embedding's own error stays an IndexError, as PyTorch's
        nn.Embedding(10, 3)(onnxnn.tensor([11]))


def test_celu_with_alpha_0_raises():
    with pytest.raises(RuntimeError, match="alpha cannot be 0 for CELU"):
        nn.CELU(0.0)(onnxnn.ones(3))
    with pytest.raises(RuntimeError, match="alpha cannot be 0 for CELU"):
        F.celu(onnxnn.ones(3), 0.0, inplace=True)
