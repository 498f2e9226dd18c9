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


# ---------------------------------------------------------------- far tails and PyTorch's refusals


def _tail_safe_truncated_normal_moments(mean, std, a, b):
    """The truncated normal's mean and std with the mass taken from erfc on the side of the bounds
    (``cdf(b) - cdf(a)`` rounds to 0 when both lie 9 std above the mean)."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    if alpha > 0:  # upper tail: Q(alpha) - Q(beta), Q(x) = erfc(x / sqrt 2) / 2
        z = (math.erfc(alpha / math.sqrt(2)) - math.erfc(beta / math.sqrt(2))) / 2
    else:  # cdf(x) = erfc(-x / sqrt 2) / 2 keeps the lower tail
        z = (math.erfc(-beta / math.sqrt(2)) - math.erfc(-alpha / math.sqrt(2))) / 2
    shift = (pdf(alpha) - pdf(beta)) / z
    variance = 1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - shift**2
    return mean + std * shift, std * math.sqrt(variance)


@pytest.mark.parametrize(
    "mean, std, a, b",
    [(0.0, 1.0, 6.0, 7.0), (0.0, 1.0, -7.0, -6.0), (0.0, 1.0, 10.0, 11.0), (0.0, 1.0, 5.5, 6.5), (3.0, 0.5, -1.0, 1.0)],
)
def test_trunc_normal_far_in_the_tail_follows_the_truncated_distribution(mean, std, a, b):
    # The inverse-CDF sampler rounded both CDF values to 1 there and put every sample on one bound.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "mean is more than 2 std from [a, b]": expected here
        values = _values(init.trunc_normal_(onnxnn.empty(*SHAPE), mean, std, a, b))
    expected_mean, expected_std = _tail_safe_truncated_normal_moments(mean, std, a, b)
    assert values.min() >= a and values.max() <= b
    # Five standard errors of the sample mean and (about) of the sample std over 200000 samples.
    assert abs(values.mean() - expected_mean) <= 5 * expected_std / math.sqrt(values.size)
    assert values.std() == pytest.approx(expected_std, rel=5 * math.sqrt(2 / values.size) + 1e-3)


ARGUMENT_ERRORS = [
    ("uniform_ a > b", lambda: init.uniform_(onnxnn.zeros(3), 1.0, 0.0), RuntimeError, r"\[from, to\) range"),
    (
        "uniform_ inf",
        lambda: init.uniform_(onnxnn.zeros(3), 0.0, math.inf),
        RuntimeError,
        "to is out of bounds for float",
    ),
    ("uniform_ nan", lambda: init.uniform_(onnxnn.zeros(3), math.nan, 1.0), RuntimeError, "from is out of bounds"),
    ("uniform_ 1e39", lambda: init.uniform_(onnxnn.zeros(3), 0.0, 1e39), RuntimeError, "to is out of bounds for float"),
    (
        "uniform_ f16 range",
        lambda: init.uniform_(onnxnn.zeros(3, dtype=onnxnn.float16), -6e4, 6e4),
        RuntimeError,
        "to-from to exceed the limit",
    ),
    (
        "uniform_ bf16 bound",
        lambda: init.uniform_(onnxnn.zeros(3, dtype=onnxnn.bfloat16), 0.0, 3.4e38),
        RuntimeError,
        "out of bounds for c10::BFloat16",
    ),
    ("normal_ std < 0", lambda: init.normal_(onnxnn.zeros(3), 0.0, -1.0), RuntimeError, "normal expects std >= 0.0"),
    ("normal_ std nan", lambda: init.normal_(onnxnn.zeros(3), 0.0, math.nan), RuntimeError, "std >= 0.0"),
    ("xavier_uniform_ gain < 0", lambda: init.xavier_uniform_(onnxnn.zeros(3, 4), gain=-1.0), RuntimeError, "range"),
    ("xavier_normal_ gain < 0", lambda: init.xavier_normal_(onnxnn.zeros(3, 4), gain=-1.0), RuntimeError, "std >= 0"),
    ("sparse_ std < 0", lambda: init.sparse_(onnxnn.zeros(3, 4), 0.5, std=-1.0), RuntimeError, "std >= 0"),
    ("trunc_normal_ a > b", lambda: init.trunc_normal_(onnxnn.zeros(3), 0, 1, a=1, b=-1), RuntimeError, "range"),
    (
        "constant_ nan into int64",
        lambda: init.constant_(onnxnn.zeros(3, dtype=onnxnn.int64), math.nan),
        RuntimeError,
        "cannot be converted to type int64_t without overflow",
    ),
    ("constant_ 1e40", lambda: init.constant_(onnxnn.zeros(3), 1e40), RuntimeError, "to type float without overflow"),
    (
        "constant_ f16 65505",
        lambda: init.constant_(onnxnn.zeros(3, dtype=onnxnn.float16), 65505.0),
        RuntimeError,
        "c10::Half without overflow",
    ),
    (
        "constant_ uint8 256",
        lambda: init.constant_(onnxnn.zeros(3, dtype=onnxnn.uint8), 256),
        RuntimeError,
        "uint8_t without overflow",
    ),
    (
        "constant_ str",
        lambda: init.constant_(onnxnn.zeros(3), "a"),
        TypeError,
        r"fill_\(\) received an invalid combination of arguments - got \(str\)",
    ),
    ("constant_ None", lambda: init.constant_(onnxnn.zeros(3), None), TypeError, r"got \(NoneType\)"),
]
RANDOM_FILLS = [
    ("uniform_", init.uniform_, "check_uniform_bounds"),
    ("normal_", init.normal_, "normal_kernel_cpu"),
    ("trunc_normal_", init.trunc_normal_, "normal_kernel_cpu"),
    ("xavier_uniform_", init.xavier_uniform_, "check_uniform_bounds"),
    ("kaiming_normal_", init.kaiming_normal_, "normal_kernel_cpu"),
    ("orthogonal_", init.orthogonal_, "normal_kernel_cpu"),
    ("sparse_", lambda t: init.sparse_(t, 0.5), "normal_kernel_cpu"),
]
for name, fill, kernel in RANDOM_FILLS:
    for dtype, type_name in ((onnxnn.int64, "Long"), (onnxnn.bool, "Bool")):
        ARGUMENT_ERRORS.append(
            (
                f"{name} on {dtype}",
                lambda fill=fill, dtype=dtype: fill(onnxnn.zeros(3, 4, dtype=dtype)),
                NotImplementedError,
                f"\"{kernel}\" not implemented for '{type_name}'",
            )
        )


@pytest.mark.parametrize(
    "call, error, message", [case[1:] for case in ARGUMENT_ERRORS], ids=[c[0] for c in ARGUMENT_ERRORS]
)
def test_arguments_pytorch_refuses_raise_its_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    "fill, dtype, expected",
    [
        (lambda t: init.uniform_(t, 1.0, 1.0), onnxnn.float32, 1.0),
        (lambda t: init.normal_(t, 2.0, 0.0), onnxnn.float32, 2.0),
        (lambda t: init.constant_(t, math.inf), onnxnn.float32, math.inf),
        (lambda t: init.constant_(t, 65504.0), onnxnn.float16, 65504.0),
        (lambda t: init.constant_(t, 1.5), onnxnn.int64, 1),
        (lambda t: init.constant_(t, -129), onnxnn.uint8, 127),  # C++'s wrap-around, as PyTorch
        (lambda t: init.constant_(t, math.nan), onnxnn.bool, True),
        (lambda t: init.trunc_normal_(t, 0.0, 1.0, 1.0, 1.0), onnxnn.float32, 1.0),
    ],
)
def test_edge_arguments_pytorch_accepts_still_fill(fill, dtype, expected):
    np.testing.assert_array_equal(fill(onnxnn.zeros(3, dtype=dtype)).numpy(), np.full(3, expected))


# ---------------------------------------------------------------- deprecated aliases without the underscore

# (alias, its arguments after the tensor): each warns, then fills exactly as the underscore version
DEPRECATED_ALIASES = [
    ("uniform", (-2.0, 3.0)),
    ("normal", (1.0, 0.5)),
    ("constant", (0.25,)),
    ("eye", ()),
    ("dirac", ()),
    ("xavier_uniform", (2.0,)),
    ("xavier_normal", ()),
    ("kaiming_uniform", (0.1,)),
    ("kaiming_normal", ()),
    ("orthogonal", (1.5,)),
    ("sparse", (0.5,)),
]


@pytest.mark.parametrize("alias, args", DEPRECATED_ALIASES, ids=[case[0] for case in DEPRECATED_ALIASES])
def test_deprecated_alias_warns_and_fills_as_the_underscore_version(alias, args):
    shape = (3, 3, 1) if alias == "dirac" else (4, 6)
    onnxnn.manual_seed(5)
    expected = _values(getattr(init, alias + "_")(onnxnn.empty(*shape), *args))
    onnxnn.manual_seed(5)
    tensor = onnxnn.empty(*shape)
    with pytest.warns(
        FutureWarning, match=rf"^`nn.init.{alias}` is now deprecated in favor of `nn.init.{alias}_`.$"
    ) as seen:
        assert getattr(init, alias)(tensor, *args) is tensor
    assert seen[0].filename == __file__  # the warning points at the caller
    np.testing.assert_array_equal(_values(tensor), expected)
    assert getattr(init, alias).__name__ == alias and alias in init.__all__


@pytest.mark.parametrize(
    "alias, expected",
    [
        ("constant", np.full((2, 3), 0.25)),
        ("eye", np.eye(2, 3)),
    ],
)
def test_deprecated_structured_aliases_fill_the_documented_values(alias, expected):
    tensor = onnxnn.empty(2, 3)
    with pytest.warns(FutureWarning):
        getattr(init, alias)(tensor, *((0.25,) if alias == "constant" else ()))
    np.testing.assert_array_equal(_values(tensor), expected)


def test_init_has_every_name_of_torch_nn_init():
    torch = pytest.importorskip("torch")
    assert set(torch.nn.init.__all__) <= set(init.__all__)


FLOAT64_FILLS = [
    ("uniform_", lambda t: init.uniform_(t, 1e6, 1e6 + 1)),
    ("normal_", lambda t: init.normal_(t, mean=1e6)),
    ("trunc_normal_", lambda t: init.trunc_normal_(t, mean=3000.0005, std=1.0, a=3000.0, b=3000.001)),
    ("kaiming_uniform_", lambda t: init.kaiming_uniform_(t.reshape(100, 1000))),
    ("xavier_normal_", lambda t: init.xavier_normal_(t.reshape(100, 1000))),
]


@pytest.mark.parametrize("name, fill", FLOAT64_FILLS, ids=[case[0] for case in FLOAT64_FILLS])
def test_float64_tensors_get_float64_draws(name, fill):
    # Draws made in float32 and widened would all be float32 numbers (17 distinct values of 1e5 in
    # [1e6, 1e6 + 1)); float64 draws almost never are.
    values = fill(onnxnn.empty(100_000, dtype=onnxnn.float64)).numpy()
    assert np.mean(values == values.astype(np.float32)) < 0.01
    assert len(np.unique(values)) > 99_000


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-3.0, 7.0), (-1.0, 1.0)])
def test_half_uniform_draws_stay_below_the_upper_bound(dtype, low, high):
    values = init.uniform_(onnxnn.empty(100_000, dtype=dtype), low, high).float().numpy()
    assert values.min() >= low and values.max() < high
