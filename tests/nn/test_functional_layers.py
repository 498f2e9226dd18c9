"""onnxnn.nn.functional's linear, activations, dropout and batch norm against numpy formulas, finite
differences and PyTorch's error messages. The losses are in test_functional_losses.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import TRANSCENDENTAL_ULPS, assert_within, gamma, normalization_bound, rtol_for
from recorded_graphs import pending_op_types

import onnxnn
import onnxnn.nn.functional as F

from .functional_cases import _log_softmax

RNG = np.random.default_rng(1234)


def _randn(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _away_from(values, points=(0.0,), margin=0.05):
    """Moves values off the kinks of piecewise functions so finite differences stay on one piece."""
    values = values.copy()
    for point in points:
        close = np.abs(values - point) < margin
        values[close] = point + np.where(values[close] >= point, margin, -margin) * 2
    return values


def _erf(x):
    return np.vectorize(math.erf)(x)


# ---------------------------------------------------------------- linear


@pytest.mark.parametrize("input_shape", [(4,), (3, 4), (2, 3, 4), (2, 2, 3, 4)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_numpy(input_shape, with_bias):
    x, w, b = _randn(*input_shape), _randn(5, 4), _randn(5)
    result = F.linear(onnxnn.tensor(x), onnxnn.tensor(w), onnxnn.tensor(b) if with_bias else None)
    expected = x @ w.T + (b if with_bias else 0)
    assert result.shape == expected.shape
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "input_shape, with_bias, grad_fn",
    [
        ((3, 4), True, "AddmmBackward0"),
        ((3, 4), False, "MmBackward0"),
        ((2, 3, 4), True, "ViewBackward0"),
        ((4,), True, "AddBackward0"),
    ],
)
def test_linear_grad_fn_names_follow_pytorch(input_shape, with_bias, grad_fn):
    x = onnxnn.randn(*input_shape, requires_grad=True)
    out = F.linear(x, onnxnn.randn(5, 4), onnxnn.randn(5) if with_bias else None)
    assert out.grad_fn.name() == grad_fn


def test_linear_shape_mismatch_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x5 and 4x3\)"):
        F.linear(onnxnn.randn(2, 5), onnxnn.randn(3, 4))


def test_linear_dtype_mismatch_raises():
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but got Float and Half"):
        F.linear(onnxnn.randn(2, 4), onnxnn.randn(3, 4, dtype=onnxnn.half))


@pytest.mark.parametrize("input_shape", [(4,), (3, 4), (2, 3, 4), (2, 1, 3, 4)])
def test_linear_gradients(input_shape):
    check_gradients(F.linear, [_randn(*input_shape), _randn(5, 4), _randn(5)])


@pytest.mark.parametrize("input_shape", [(8, 16, 32), (2, 4, 16, 32)])
def test_a_linear_layers_weight_gradient_over_a_batch_of_sequences_is_one_gemm(input_shape):
    # As PyTorch's linear folds the batch into one addmm: the rows of every matrix in one product, not
    # a product per matrix summed afterwards.
    x, w, g = _randn(*input_shape, dtype=np.float32), _randn(24, 32, dtype=np.float32), _randn(24, dtype=np.float32)
    weight = onnxnn.tensor(w, requires_grad=True)
    (gradient,) = onnxnn.autograd.grad((F.linear(onnxnn.tensor(x), weight) * onnxnn.tensor(g)).sum(), [weight])
    recorded = pending_op_types(gradient)
    assert recorded.count("Gemm") == 1 and "MatMul" not in recorded and "ReduceSum" not in recorded
    rows = x.reshape(-1, 32).astype(np.float64)
    expected = np.broadcast_to(g.astype(np.float64), (rows.shape[0], 24)).T @ rows
    # Sums of as many products as there are rows, each within n * eps of the sum of their magnitudes.
    bound = gamma(rows.shape[0] + 2) * (np.abs(g.astype(np.float64))[:, None] * np.abs(rows).sum(0))
    assert_within(gradient.numpy(), expected, bound)


# ---------------------------------------------------------------- activations

_GELU_TANH_K = math.sqrt(2 / math.pi)

ACTIVATIONS = [
    ("relu", F.relu, lambda x: np.maximum(x, 0)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    ("leaky_relu_default", F.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
    ("sigmoid", F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    ("tanh", F.tanh, np.tanh),
    ("gelu", F.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (
        "gelu_tanh",
        lambda x: F.gelu(x, approximate="tanh"),
        lambda x: 0.5 * x * (1 + np.tanh(_GELU_TANH_K * (x + 0.044715 * x**3))),
    ),
    ("silu", F.silu, lambda x: x / (1 + np.exp(-x))),
    ("elu", lambda x: F.elu(x, alpha=0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    ("softplus", lambda x: F.softplus(x, beta=2.0), lambda x: np.log1p(np.exp(2 * x)) / 2),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5)),
    ("relu6", lambda x: F.relu6(x * 4), lambda x: np.clip(x * 4, 0, 6)),
    ("logsigmoid", F.logsigmoid, lambda x: -np.log1p(np.exp(-x))),
    ("softmax_dim0", lambda x: F.softmax(x, dim=0), lambda x: np.exp(_log_softmax(x, 0))),
    ("softmax_dim1", lambda x: F.softmax(x, dim=1), lambda x: np.exp(_log_softmax(x, 1))),
    ("log_softmax_dim1", lambda x: F.log_softmax(x, dim=1), lambda x: _log_softmax(x, 1)),
    ("log_softmax_last", lambda x: F.log_softmax(x, dim=-1), lambda x: _log_softmax(x, -1)),
]

_KINKS = {
    "relu": (0.0,),
    "leaky_relu": (0.0,),
    "leaky_relu_default": (0.0,),
    "elu": (0.0,),
    "hardtanh": (-0.5, 0.5),
    "relu6": (0.0, 1.5),
}


# Each activation is a chain of at most 6 roundings and ulp-accurate functions (exp, log1p, erf,
# tanh). Every intermediate is at most twice the largest input in magnitude (x - max(x) in the
# softmaxes), exps and their sums excepted, which enter through a log or a division as a
# relative error; so each rounding errs by at most u * (|result| + 2 max |x| + 1).
ACTIVATION_ROUNDINGS = 6 + TRANSCENDENTAL_ULPS


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, function, reference", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_values(name, function, reference, dtype):
    # float32 runs onnxruntime's fused kernels (Gelu, Softplus, ...); float64 the decompositions.
    x = _randn(3, 4, 5, dtype=dtype) * 3
    result = function(onnxnn.tensor(x))
    assert result.dtype is onnxnn.tensor(x).dtype
    expected = reference(x.astype(np.float64))
    scale = np.abs(expected) + 2 * np.abs(x).max() + 1
    assert_within(result.numpy(), expected, 2 * gamma(ACTIVATION_ROUNDINGS, dtype) * scale)


@pytest.mark.parametrize("name, function, reference", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_gradients(name, function, reference):
    x = _away_from(_randn(3, 4) * 2, _KINKS.get(name, ()))
    check_gradients(function, [x])


@pytest.mark.parametrize(
    "function, reference",
    [
        (lambda t: F.relu(t, inplace=True), lambda x: np.maximum(x, 0)),
        (F.relu_, lambda x: np.maximum(x, 0)),
        (lambda t: F.leaky_relu(t, 0.1, inplace=True), lambda x: np.where(x > 0, x, 0.1 * x)),
        (lambda t: F.hardtanh(t, inplace=True), lambda x: np.clip(x, -1, 1)),
    ],
)
def test_inplace_activation_rebinds_the_input(function, reference):
    x = _randn(6)
    t = onnxnn.tensor(x)
    result = function(t)
    assert result is t
    np.testing.assert_allclose(t.numpy(), reference(x), rtol=1e-12)


def test_inplace_activation_on_leaf_requiring_grad_raises():
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.relu(onnxnn.randn(3, requires_grad=True), inplace=True)


@pytest.mark.parametrize("shape, implied_dim", [((5,), 0), ((2, 5), 1), ((2, 3, 5), 0), ((2, 3, 4, 5), 1)])
def test_softmax_without_dim_warns_and_uses_pytorchs_legacy_dim(shape, implied_dim):
    x = _randn(*shape)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been deprecated"):
        result = F.softmax(onnxnn.tensor(x))
    np.testing.assert_allclose(result.numpy(), np.exp(_log_softmax(x, implied_dim)), rtol=1e-10)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        F.gelu(onnxnn.randn(3), approximate="fast")


# ---------------------------------------------------------------- dropout


def test_dropout_zeroes_a_fraction_p_and_scales_the_rest():
    p = 0.3
    x = onnxnn.ones(200, 500)
    out = F.dropout(x, p).numpy()
    assert abs((out == 0).mean() - p) < 0.01
    # A kept one times 1 / (1 - p): the scale's rounding and the product's, at most 2 u = 1.2e-7.
    np.testing.assert_allclose(out[out != 0], 1 / (1 - p), rtol=rtol_for(2))
    assert abs(out.mean() - 1.0) < 0.02  # the scaling keeps the expectation


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_dropout_is_the_identity_when_not_training(p):
    x = onnxnn.randn(4, 5)
    assert F.dropout(x, p, training=False) is x


def test_dropout_with_p_one_zeroes_everything_and_p_zero_keeps_everything():
    x = onnxnn.randn(4, 5)
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros((4, 5), np.float32))
    np.testing.assert_array_equal(F.dropout(x, 0.0).numpy(), x.numpy())


def test_dropout_mask_repeats_for_the_same_seed():
    x = onnxnn.randn(50, 50)
    onnxnn.manual_seed(7)
    first = F.dropout(x, 0.5).numpy()
    second = F.dropout(x, 0.5).numpy()
    onnxnn.manual_seed(7)
    again = F.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)


def test_dropout_inplace_rebinds_the_input():
    x = onnxnn.ones(100)
    result = F.dropout(x, 0.5, inplace=True)
    assert result is x
    assert set(np.unique(x.numpy()).tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("p", [1.5, -0.1])
def test_dropout_rejects_probabilities_outside_unit_interval(p):
    with pytest.raises(ValueError, match=f"dropout probability has to be between 0 and 1, but got {p}"):
        F.dropout(onnxnn.randn(3), p)


def test_dropout_gradient_is_the_mask_scaled():
    def function(x):
        onnxnn.manual_seed(3)
        return F.dropout(x, 0.4)

    check_gradients(function, [_randn(5, 6)])


# ---------------------------------------------------------------- batch norm


def _numpy_batch_norm(x, mean, var, weight, bias, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _batch_stats(x):
    axes = (0,) + tuple(range(2, x.ndim))
    count = x.size // x.shape[1]
    return x.mean(axis=axes), x.var(axis=axes), x.var(axis=axes) * count / (count - 1)


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_normalizes_with_batch_statistics_and_updates_running_ones(shape, affine):
    x = _randn(*shape) * 2 + 1
    weight, bias = (_randn(3), _randn(3)) if affine else (None, None)
    running_mean, running_var = onnxnn.tensor(_randn(3)), onnxnn.tensor(np.abs(_randn(3)) + 0.5)
    old_mean, old_var = running_mean.numpy().copy(), running_var.numpy().copy()
    out = F.batch_norm(
        onnxnn.tensor(x),
        running_mean,
        running_var,
        onnxnn.tensor(weight) if affine else None,
        onnxnn.tensor(bias) if affine else None,
        training=True,
        momentum=0.2,
        eps=1e-3,
    )
    mean, biased, unbiased = _batch_stats(x)
    np.testing.assert_allclose(
        out.numpy(), _numpy_batch_norm(x, mean, biased, weight, bias, 1e-3), rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(running_mean.numpy(), 0.8 * old_mean + 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(running_var.numpy(), 0.8 * old_var + 0.2 * unbiased, rtol=1e-12)


def test_batch_norm_momentum_as_tensor_gives_the_cumulative_average():
    running_mean, running_var = onnxnn.zeros(3, dtype=onnxnn.float64), onnxnn.ones(3, dtype=onnxnn.float64)
    batches = [_randn(6, 3) for _ in range(3)]
    for step, batch in enumerate(batches, start=1):
        F.batch_norm(
            onnxnn.tensor(batch),
            running_mean,
            running_var,
            training=True,
            momentum=1.0 / onnxnn.tensor(step, dtype=onnxnn.float64),
        )
    np.testing.assert_allclose(running_mean.numpy(), np.mean([b.mean(0) for b in batches], axis=0), rtol=1e-12)
    np.testing.assert_allclose(running_var.numpy(), np.mean([b.var(0, ddof=1) for b in batches], axis=0), rtol=1e-12)


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batch_norm_eval_uses_running_statistics_and_leaves_them(shape):
    x, mean, var, weight, bias = _randn(*shape), _randn(3), np.abs(_randn(3)) + 0.1, _randn(3), _randn(3)
    running_mean, running_var = onnxnn.tensor(mean), onnxnn.tensor(var)
    out = F.batch_norm(onnxnn.tensor(x), running_mean, running_var, onnxnn.tensor(weight), onnxnn.tensor(bias))
    assert out.shape == shape
    np.testing.assert_allclose(out.numpy(), _numpy_batch_norm(x, mean, var, weight, bias, 1e-5), rtol=1e-10)
    np.testing.assert_array_equal(running_mean.numpy(), mean)
    np.testing.assert_array_equal(running_var.numpy(), var)


def test_batch_norm_training_without_running_statistics():
    x = _randn(5, 3, 2)
    mean, biased, _ = _batch_stats(x)
    out = F.batch_norm(onnxnn.tensor(x), None, None, training=True)
    np.testing.assert_allclose(out.numpy(), _numpy_batch_norm(x, mean, biased, None, None, 1e-5), rtol=1e-10)


def test_batch_norm_half_precision():
    x = onnxnn.randn(6, 3, dtype=onnxnn.half)
    running_mean, running_var = onnxnn.zeros(3, dtype=onnxnn.half), onnxnn.ones(3, dtype=onnxnn.half)
    train = F.batch_norm(x, running_mean, running_var, training=True)
    evaluated = F.batch_norm(x, running_mean, running_var)
    assert train.dtype is onnxnn.half and evaluated.dtype is onnxnn.half and running_mean.dtype is onnxnn.half
    x64 = x.numpy().astype(np.float64)
    # float16 rounds every op: the mean of 6 values (7 roundings), the momentum blend (3 more).
    assert_within(running_mean.numpy(), 0.1 * x64.mean(0), gamma(6 + 4, np.float16) * np.abs(x64).mean(0))
    assert_within(
        train.numpy(),
        (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + 1e-5),
        normalization_bound(x64, (0,), 1e-5, dtype=np.float16),
    )


@pytest.mark.parametrize("name, position", [("running_mean", 1), ("running_var", 2), ("weight", 3), ("bias", 4)])
def test_batch_norm_wrong_channel_count_names_the_shapes(name, position):
    arguments = [onnxnn.randn(4, 3, 2), onnxnn.zeros(3), onnxnn.ones(3), onnxnn.ones(3), onnxnn.zeros(3)]
    arguments[position] = onnxnn.zeros(4)
    with pytest.raises(RuntimeError, match=rf"{name} should contain 3 elements not 4 \(input of shape \[4, 3, 2\]"):
        F.batch_norm(*arguments)


def test_batch_norm_training_needs_more_than_one_value_per_channel():
    with pytest.raises(
        ValueError,
        match=r"Expected more than 1 value per channel when training, "
        r"got input size \[1, 3\]",
    ):
        F.batch_norm(onnxnn.randn(1, 3), onnxnn.zeros(3), onnxnn.ones(3), training=True)


def test_batch_norm_eval_needs_running_statistics():
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined in evaluation mode"):
        F.batch_norm(onnxnn.randn(4, 3), None, None, training=False)


@pytest.mark.parametrize("shape", [(6, 3), (3, 3, 4)])
def test_batch_norm_training_gradients(shape):
    check_gradients(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [_randn(*shape), _randn(3), _randn(3)]
    )


@pytest.mark.parametrize("shape", [(6, 3), (3, 3, 4)])
def test_batch_norm_eval_gradients_for_every_input(shape):
    # The BatchNormalization gradient rule, including the statistics gradients, which an imported graph
    # whose statistics are parameters needs: recorded directly, since F.batch_norm refuses statistics
    # that require grad, as PyTorch's native_batch_norm does.
    from onnxnn.runtime.tensor import apply_op

    check_gradients(
        lambda x, m, v, w, b: apply_op("BatchNormalization", (x, w, b, m, v), {"epsilon": 0.1}),
        [_randn(*shape), _randn(3), np.abs(_randn(3)) + 0.5, _randn(3), _randn(3)],
    )


def test_batch_normalization_node_in_training_mode_has_rules():
    # Imported training graphs contain BatchNormalization(training_mode=1): three outputs, and a gradient.
    from onnxnn.runtime.tensor import apply_op

    def normalized(x, w, b):
        stats = (onnxnn.zeros(3, dtype=onnxnn.float64), onnxnn.ones(3, dtype=onnxnn.float64))
        outputs = apply_op("BatchNormalization", (x, w, b) + stats, {"training_mode": 1, "epsilon": 1e-5})
        assert [tuple(o.shape) for o in outputs] == [tuple(x.shape), (3,), (3,)]
        return outputs[0]

    x, w, b = _randn(5, 3, 2), _randn(3), _randn(3)
    mean, biased, _ = _batch_stats(x)
    result = normalized(onnxnn.tensor(x), onnxnn.tensor(w), onnxnn.tensor(b))
    np.testing.assert_allclose(result.numpy(), _numpy_batch_norm(x, mean, biased, w, b, 1e-5), rtol=1e-8, atol=1e-10)
    check_gradients(normalized, [x, w, b])


def test_batch_norm_grad_fn_name():
    x = onnxnn.randn(4, 3, requires_grad=True)
    assert F.batch_norm(x, None, None, training=True).grad_fn.name() == "NativeBatchNormBackward0"
    assert F.batch_norm(x, onnxnn.zeros(3), onnxnn.ones(3)).grad_fn.name() == "NativeBatchNormBackward0"
