"""fake_quantize_per_tensor_affine / per_channel_affine against the numpy formula, exactly, on both
executors; the straight-through gradient against its mask (and torch when installed); observers'
and FakeQuantize's scale and zero point against PyTorch's formulas written in numpy.

The expected values are ``(clip(rint(x / scale) + zero_point, quant_min, quant_max) - zero_point) * scale``
evaluated in float32, the same IEEE operations QuantizeLinear and DequantizeLinear specify: equal bit
for bit, no tolerance.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.quantization import (
    FakeQuantize,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
    disable_observer,
    fake_quantize_per_channel_affine,
    fake_quantize_per_tensor_affine,
    quint8,
)


def expected_fake_quantize(x, scale, zero_point, quant_min, quant_max):
    scale = np.float32(scale)
    levels = np.clip(np.rint(x / scale) + zero_point, quant_min, quant_max)
    return ((levels - zero_point) * scale).astype(np.float32)


def straight_through_mask(x, scale, zero_point, quant_min, quant_max):
    levels = np.rint(x / np.float32(scale)) + zero_point
    return ((levels >= quant_min) & (levels <= quant_max)).astype(np.float32)


def sample(shape=(4, 25)):
    # Spread wide enough that every case clamps on both sides.
    return (np.random.default_rng(0).standard_normal(shape) * 3).astype(np.float32)


# scale, zero_point, quant_min, quant_max: full 8-bit ranges, grids narrower than their storage
# type (clipped before QuantizeLinear), and a 16-bit grid.
PER_TENSOR_CASES = [
    pytest.param(0.05, 0, -128, 127, id="qint8"),
    pytest.param(0.02, 128, 0, 255, id="quint8"),
    pytest.param(0.03, 10, 0, 127, id="quint8-reduce-range"),
    pytest.param(0.025, 0, -127, 127, id="symmetric-127"),
    pytest.param(0.25, -3, -8, 7, id="4-bit"),
    pytest.param(1e-4, 5, -32768, 32767, id="16-bit"),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("scale, zero_point, quant_min, quant_max", PER_TENSOR_CASES)
def test_per_tensor_values_and_gradient_equal_the_formula(executor, scale, zero_point, quant_min, quant_max):
    data = sample()
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(data, requires_grad=True)
        y = fake_quantize_per_tensor_affine(x, scale, zero_point, quant_min, quant_max)
        y.backward(onnxnn.ones_like(y))
        np.testing.assert_array_equal(
            y.detach().numpy(), expected_fake_quantize(data, scale, zero_point, quant_min, quant_max)
        )
        mask = straight_through_mask(data, scale, zero_point, quant_min, quant_max)
        assert 0 < mask.sum() < mask.size  # some values pass, some are clamped
        np.testing.assert_array_equal(x.grad.numpy(), mask)


def test_tensor_scale_and_zero_point_and_float64_input():
    data = sample().astype(np.float64)
    x = onnxnn.tensor(data)
    y = fake_quantize_per_tensor_affine(x, onnxnn.tensor([0.1]), onnxnn.tensor([3], dtype=onnxnn.int32), 0, 255)
    assert y.dtype == onnxnn.float64
    expected = expected_fake_quantize(data.astype(np.float32), 0.1, 3, 0, 255)
    np.testing.assert_array_equal(y.numpy(), expected.astype(np.float64))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_per_channel_values_and_gradient(axis):
    data = sample((3, 4, 5))
    channels = data.shape[axis]
    scale = np.linspace(0.05, 0.4, channels).astype(np.float32)
    zero_point = np.arange(channels, dtype=np.int32) * 20
    x = onnxnn.tensor(data, requires_grad=True)
    y = fake_quantize_per_channel_affine(x, onnxnn.tensor(scale), onnxnn.tensor(zero_point), axis, 0, 255)
    y.sum().backward()
    shape = [1] * data.ndim
    shape[axis] = channels
    scale_b, zero_point_b = scale.reshape(shape), zero_point.reshape(shape)
    np.testing.assert_array_equal(y.detach().numpy(), expected_fake_quantize(data, scale_b, zero_point_b, 0, 255))
    np.testing.assert_array_equal(x.grad.numpy(), straight_through_mask(data, scale_b, zero_point_b, 0, 255))


def test_records_a_quantize_dequantize_pair():
    class FakeQuantized(onnxnn.nn.Module):
        def forward(self, x):
            return fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)

    ops = [node.op_type for node in to_onnx(FakeQuantized(), (onnxnn.randn(2, 3),)).graph.node]
    assert ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 1
    assert ops.index("QuantizeLinear") < ops.index("DequantizeLinear")


@pytest.mark.parametrize("scale, zero_point, quant_min, quant_max", PER_TENSOR_CASES[:4])
def test_matches_torch(scale, zero_point, quant_min, quant_max):
    torch = pytest.importorskip("torch")
    data = sample()
    # torch multiplies by 1/scale where ONNX divides: the two can round apart only at exact ties
    # of x / scale, which the comparison leaves out.
    away_from_ties = np.abs(np.abs(data / np.float32(scale)) % 1 - 0.5) > 1e-3
    reference = torch.tensor(data, requires_grad=True)
    expected = torch.fake_quantize_per_tensor_affine(reference, scale, zero_point, quant_min, quant_max)
    expected.sum().backward()
    x = onnxnn.tensor(data, requires_grad=True)
    y = fake_quantize_per_tensor_affine(x, scale, zero_point, quant_min, quant_max)
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy()[away_from_ties], expected.detach().numpy()[away_from_ties])
    np.testing.assert_array_equal(x.grad.numpy()[away_from_ties], reference.grad.numpy()[away_from_ties])


@pytest.mark.parametrize(
    "call, error, match",
    [
        # PyTorch's exception types and messages.
        (lambda x: fake_quantize_per_tensor_affine(x, 0.1, 0, 10, -10), RuntimeError, "`quant_min` should be less"),
        (lambda x: fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255), RuntimeError, "`zero_point` must be between"),
        (lambda x: FakeQuantize(quant_min=3, quant_max=2), AssertionError, "quant_min must be less than or equal"),
        (lambda x: MinMaxObserver(quant_min=5, quant_max=-5), AssertionError, "range must include 0"),
        (lambda x: MinMaxObserver(quant_min=0, quant_max=0), AssertionError, "qmin must be strictly less"),
        (lambda x: MinMaxObserver(qscheme="per_channel_affine"), NotImplementedError, "qscheme only supports"),
        (lambda x: fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 70000), ValueError, "fits no type"),
        (lambda x: fake_quantize_per_tensor_affine(x.long(), 0.1, 0, 0, 255), TypeError, "floating point"),
        (
            lambda x: fake_quantize_per_channel_affine(x, onnxnn.ones(3), onnxnn.zeros(3), 0, 0, 255),
            RuntimeError,
            "4 entries",
        ),
        (
            lambda x: fake_quantize_per_channel_affine(x, onnxnn.ones(4), onnxnn.zeros(4), 2, 0, 255),
            IndexError,
            "axis 2",
        ),
        (lambda x: MinMaxObserver(dtype="qint4"), ValueError, "unsupported quantized dtype 'qint4'"),
        (lambda x: MinMaxObserver(dtype=onnxnn.float32), ValueError, "unsupported quantized dtype"),
        (lambda x: MinMaxObserver(dtype="quint8", quant_min=0, quant_max=300), ValueError, "does not fit"),
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(onnxnn.randn(4, 5))


# ---------------------------------------------------------------- observers and FakeQuantize


def affine_qparams(low, high, quant_min, quant_max):
    low, high = min(low, 0.0), max(high, 0.0)
    scale = max((high - low) / (quant_max - quant_min), np.finfo(np.float32).eps)
    return np.float32(scale), int(np.clip(quant_min - np.rint(low / np.float32(scale)), quant_min, quant_max))


def test_min_max_observer_affine_parameters():
    observer = MinMaxObserver(dtype=quint8)
    first, second = sample(), sample((2, 3)) * 4
    observer(onnxnn.tensor(first))
    observer(onnxnn.tensor(second))
    low, high = min(first.min(), second.min()), max(first.max(), second.max())
    assert observer.min_val.item() == np.float32(low) and observer.max_val.item() == np.float32(high)
    scale, zero_point = observer.calculate_qparams()
    expected_scale, expected_zero_point = affine_qparams(low, high, 0, 255)
    np.testing.assert_allclose(scale.item(), expected_scale, rtol=1e-6)
    assert zero_point.item() == expected_zero_point


@pytest.mark.parametrize("dtype, zero_point", [("qint8", 0), ("quint8", 128)])
def test_symmetric_parameters(dtype, zero_point):
    observer = MinMaxObserver(dtype=dtype, qscheme="per_tensor_symmetric")
    data = sample()
    observer(onnxnn.tensor(data))
    scale, point = observer.calculate_qparams()
    np.testing.assert_allclose(scale.item(), np.abs(data).max() / 127.5, rtol=1e-6)
    assert point.item() == zero_point


def test_moving_average_observer_follows_the_average():
    observer = MovingAverageMinMaxObserver(averaging_constant=0.25)
    first, second = sample(), sample((2, 3)) * 4
    observer(onnxnn.tensor(first))
    observer(onnxnn.tensor(second))
    expected_min = first.min() + 0.25 * (second.min() - first.min())
    np.testing.assert_allclose(observer.min_val.item(), expected_min, rtol=1e-6)


def test_per_channel_observer():
    observer = MovingAveragePerChannelMinMaxObserver(ch_axis=1, dtype="qint8", qscheme="per_channel_symmetric")
    data = sample((2, 3, 4))
    observer(onnxnn.tensor(data))
    np.testing.assert_array_equal(observer.max_val.numpy(), data.max(axis=(0, 2)))
    scale, zero_point = observer.calculate_qparams()
    np.testing.assert_allclose(scale.numpy(), np.abs(data).max(axis=(0, 2)) / 127.5, rtol=1e-6)
    np.testing.assert_array_equal(zero_point.numpy(), 0)


def test_fake_quantize_observes_then_freezes():
    fake_quant = FakeQuantize(observer=MinMaxObserver, quant_min=0, quant_max=255, dtype=quint8)
    data = sample()
    y = fake_quant(onnxnn.tensor(data))
    scale, zero_point = affine_qparams(data.min(), data.max(), 0, 255)
    np.testing.assert_allclose(fake_quant.scale.numpy(), [scale], rtol=1e-6)
    assert fake_quant.zero_point.numpy().tolist() == [zero_point]
    frozen = fake_quant.scale.numpy().copy()
    np.testing.assert_array_equal(y.numpy(), expected_fake_quantize(data, frozen[0], zero_point, 0, 255))
    fake_quant.apply(disable_observer)
    fake_quant(onnxnn.tensor(data * 10))
    np.testing.assert_array_equal(fake_quant.scale.numpy(), frozen)
    fake_quant.disable_fake_quant()
    np.testing.assert_array_equal(fake_quant(onnxnn.tensor(data)).numpy(), data)
    keys = list(fake_quant.state_dict())
    assert keys == [
        "fake_quant_enabled",
        "observer_enabled",
        "scale",
        "zero_point",
        "activation_post_process.eps",
        "activation_post_process.min_val",
        "activation_post_process.max_val",
    ]


@pytest.mark.parametrize(
    "dtype, quant_min, quant_max, reduced",
    [("qint8", -128, 127, (-64, 63)), ("quint8", 0, 15, (0, 7)), ("quint8", None, None, (0, 127))],
)
def test_reduce_range_halves_a_given_range_too(dtype, quant_min, quant_max, reduced):
    # As PyTorch's calculate_qmin_qmax: one bit less, whether the range is the dtype's or given.
    observer = MinMaxObserver(dtype=dtype, reduce_range=True, quant_min=quant_min, quant_max=quant_max)
    assert (observer.quant_min, observer.quant_max) == reduced


def test_per_channel_float_zero_points_round_with_the_zero_point():
    # (clamp(round(x / scale + zero_point), min, max) - zero_point) * scale, the zero point not
    # truncated to an integer; the gradient passes where the level is in range.
    x = onnxnn.tensor([[0.0, 0.1, 0.26, 30.0, -5.0]], requires_grad=True)
    scale, zero_point = np.float32(0.1), np.float32(1.5)
    result = fake_quantize_per_channel_affine(x, onnxnn.tensor([0.1]), onnxnn.tensor([1.5]), 0, 0, 255)
    result.sum().backward()
    data = x.detach().numpy()
    level = np.rint(data * (np.float32(1) / scale) + zero_point)
    expected = (np.clip(level, 0, 255) - zero_point) * scale
    np.testing.assert_allclose(result.detach().numpy(), expected, rtol=2**-23)
    np.testing.assert_array_equal(x.grad.numpy(), ((level >= 0) & (level <= 255)).astype(np.float32))


# ---------------------------------------------------------------- PyTorch's arithmetic by input dtype
# PyTorch's kernels: level = clamp(nearbyint(x * float32(1 / scale)) + zero_point, quant_min, quant_max),
# output = (level - zero_point) * scale; half inputs computed in float32 and cast back, float64 inputs
# leveled in float64 (the per-channel output multiplied in float64, the per-tensor one in float32).


def torch_levels(x, scale, zero_point, compute):
    inverse = (np.float32(1) / np.float32(scale)).astype(compute)
    return np.rint(x.astype(compute) * inverse) + zero_point


HALF_CASES = [
    pytest.param(np.float16, 0.1, 0, 0, 255, id="float16-quint8"),
    pytest.param(np.float16, 0.01, 128, 0, 255, id="float16-zp128"),
    pytest.param(np.float16, 0.003, 0, -128, 127, id="float16-qint8"),
    pytest.param(ml_dtypes.bfloat16, 0.01, 128, 0, 255, id="bfloat16-zp128"),
    pytest.param(ml_dtypes.bfloat16, 0.05, -3, -128, 127, id="bfloat16-qint8"),
]


@pytest.mark.parametrize("dtype, scale, zero_point, quant_min, quant_max", HALF_CASES)
def test_half_inputs_are_quantized_in_float32(dtype, scale, zero_point, quant_min, quant_max):
    data = np.random.default_rng(1).standard_normal(1000).astype(dtype)
    wide = data.astype(np.float32)
    # Leaves out the ties, where QuantizeLinear's x / scale and PyTorch's x * (1 / scale) may part.
    away_from_ties = np.abs(np.abs(wide / np.float32(scale)) % 1 - 0.5) > 1e-3
    levels = torch_levels(wide, scale, zero_point, np.float32)
    expected = ((np.clip(levels, quant_min, quant_max) - zero_point) * np.float32(scale)).astype(np.float32)
    x = onnxnn.tensor(data, requires_grad=True)
    y = fake_quantize_per_tensor_affine(x, scale, zero_point, quant_min, quant_max)
    y.sum().backward()
    assert y.dtype == x.dtype
    got = y.detach().numpy().astype(np.float32)
    np.testing.assert_array_equal(got[away_from_ties], expected.astype(dtype).astype(np.float32)[away_from_ties])
    mask = ((levels >= quant_min) & (levels <= quant_max)).astype(np.float32)
    np.testing.assert_array_equal(x.grad.numpy().astype(np.float32)[away_from_ties], mask[away_from_ties])


_STEP = float(np.float32(0.001))
# Float64 values near and at ties of x * (1 / scale): 1.5, 17.5 and -127.5 grid steps, and off-grid.
FLOAT64_TIES = np.array([0.119, 1.5 * _STEP, 17.5 * _STEP, -127.5 * _STEP, -128.5 * _STEP, 0.0015, 0.2555])


@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
@pytest.mark.parametrize("zero_point, quant_min, quant_max", [(0, 0, 255), (127, 0, 255), (0, -128, 127)])
def test_float64_inputs_are_computed_in_float64(per_channel, zero_point, quant_min, quant_max):
    scale = np.float32(0.001)
    levels = torch_levels(FLOAT64_TIES, scale, zero_point, np.float64)
    steps = np.clip(levels, quant_min, quant_max) - zero_point
    if per_channel:
        expected = steps * np.float64(scale)
        x = onnxnn.tensor(FLOAT64_TIES.reshape(-1, 1), requires_grad=True)
        channels = len(FLOAT64_TIES)
        y = fake_quantize_per_channel_affine(
            x,
            onnxnn.tensor(np.full(channels, scale)),
            onnxnn.tensor(np.full(channels, zero_point, np.int32)),
            0,
            quant_min,
            quant_max,
        )
    else:
        expected = (steps.astype(np.float32) * scale).astype(np.float64)
        x = onnxnn.tensor(FLOAT64_TIES, requires_grad=True)
        y = fake_quantize_per_tensor_affine(x, 0.001, zero_point, quant_min, quant_max)
    y.sum().backward()
    assert y.dtype == onnxnn.float64
    np.testing.assert_array_equal(y.detach().numpy().reshape(-1), expected)
    mask = (levels >= quant_min) & (levels <= quant_max)
    np.testing.assert_array_equal(x.grad.numpy().reshape(-1), mask.astype(np.float64))


def _wrapped_zero_point(quant_min, quant_max):
    # PyTorch: round(min / scale) is NaN, cast to int32 gives INT32_MIN, quant_min - INT32_MIN
    # wraps in int32, then the clamp.
    with np.errstate(over="ignore"):
        difference = np.array([quant_min], np.int32) - np.array([-(2**31)], np.int32)
    return int(np.clip(difference, quant_min, quant_max)[0])


@pytest.mark.parametrize(
    "observer, data, scale",
    [
        (lambda: MinMaxObserver(eps=0.0), np.zeros(3), 0.0),
        (lambda: MinMaxObserver(), np.full(2, -np.inf), np.inf),
        (lambda: MinMaxObserver(dtype="qint8"), np.full(2, -np.inf), np.inf),
        (lambda: MinMaxObserver(dtype="qint8", eps=0.0), np.zeros(3), 0.0),
        (lambda: MinMaxObserver(dtype="qint8", reduce_range=True), np.full(2, -np.inf), np.inf),
        (lambda: PerChannelMinMaxObserver(eps=0.0), np.zeros((2, 3)), 0.0),
        (lambda: PerChannelMinMaxObserver(dtype="qint8", eps=0.0), np.zeros((2, 3)), 0.0),
    ],
)
def test_undefined_zero_point_stays_in_range(observer, data, scale):
    module = observer()
    module(onnxnn.tensor(data.astype(np.float32)))
    got_scale, got_zero_point = module.calculate_qparams()
    np.testing.assert_array_equal(got_scale.numpy().reshape(-1)[:1], [scale])
    expected = _wrapped_zero_point(module.quant_min, module.quant_max)
    assert set(got_zero_point.numpy().reshape(-1).tolist()) == {expected}


@pytest.mark.parametrize(
    "make, prefix",
    [
        (lambda: MinMaxObserver(), ""),
        (lambda: PerChannelMinMaxObserver(), ""),
        (lambda: FakeQuantize(observer=MinMaxObserver, quant_min=0, quant_max=255), "activation_post_process."),
    ],
)
def test_eps_is_a_buffer_as_pytorch(make, prefix):
    module = make()
    state = module.state_dict()
    eps = state[prefix + "eps"].numpy()
    assert eps.dtype == np.float32 and eps.tolist() == [np.finfo(np.float32).eps]
    # A PyTorch checkpoint carries eps: it loads strictly, and the loaded value is the one used.
    state[prefix + "eps"] = onnxnn.tensor(np.array([0.5], np.float32))
    module.load_state_dict(state, strict=True)
    observer = module.activation_post_process if prefix else module
    observer(onnxnn.tensor(np.array([[0.0, 1.0]], np.float32)))
    scale, _ = observer.calculate_qparams()
    np.testing.assert_array_equal(scale.numpy().reshape(-1), [0.5])


@pytest.mark.parametrize("x, expected", [([0.3, -1.0, 2.0], [0.0, 0.0, 0.0]), ([5.0], [0.0])])
def test_a_one_level_grid_is_accepted(x, expected):
    # quant_min == quant_max: PyTorch accepts it; every value lands on (quant_min - zero_point) * scale.
    y = fake_quantize_per_tensor_affine(onnxnn.tensor(x), 0.1, 3, 3, 3)
    np.testing.assert_array_equal(y.numpy(), np.array(expected, np.float32))
