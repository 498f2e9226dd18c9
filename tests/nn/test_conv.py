"""Convolution layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d, Fold/Unfold, as PyTorch specifies them.

Expected values come from the direct numpy convolutions of ``tests/runtime/test_conv_ops.py``
(checked there against the ONNX backend cases), with the non-zero padding modes done by
``np.pad`` (reflect, edge, wrap). Tolerances are Higham's bound for sums of ``terms`` products,
``2 * gamma(terms) * (|x| conv |w| + |b|)``. Gradients are checked against float64 finite
differences on the kernels executor (onnxruntime's CPU provider has no float64 Conv) and in
float32 on onnxruntime. The comparison with PyTorch at the end runs only where torch is installed.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import onnxruntime
import pytest
from gradcheck import check_gradients
from runtime.test_conv_ops import check_gradients_float32, conv_reference, conv_transpose_reference
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx

RNG = np.random.default_rng(12)
NUMPY_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
# onnxruntime's CPU provider runs Conv/ConvTranspose in float32 (and float16), not float64.
EXECUTOR_DTYPES = [("onnxruntime", onnxnn.float32), ("kernels", onnxnn.float32), ("kernels", onnxnn.float64)]
EXECUTOR_DTYPE_IDS = ["onnxruntime-float32", "kernels-float32", "kernels-float64"]


def _values(tensor) -> np.ndarray:
    return np.asarray(
        tensor.detach().float().numpy()
        if tensor.dtype in (onnxnn.float16, onnxnn.bfloat16)
        else tensor.detach().numpy(),
        dtype=np.float64,
    )


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


def assert_within_conv_rounding(actual, expected, magnitude, terms, dtype) -> None:
    bound = 2 * gamma(terms + 1, dtype) * magnitude
    error = np.abs(np.asarray(actual, np.float64) - expected)
    assert actual.shape == expected.shape
    worst = np.argmax(error - bound)
    assert np.all(error <= bound), f"error {error.flat[worst]:.3g} exceeds the bound {bound.flat[worst]:.3g}"


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


CONV_CASES = [
    # id, class, positional arguments, keyword arguments, input shape
    ("1d", nn.Conv1d, (3, 4, 3), {}, (2, 3, 7)),
    (
        "1d_stride_dilation_groups",
        nn.Conv1d,
        (4, 6, 3),
        {"stride": 2, "dilation": 2, "groups": 2, "padding": 1},
        (2, 4, 11),
    ),
    ("1d_unbatched_same_even_kernel", nn.Conv1d, (2, 3, 4), {"padding": "same"}, (2, 9)),
    ("1d_circular", nn.Conv1d, (2, 2, 3), {"padding": 2, "padding_mode": "circular"}, (1, 2, 5)),
    (
        "2d_tuples_no_bias",
        nn.Conv2d,
        (3, 4, (2, 3)),
        {"stride": (2, 1), "padding": (1, 2), "bias": False},
        (2, 3, 6, 5),
    ),
    ("2d_valid_depthwise", nn.Conv2d, (4, 4, 3), {"padding": "valid", "groups": 4}, (1, 4, 5, 5)),
    ("2d_same_dilated", nn.Conv2d, (2, 3, (3, 4)), {"padding": "same", "dilation": (2, 1)}, (1, 2, 7, 6)),
    ("2d_reflect", nn.Conv2d, (2, 3, 3), {"padding": (1, 2), "padding_mode": "reflect"}, (1, 2, 5, 6)),
    (
        "2d_replicate_strided",
        nn.Conv2d,
        (2, 3, 3),
        {"padding": 2, "stride": 2, "padding_mode": "replicate"},
        (2, 2, 5, 4),
    ),
    ("2d_circular_same", nn.Conv2d, (2, 2, (2, 4)), {"padding": "same", "padding_mode": "circular"}, (1, 2, 4, 5)),
    ("2d_unbatched_reflect", nn.Conv2d, (2, 2, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 4, 4)),
    ("3d", nn.Conv3d, (2, 4, (2, 3, 2)), {"stride": (1, 2, 1), "padding": 1}, (1, 2, 4, 5, 3)),
    (
        "3d_reflect_groups",
        nn.Conv3d,
        (2, 4, 3),
        {"padding": 1, "padding_mode": "reflect", "groups": 2},
        (1, 2, 3, 4, 4),
    ),
]


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

TRANSPOSE_CASES = [
    # id, class, positional arguments, keyword arguments, input shape, forward's output_size
    ("1d_strided", nn.ConvTranspose1d, (3, 2, 3), {"stride": 2}, (2, 3, 4), None),
    (
        "1d_output_padding_dilation",
        nn.ConvTranspose1d,
        (2, 4, 3),
        {"stride": 3, "padding": 1, "output_padding": 2, "dilation": 2},
        (1, 2, 4),
        None,
    ),
    (
        "2d_groups_no_bias",
        nn.ConvTranspose2d,
        (4, 6, (3, 2)),
        {"stride": (2, 1), "padding": (1, 0), "groups": 2, "bias": False},
        (2, 4, 3, 4),
        None,
    ),
    ("2d_output_size", nn.ConvTranspose2d, (3, 2, 3), {"stride": 2, "padding": 1}, (1, 3, 4, 4), [8, 7]),
    ("2d_unbatched_output_size_with_channels", nn.ConvTranspose2d, (3, 2, 3), {"stride": 2}, (3, 4, 4), [2, 10, 9]),
    ("3d", nn.ConvTranspose3d, (2, 3, 2), {"stride": 2}, (1, 2, 2, 3, 2), None),
]


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


# ---------------------------------------------------------------- low precision


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "dtype, u", [(onnxnn.float16, 2.0**-11), (onnxnn.bfloat16, 2.0**-8)], ids=["float16", "bfloat16"]
)
@pytest.mark.parametrize(
    "cls, args, input_shape",
    [
        (nn.Conv2d, (3, 4, 3), (1, 3, 5, 5)),
        (nn.ConvTranspose2d, (3, 4, 3), (1, 3, 3, 3)),
    ],
    ids=["Conv2d", "ConvTranspose2d"],
)
def test_low_precision_layers_compute_in_their_dtype(cls, args, input_shape, dtype, u, executor):
    layer = cls(*args, dtype=dtype)
    x = onnxnn.randn(*input_shape, dtype=dtype)
    with onnxnn.set_executor(executor):
        out = layer(x)
        actual = _values(out)
    assert out.dtype is dtype
    # The same layer in float64 on the same (already rounded) values, and with |w|, |b| on |x|.
    exact, absolute = cls(*args, dtype=onnxnn.float64), cls(*args, dtype=onnxnn.float64)
    state = {key: value.double() for key, value in layer.state_dict().items()}
    exact.load_state_dict(state)
    absolute.load_state_dict({key: value.abs() for key, value in state.items()})
    with onnxnn.set_executor("kernels"):
        expected = _values(exact(x.double()))
        magnitude = _values(absolute(x.double().abs()))
    # A sum of `terms` products rounded in the dtype at worst, then the result rounded to it.
    terms = (
        int(np.prod(layer.weight.shape[1:]))
        if not layer.transposed
        else layer.weight.shape[0] * int(np.prod(layer.weight.shape[2:]))
    )
    gamma_low = (terms + 1) * u / (1 - (terms + 1) * u)
    bound = gamma_low * magnitude + u * np.abs(expected)
    assert np.all(np.abs(actual - expected) <= bound)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "dtype, u", [(onnxnn.float16, 2.0**-11), (onnxnn.bfloat16, 2.0**-8)], ids=["float16", "bfloat16"]
)
@pytest.mark.parametrize("padding_mode", ["reflect", "replicate", "circular"])
def test_low_precision_padded_conv_backward(padding_mode, dtype, u, executor):
    layer = nn.Conv1d(2, 3, 3, padding=2, padding_mode=padding_mode, dtype=dtype)
    x = onnxnn.randn(2, 2, 6, dtype=dtype, requires_grad=True)
    with onnxnn.set_executor(executor):
        layer(x).float().sum().backward()
        actual = _values(x.grad)
    assert x.grad.dtype is dtype
    # d sum(y) / dx from the float64 layer with the same weights, and with |w| for the magnitude.
    exact, absolute = (
        nn.Conv1d(2, 3, 3, padding=2, padding_mode=padding_mode, dtype=onnxnn.float64),
        nn.Conv1d(2, 3, 3, padding=2, padding_mode=padding_mode, dtype=onnxnn.float64),
    )
    state = {key: value.double() for key, value in layer.state_dict().items()}
    exact.load_state_dict(state)
    absolute.load_state_dict({key: value.abs() for key, value in state.items()})
    gradients = []
    with onnxnn.set_executor("kernels"):
        for network in (exact, absolute):
            x64 = onnxnn.tensor(_values(x), requires_grad=True)
            network(x64).sum().backward()
            gradients.append(_values(x64.grad))
    expected, magnitude = gradients
    # An input element reaches at most 3 output channels x 3 taps, twice when padding copies it.
    terms = 2 * 3 * 3
    bound = (terms + 1) * u / (1 - (terms + 1) * u) * magnitude + u * np.abs(expected)
    assert np.all(np.abs(actual - expected) <= bound)


# ---------------------------------------------------------------- export

EXPORT_CASES = [
    ("conv_reflect", lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (2, 2, 5, 5)),
    ("conv_circular_same", lambda: nn.Conv1d(2, 3, 4, padding="same", padding_mode="circular"), (2, 2, 7)),
    ("conv_replicate_3d", lambda: nn.Conv3d(2, 2, 2, padding=1, padding_mode="replicate"), (1, 2, 3, 3, 3)),
    ("conv_transpose", lambda: nn.ConvTranspose2d(2, 3, 3, stride=2, output_padding=1), (2, 2, 3, 4)),
    ("unfold", lambda: nn.Unfold(2, padding=1), (1, 2, 3, 4)),
    ("fold", lambda: nn.Fold((4, 5), 2), (1, 8, 12)),
]


@pytest.mark.parametrize("case_id, build, input_shape", EXPORT_CASES, ids=[c[0] for c in EXPORT_CASES])
def test_export_runs_in_plain_onnxruntime_like_the_layer(case_id, build, input_shape):
    layer = build().eval()
    x = onnxnn.randn(*input_shape)
    proto = to_onnx(layer, x, input_names=["x"], output_names=["y"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {"x": x.numpy()})
    with onnxnn.set_executor("kernels"):
        ours = layer(x).detach().numpy()
        absolute = copy.deepcopy(layer)
        for parameter in absolute.parameters():
            parameter.data = parameter.data.abs()
        magnitude = _values(absolute(x.abs()))
    terms = int(np.prod(layer.weight.shape[1:])) if hasattr(layer, "weight") else 4
    assert_within_conv_rounding(exported, ours.astype(np.float64), magnitude, terms, np.float32)


# ---------------------------------------------------------------- errors in PyTorch's words

ERROR_CASES = [
    ("groups_in_channels", lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, "in_channels must be divisible by groups"),
    (
        "groups_out_channels",
        lambda: nn.Conv2d(4, 3, 3, groups=2),
        ValueError,
        "out_channels must be divisible by groups",
    ),
    ("groups_zero", lambda: nn.Conv2d(4, 4, 3, groups=0), ValueError, "groups must be a positive integer"),
    ("padding_string", lambda: nn.Conv2d(2, 2, 3, padding="full"), ValueError, "Invalid padding string 'full'"),
    (
        "same_strided",
        lambda: nn.Conv1d(2, 2, 3, stride=2, padding="same"),
        ValueError,
        "padding='same' is not supported for strided convolutions",
    ),
    ("padding_mode", lambda: nn.Conv2d(2, 2, 3, padding_mode="mirror"), ValueError, "padding_mode must be one of"),
    (
        "transpose_padding_mode",
        lambda: nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"),
        ValueError,
        'Only "zeros" padding mode is supported for ConvTranspose2d',
    ),
    (
        "rank",
        lambda: nn.Conv2d(3, 4, 3)(onnxnn.randn(5, 5)),
        RuntimeError,
        "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [5, 5]",
    ),
    (
        "channels",
        lambda: nn.Conv2d(3, 4, 3)(onnxnn.randn(1, 2, 5, 5)),
        RuntimeError,
        "expected input[1, 2, 5, 5] to have 3 channels, but got 2 channels instead",
    ),
    (
        "transpose_channels",
        lambda: nn.ConvTranspose1d(3, 4, 3)(onnxnn.randn(1, 2, 5)),
        RuntimeError,
        "expected input[1, 2, 5] to have 3 channels, but got 2 channels instead",
    ),
    (
        "kernel_too_big",
        lambda: nn.Conv2d(1, 1, 5)(onnxnn.randn(1, 1, 3, 3)),
        RuntimeError,
        "Kernel size can't be greater than actual input size",
    ),
    (
        "reflect_too_wide",
        lambda: nn.Conv1d(1, 1, 3, padding=3, padding_mode="reflect")(onnxnn.randn(1, 1, 3)),
        RuntimeError,
        "Padding size should be less than the corresponding input dimension",
    ),
    (
        "circular_wraps_twice",
        lambda: nn.Conv1d(1, 1, 3, padding=4, padding_mode="circular")(onnxnn.randn(1, 1, 3)),
        RuntimeError,
        "Padding value causes wrapping around more than once",
    ),
    (
        "output_size_range",
        lambda: nn.ConvTranspose2d(3, 2, 3, stride=2)(onnxnn.randn(1, 3, 4, 4), output_size=[20, 20]),
        ValueError,
        "requested an output size of [20, 20], but valid sizes range from [9, 9] to [10, 10]",
    ),
    (
        "output_size_length",
        lambda: nn.ConvTranspose2d(3, 2, 3)(onnxnn.randn(1, 3, 4, 4), output_size=[6, 6, 6]),
        ValueError,
        "ConvTranspose2D: for 4D input, output_size must have 2 or 4 elements (got 3)",
    ),
    (
        "fold_blocks",
        lambda: F.fold(onnxnn.randn(1, 12, 10), (5, 6), 2),
        RuntimeError,
        "expected size of input's dimension 2 to match the calculated number of sliding blocks 4 * 5 = 20",
    ),
    (
        "fold_kernel_divides",
        lambda: F.fold(onnxnn.randn(1, 10, 20), (5, 6), 2),
        RuntimeError,
        "Expected size of input's dimension 1 to be divisible by the product of kernel_size",
    ),
    ("unfold_rank", lambda: F.unfold(onnxnn.randn(2, 3), 2), RuntimeError, "Expected 3D or 4D (batch mode) tensor"),
]


@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_in_pytorch_words(case_id, call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


# ---------------------------------------------------------------- against PyTorch, where installed


@pytest.mark.parametrize("case_id, cls, args, kwargs, input_shape", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_layer_agrees_with_pytorch(case_id, cls, args, kwargs, input_shape):
    torch = pytest.importorskip("torch")
    reference = getattr(torch.nn, cls.__name__)(*args, **kwargs).double()
    layer = cls(*args, **kwargs, dtype=onnxnn.float64)
    assert list(layer.state_dict()) == list(reference.state_dict())
    assert repr(layer) == repr(reference)
    layer.load_state_dict({key: onnxnn.tensor(value.detach().numpy()) for key, value in reference.state_dict().items()})
    x = RNG.standard_normal(input_shape)
    xt = torch.tensor(x, requires_grad=True)
    expected = reference(xt)
    expected.sum().backward()
    xo = onnxnn.tensor(x, requires_grad=True)
    with onnxnn.set_executor("kernels"):
        out = layer(xo)
        out.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(layer.weight.grad.numpy(), reference.weight.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "case_id, cls, args, kwargs, input_shape, output_size", TRANSPOSE_CASES, ids=[c[0] for c in TRANSPOSE_CASES]
)
def test_conv_transpose_layer_agrees_with_pytorch(case_id, cls, args, kwargs, input_shape, output_size):
    torch = pytest.importorskip("torch")
    reference = getattr(torch.nn, cls.__name__)(*args, **kwargs).double()
    layer = cls(*args, **kwargs, dtype=onnxnn.float64)
    assert repr(layer) == repr(reference)
    layer.load_state_dict({key: onnxnn.tensor(value.detach().numpy()) for key, value in reference.state_dict().items()})
    x = RNG.standard_normal(input_shape)
    with onnxnn.set_executor("kernels"):
        actual = layer(onnxnn.tensor(x), output_size=output_size).detach().numpy()
    expected = reference(torch.tensor(x), output_size=output_size).detach().numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- lazy forms

LAZY_CASES = [
    # lazy class, arguments, input shape, the class it becomes, expected weight shape
    (nn.LazyConv1d, (4, 3), (2, 6, 7), nn.Conv1d, (4, 6, 3)),
    (nn.LazyConv2d, (8, 3), (5, 4, 4), nn.Conv2d, (8, 5, 3, 3)),  # unbatched: channels are dim 0
    (nn.LazyConv3d, (2, (1, 2, 2)), (1, 3, 2, 3, 3), nn.Conv3d, (2, 3, 1, 2, 2)),
    (nn.LazyConvTranspose1d, (3, 2), (1, 4, 5), nn.ConvTranspose1d, (4, 3, 2)),
    (nn.LazyConvTranspose2d, (6, 3), (2, 4, 3, 3), nn.ConvTranspose2d, (4, 6, 3, 3)),
    (nn.LazyConvTranspose3d, (2, 2), (1, 3, 2, 2, 2), nn.ConvTranspose3d, (3, 2, 2, 2, 2)),
]


@pytest.mark.filterwarnings("ignore:Lazy modules are a new feature")
@pytest.mark.parametrize(
    "lazy_cls, args, input_shape, becomes, weight_shape", LAZY_CASES, ids=[c[0].__name__ for c in LAZY_CASES]
)
def test_lazy_conv_takes_in_channels_from_the_first_input(lazy_cls, args, input_shape, becomes, weight_shape):
    layer = lazy_cls(*args, dtype=onnxnn.float64)
    assert layer.has_uninitialized_params() and isinstance(layer.weight, nn.UninitializedParameter)
    assert layer.in_channels == 0
    x = RNG.standard_normal(input_shape)
    out = layer(onnxnn.tensor(x))
    assert type(layer) is becomes and not hasattr(layer, "_initialize_hook")
    assert type(layer.weight) is nn.Parameter and layer.weight.shape == weight_shape
    assert layer.in_channels == (input_shape[1] if len(input_shape) == len(weight_shape) else input_shape[0])
    assert layer.bias.shape == (args[0],)
    # Initialized as the eager layer is: bound 1 / sqrt(weight.size(1) * kernel size).
    bound = 1 / math.sqrt(int(np.prod(weight_shape[1:])))
    assert np.abs(_values(layer.weight)).max() <= bound and np.abs(_values(layer.bias)).max() <= bound
    # ... and it computes what the eager layer with the same parameters computes.
    eager = becomes(
        *((layer.in_channels, layer.out_channels) + (layer.kernel_size,)), stride=layer.stride, dtype=onnxnn.float64
    )
    eager.load_state_dict(layer.state_dict())
    with onnxnn.set_executor("kernels"):
        np.testing.assert_array_equal(out.detach().numpy(), eager(onnxnn.tensor(x)).detach().numpy())


@pytest.mark.filterwarnings("ignore:Lazy modules are a new feature")
def test_optimizer_built_before_the_first_forward_trains_the_materialized_parameters():
    layer = nn.LazyConv2d(3, 2)
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.5)
    loss = layer(onnxnn.randn(2, 4, 3, 3)).sum()
    loss.backward()
    before = _values(layer.weight).copy()
    gradient = _values(layer.weight.grad)
    optimizer.step()
    np.testing.assert_allclose(_values(layer.weight), before - 0.5 * gradient, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Lazy modules are a new feature")
def test_lazy_conv_state_dict_before_and_after_loading():
    layer = nn.LazyConv1d(4, 3)
    state = layer.state_dict()
    assert list(state) == ["weight", "bias"] and all(isinstance(v, nn.UninitializedParameter) for v in state.values())
    source = nn.Conv1d(6, 4, 3)
    layer.load_state_dict(source.state_dict())
    assert layer.weight.shape == (4, 6, 3) and not layer.has_uninitialized_params()
    np.testing.assert_array_equal(_values(layer.weight), _values(source.weight))
    x = onnxnn.randn(1, 6, 5)
    np.testing.assert_array_equal(layer(x).detach().numpy(), source(x).detach().numpy())
    # PyTorch sets in_channels only when the first forward materializes; after a load it stays 0.
    assert type(layer) is nn.Conv1d and layer.in_channels == 0


@pytest.mark.filterwarnings("ignore:Lazy modules are a new feature")
@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: nn.LazyConv2d(4, 3)(onnxnn.randn(5, 5)),
            RuntimeError,
            "Expected 3D (unbatched) or 4D (batch mode) input to LazyConv2d, but got input of size",
        ),
        (
            lambda: nn.LazyConv1d(4, 3, groups=2)(onnxnn.randn(1, 3, 5)),
            ValueError,
            "in_channels must be divisible by groups",
        ),
    ],
)
def test_lazy_conv_errors_in_pytorch_words(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


def test_lazy_conv_warns_as_pytorch_does_and_reprs_before_initialization():
    with pytest.warns(UserWarning, match="Lazy modules are a new feature"):
        layer = nn.LazyConv2d(8, 3, groups=2)
    assert repr(layer) == "LazyConv2d(0, 8, kernel_size=(3, 3), stride=(1, 1), groups=2)"
    assert repr(layer.weight) == "<UninitializedParameter>"


# ---------------------------------------------------------------- empty batches and empty kernels


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "convolution, input_shape, weight_shape",
    [
        (F.conv3d, (0, 2, 5, 5, 5), (3, 2, 2, 2, 2)),
        (F.conv_transpose3d, (0, 2, 4, 4, 4), (2, 3, 2, 2, 2)),
        (F.conv2d, (0, 2, 5, 5), (3, 2, 3, 3)),
    ],
    ids=["conv3d", "conv_transpose3d", "conv2d"],
)
def test_an_empty_batch_gives_zero_weight_gradients(convolution, input_shape, weight_shape, executor):
    with onnxnn.set_executor(executor):
        x = onnxnn.zeros(*input_shape, requires_grad=True)
        weight = onnxnn.randn(*weight_shape, requires_grad=True)
        convolution(x, weight).sum().backward()
        assert weight.grad.shape == weight_shape
        assert not weight.grad.numpy().any()


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_max_unpool_of_an_empty_batch(rank, executor):
    with onnxnn.set_executor(executor):
        pooled, indices = getattr(F, f"max_pool{rank}d")(onnxnn.zeros((0, 3) + (4,) * rank), 2, return_indices=True)
        assert getattr(F, f"max_unpool{rank}d")(pooled, indices, 2).shape == (0, 3) + (4,) * rank


@pytest.mark.parametrize(
    "convolution, input_shape, weight_shape, detail",
    [
        (F.conv1d, (1, 2, 5), (3, 2, 0), "kernel_height: 1 kernel_width: 0"),
        (F.conv2d, (1, 2, 5, 5), (3, 2, 0, 3), "kernel_height: 0 kernel_width: 3"),
        (F.conv3d, (1, 2, 5, 5, 5), (3, 2, 2, 0, 3), r"2 x 0 x 3 \(TxHxW\)"),
        (F.conv_transpose2d, (1, 2, 5, 5), (2, 3, 3, 0), "kernel_height: 3 kernel_width: 0"),
    ],
)
def test_an_empty_kernel_is_refused_as_pytorch_refuses_it(convolution, input_shape, weight_shape, detail):
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero, but got.*" + detail):
        convolution(onnxnn.zeros(*input_shape), onnxnn.zeros(*weight_shape))


def test_bilinear_needs_a_first_input_feature():
    with pytest.raises(ValueError, match=r"in1_features must be > 0, but got \(in1_features=0\)"):
        nn.Bilinear(0, 2, 3)
