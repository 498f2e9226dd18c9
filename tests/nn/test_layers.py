"""The layers: PyTorch's constructors, defaults, initialization, reprs, state and train/eval behaviour."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from tolerances import assert_close_to_matmul, assert_within, gamma, normalization_bound, rtol_for, sum_bound, ulps

RNG = np.random.default_rng(99)


def _values(tensor):
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


# ---------------------------------------------------------------- reprs


@pytest.mark.parametrize(
    "module, text",
    [
        (nn.Linear(4, 3), "Linear(in_features=4, out_features=3, bias=True)"),
        (nn.Linear(4, 3, bias=False), "Linear(in_features=4, out_features=3, bias=False)"),
        (nn.Identity(54, unused=1), "Identity()"),
        (nn.ReLU(), "ReLU()"),
        (nn.ReLU(inplace=True), "ReLU(inplace=True)"),
        (nn.LeakyReLU(), "LeakyReLU(negative_slope=0.01)"),
        (nn.LeakyReLU(0.2, inplace=True), "LeakyReLU(negative_slope=0.2, inplace=True)"),
        (nn.Sigmoid(), "Sigmoid()"),
        (nn.Tanh(), "Tanh()"),
        (nn.GELU(), "GELU(approximate='none')"),
        (nn.GELU("tanh"), "GELU(approximate='tanh')"),
        (nn.Softmax(dim=1), "Softmax(dim=1)"),
        (nn.Softmax(), "Softmax(dim=None)"),
        (nn.LogSoftmax(dim=-1), "LogSoftmax(dim=-1)"),
        (nn.Dropout(), "Dropout(p=0.5, inplace=False)"),
        (nn.Dropout(0.25, inplace=True), "Dropout(p=0.25, inplace=True)"),
        (nn.Flatten(), "Flatten(start_dim=1, end_dim=-1)"),
        (nn.Flatten(0, 2), "Flatten(start_dim=0, end_dim=2)"),
        (nn.Unflatten(1, (2, 5, 5)), "Unflatten(dim=1, unflattened_size=(2, 5, 5))"),
        (
            nn.BatchNorm1d(3),
            "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)",
        ),
        (
            nn.BatchNorm2d(8, eps=1e-3, momentum=None, affine=False, track_running_stats=False),
            "BatchNorm2d(8, eps=0.001, momentum=None, affine=False, bias=False, track_running_stats=False)",
        ),
    ],
)
def test_repr_matches_pytorch(module, text):
    assert repr(module) == text


# ---------------------------------------------------------------- Linear and Identity


@pytest.mark.parametrize("input_shape, output_shape", [((4,), (3,)), ((2, 4), (2, 3)), ((5, 2, 4), (5, 2, 3))])
def test_linear_computes_x_w_transpose_plus_b(input_shape, output_shape):
    layer = nn.Linear(4, 3)
    x = RNG.standard_normal(input_shape).astype(np.float32)
    out = layer(onnxnn.tensor(x))
    assert out.shape == output_shape
    assert_close_to_matmul(_values(out), x, _values(layer.weight).T, _values(layer.bias))


@pytest.mark.parametrize("bias", [True, False])
def test_linear_parameters_and_default_initialization(bias):
    in_features, out_features = 200, 300
    layer = nn.Linear(in_features, out_features, bias=bias)
    assert layer.weight.shape == (out_features, in_features) and layer.weight.requires_grad
    bound = 1 / math.sqrt(in_features)  # kaiming_uniform_(a=sqrt(5)) on the weight gives this bound
    weight = _values(layer.weight)
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.99 * bound
    assert weight.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    names = [name for name, _ in layer.named_parameters()]
    if bias:
        assert names == ["weight", "bias"] and layer.bias.shape == (out_features,)
        assert np.abs(_values(layer.bias)).max() <= bound
        assert _values(layer.bias).std() == pytest.approx(bound / math.sqrt(3), rel=0.2)
    else:
        assert names == ["weight"] and layer.bias is None


def test_linear_factory_kwargs_and_reset_parameters():
    layer = nn.Linear(5, 3, device="cpu", dtype=onnxnn.half)
    assert layer.weight.dtype is onnxnn.half and layer.bias.dtype is onnxnn.half
    assert layer(onnxnn.randn(2, 5, dtype=onnxnn.half)).dtype is onnxnn.half
    before = _values(layer.weight).copy()
    layer.reset_parameters()
    assert not np.array_equal(before, _values(layer.weight))


def test_linear_backward_reaches_both_parameters():
    layer = nn.Linear(4, 3)
    x = onnxnn.randn(6, 4)
    layer(x).sum().backward()
    # Each weight gradient is a sum over the 6 rows of x (times a cotangent of ones).
    assert_within(
        layer.weight.grad.numpy(), np.tile(x.numpy().sum(0, dtype=np.float64), (3, 1)), sum_bound(x.numpy(), 0)
    )
    np.testing.assert_allclose(layer.bias.grad.numpy(), np.full(3, 6.0))


def test_linear_wrong_input_size_raises():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x5 and 4x3\)"):
        nn.Linear(4, 3)(onnxnn.randn(2, 5))


def test_identity_returns_its_input():
    x = onnxnn.randn(3)
    assert nn.Identity(1, 2, key="ignored")(x) is x


# ---------------------------------------------------------------- activations


@pytest.mark.parametrize(
    "module, function",
    [
        (nn.ReLU(), F.relu),
        (nn.LeakyReLU(0.3), lambda x: F.leaky_relu(x, 0.3)),
        (nn.Sigmoid(), F.sigmoid),
        (nn.Tanh(), F.tanh),
        (nn.GELU(), F.gelu),
        (nn.GELU("tanh"), lambda x: F.gelu(x, "tanh")),
        (nn.Softmax(dim=0), lambda x: F.softmax(x, 0)),
        (nn.LogSoftmax(dim=1), lambda x: F.log_softmax(x, 1)),
    ],
)
def test_activation_modules_apply_their_function(module, function):
    x = onnxnn.randn(4, 5)
    np.testing.assert_array_equal(module(x).numpy(), function(x).numpy())


@pytest.mark.parametrize("module", [nn.ReLU(inplace=True), nn.LeakyReLU(inplace=True)])
def test_inplace_activation_modules_rebind_the_input(module):
    x = onnxnn.tensor([-1.0, 2.0])
    assert module(x) is x
    assert x.tolist()[1] == 2.0 and x.tolist()[0] <= 0.0 and x.tolist()[0] > -1.0


def test_softmax_modules_keep_dim_through_copies():
    copied = copy.deepcopy(nn.Softmax(dim=1))
    assert copied.dim == 1
    np.testing.assert_allclose(copied(onnxnn.zeros(2, 4)).numpy(), np.full((2, 4), 0.25))


# ---------------------------------------------------------------- Dropout


def test_dropout_module_masks_in_training_and_is_the_identity_in_eval():
    layer = nn.Dropout(p=0.4)
    x = onnxnn.ones(100, 100)
    trained = layer(x).numpy()
    assert abs((trained == 0).mean() - 0.4) < 0.02
    # A kept one times 1 / 0.6: the scale's rounding and the product's.
    np.testing.assert_allclose(trained[trained != 0], 1 / 0.6, rtol=rtol_for(2))
    layer.eval()
    assert layer(x) is x


@pytest.mark.parametrize("p", [-0.5, 1.5])
def test_dropout_module_rejects_bad_probabilities(p):
    with pytest.raises(ValueError, match=f"dropout probability has to be between 0 and 1, but got {p}"):
        nn.Dropout(p)


# ---------------------------------------------------------------- Flatten and Unflatten


@pytest.mark.parametrize(
    "module, input_shape, output_shape",
    [
        (nn.Flatten(), (32, 1, 5, 5), (32, 25)),
        (nn.Flatten(0, 2), (32, 1, 5, 5), (160, 5)),
        (nn.Flatten(-2), (2, 3, 4), (2, 12)),
        (nn.Unflatten(1, (2, 5, 5)), (2, 50), (2, 2, 5, 5)),
        (nn.Unflatten(-1, (5, -1)), (2, 3, 10), (2, 3, 5, 2)),
        (nn.Unflatten(0, [2, 2]), (4, 3), (2, 2, 3)),
    ],
)
def test_flatten_and_unflatten_shapes(module, input_shape, output_shape):
    x = onnxnn.randn(*input_shape)
    out = module(x)
    assert out.shape == output_shape
    np.testing.assert_array_equal(out.numpy().reshape(-1), x.numpy().reshape(-1))


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: nn.Unflatten(1, (2, 2.5)),
            TypeError,
            "unflattened_size must be tuple of ints, but found element of type float at pos 1",
        ),
        (lambda: nn.Unflatten(1, 4), TypeError, "unflattened_size must be a tuple of ints, but found type int"),
        (
            lambda: nn.Unflatten(1, (2, 3))(onnxnn.randn(2, 5)),
            RuntimeError,
            r"unflatten: Provided sizes \[2, 3\] don't multiply up to the size of dim 1 \(5\) in the input tensor",
        ),
    ],
)
def test_unflatten_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


# ---------------------------------------------------------------- BatchNorm


def test_batch_norm_parameters_and_buffers_in_pytorchs_order():
    layer = nn.BatchNorm2d(3)
    assert list(layer.state_dict().keys()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
    np.testing.assert_array_equal(layer.weight.numpy(force=True), np.ones(3))
    np.testing.assert_array_equal(layer.bias.numpy(force=True), np.zeros(3))
    np.testing.assert_array_equal(layer.running_mean.numpy(), np.zeros(3))
    np.testing.assert_array_equal(layer.running_var.numpy(), np.ones(3))
    assert layer.num_batches_tracked.dtype is onnxnn.int64 and layer.num_batches_tracked.shape == ()
    assert layer.num_batches_tracked.item() == 0


@pytest.mark.parametrize(
    "affine, track, keys",
    [
        (False, True, ["running_mean", "running_var", "num_batches_tracked"]),
        (True, False, ["weight", "bias"]),
        (False, False, []),
    ],
)
def test_batch_norm_options_change_the_registered_state(affine, track, keys):
    layer = nn.BatchNorm1d(4, affine=affine, track_running_stats=track)
    assert list(layer.state_dict().keys()) == keys
    assert (layer.weight is None) == (not affine) and (layer.running_mean is None) == (not track)


def test_batch_norm_half_dtype_applies_to_parameters_and_float_buffers():
    layer = nn.BatchNorm2d(3, dtype=onnxnn.half)
    assert repr(layer.running_mean) == "tensor([0., 0., 0.], dtype=onnxnn.float16)"
    assert layer.weight.dtype is onnxnn.half and layer.running_var.dtype is onnxnn.half
    assert layer.num_batches_tracked.dtype is onnxnn.int64
    out = layer(onnxnn.randn(2, 3, 4, 4, dtype=onnxnn.half))
    assert out.dtype is onnxnn.half and out.shape == (2, 3, 4, 4)


def _numpy_running_stats(batches, momentum):
    mean, var = np.zeros(3), np.ones(3)
    for step, batch in enumerate(batches, start=1):
        axes = (0,) + tuple(range(2, batch.ndim))
        factor = 1.0 / step if momentum is None else momentum
        mean = (1 - factor) * mean + factor * batch.mean(axis=axes)
        var = (1 - factor) * var + factor * batch.var(axis=axes, ddof=1)
    return mean, var


@pytest.mark.parametrize(
    "layer_class, shape", [(nn.BatchNorm1d, (8, 3)), (nn.BatchNorm1d, (4, 3, 5)), (nn.BatchNorm2d, (2, 3, 4, 4))]
)
@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
def test_batch_norm_running_statistics_over_three_training_steps(layer_class, shape, momentum):
    layer = layer_class(3, momentum=momentum)
    batches = [RNG.standard_normal(shape) * (step + 1) + step for step in range(3)]
    for batch in batches:
        out = layer(onnxnn.tensor(batch, dtype=onnxnn.float32))
        axes = (0,) + tuple(range(2, batch.ndim))
        batch32 = batch.astype(np.float32).astype(np.float64)  # what the layer sees
        expected = (batch32 - batch32.mean(axis=axes, keepdims=True)) / np.sqrt(
            batch32.var(axis=axes, keepdims=True) + 1e-5
        )
        assert_within(_values(out), expected, normalization_bound(batch32, axes, 1e-5))
    mean, var = _numpy_running_stats([batch.astype(np.float32).astype(np.float64) for batch in batches], momentum)
    # Each update blends in a mean/variance over n elements (a sum's rounding) plus a few roundings;
    # three updates add up, each contributing at most its own bound (the blend factors are <= 1).
    n = shape[0] * math.prod(shape[2:])
    scale = sum(np.abs(b).max() for b in batches) + 1
    np.testing.assert_array_less(np.abs(_values(layer.running_mean) - mean), 2 * 3 * gamma(n + 4) * scale)
    np.testing.assert_array_less(np.abs(_values(layer.running_var) - var), 2 * 3 * gamma(n + 6) * scale**2)
    assert layer.num_batches_tracked.item() == 3

    layer.eval()
    test_batch = RNG.standard_normal(shape)
    evaluated = layer(onnxnn.tensor(test_batch, dtype=onnxnn.float32))
    stat_shape = (1, 3) + (1,) * (len(shape) - 2)
    test_batch32 = test_batch.astype(np.float32).astype(np.float64)
    running_mean, running_var = _values(layer.running_mean), _values(layer.running_var)
    expected = (test_batch32 - running_mean.reshape(stat_shape)) / np.sqrt(running_var.reshape(stat_shape) + 1e-5)
    # (x - mean) and the variance's rsqrt: a handful of roundings per element, a few ulps for the rsqrt.
    assert_within(
        _values(evaluated),
        expected,
        2
        * gamma(4)
        * (
            np.abs(expected)
            + np.abs(running_mean.reshape(stat_shape) / np.sqrt(running_var.reshape(stat_shape) + 1e-5))
        )
        + ulps(expected),
    )
    np.testing.assert_array_equal(_values(layer.running_mean), running_mean)  # eval leaves them
    assert layer.num_batches_tracked.item() == 3


def test_batch_norm_without_running_statistics_uses_batch_statistics_in_eval_too():
    layer = nn.BatchNorm1d(3, track_running_stats=False).eval()
    batch = RNG.standard_normal((6, 3))
    expected = (batch - batch.mean(0)) / np.sqrt(batch.var(0) + 1e-5)
    batch32 = batch.astype(np.float32).astype(np.float64)
    expected = (batch32 - batch32.mean(0)) / np.sqrt(batch32.var(0) + 1e-5)
    assert_within(
        _values(layer(onnxnn.tensor(batch, dtype=onnxnn.float32))), expected, normalization_bound(batch32, (0,), 1e-5)
    )


def test_batch_norm_backward_reaches_weight_and_bias():
    layer = nn.BatchNorm1d(3)
    x = onnxnn.randn(5, 3, requires_grad=True)
    (layer(x) * onnxnn.tensor([1.0, 2.0, 3.0])).sum().backward()
    # The bias gradient sums 5 cotangents (exact small integers); the weight gradient sums 5
    # normalized values (|y| <= sqrt(n - 1) = 2 each, exactly 0 in exact arithmetic) times the
    # cotangent, each normalized value carrying its own rounding: about 2 * gamma(n + 8) * n * 2 * 3.
    np.testing.assert_array_equal(layer.bias.grad.numpy(), [5.0, 10.0, 15.0])
    assert_within(layer.weight.grad.numpy(), np.zeros(3), 2 * gamma(5 + 8) * 5 * 2 * 3)  # normalized values sum to 0
    assert x.grad.shape == (5, 3)


def test_batch_norm_reset_running_stats():
    layer = nn.BatchNorm1d(3)
    layer(onnxnn.randn(4, 3) + 2)
    layer.reset_running_stats()
    np.testing.assert_array_equal(layer.running_mean.numpy(), np.zeros(3))
    np.testing.assert_array_equal(layer.running_var.numpy(), np.ones(3))
    assert layer.num_batches_tracked.item() == 0


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (nn.BatchNorm1d(3), (2, 3, 4, 4), r"expected 2D or 3D input \(got 4D input\)"),
        (nn.BatchNorm2d(3), (2, 3, 4), r"expected 4D input \(got 3D input\)"),
        (nn.BatchNorm1d(3), (1, 3), r"Expected more than 1 value per channel when training, got input size \[1, 3\]"),
    ],
)
def test_batch_norm_input_errors(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        layer(onnxnn.randn(*shape))


def test_batch_norm_wrong_channel_count_names_the_shapes():
    with pytest.raises(RuntimeError, match=r"running_mean should contain 4 elements not 3 \(input of shape \[2, 4\]"):
        nn.BatchNorm1d(3)(onnxnn.randn(2, 4))


def test_batch_norm_loads_checkpoints_without_num_batches_tracked():
    layer = nn.BatchNorm1d(3)
    old_checkpoint = {
        "weight": onnxnn.full((3,), 2.0),
        "bias": onnxnn.zeros(3),
        "running_mean": onnxnn.ones(3),
        "running_var": onnxnn.ones(3),
    }
    layer.load_state_dict(old_checkpoint)
    np.testing.assert_array_equal(layer.weight.numpy(force=True), np.full(3, 2.0))
    assert layer.num_batches_tracked.item() == 0


# ---------------------------------------------------------------- skip_init


def test_skip_init_leaves_parameters_uninitialized_for_custom_initialization():
    state = onnxnn.get_rng_state()
    layer = nn.utils.skip_init(nn.Linear, 5, 1)
    assert onnxnn.get_rng_state() == state  # no default initialization drew numbers
    assert isinstance(layer, nn.Linear) and layer.weight.shape == (1, 5)
    np.testing.assert_array_equal(layer.weight.numpy(force=True), np.zeros((1, 5)))
    nn.init.orthogonal_(layer.weight)
    assert np.linalg.norm(layer.weight.numpy(force=True)) == pytest.approx(1.0, rel=1e-6)


def test_skip_init_passes_arguments_through():
    layer = nn.utils.skip_init(nn.Linear, 4, 3, bias=False, dtype=onnxnn.float64)
    assert layer.bias is None and layer.weight.dtype is onnxnn.float64
    norm = nn.utils.skip_init(nn.BatchNorm1d, 3, momentum=None)
    assert norm.momentum is None and norm.num_batches_tracked.item() == 0
    nn.init.ones_(nn.Linear(2, 2).weight)  # initialization works again afterwards


class _NoDevice(nn.Module):
    def __init__(self, size):
        super().__init__()


@pytest.mark.parametrize(
    "module_class, message",
    [
        (_NoDevice, "Module must support a 'device' arg to skip initialization"),
        (int, "Expected a Module; got <class 'int'>"),
    ],
)
def test_skip_init_errors(module_class, message):
    with pytest.raises(RuntimeError, match=message):
        nn.utils.skip_init(module_class, 3)
