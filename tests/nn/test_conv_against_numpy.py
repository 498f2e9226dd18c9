"""Convolution layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d, conv_tbc, Fold/Unfold against numpy, as
PyTorch specifies them, with their parameters, initialization and repr.

Expected values come from the direct numpy convolutions of ``tests/runtime/conv_cases.py``
(checked in test_conv_ops_values.py against the ONNX backend cases), with the non-zero padding modes
done by ``np.pad`` (reflect, edge, wrap). Tolerances are Higham's bound for sums of ``terms``
products, ``2 * gamma(terms) * (|x| conv |w| + |b|)``. Gradients are checked against float64 finite
differences on the kernels executor (onnxruntime's CPU provider has no float64 Conv) and in
float32 on onnxruntime. Low precision, export, errors, lazy forms, empty batches and the comparison
with PyTorch are in test_conv_lazy_export_errors.py.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from gradcheck import check_gradients
from runtime.conv_cases import check_gradients_float32, conv_reference, conv_transpose_reference

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .conv_layer_cases import CONV_CASES, TRANSPOSE_CASES, _values, assert_within_conv_rounding

RNG = np.random.default_rng(12)

NUMPY_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
# onnxruntime's CPU provider runs Conv/ConvTranspose in float32 (and float16), not float64.
EXECUTOR_DTYPES = [("onnxruntime", onnxnn.float32), ("kernels", onnxnn.float32), ("kernels", onnxnn.float64)]
EXECUTOR_DTYPE_IDS = ["onnxruntime-float32", "kernels-float32", "kernels-float64"]


def _parameters(layer):
    return _values(layer.weight), None if layer.bias is None else _values(layer.bias)


def _call_with(layer, weight, bias, *args, **kwargs):
    """``layer(*args)`` with its weight and bias replaced (for gradients with respect to them)."""
    saved = dict(layer._parameters)
    layer._parameters["weight"], layer._parameters["bias"] = weight, bias
    try:
        return layer(*args, **kwargs)
    finally:
        layer._parameters.update(saved)


# ---------------------------------------------------------------- Conv*d against numpy


def conv_layer_reference(layer, x, weight, bias):
    """What PyTorch documents Conv*d computes, from the layer's settings, in float64."""
    unbatched = x.ndim == layer.weight.dim() - 1
    if unbatched:
        x = x[None]
    rank = x.ndim - 2
    if layer.padding == "valid":
        begin = end = [0] * rank
    elif layer.padding == "same":  # PyTorch puts the odd padding element at the end
        totals = [d * (k - 1) for d, k in zip(layer.dilation, layer.kernel_size)]
        begin, end = [t // 2 for t in totals], [t - t // 2 for t in totals]
    else:
        begin = end = list(layer.padding)
    if layer.padding_mode != "zeros":
        x = np.pad(x, [(0, 0), (0, 0)] + list(zip(begin, end)), mode=NUMPY_PAD_MODES[layer.padding_mode])
        begin = end = [0] * rank
    y = conv_reference(x, weight, bias, list(layer.stride), begin, end, list(layer.dilation), layer.groups)
    return y[0] if unbatched else y


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize("case_id, cls, args, kwargs, input_shape", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_layer_matches_numpy(case_id, cls, args, kwargs, input_shape, executor, dtype):
    layer = cls(*args, **kwargs, dtype=dtype)
    x = RNG.standard_normal(input_shape).astype(dtype.numpy_dtype)
    with onnxnn.set_executor(executor):
        out = layer(onnxnn.tensor(x))
        actual = out.detach().numpy()
    assert out.dtype is dtype
    weight, bias = _parameters(layer)
    expected = conv_layer_reference(layer, x.astype(np.float64), weight, bias)
    magnitude = conv_layer_reference(
        layer, np.abs(x.astype(np.float64)), np.abs(weight), None if bias is None else np.abs(bias)
    )
    assert_within_conv_rounding(actual, expected, magnitude, int(np.prod(weight.shape[1:])), dtype.numpy_dtype)


PADDED_CASES = [c for c in CONV_CASES if "padding_mode" in c[3] or c[3].get("padding") == "same"]


@pytest.mark.parametrize("case_id, cls, args, kwargs, input_shape", PADDED_CASES, ids=[c[0] for c in PADDED_CASES])
def test_conv_layer_gradients_match_finite_differences(case_id, cls, args, kwargs, input_shape):
    layer = cls(*args, **kwargs, dtype=onnxnn.float64)
    weight, bias = _parameters(layer)
    inputs = [RNG.standard_normal(input_shape), weight] + ([] if bias is None else [bias])
    with onnxnn.set_executor("kernels"):
        check_gradients(lambda x, w, b=None: _call_with(layer, w, b, x), inputs)


def test_padded_conv_gradients_in_float32_on_onnxruntime():
    layer = nn.Conv2d(2, 2, 3, padding=(1, 2), padding_mode="reflect")
    weight, bias = _parameters(layer)
    with onnxnn.set_executor("onnxruntime"):
        check_gradients_float32(
            lambda x, w, b: _call_with(layer, w, b, x), [RNG.standard_normal((1, 2, 4, 5)), weight, bias]
        )


# ---------------------------------------------------------------- ConvTranspose*d against numpy


def transpose_layer_reference(layer, x, weight, bias, output_size):
    unbatched = x.ndim == layer.weight.dim() - 1
    if unbatched:
        x = x[None]
    rank = x.ndim - 2
    # The documented output length; output_size picks one of the `stride` lengths from there up.
    smallest = [
        (x.shape[2 + i] - 1) * layer.stride[i]
        - 2 * layer.padding[i]
        + layer.dilation[i] * (layer.kernel_size[i] - 1)
        + 1
        for i in range(rank)
    ]
    if output_size is None:
        extra = list(layer.output_padding)
    else:
        extra = [size - low for size, low in zip(list(output_size)[-rank:], smallest)]
    y = conv_transpose_reference(
        x, weight, bias, list(layer.stride), list(layer.padding), None, list(layer.dilation), layer.groups, extra
    )
    return y[0] if unbatched else y


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize(
    "case_id, cls, args, kwargs, input_shape, output_size", TRANSPOSE_CASES, ids=[c[0] for c in TRANSPOSE_CASES]
)
def test_conv_transpose_layer_matches_numpy(case_id, cls, args, kwargs, input_shape, output_size, executor, dtype):
    layer = cls(*args, **kwargs, dtype=dtype)
    x = RNG.standard_normal(input_shape).astype(dtype.numpy_dtype)
    with onnxnn.set_executor(executor):
        actual = layer(onnxnn.tensor(x), output_size=output_size).detach().numpy()
    weight, bias = _parameters(layer)
    expected = transpose_layer_reference(layer, x.astype(np.float64), weight, bias, output_size)
    if output_size is not None:
        assert list(actual.shape[-len(layer.kernel_size) :]) == list(output_size)[-len(layer.kernel_size) :]
    magnitude = transpose_layer_reference(
        layer, np.abs(x.astype(np.float64)), np.abs(weight), None if bias is None else np.abs(bias), output_size
    )
    terms = weight.shape[0] // layer.groups * int(np.prod(weight.shape[2:]))
    assert_within_conv_rounding(actual, expected, magnitude, terms, dtype.numpy_dtype)


def test_conv_transpose_with_output_size_gradients_match_finite_differences():
    layer = nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1, dtype=onnxnn.float64)
    weight, bias = _parameters(layer)
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda x, w, b: _call_with(layer, w, b, x, output_size=[6, 5]),
            [RNG.standard_normal((1, 2, 3, 3)), weight, bias],
        )


# ---------------------------------------------------------------- parameters, initialization, repr


@pytest.mark.parametrize(
    "layer, weight_shape, bias_shape",
    [
        (nn.Conv1d(4, 6, 3, groups=2), (6, 2, 3), (6,)),
        (nn.Conv2d(3, 8, (2, 5)), (8, 3, 2, 5), (8,)),
        (nn.Conv2d(3, 8, 3, bias=False), (8, 3, 3, 3), None),
        (nn.Conv3d(2, 4, (1, 2, 3)), (4, 2, 1, 2, 3), (4,)),
        (nn.ConvTranspose1d(4, 6, 3, groups=2), (4, 3, 3), (6,)),
        (nn.ConvTranspose2d(3, 8, (2, 5)), (3, 8, 2, 5), (8,)),
        (nn.ConvTranspose3d(2, 4, 2, bias=False), (2, 4, 2, 2, 2), None),
    ],
    ids=lambda value: repr(value) if isinstance(value, nn.Module) else None,
)
def test_state_dict_keys_and_shapes_are_pytorchs(layer, weight_shape, bias_shape):
    state = layer.state_dict()
    expected = {"weight": weight_shape} if bias_shape is None else {"weight": weight_shape, "bias": bias_shape}
    assert list(state) == list(expected)
    assert {key: tuple(value.shape) for key, value in state.items()} == expected
    assert [name for name, _ in layer.named_parameters()] == list(expected)
    assert list(layer.buffers()) == []


@pytest.mark.parametrize(
    "layer, fan_in",
    [
        (nn.Conv2d(32, 64, 3, groups=2), 16 * 9),  # in_channels / groups * kernel size
        (nn.Conv1d(16, 400, 5), 80),
        (nn.ConvTranspose2d(64, 32, 3, groups=4), 8 * 9),  # PyTorch uses weight.size(1) = out / groups
    ],
)
def test_default_initialization_is_uniform_with_bound_one_over_sqrt_fan_in(layer, fan_in):
    # kaiming_uniform_(a=sqrt(5)) gives U(-b, b) with b = sqrt(6 / ((1 + 5) * fan_in)) = 1 / sqrt(fan_in).
    bound = 1 / math.sqrt(fan_in)
    weight, bias = _parameters(layer)
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.98 * bound
    # std of U(-b, b) is b / sqrt(3); its estimate from n draws has relative std ~ 0.45 / sqrt(n)
    assert weight.std() == pytest.approx(bound / math.sqrt(3), rel=5 * 0.45 / math.sqrt(weight.size))
    assert abs(weight.mean()) < 5 * bound / math.sqrt(3 * weight.size)
    assert np.abs(bias).max() <= bound


def test_reset_parameters_redraws_weight_and_bias():
    layer = nn.Conv2d(2, 3, 3)
    before = [_values(p).copy() for p in layer.parameters()]
    layer.reset_parameters()
    assert all(not np.array_equal(old, _values(p)) for old, p in zip(before, layer.parameters()))


@pytest.mark.parametrize(
    "layer, text",
    [
        (nn.Conv1d(16, 33, 3, stride=2), "Conv1d(16, 33, kernel_size=(3,), stride=(2,))"),
        (
            nn.Conv2d(16, 33, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1)),
            "Conv2d(16, 33, kernel_size=(3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1))",
        ),
        (
            nn.Conv2d(4, 4, 3, padding="same", groups=4, bias=False, padding_mode="reflect"),
            "Conv2d(4, 4, kernel_size=(3, 3), stride=(1, 1), padding=same, groups=4, bias=False, padding_mode=reflect)",
        ),
        (nn.Conv3d(2, 4, 3, padding="valid"), "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=valid)"),
        (
            nn.ConvTranspose2d(16, 33, 3, stride=2, output_padding=1),
            "ConvTranspose2d(16, 33, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))",
        ),
        (
            nn.ConvTranspose1d(4, 2, 3, padding=1, dilation=2, groups=2),
            "ConvTranspose1d(4, 2, kernel_size=(3,), stride=(1,), padding=(1,), dilation=(2,), groups=2)",
        ),
        (nn.Unfold((2, 3), padding=1), "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=1)"),
        (nn.Fold((4, 5), 2, stride=2), "Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=2)"),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, nn.Module) else None,
)
def test_repr_matches_pytorch(layer, text):
    assert repr(layer) == text


def test_conv_layers_train_and_survive_deepcopy():
    layer = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular")
    x = onnxnn.randn(2, 2, 4, 4)
    loss = layer(x).pow(2).mean()
    loss.backward()
    assert layer.weight.grad.shape == layer.weight.shape and layer.bias.grad.shape == (3,)
    clone = copy.deepcopy(layer)
    np.testing.assert_array_equal(clone(x).detach().numpy(), layer(x).detach().numpy())


# ---------------------------------------------------------------- conv_tbc


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("pad", [0, 2])
def test_conv_tbc_convolves_time_major_sequences(pad, executor):
    x = RNG.standard_normal((7, 2, 3)).astype(np.float32)  # (time, batch, channels)
    weight = RNG.standard_normal((3, 3, 4)).astype(np.float32)  # (width, in, out)
    bias = RNG.standard_normal(4).astype(np.float32)
    with onnxnn.set_executor(executor):
        actual = F.conv_tbc(onnxnn.tensor(x), onnxnn.tensor(weight), onnxnn.tensor(bias), pad).numpy()
    # y[t, b, o] = bias[o] + sum_{k, c} x_padded[t + k, b, c] * weight[k, c, o]
    padded = np.pad(x.astype(np.float64), [(pad, pad), (0, 0), (0, 0)])
    steps = padded.shape[0] - weight.shape[0] + 1
    expected = np.stack([np.einsum("kbc,kco->bo", padded[t : t + 3], weight) for t in range(steps)]) + bias
    magnitude = np.stack(
        [np.einsum("kbc,kco->bo", np.abs(padded[t : t + 3]), np.abs(weight)) for t in range(steps)]
    ) + np.abs(bias)
    assert_within_conv_rounding(actual, expected, magnitude, 9, np.float32)


def test_conv_tbc_gradients_match_finite_differences():
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda x, w, b: F.conv_tbc(x, w, b, 1),
            [RNG.standard_normal((5, 2, 2)), RNG.standard_normal((2, 2, 3)), RNG.standard_normal(3)],
        )


# ---------------------------------------------------------------- Fold / Unfold


def unfold_reference(x, kernel, dilation, padding, stride):
    """Block (c, i, j) of position (p, q) is x_padded[c, p * s + i * d, q * s + j * d], channel-major."""
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    blocks = [(padded.shape[2 + a] - dilation[a] * (kernel[a] - 1) - 1) // stride[a] + 1 for a in range(2)]
    out = np.zeros((x.shape[0], x.shape[1], kernel[0], kernel[1], blocks[0], blocks[1]))
    for i, j, p, q in np.ndindex(kernel[0], kernel[1], blocks[0], blocks[1]):
        out[:, :, i, j, p, q] = padded[:, :, p * stride[0] + i * dilation[0], q * stride[1] + j * dilation[1]]
    return out.reshape(x.shape[0], -1, blocks[0] * blocks[1])


FOLD_CASES = [
    # kernel, dilation, padding, stride, input spatial size
    ((2, 2), (1, 1), (0, 0), (1, 1), (4, 5)),
    ((2, 3), (1, 2), (1, 1), (2, 1), (7, 6)),
    ((3, 1), (2, 1), (2, 0), (3, 2), (8, 5)),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("kernel, dilation, padding, stride, size", FOLD_CASES)
def test_unfold_extracts_blocks_channel_major(kernel, dilation, padding, stride, size, executor):
    x = RNG.standard_normal((2, 3) + size).astype(np.float32)
    with onnxnn.set_executor(executor):
        actual = nn.Unfold(kernel, dilation, padding, stride)(onnxnn.tensor(x)).numpy()
    # Copies of input elements (or zeros): exact.
    np.testing.assert_array_equal(actual, unfold_reference(x, kernel, dilation, padding, stride))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("kernel, dilation, padding, stride, size", FOLD_CASES)
def test_fold_is_the_adjoint_of_unfold(kernel, dilation, padding, stride, size, executor):
    """<unfold(x), c> == <x, fold(c)> for every x and c: fold sums each block entry into its position."""
    x = RNG.standard_normal((2, 3) + size)
    columns_shape = unfold_reference(x, kernel, dilation, padding, stride).shape
    c = RNG.standard_normal(columns_shape).astype(np.float32)
    with onnxnn.set_executor(executor):
        folded = nn.Fold(size, kernel, dilation, padding, stride)(onnxnn.tensor(c)).numpy()
    assert folded.shape == x.shape
    # fold(c) = U^T c: each output element sums at most prod(kernel) column entries.
    expected = np.zeros(x.size)
    magnitude = np.zeros(x.size)
    for index in range(x.size):
        basis = np.zeros(x.size)
        basis[index] = 1.0
        column = unfold_reference(basis.reshape(x.shape), kernel, dilation, padding, stride)
        expected[index] = np.sum(column * c)
        magnitude[index] = np.sum(column * np.abs(c))
    assert_within_conv_rounding(folded.reshape(-1), expected, magnitude, int(np.prod(kernel)), np.float32)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [np.inf, np.nan])
@pytest.mark.parametrize("kernel, dilation, padding, stride, size", FOLD_CASES)
def test_fold_and_unfold_copy_an_inf_or_nan_only_where_it_goes(
    kernel, dilation, padding, stride, size, special, dtype, executor
):
    # Copies and sums of copies: a product with the zeros of other kernel taps would spread NaN.
    x = RNG.standard_normal((2, 3) + size).astype(dtype)
    x[0, 1, 1, 2] = special
    columns = unfold_reference(x, kernel, dilation, padding, stride).astype(dtype)
    with onnxnn.set_executor(executor):
        unfolded = F.unfold(onnxnn.tensor(x), kernel, dilation, padding, stride).numpy()
        folded = F.fold(onnxnn.tensor(columns), size, kernel, dilation, padding, stride).numpy()
    np.testing.assert_array_equal(unfolded, columns)
    # Each input element is summed from its copies: the special one alone is inf or NaN.
    assert np.array_equal(np.isfinite(folded), np.isfinite(x))
    assert np.isnan(folded[0, 1, 1, 2]) == np.isnan(special)


def test_fold_and_unfold_gradients_match_finite_differences():
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
            [RNG.standard_normal((1, 2, 5, 6))],
        )
        check_gradients(
            lambda c: F.fold(c, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
            [RNG.standard_normal((1, 12, 12))],
        )


def test_unfold_accepts_unbatched_input():
    x = RNG.standard_normal((3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        F.unfold(onnxnn.tensor(x), 2).numpy(), unfold_reference(x[None], (2, 2), (1, 1), (0, 0), (1, 1))[0]
    )
