"""onnxnn.nn.functional against numpy formulas, finite differences and PyTorch's error messages."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import TRANSCENDENTAL_ULPS, assert_within, gamma, normalization_bound, rtol_for

import onnxnn
import onnxnn.nn.functional as F

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


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


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


@pytest.mark.parametrize("input_shape", [(4,), (3, 4), (2, 3, 4)])
def test_linear_gradients(input_shape):
    check_gradients(F.linear, [_randn(*input_shape), _randn(5, 4), _randn(5)])


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


# ---------------------------------------------------------------- regression losses

REDUCTIONS = ["mean", "sum", "none"]
_NUMPY_REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "loss, reference",
    [
        (F.mse_loss, lambda x, t: (x - t) ** 2),
        (F.l1_loss, lambda x, t: np.abs(x - t)),
    ],
)
def test_regression_losses(loss, reference, reduction):
    x, t = _randn(4, 5), _randn(4, 5)
    result = loss(onnxnn.tensor(x), onnxnn.tensor(t), reduction=reduction)
    np.testing.assert_allclose(result.numpy(), _NUMPY_REDUCE[reduction](reference(x, t)), rtol=1e-12)
    check_gradients(lambda a, b: loss(a, b, reduction=reduction), [x, t])


def test_mse_loss_grad_fn_and_broadcast_warning():
    x = onnxnn.randn(3, 1, requires_grad=True)
    with pytest.warns(UserWarning, match="Using a target size .* that is different to the input size"):
        loss = F.mse_loss(x, onnxnn.randn(3))
    assert loss.shape == () and loss.grad_fn.name() == "MseLossBackward0"


@pytest.mark.parametrize(
    "size_average, reduce, equivalent",
    [
        (None, False, "none"),
        (False, None, "sum"),
        (True, True, "mean"),
    ],
)
def test_legacy_size_average_and_reduce_map_to_a_reduction(size_average, reduce, equivalent):
    x, t = onnxnn.randn(3, 4), onnxnn.randn(3, 4)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        legacy = F.mse_loss(x, t, size_average=size_average, reduce=reduce)
    np.testing.assert_allclose(legacy.numpy(), F.mse_loss(x, t, reduction=equivalent).numpy())


@pytest.mark.parametrize("loss", [F.mse_loss, F.l1_loss, F.binary_cross_entropy_with_logits])
def test_invalid_reduction_raises(loss):
    with pytest.raises(ValueError, match="elementwise_mean is not a valid value for reduction"):
        loss(onnxnn.rand(3), onnxnn.rand(3), reduction="elementwise_mean")


# ---------------------------------------------------------------- classification losses


def _numpy_nll(log_probs, target, weight=None, ignore_index=-100, reduction="mean"):
    """nll over (N, C, d...) log-probabilities, written out element by element."""
    classes = log_probs.shape[1]
    weight = np.ones(classes) if weight is None else weight
    losses = np.zeros(target.shape)
    weights = np.zeros(target.shape)
    for position in np.ndindex(target.shape):
        label = target[position]
        if label == ignore_index:
            continue
        index = (position[0], label) + position[1:]
        losses[position] = -weight[label] * log_probs[index]
        weights[position] = weight[label]
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / weights.sum()


CLASS_CASES = [
    # (input shape, target shape, weight?, ignore_index)
    ((5, 4), (5,), False, -100),
    ((5, 4), (5,), True, -100),
    ((6, 4), (6,), True, 2),
    ((6, 4), (6,), False, 1),
    ((3, 4, 2, 2), (3, 2, 2), True, 0),
]


def _class_targets(shape, classes, ignore_index):
    target = RNG.integers(0, classes, shape)
    if ignore_index >= 0:
        target.reshape(-1)[0] = ignore_index  # at least one ignored element
    return target


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("input_shape, target_shape, weighted, ignore_index", CLASS_CASES)
def test_nll_loss_and_cross_entropy_with_class_indices(input_shape, target_shape, weighted, ignore_index, reduction):
    x = _randn(*input_shape)
    target = _class_targets(target_shape, input_shape[1], ignore_index)
    weight = np.abs(_randn(input_shape[1])) + 0.1 if weighted else None
    log_probs = _log_softmax(x, 1)
    expected = _numpy_nll(log_probs, target, weight, ignore_index, reduction)
    weight_tensor = onnxnn.tensor(weight) if weighted else None
    nll = F.nll_loss(
        onnxnn.tensor(log_probs), onnxnn.tensor(target), weight_tensor, ignore_index=ignore_index, reduction=reduction
    )
    ce = F.cross_entropy(
        onnxnn.tensor(x), onnxnn.tensor(target), weight_tensor, ignore_index=ignore_index, reduction=reduction
    )
    np.testing.assert_allclose(nll.numpy(), expected, rtol=1e-10)
    np.testing.assert_allclose(ce.numpy(), expected, rtol=1e-10)
    extra = [weight] if weighted else []
    check_gradients(
        lambda a, t, *w: F.cross_entropy(a, t, *w, ignore_index=ignore_index, reduction=reduction), [x, target] + extra
    )
    check_gradients(
        lambda a, t, *w: F.nll_loss(a, t, *w, ignore_index=ignore_index, reduction=reduction),
        [log_probs, target] + extra,
        requires_grad=[True, False] + [False] * len(extra),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_records_log_softmax_and_one_negative_log_likelihood_node(reduction):
    x = _randn(4, 5).astype(np.float32)
    target = np.array([0, 4, -100, 2])
    loss = F.cross_entropy(onnxnn.tensor(x), onnxnn.tensor(target), reduction=reduction)
    node = loss._value.node
    assert node.op_type == "NegativeLogLikelihoodLoss"
    assert dict(node.attrs) == {"ignore_index": -100, "reduction": reduction}
    assert node.inputs[0].node.op_type == "LogSoftmax"
    expected = _numpy_nll(_log_softmax(x.astype(np.float64), 1), target, None, -100, reduction)
    # float32 log-softmax over 5 classes, then a sum of 3 terms: a few float32 ulps.
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_cross_entropy_refuses_computed_targets_out_of_range(executor):
    # Targets known at the call are checked there (PyTorch's IndexError); computed ones when they run.
    with onnxnn.set_executor(executor):
        targets = onnxnn.tensor([1, 2, 3]) * 2
        with pytest.raises((IndexError, RuntimeError)):
            F.cross_entropy(onnxnn.randn(3, 4), targets).item()


def _numpy_label_smoothing(x, target, weight, ignore_index, reduction, smoothing):
    classes = x.shape[1]
    log_probs = _log_softmax(x, 1)
    weight_vector = np.ones(classes) if weight is None else weight
    nll = _numpy_nll(log_probs, target, weight, ignore_index, reduction)
    shape = (1, classes) + (1,) * (x.ndim - 2)
    smooth = -(log_probs * weight_vector.reshape(shape)).sum(1)
    smooth[target == ignore_index] = 0
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        valid = target != ignore_index
        smooth = smooth.sum() / weight_vector[target[valid]].sum()
    return (1 - smoothing) * nll + smooth * smoothing / classes


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("input_shape, target_shape, weighted, ignore_index", CLASS_CASES)
def test_cross_entropy_label_smoothing_with_class_indices(input_shape, target_shape, weighted, ignore_index, reduction):
    x = _randn(*input_shape)
    target = _class_targets(target_shape, input_shape[1], ignore_index)
    weight = np.abs(_randn(input_shape[1])) + 0.1 if weighted else None
    result = F.cross_entropy(
        onnxnn.tensor(x),
        onnxnn.tensor(target),
        onnxnn.tensor(weight) if weighted else None,
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=0.2,
    )
    expected = _numpy_label_smoothing(x, target, weight, ignore_index, reduction, 0.2)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)
    check_gradients(
        lambda a, t: F.cross_entropy(a, t, ignore_index=ignore_index, reduction=reduction, label_smoothing=0.2),
        [x, target],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "shape, weighted, smoothing",
    [
        ((4, 5), False, 0.0),
        ((4, 5), True, 0.0),
        ((4, 5), True, 0.3),
        ((2, 3, 4), False, 0.1),
    ],
)
def test_cross_entropy_with_class_probabilities(shape, weighted, smoothing, reduction):
    x = _randn(*shape)
    probabilities = np.exp(_log_softmax(_randn(*shape), 1))
    weight = np.abs(_randn(shape[1])) + 0.1 if weighted else None
    result = F.cross_entropy(
        onnxnn.tensor(x),
        onnxnn.tensor(probabilities),
        onnxnn.tensor(weight) if weighted else None,
        reduction=reduction,
        label_smoothing=smoothing,
    )
    classes = shape[1]
    target = probabilities * (1 - smoothing) + smoothing / classes
    weight_shape = (1, classes) + (1,) * (len(shape) - 2)
    terms = _log_softmax(x, 1) * target * (np.ones(weight_shape) if weight is None else weight.reshape(weight_shape))
    expected = {"none": -terms.sum(1), "sum": -terms.sum(), "mean": -terms.sum() / (x.size / classes)}[reduction]
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)
    check_gradients(
        lambda a, p: F.cross_entropy(a, p, reduction=reduction, label_smoothing=smoothing), [x, probabilities]
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_unbatched_input(reduction):
    x = _randn(5)
    result = F.cross_entropy(onnxnn.tensor(x), onnxnn.tensor(3), reduction=reduction)
    assert result.shape == ()
    np.testing.assert_allclose(result.numpy(), -_log_softmax(x, 0)[3], rtol=1e-12)


def test_cross_entropy_with_every_target_ignored_is_nan_for_mean():
    result = F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([-100, -100]))
    assert math.isnan(result.item())


@pytest.mark.parametrize(
    "input_shape, target, error, message",
    [
        ((3, 4), [0, 1], ValueError, r"Expected input batch_size \(3\) to match target batch_size \(2\)\."),
        ((2, 4), [0, 4], IndexError, r"Target 4 is out of bounds\."),
        ((2, 4), [-1, 0], IndexError, r"Target -1 is out of bounds\."),
        ((2, 4, 3), [[0, 1], [1, 2]], RuntimeError, r"Expected target size \[2, 3\], got \[2, 2\]"),
        ((2, 4), [[0, 1], [1, 2]], RuntimeError, "0D or 1D target tensor expected, multi-target not supported"),
    ],
)
def test_class_index_errors_follow_pytorch(input_shape, target, error, message):
    with pytest.raises(error, match=message):
        F.cross_entropy(onnxnn.randn(*input_shape), onnxnn.tensor(target))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: F.nll_loss(onnxnn.randn(2, 3), onnxnn.rand(2)),
            RuntimeError,
            "expected scalar type Long but found Float",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([0, 1]), onnxnn.ones(4)),
            RuntimeError,
            r"weight tensor should be defined either for all 3 classes or no classes "
            r"but got weight tensor of shape: \[4\]",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([0, 1]), label_smoothing=1.5),
            RuntimeError,
            "label_smoothing must be between 0.0 and 1.0. Got: 1.5",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.rand(2, 3), ignore_index=1),
            RuntimeError,
            "ignore_index is not supported for floating point target",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([[0, 1, 2], [1, 1, 0]])),
            RuntimeError,
            "Expected floating point type for target with class probabilities, got Long",
        ),
        (
            lambda: F.cross_entropy(onnxnn.randn(2, 3), onnxnn.tensor([0, 1]), reduction="avg"),
            ValueError,
            "avg is not a valid value for reduction",
        ),
    ],
)
def test_cross_entropy_argument_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_cross_entropy_grad_fn_name():
    logits = onnxnn.randn(3, 4, requires_grad=True)
    assert F.cross_entropy(logits, onnxnn.tensor([0, 1, 2])).grad_fn.name() == "NllLossBackward0"


def test_one_hot():
    result = F.one_hot(onnxnn.tensor([0, 2, 1]))
    assert result.dtype is onnxnn.int64
    np.testing.assert_array_equal(result.numpy(), np.eye(3, dtype=np.int64)[[0, 2, 1]])
    assert F.one_hot(onnxnn.tensor([[1], [0]]), num_classes=4).shape == (2, 1, 4)


# ---------------------------------------------------------------- binary losses


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    x = 1 / (1 + np.exp(-_randn(4, 3)))
    t = RNG.random((4, 3))
    weight = RNG.random((4, 3)) + 0.5 if weighted else None
    expected = -(t * np.log(x) + (1 - t) * np.log(1 - x)) * (1 if weight is None else weight)
    extra = [onnxnn.tensor(weight)] if weighted else []
    result = F.binary_cross_entropy(onnxnn.tensor(x), onnxnn.tensor(t), *extra, reduction=reduction)
    np.testing.assert_allclose(result.numpy(), _NUMPY_REDUCE[reduction](expected), rtol=1e-10)
    check_gradients(
        lambda a, b, *w: F.binary_cross_entropy(a, b, *w, reduction=reduction), [x, t] + ([weight] if weighted else [])
    )


def test_binary_cross_entropy_clamps_the_log_at_minus_100():
    loss = F.binary_cross_entropy(onnxnn.tensor([0.0, 1.0]), onnxnn.tensor([1.0, 0.0]), reduction="none")
    np.testing.assert_array_equal(loss.numpy(), [100.0, 100.0])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted, pos_weighted", [(False, False), (True, False), (False, True), (True, True)])
def test_binary_cross_entropy_with_logits(reduction, weighted, pos_weighted):
    x, t = _randn(4, 3) * 3, RNG.random((4, 3))
    weight = RNG.random((4, 3)) + 0.5 if weighted else None
    pos_weight = RNG.random(3) + 0.5 if pos_weighted else None
    sigmoid = 1 / (1 + np.exp(-x))
    positive = t * np.log(sigmoid) * (1 if pos_weight is None else pos_weight)
    expected = -(positive + (1 - t) * np.log(1 - sigmoid)) * (1 if weight is None else weight)
    result = F.binary_cross_entropy_with_logits(
        onnxnn.tensor(x),
        onnxnn.tensor(t),
        onnxnn.tensor(weight) if weighted else None,
        reduction=reduction,
        pos_weight=onnxnn.tensor(pos_weight) if pos_weighted else None,
    )
    np.testing.assert_allclose(result.numpy(), _NUMPY_REDUCE[reduction](expected), rtol=1e-9)
    check_gradients(
        lambda a, b: F.binary_cross_entropy_with_logits(
            a,
            b,
            onnxnn.tensor(weight) if weighted else None,
            reduction=reduction,
            pos_weight=onnxnn.tensor(pos_weight) if pos_weighted else None,
        ),
        [x, t],
    )


def test_binary_cross_entropy_with_logits_is_stable_for_large_logits():
    loss = F.binary_cross_entropy_with_logits(
        onnxnn.tensor([100.0, -100.0, 1000.0]), onnxnn.tensor([0.0, 1.0, 1.0]), reduction="none"
    )
    np.testing.assert_allclose(loss.numpy(), [100.0, 100.0, 0.0], atol=1e-5)


@pytest.mark.parametrize(
    "loss, message",
    [
        (
            F.binary_cross_entropy,
            r"Using a target size \(onnxnn.Size\(\[3\]\)\) that is different to the input size "
            r"\(onnxnn.Size\(\[3, 1\]\)\) is deprecated",
        ),
        (
            F.binary_cross_entropy_with_logits,
            r"Target size \(onnxnn.Size\(\[3\]\)\) must be the same as input size "
            r"\(onnxnn.Size\(\[3, 1\]\)\)",
        ),
    ],
)
def test_binary_losses_require_matching_shapes(loss, message):
    with pytest.raises(ValueError, match=message):
        loss(onnxnn.rand(3, 1), onnxnn.rand(3))


def test_no_warnings_from_ordinary_calls():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.cross_entropy(onnxnn.randn(3, 4), onnxnn.tensor([0, 1, 3]))
        F.mse_loss(onnxnn.randn(3), onnxnn.randn(3))
        F.softmax(onnxnn.randn(3, 4), dim=1)
