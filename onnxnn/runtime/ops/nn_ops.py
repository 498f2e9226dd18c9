"""Neural-network ops with their own ONNX node: BatchNormalization (shape and gradient rules).

``onnxnn.nn.functional.batch_norm`` decomposes training-mode normalization (onnxruntime runs
``training_mode=1`` only in its training builds) and records this one fused node in evaluation, which
is also what imported inference graphs contain. Imported ``training_mode=1`` nodes get their gradient
from ``normalization.batch_normalization_training_grad``.
"""
from __future__ import annotations

from ..registry import gradient_rules, shape_rules
from ._common import normalize_axes

__all__: list[str] = []


@shape_rules.register("BatchNormalization")
def _batch_normalization_shape(inputs, attrs):
    x = inputs[0]
    if len(x.shape) < 2:
        raise RuntimeError(f"BatchNormalization expects an input of rank >= 2, got shape {list(x.shape)}")
    channels = x.shape[1]
    for name, value in zip(("scale", "B", "input_mean", "input_var"), inputs[1:5]):
        if value is not None and value.shape != (channels,):
            raise RuntimeError(f"BatchNormalization: {name} of shape {list(value.shape)} does not match the "
                               f"{channels} channels of the input of shape {list(x.shape)}")
    outputs = [(x.shape, x.dtype)]
    if attrs.get("training_mode", 0):
        # running_mean and running_var outputs, typed like the input statistics.
        outputs += [((channels,), inputs[3].dtype), ((channels,), inputs[4].dtype)]
    return outputs


@gradient_rules.register("BatchNormalization")
def _batch_normalization_grad(ctx, g, *statistics_grads):
    if ctx.attrs.get("training_mode", 0):
        from .normalization import batch_normalization_training_grad  # the normalization family owns it
        return batch_normalization_training_grad(ctx, g, *statistics_grads)
    x, scale, mean, variance = ctx.input(0), ctx.input(1), ctx.input(3), ctx.input(4)
    rank = x.dim()
    stat_shape = (1, x.shape[1]) + (1,) * (rank - 2)
    other_axes = normalize_axes([0] + list(range(2, rank)), rank)
    inverse_std = (variance + ctx.attrs.get("epsilon", 1e-5)).rsqrt().reshape(stat_shape)
    centered = x - mean.reshape(stat_shape)
    scaled_g = g * (scale.reshape(stat_shape) * inverse_std)
    # Per-channel parameters are reduced over every non-channel axis here: the autodiff driver only
    # sums numpy-style (trailing-aligned) broadcasting, and these broadcast along dim 1.
    grad_x = scaled_g
    grad_scale = (g * centered * inverse_std).sum(other_axes)
    grad_bias = g.sum(other_axes)
    grad_mean = -scaled_g.sum(other_axes)
    grad_variance = (scaled_g * centered * (inverse_std * inverse_std) * -0.5).sum(other_axes)
    return grad_x, grad_scale, grad_bias, grad_mean, grad_variance
