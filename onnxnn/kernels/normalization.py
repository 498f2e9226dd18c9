"""Normalization kernels: BatchNormalization (inference and training mode), LayerNormalization,
GroupNormalization, InstanceNormalization, RMSNormalization, LpNormalization,
MeanVarianceNormalization, LRN, and Dropout.

Statistics are computed in float32 or wider (float16/bfloat16 inputs arrive widened, which is
what ``stash_type=1`` asks for). Variances are population variances, as ONNX specifies.
"""

from __future__ import annotations

import math

import numpy as np

from . import compiled_normalization
from .activation_gradients import masked_by_activation
from ._common import normalize_axis, reduce_mean, reduce_sum, to_scalar
from ..ir.domains import ONNXNN_DOMAIN
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.registry import compiled_forms, compiled_readers
from ..ir.random import uniform as onnxnn_uniform

__all__: list[str] = []


def _channel_shape(x) -> tuple:
    """Shape that broadcasts a per-channel vector over an (N, C, ...) array."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _moments(xp, x, axes):
    mean = reduce_mean(xp, x, axes, True)
    centered = x - mean
    variance = reduce_mean(xp, centered * centered, axes, True)
    return mean, centered, variance


def _shifted_moments(xp, x, axes):
    """``(shift, centered, residual, variance)``: ``centered = x - shift`` with ``shift`` the float mean
    of ``x``, and the mean ``residual`` and the variance of ``centered``, all kept over ``axes``.

    The corrected two-pass algorithm (Chan, Golub and LeVeque, 1983): the mean is ``shift + residual``,
    and the normalized values are ``(centered - residual) / std``, in which the mean's rounding (up to
    ``ulp(mean) / 2``, ``ulp(mean) / (2 std)`` in the output) never enters; one read more than
    ``_moments``. ``mean(centered^2) - residual^2`` is clamped at 0, which rounding crosses only where
    the values are all equal.
    """
    shift = reduce_mean(xp, x, axes, True)
    centered = x - shift
    residual = reduce_mean(xp, centered, axes, True)
    variance = xp.maximum(reduce_mean(xp, centered * centered, axes, True) - residual * residual, 0)
    return shift, centered, residual, variance


@kernels.register("BatchNormalization", types=FLOATING)
def batch_normalization(xp, inputs, attrs):
    x, scale, bias, mean, variance = inputs[:5]
    epsilon = attrs.get("epsilon", 1e-5)
    shape = _channel_shape(x)
    if attrs.get("training_mode", 0):
        axes = (0,) + tuple(range(2, x.ndim))
        batch_mean, centered, batch_variance = _moments(xp, x, axes)
        # onnxruntime reads the FLOAT attributes as they are (runtime/ops/batch_norm_epsilon.py gives only
        # the inference node PyTorch's epsilon), and so do these, so that both executors agree.
        epsilon = float(np.float32(epsilon))
        y = centered / xp.sqrt(batch_variance + epsilon) * scale.reshape(shape) + bias.reshape(shape)
        momentum = float(np.float32(attrs.get("momentum", 0.9)))
        running_mean = mean * momentum + batch_mean.reshape(-1) * (1 - momentum)
        running_variance = variance * momentum + batch_variance.reshape(-1) * (1 - momentum)
        return [y, running_mean, running_variance]
    return [_normalized(xp, x, scale, bias, mean, variance, epsilon)]


def _normalized(xp, x, scale, bias, mean, variance, epsilon):
    """Inference BatchNormalization: the statistics folded into one scale and shift, two passes over x."""
    shape = _channel_shape(x)
    factor = scale / xp.sqrt(variance + x.dtype.type(epsilon))
    shift = bias - mean * factor
    return x * factor.reshape(shape) + shift.reshape(shape)


@kernels.register("BatchNormalizationTraining", domain=ONNXNN_DOMAIN, types=FLOATING)
def batch_normalization_training(xp, inputs, attrs):
    """The batch's mean and biased variance, then inference BatchNormalization with them and epsilon
    added in the input's dtype (the decomposition in runtime/ops/batch_norm_training.py)."""
    x, scale, bias = inputs
    if xp is np and compiled_normalization.eligible(x.shape, x.dtype):
        return compiled_normalization.batch_norm_training(x, scale, bias, _epsilon(attrs))
    axes = (0,) + tuple(range(2, x.ndim))
    shift, centered, residual, variance = _shifted_moments(xp, x, axes)
    residual, variance = residual.reshape(-1), variance.reshape(-1)
    shifted_variance = variance + x.dtype.type(attrs.get("epsilon", 1e-5))
    normalized = _normalized(xp, centered, scale, bias, residual, shifted_variance, 0.0)
    return [normalized, shift.reshape(-1) + residual, variance]


@kernels.register("BatchNormalizationTrainingGradient", domain=ONNXNN_DOMAIN, types=FLOATING)
def batch_normalization_training_gradient(xp, inputs, attrs):
    """dX, dscale and dB of ``BatchNormalizationTraining`` (runtime/ops/batch_norm_training.py's formulas),
    for G masked by the output A of a ReLU, or of a Hardtanh with its bounds, where A is given."""
    g, x, scale, mean, variance = inputs[:5]
    activation_output, bounds = _folded_activation(inputs)
    epsilon = _epsilon(attrs)
    if xp is np and compiled_normalization.eligible(x.shape, x.dtype):
        return compiled_normalization.batch_norm_training_gradient(
            g, x, scale, mean, variance, epsilon, 1, activation_output, bounds
        )
    if activation_output is not None:
        g = masked_by_activation(xp, g, activation_output, bounds)
    shape = _channel_shape(x)
    axes = (0,) + tuple(range(2, x.ndim))
    centered = x - mean.reshape(shape)
    sum_g = reduce_sum(xp, g, axes, True)
    sum_gc = reduce_sum(xp, g * centered, axes, True)
    inverse_std = 1 / xp.sqrt(variance.reshape(shape) + x.dtype.type(epsilon))
    factor = scale.reshape(shape) * inverse_std
    per_element = -factor / x.dtype.type(x.size // x.shape[1])
    dx = g * factor + per_element * sum_g + centered * (per_element * inverse_std * inverse_std * sum_gc)
    return [dx, (sum_gc * inverse_std).reshape(-1), sum_g.reshape(-1)]


# A normalization runs as its loop on any number of intra-op threads, a ReLU to take or not. With a
# thread started per call, two threads lost where there was no ReLU to take (MobileNetV2's training
# step, ReLU6: 1.12x as long with its 52 normalizations as loops), so only those taking one ran so;
# since the loops' threads are a pool whose workers take a call's pieces as they come free
# (loop_threads.c), MobileNetV2's step at batch 8, 64x64, two threads, takes 76-78 ms with every
# normalization a loop against 99 ms with those alone on onnxruntime, and a small ResNet's 15.1-16.0
# against 15.5-16.3 ms.
@compiled_forms.register("BatchNormalizationTraining", domain=ONNXNN_DOMAIN)
def _compiled_batch_normalization_training(node, threads: int):
    """onnxnn's sessions run a float32 training batch normalization over planes as the compiled loop."""
    return _forward_loop(node, None)


@compiled_readers.register("BatchNormalizationTraining", domain=ONNXNN_DOMAIN)
def _compiled_batch_normalization_training_and_readers(node, readers: list, threads: int):
    """The loop writes what the normalization's only readers would: the ReLU or the Hardtanh (ReLU6) of
    its output (most convolutional networks' BatchNorm-ReLU, MobileNet's BatchNorm-ReLU6), or its sum
    with a residual of the same shape and then, where one is all that reads the sum, that sum's ReLU
    (a residual block's end). Those readers cost no passes of their own."""
    first = readers[0]
    if (first.op_type, first.domain) == ("Relu", ""):
        run = _forward_loop(node, "relu")
        return None if run is None else (run, 1)
    if (first.op_type, first.domain) == (HARDTANH, ONNXNN_DOMAIN):
        run = _forward_loop(node, "clamp")  # its bounds come after the normalization's inputs
        return None if run is None else (run, 1)
    if not _adds_a_residual(first, node.inputs[0]):
        return None
    relu = len(readers) > 1 and (readers[1].op_type, readers[1].domain) == ("Relu", "")
    run = _forward_loop(node, "relu" if relu else None, residual=True)
    return None if run is None else (run, 2 if relu else 1)


# onnxnn's Hardtanh (runtime/ops/hardtanh.py), which sessions run as a Clip.
HARDTANH = "Hardtanh"


def _adds_a_residual(add, x) -> bool:
    """Whether ``add`` sums the normalization's output with one other value of its shape and dtype."""
    if (add.op_type, add.domain) != ("Add", "") or len(add.inputs) != 2:
        return False
    first, second = add.inputs
    return first is not second and all(v.shape == x.shape and v.dtype is x.dtype for v in (first, second))


def _forward_loop(node, activation: str | None, residual: bool = False):
    """The forward's run: ``activation`` None, "relu" or "clamp" (its bounds the arrays after the
    normalization's three); with ``residual``, the residual after them."""
    x = node.inputs[0]
    if not compiled_normalization.eligible(x.shape, x.dtype.numpy_dtype):
        return None
    epsilon = _epsilon(node.attrs)

    def run(arrays, threads: int) -> list:
        x, scale, bias = arrays[:3]
        added = arrays[3] if residual else None
        bounds: tuple | None = None
        if activation == "relu":
            bounds = compiled_normalization.RELU_BOUNDS
        elif activation == "clamp":
            bounds = (float(arrays[3]), float(arrays[4]))
        return compiled_normalization.batch_norm_training(x, scale, bias, epsilon, threads, bounds, added)

    return run


@compiled_forms.register("BatchNormalizationTrainingGradient", domain=ONNXNN_DOMAIN)
def _compiled_batch_normalization_training_gradient(node, threads: int):
    """As the forward: its gradient as the compiled loop."""
    x = node.inputs[1]
    if not compiled_normalization.eligible(x.shape, x.dtype.numpy_dtype):
        return None
    epsilon = _epsilon(node.attrs)

    def run(arrays, threads: int) -> list:
        g, x, scale, mean, variance = arrays[:5]
        activation_output, bounds = _folded_activation(arrays)
        return compiled_normalization.batch_norm_training_gradient(
            g, x, scale, mean, variance, epsilon, threads, activation_output, bounds
        )

    return run


def _folded_activation(inputs) -> tuple:
    """A BatchNormalizationTrainingGradient's folded activation: its output (or None) and its bounds."""
    if len(inputs) == 6:
        return inputs[5], compiled_normalization.RELU_BOUNDS
    if len(inputs) == 8:
        return inputs[5], (float(inputs[6]), float(inputs[7]))
    return None, compiled_normalization.RELU_BOUNDS


def _epsilon(attrs) -> float:
    return float(attrs.get("epsilon", 1e-5))


@kernels.register("LayerNormalization", types=FLOATING)
def layer_normalization(xp, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    axes = tuple(range(axis, x.ndim))
    mean, centered, variance = _moments(xp, x, axes)
    inverse_std = 1 / xp.sqrt(variance + x.dtype.type(attrs.get("epsilon", 1e-5)))
    y = centered * inverse_std * scale
    if bias is not None:
        y = y + bias
    return [y, mean, inverse_std]


@kernels.register("GroupNormalization", types=FLOATING)
def group_normalization(xp, inputs, attrs):
    x, scale, bias = inputs
    groups = attrs["num_groups"]
    batch, channels = x.shape[:2]
    # The group's size counted, not -1: an empty batch has no size to infer it from.
    grouped = x.reshape(batch, groups, channels // groups * math.prod(x.shape[2:]))
    _, centered, residual, variance = _shifted_moments(xp, grouped, (2,))
    if scale.shape[0] != channels:
        # Opset 18 took one scale and bias per group; opset 21 takes one per channel.
        scale = xp.repeat(scale, channels // groups)
        bias = xp.repeat(bias, channels // groups)
    inverse_std = 1 / xp.sqrt(variance + x.dtype.type(attrs.get("epsilon", 1e-5)))
    # Per (sample, channel): each channel's group statistics with its scale and bias, applied in two passes.
    per_group = (batch, groups, channels // groups)
    factor = (inverse_std * scale.reshape(1, groups, -1)).reshape(per_group)
    shift = bias.reshape(1, groups, -1) - residual * factor
    return [_affine(centered.reshape(x.shape), factor, shift)]


def _affine(centered, factor, shift):
    """``centered * factor + shift`` with ``factor`` and ``shift`` per (sample, channel) of (N, C, ...)."""
    shape = centered.shape[:2] + (1,) * (centered.ndim - 2)
    return centered * factor.reshape(shape) + shift.reshape(shape)


@kernels.register("InstanceNormalization", types=FLOATING)
def instance_normalization(xp, inputs, attrs):
    x, scale, bias = inputs
    _, centered, residual, variance = _shifted_moments(xp, x, tuple(range(2, x.ndim)))
    shape = _channel_shape(x)
    factor = scale.reshape(shape) / xp.sqrt(variance + x.dtype.type(attrs.get("epsilon", 1e-5)))
    return [_affine(centered, factor, bias.reshape(shape) - residual * factor)]


@kernels.register("RMSNormalization", types=FLOATING)
def rms_normalization(xp, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    mean_square = reduce_mean(xp, x * x, tuple(range(axis, x.ndim)), True)
    return [x / xp.sqrt(mean_square + x.dtype.type(attrs.get("epsilon", 1e-5))) * scale]


@kernels.register("LpNormalization", types=FLOATING)
def lp_normalization(xp, inputs, attrs):
    x = inputs[0]
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    if attrs.get("p", 2) == 1:
        norm = reduce_sum(xp, xp.abs(x), axis, True)
    else:
        norm = xp.sqrt(reduce_sum(xp, x * x, axis, True))
    # A zero vector stays zero instead of becoming 0/0.
    return [xp.where(norm == 0, x.dtype.type(0), x / norm)]


@kernels.register("MeanVarianceNormalization", types=FLOATING)
def mean_variance_normalization(xp, inputs, attrs):
    x = inputs[0]
    axes = tuple(normalize_axis(a, x.ndim) for a in attrs.get("axes", [0, 2, 3]))
    mean = reduce_mean(xp, x, axes, True)
    variance = reduce_mean(xp, x * x, axes, True) - mean * mean
    # The epsilon of ONNX's function definition of the op.
    return [(x - mean) / (xp.sqrt(variance) + x.dtype.type(1e-9))]


@kernels.register("LRN", types=FLOATING)
def local_response_normalization(xp, inputs, attrs):
    x = inputs[0]
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    squares = x * x
    # Window sums over channels from one cumulative sum: prefix[c + after + 1] - prefix[c - before].
    widths = [(0, 0), (before + 1, after)] + [(0, 0)] * (x.ndim - 2)
    prefix = xp.cumsum(xp.pad(squares, widths), axis=1)
    channels = x.shape[1]
    window = prefix[:, before + after + 1 : before + after + 1 + channels] - prefix[:, :channels]
    return [x / (x.dtype.type(bias) + x.dtype.type(alpha / size) * window) ** x.dtype.type(beta)]


@kernels.register("Dropout", types=FLOATING)
def dropout(xp, inputs, attrs):
    x = inputs[0]
    ratio = float(to_scalar(inputs[1])) if len(inputs) > 1 and inputs[1] is not None else attrs.get("ratio", 0.5)
    training = bool(to_scalar(inputs[2])) if len(inputs) > 2 and inputs[2] is not None else False
    if not training or ratio == 0:
        return [x, xp.ones(x.shape, dtype=bool)]
    # Randomness for recorded graphs enters as data (onnxnn's generator); a bare Dropout node in
    # training mode draws from its seed attribute, or from onnxnn's generator when it has none.
    if "seed" in attrs:
        uniform = np.random.RandomState(int(attrs["seed"])).uniform(0, 1.0, x.shape)
    else:
        uniform = onnxnn_uniform(x.shape, np.float64)
    mask = xp.asarray(uniform >= ratio)
    return [x * mask * x.dtype.type(1.0 / (1.0 - ratio)), mask]
