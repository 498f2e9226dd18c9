"""onnxnn.nn.init: distributions, fans and gains against PyTorch's formulas, exact structured fills."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn.nn import init


def _values(tensor):
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


# ---------------------------------------------------------------- gains and fans


@pytest.mark.parametrize(
    "nonlinearity, param, gain",
    [
        ("linear", None, 1.0),
        ("conv1d", None, 1.0),
        ("conv2d", None, 1.0),
        ("conv3d", None, 1.0),
        ("conv_transpose1d", None, 1.0),
        ("conv_transpose2d", None, 1.0),
        ("conv_transpose3d", None, 1.0),
        ("sigmoid", None, 1.0),
        ("tanh", None, 5.0 / 3),
        ("relu", None, math.sqrt(2.0)),
        ("leaky_relu", None, math.sqrt(2.0 / (1 + 0.01**2))),
        ("leaky_relu", 0.2, math.sqrt(2.0 / 1.04)),
        ("leaky_relu", 1, 1.0),
        ("leaky_relu", math.sqrt(5), math.sqrt(2.0 / 6)),
        ("selu", None, 0.75),
    ],
)
def test_calculate_gain(nonlinearity, param, gain):
    assert init.calculate_gain(nonlinearity, param) == pytest.approx(gain, rel=1e-15)


@pytest.mark.parametrize(
    "nonlinearity, param, message",
    [
        ("leaky_relu", True, "negative_slope True not a valid number"),
        ("leaky_relu", "0.1", "negative_slope 0.1 not a valid number"),
        ("softsign", None, "Unsupported nonlinearity softsign"),
    ],
)
def test_calculate_gain_errors(nonlinearity, param, message):
    with pytest.raises(ValueError, match=message):
        init.calculate_gain(nonlinearity, param)


@pytest.mark.parametrize(
    "shape, fans",
    [
        ((3, 5), (5, 3)),
        ((16, 8, 3, 3), (72, 144)),
        ((4, 2, 5), (10, 20)),
        ((6, 3, 2, 2, 2), (24, 48)),
        ((7, 0), (0, 7)),
    ],
)
def test_fan_in_and_fan_out(shape, fans):
    assert init._calculate_fan_in_and_fan_out(onnxnn.empty(*shape)) == fans


@pytest.mark.parametrize("shape", [(5,), ()])
def test_fans_need_two_dimensions(shape):
    with pytest.raises(
        ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
    ):
        init._calculate_fan_in_and_fan_out(onnxnn.empty(shape))


def test_kaiming_rejects_unknown_mode():
    with pytest.raises(ValueError, match=r"Mode fan_avg not supported, please use one of \['fan_in', 'fan_out'\]"):
        init.kaiming_uniform_(onnxnn.empty(3, 4), mode="fan_avg")


# ---------------------------------------------------------------- distributions

SHAPE = (400, 500)


@pytest.mark.parametrize(
    "fill, low, high",
    [
        (lambda t: init.uniform_(t), 0.0, 1.0),
        (lambda t: init.uniform_(t, -3.0, 5.0), -3.0, 5.0),
    ],
)
def test_uniform_bounds_and_moments(fill, low, high):
    values = _values(fill(onnxnn.empty(*SHAPE)))
    assert values.min() >= low and values.max() < high
    assert values.mean() == pytest.approx((low + high) / 2, abs=0.01 * (high - low))
    assert values.std() == pytest.approx((high - low) / math.sqrt(12), rel=0.01)


@pytest.mark.parametrize("mean, std", [(0.0, 1.0), (2.0, 0.5)])
def test_normal_moments(mean, std):
    values = _values(init.normal_(onnxnn.empty(*SHAPE), mean, std))
    assert values.mean() == pytest.approx(mean, abs=0.01 * std)
    assert values.std() == pytest.approx(std, rel=0.01)


def _truncated_normal_moments(mean, std, a, b):
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    z = cdf(beta) - cdf(alpha)
    shift = (pdf(alpha) - pdf(beta)) / z
    variance = 1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - shift**2
    return mean + std * shift, std * math.sqrt(variance)


@pytest.mark.parametrize("mean, std, a, b", [(0.0, 1.0, -2.0, 2.0), (1.0, 2.0, -1.0, 4.0), (0.0, 0.02, -0.04, 0.04)])
def test_trunc_normal_bounds_and_moments(mean, std, a, b):
    values = _values(init.trunc_normal_(onnxnn.empty(*SHAPE), mean, std, a, b))
    expected_mean, expected_std = _truncated_normal_moments(mean, std, a, b)
    assert values.min() >= a and values.max() <= b
    assert values.mean() == pytest.approx(expected_mean, abs=0.01 * std)
    assert values.std() == pytest.approx(expected_std, rel=0.01)


def test_trunc_normal_warns_when_the_mean_is_far_outside_the_bounds():
    with pytest.warns(UserWarning, match=r"mean is more than 2 std from \[a, b\] in nn.init.trunc_normal_"):
        init.trunc_normal_(onnxnn.empty(10), mean=10.0, std=1.0, a=-2.0, b=2.0)


def test_xavier_uniform_and_normal_follow_glorot():
    shape, gain = (300, 200, 3), 1.7
    fan_in, fan_out = 200 * 3, 300 * 3
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    uniform = _values(init.xavier_uniform_(onnxnn.empty(*shape), gain=gain))
    assert np.abs(uniform).max() <= math.sqrt(3) * std
    assert uniform.std() == pytest.approx(std, rel=0.01)
    normal = _values(init.xavier_normal_(onnxnn.empty(*shape), gain=gain))
    assert normal.std() == pytest.approx(std, rel=0.01)
    assert normal.mean() == pytest.approx(0.0, abs=0.01 * std)


@pytest.mark.parametrize(
    "a, mode, nonlinearity",
    [
        (0, "fan_in", "leaky_relu"),
        (math.sqrt(5), "fan_in", "leaky_relu"),
        (0, "fan_out", "relu"),
        (0, "FAN_OUT", "tanh"),
        (0.1, "fan_in", "leaky_relu"),
    ],
)
def test_kaiming_uniform_and_normal_follow_he(a, mode, nonlinearity):
    shape = (250, 120, 2, 2)
    fan = 120 * 4 if mode.lower() == "fan_in" else 250 * 4
    std = init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    uniform = _values(init.kaiming_uniform_(onnxnn.empty(*shape), a=a, mode=mode, nonlinearity=nonlinearity))
    assert np.abs(uniform).max() <= math.sqrt(3) * std
    assert np.abs(uniform).max() > 0.99 * math.sqrt(3) * std
    assert uniform.std() == pytest.approx(std, rel=0.01)
    normal = _values(init.kaiming_normal_(onnxnn.empty(*shape), a=a, mode=mode, nonlinearity=nonlinearity))
    assert normal.std() == pytest.approx(std, rel=0.01)


@pytest.mark.parametrize("fill", [init.kaiming_uniform_, init.kaiming_normal_])
def test_kaiming_on_zero_element_tensor_warns_and_does_nothing(fill):
    tensor = onnxnn.empty(0, 3)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert fill(tensor) is tensor


# ---------------------------------------------------------------- structured fills


@pytest.mark.parametrize(
    "fill, expected",
    [
        (lambda t: init.constant_(t, 0.25), np.full((3, 4), 0.25)),
        (init.ones_, np.ones((3, 4))),
        (init.zeros_, np.zeros((3, 4))),
        (init.eye_, np.eye(3, 4)),
    ],
)
def test_constant_fills(fill, expected):
    tensor = onnxnn.randn(3, 4)
    assert fill(tensor) is tensor
    np.testing.assert_array_equal(tensor.numpy(), expected)


def test_eye_on_wide_and_tall_matrices():
    np.testing.assert_array_equal(init.eye_(onnxnn.empty(4, 2)).numpy(), np.eye(4, 2))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(onnxnn.empty(2, 2, 2))


def test_dirac_preserves_the_input_channels():
    weight = init.dirac_(onnxnn.randn(4, 2, 3, 3)).numpy()
    expected = np.zeros((4, 2, 3, 3))
    expected[0, 0, 1, 1] = expected[1, 1, 1, 1] = 1
    np.testing.assert_array_equal(weight, expected)


def test_dirac_with_groups():
    weight = init.dirac_(onnxnn.randn(6, 2, 3), groups=2).numpy()
    expected = np.zeros((6, 2, 3))
    for group in range(2):
        for channel in range(2):
            expected[group * 3 + channel, channel, 1] = 1
    np.testing.assert_array_equal(weight, expected)
    assert init.dirac_(onnxnn.randn(2, 2, 2, 2, 4)).numpy()[1, 1, 1, 1, 2] == 1


@pytest.mark.parametrize(
    "shape, groups, message",
    [
        ((3, 3), 1, "Only tensors with 3, 4, or 5 dimensions are supported"),
        ((5, 2, 3), 2, "dim 0 must be divisible by groups"),
    ],
)
def test_dirac_errors(shape, groups, message):
    with pytest.raises(ValueError, match=message):
        init.dirac_(onnxnn.empty(*shape), groups=groups)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (6, 2, 3)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_orthogonal_rows_or_columns_are_orthonormal(shape, gain):
    matrix = _values(init.orthogonal_(onnxnn.empty(*shape), gain=gain)).reshape(shape[0], -1) / gain
    rows, columns = matrix.shape
    product = matrix @ matrix.T if rows <= columns else matrix.T @ matrix
    np.testing.assert_allclose(product, np.eye(min(rows, columns)), atol=1e-6)


def test_orthogonal_errors_and_empty_tensors():
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(onnxnn.empty(3))
    empty = onnxnn.empty(0, 3)
    assert init.orthogonal_(empty) is empty


@pytest.mark.parametrize("sparsity", [0.1, 0.5, 0.75])
def test_sparse_zeroes_the_same_count_in_every_column(sparsity):
    rows, columns = 40, 300
    values = _values(init.sparse_(onnxnn.empty(rows, columns), sparsity, std=0.5))
    zeros_per_column = (values == 0).sum(axis=0)
    np.testing.assert_array_equal(zeros_per_column, math.ceil(sparsity * rows))
    assert values[values != 0].std() == pytest.approx(0.5, rel=0.05)


def test_sparse_needs_a_matrix():
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(onnxnn.empty(3, 4, 5), 0.5)


# ---------------------------------------------------------------- behaviour shared by every fill

ALL_FILLS = [
    ("uniform_", init.uniform_),
    ("normal_", init.normal_),
    ("trunc_normal_", init.trunc_normal_),
    ("constant_", lambda t: init.constant_(t, 3.0)),
    ("ones_", init.ones_),
    ("zeros_", init.zeros_),
    ("eye_", init.eye_),
    ("xavier_uniform_", init.xavier_uniform_),
    ("xavier_normal_", init.xavier_normal_),
    ("kaiming_uniform_", init.kaiming_uniform_),
    ("kaiming_normal_", init.kaiming_normal_),
    ("orthogonal_", init.orthogonal_),
    ("sparse_", lambda t: init.sparse_(t, 0.5)),
]


@pytest.mark.parametrize("name, fill", ALL_FILLS, ids=[f[0] for f in ALL_FILLS])
def test_fills_a_leaf_that_requires_grad_without_recording(name, fill):
    parameter = onnxnn.zeros(6, 4, requires_grad=True)
    assert fill(parameter) is parameter
    assert parameter.requires_grad and parameter.is_leaf and parameter.grad_fn is None
    assert parameter.shape == (6, 4) and parameter.dtype is onnxnn.float32


@pytest.mark.parametrize("dtype", [onnxnn.float64, onnxnn.float16])
def test_fills_keep_the_dtype(dtype):
    tensor = init.kaiming_uniform_(onnxnn.empty(8, 8, dtype=dtype))
    assert tensor.dtype is dtype
    assert np.abs(_values(tensor)).max() <= math.sqrt(3) * init.calculate_gain("leaky_relu", 0) / math.sqrt(8) + 1e-3


@pytest.mark.parametrize(
    "fill",
    [init.uniform_, init.normal_, init.trunc_normal_, init.xavier_uniform_, init.kaiming_normal_, init.orthogonal_],
)
def test_seeded_fills_repeat_and_generators_are_honoured(fill):
    onnxnn.manual_seed(11)
    first = _values(fill(onnxnn.empty(5, 6)))
    onnxnn.manual_seed(11)
    np.testing.assert_array_equal(_values(fill(onnxnn.empty(5, 6))), first)
    generator = onnxnn.Generator().manual_seed(5)
    own = _values(fill(onnxnn.empty(5, 6), generator=generator))
    generator.manual_seed(5)
    np.testing.assert_array_equal(_values(fill(onnxnn.empty(5, 6), generator=generator)), own)
    assert not np.array_equal(own, first)


def test_skipping_initialization_makes_fills_no_ops_and_draws_nothing():
    tensor = onnxnn.zeros(3, 4)
    onnxnn.manual_seed(3)
    state = onnxnn.get_rng_state()
    with init._skipping_initialization():
        for name, fill in ALL_FILLS:
            fill(tensor)
    np.testing.assert_array_equal(tensor.numpy(), np.zeros((3, 4)))
    assert onnxnn.get_rng_state() == state
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        init.ones_(tensor)
    np.testing.assert_array_equal(tensor.numpy(), np.ones((3, 4)))
