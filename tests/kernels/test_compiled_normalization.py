"""The compiled normalization loops (kernels/compiled_normalization.py): batch normalization's training
forward and gradient and ReLU's gradient, against float64 formulas, for every build this CPU runs.

Bounds: a channel's sum of ``N * S`` float32 terms is within ``gamma(S + 8) * sum |terms|`` of the exact
sum however the loop splits it (lanes within a plane, then a double across planes); each later step adds a
few roundings, propagated through the formulas' coefficients as the comments say.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxnn.kernels import compiled_normalization

from tolerances import assert_within, gamma

pytestmark = pytest.mark.skipif(
    not compiled_normalization.available(), reason=f"{compiled_normalization.unavailable_reason()}"
)

EPSILON = 1e-5
# (N, C, *spatial): planes with and without a tail past whole vectors, one and three spatial axes.
SHAPES = [(4, 3, 8, 8), (3, 5, 7, 7), (2, 4, 17), (2, 3, 3, 4, 5), (1, 2, 1, 33), (32, 16, 32, 32)]
ROUNDINGS = 8


def _axes(x: np.ndarray) -> tuple:
    return (0,) + tuple(range(2, x.ndim))


def _channel(vector, x: np.ndarray) -> np.ndarray:
    return np.asarray(vector, np.float64).reshape((1, -1) + (1,) * (x.ndim - 2))


def _inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    scale = rng.standard_normal(shape[1]).astype(np.float32)
    bias = rng.standard_normal(shape[1]).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    return x, scale, bias, g


def _plane_gamma(x: np.ndarray) -> float:
    return gamma(int(np.prod(x.shape[2:])) + ROUNDINGS)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_forward_loop_is_batch_normalization(shape, build):
    x, scale, bias, _ = _inputs(shape)
    y, mean, variance = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON)
    assert y.dtype == mean.dtype == variance.dtype == np.float32 and y.shape == x.shape
    x64, axes = x.astype(np.float64), _axes(x)
    exact_mean, exact_variance = x64.mean(axes), x64.var(axes)
    mean_bound = _plane_gamma(x) * np.abs(x64).mean(axes)
    assert_within(mean, exact_mean, mean_bound)
    # The two-pass variance around the rounded mean is the variance plus the mean's error squared.
    assert_within(variance, exact_variance, _plane_gamma(x) * exact_variance + mean_bound**2)
    # Y = X k + (B - mean k): k's relative error is half the variance's plus a few roundings.
    factor = np.abs(scale) / np.sqrt(exact_variance + EPSILON)
    factor_error = factor * (_plane_gamma(x) + mean_bound**2 / exact_variance + gamma(ROUNDINGS))
    expected = (x64 - _channel(exact_mean, x)) * _channel(scale / np.sqrt(exact_variance + EPSILON), x)
    expected += _channel(bias, x)
    bound = (np.abs(x64) + _channel(np.abs(exact_mean), x)) * _channel(factor_error, x)
    bound += _channel(factor * mean_bound, x) + gamma(ROUNDINGS) * (np.abs(expected) + _channel(np.abs(bias), x))
    assert_within(y, expected, bound)


# (name, bounds): the activations the loops fold in, a ReLU and clamps (Hardtanh: ReLU6, its default).
ACTIVATIONS = {
    "relu": compiled_normalization.RELU_BOUNDS,
    "relu6": (0.0, 6.0),
    "hardtanh": (-1.0, 1.0),
    "narrow clamp": (0.25, 0.5),
}


def _clamped(y, bounds):
    """min(max(y, low), high) as onnxruntime's Relu and Clip: NaN and -0 kept."""
    low, high = (np.float32(bound) if bound is not None else None for bound in bounds)
    result = np.where(y < low, low, y)
    return result if high is None else np.where(result > high, high, result)


@pytest.mark.parametrize("bounds", ACTIVATIONS.values(), ids=ACTIVATIONS.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_the_forward_loop_writes_its_activations_output_when_asked(shape, bounds, build):
    # onnxruntime's Relu and Clip: below low is low, above high is high, NaN and -0.0 kept (a NaN
    # channel stays NaN).
    x, scale, bias, _ = _inputs(shape, seed=5)
    x[(0, 0) + (0,) * (x.ndim - 2)] = np.nan
    y, mean, variance = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON)
    activated, activated_mean, activated_variance = compiled_normalization.batch_norm_training(
        x, scale, bias, EPSILON, bounds=bounds
    )
    np.testing.assert_array_equal(activated, _clamped(y, bounds))
    np.testing.assert_array_equal(np.signbit(activated), np.signbit(_clamped(y, bounds)))
    np.testing.assert_array_equal(activated_mean, mean)
    np.testing.assert_array_equal(activated_variance, variance)
    assert np.isnan(activated[:, 0]).all()


@pytest.mark.parametrize("relu", [False, True], ids=["sum", "relu of the sum"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_forward_loop_adds_a_residual_as_onnxruntimes_add_would(shape, relu, build):
    # A residual block's end: Y + R rounded once (then its ReLU), the same bits as the loop's Y then
    # numpy's (IEEE) addition; non-finite residuals pass through as in an addition.
    x, scale, bias, residual = _inputs(shape, seed=8)
    residual.reshape(-1)[:3] = [np.inf, -np.inf, np.nan]
    y, mean, variance = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON)
    summed, summed_mean, summed_variance = compiled_normalization.batch_norm_training(
        x, scale, bias, EPSILON, bounds=compiled_normalization.RELU_BOUNDS if relu else None, residual=residual
    )
    expected = y + residual
    if relu:
        expected = np.where(expected < 0, np.float32(0), expected)
    np.testing.assert_array_equal(summed, expected)
    np.testing.assert_array_equal(np.signbit(summed), np.signbit(expected))
    np.testing.assert_array_equal(summed_mean, mean)
    np.testing.assert_array_equal(summed_variance, variance)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_gradient_loop_is_batch_normalizations_gradient(shape, build):
    x, scale, bias, g = _inputs(shape, seed=1)
    x64, g64, axes = x.astype(np.float64), g.astype(np.float64), _axes(x)
    mean, variance = x64.mean(axes).astype(np.float32), x64.var(axes).astype(np.float32)
    dx, dscale, dbias = compiled_normalization.batch_norm_training_gradient(g, x, scale, mean, variance, EPSILON)
    assert dx.shape == x.shape and dscale.shape == dbias.shape == (shape[1],)
    count = x.size // shape[1]
    centered = x64 - _channel(mean, x)
    inverse_std = 1 / np.sqrt(variance.astype(np.float64) + EPSILON)
    sum_g, sum_gc = g64.sum(axes), (g64 * centered).sum(axes)
    sum_g_bound = _plane_gamma(x) * np.abs(g64).sum(axes)
    # X - mean rounds once before the products: one more rounding per term.
    sum_gc_bound = (_plane_gamma(x) + gamma(2)) * np.abs(g64 * centered).sum(axes)
    assert_within(dbias, sum_g, sum_g_bound)
    assert_within(dscale, sum_gc * inverse_std, (sum_gc_bound + gamma(ROUNDINGS) * np.abs(sum_gc)) * inverse_std)
    factor = _channel(scale * inverse_std, x)
    expected = factor * (g64 - _channel(sum_g / count, x) - centered * _channel(inverse_std**2 * sum_gc / count, x))
    magnitude = np.abs(factor) * (
        np.abs(g64)
        + _channel(np.abs(sum_g) / count, x)
        + np.abs(centered) * _channel(inverse_std**2 * np.abs(sum_gc) / count, x)
    )
    coefficient_errors = np.abs(factor) * (
        _channel(sum_g_bound / count, x) + np.abs(centered) * _channel(inverse_std**2 * sum_gc_bound / count, x)
    )
    assert_within(dx, expected, gamma(ROUNDINGS) * magnitude + coefficient_errors)


def _masked(g, output, bounds):
    """Where(LessOrEqual(A, low) [or GreaterOrEqual(A, high)], 0, G): NaN in A lets G through."""
    low, high = bounds
    dropped = output <= np.float32(low) if high is None else (output <= np.float32(low)) | (output >= np.float32(high))
    return np.where(dropped, np.float32(0), g)


@pytest.mark.parametrize("bounds", ACTIVATIONS.values(), ids=ACTIVATIONS.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_the_gradient_loop_with_an_activations_output_masks_the_gradient_first(shape, bounds, build):
    # Exactly the loop over the masked gradient: the mask gives +0.0 where numpy's where does.
    x, scale, bias, g = _inputs(shape, seed=4)
    y, mean, variance = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON)
    output = _clamped(y, bounds)
    output.reshape(-1)[:3] = np.nan
    if bounds[1] is not None:
        output.reshape(-1)[6:8] = bounds  # at the bounds themselves: no gradient
    g.reshape(-1)[3:6] = [np.nan, np.inf, -np.inf]
    masked = _masked(g, output, bounds)
    expected = compiled_normalization.batch_norm_training_gradient(masked, x, scale, mean, variance, EPSILON)
    folded = compiled_normalization.batch_norm_training_gradient(
        g, x, scale, mean, variance, EPSILON, activation_output=output, bounds=bounds
    )
    for one, other in zip(folded, expected):
        np.testing.assert_array_equal(one, other)


def _activation_arrays(size: int, bounds):
    rng = np.random.default_rng(2)
    low, high = bounds
    output = _clamped((rng.standard_normal(size) * 4).astype(np.float32), bounds)
    g = rng.standard_normal(size).astype(np.float32)
    edges = [low, np.nextafter(np.float32(low), np.float32(np.inf))]
    if high is not None:
        edges += [high, np.nextafter(np.float32(high), np.float32(-np.inf))]
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, *edges], np.float32)
    output[: len(specials)] = specials
    g[len(specials) : 2 * len(specials)] = specials  # NaN and inf gradients inside the bounds or not
    output[len(specials) : 2 * len(specials)] = np.resize(np.array([0.4, low], np.float32), len(specials))
    return g, output


@pytest.mark.parametrize("bounds", ACTIVATIONS.values(), ids=ACTIVATIONS.keys())
@pytest.mark.parametrize("size", [1, 7, 8, 15, 64, 1000, 1 << 19])
def test_the_activation_gradient_loop_is_where_outside_the_bounds(size, bounds, build):
    g, output = _activation_arrays(max(size, 22), bounds)
    g, output = g[:size].copy(), output[:size].copy()
    result = compiled_normalization.activation_gradient(g, output, bounds)
    np.testing.assert_array_equal(result, _masked(g, output, bounds))
    assert result.dtype == np.float32 and result.shape == g.shape


def test_a_lower_bound_alone_other_than_a_relus_is_refused():
    g = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="only at 0"):
        compiled_normalization.activation_gradient(g, g, (1.0, None))


@pytest.mark.parametrize("threads", [2, 3])
def test_the_results_do_not_depend_on_the_number_of_threads(threads):
    # Large enough for the loops to start threads (one per 2^18 elements).
    x, scale, bias, g = _inputs((16, 12, 48, 48), seed=3)
    forward = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON, 1)
    threaded = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON, threads)
    for one, many in zip(forward, threaded):
        np.testing.assert_array_equal(one, many)
    _, mean, variance = forward
    gradient = compiled_normalization.batch_norm_training_gradient(g, x, scale, mean, variance, EPSILON, 1)
    threaded = compiled_normalization.batch_norm_training_gradient(g, x, scale, mean, variance, EPSILON, threads)
    for one, many in zip(gradient, threaded):
        np.testing.assert_array_equal(one, many)
    for bounds in ACTIVATIONS.values():
        output = _clamped(x - 2, bounds)
        np.testing.assert_array_equal(
            compiled_normalization.activation_gradient(g, output, bounds, threads),
            compiled_normalization.activation_gradient(g, output, bounds, 1),
        )


@pytest.mark.parametrize(
    "shape, dtype, per_channel, taken",
    [
        ((32, 16, 32, 32), np.float32, True, True),
        ((32, 16, 32, 32), np.float64, True, False),  # float32 only
        ((2, 16, 8, 8), np.float32, True, False),  # fewer elements than a session boundary repays
        ((4096, 64), np.float32, True, False),  # no spatial axes: one element per plane
        ((4096, 64), np.float32, False, True),  # ReLU's gradient takes any shape
        ((64, 8, 2, 2), np.float32, True, False),  # planes smaller than a vector
    ],
)
def test_which_nodes_the_loops_take(shape, dtype, per_channel, taken):
    assert compiled_normalization.eligible(shape, dtype, per_channel) is taken


def test_switched_off_the_loops_take_nothing(monkeypatch):
    monkeypatch.setattr(compiled_normalization, "ENABLED", False)
    assert not compiled_normalization.eligible((32, 16, 32, 32), np.float32)
