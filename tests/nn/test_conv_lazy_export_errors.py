"""Convolution layers beyond their float values: low precision, export to plain onnxruntime, errors in
PyTorch's words, the lazy forms, empty batches and empty kernels, and the comparison with PyTorch
(run only where torch is installed).

Tolerances are Higham's bound for sums of ``terms`` products (conv_layer_cases.py). The layers'
values against numpy are in test_conv_against_numpy.py.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx

from .conv_layer_cases import CONV_CASES, TRANSPOSE_CASES, _values, assert_within_conv_rounding

RNG = np.random.default_rng(12)

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


def test_optimizer_built_before_the_first_forward_trains_the_materialized_parameters():
    layer = nn.LazyConv2d(3, 2)
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.5)
    loss = layer(onnxnn.randn(2, 4, 3, 3)).sum()
    loss.backward()
    before = _values(layer.weight).copy()
    gradient = _values(layer.weight.grad)
    optimizer.step()
    np.testing.assert_allclose(_values(layer.weight), before - 0.5 * gradient, rtol=1e-6, atol=1e-6)


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


def test_lazy_conv_reprs_before_initialization():
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
