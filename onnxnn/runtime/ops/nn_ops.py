"""Neural-network ops with their own ONNX node: BatchNormalization and the activations with attributes.

The activations (Selu, Celu, HardSigmoid, HardSwish, Mish, Softsign, Shrink, ThresholdedRelu, PRelu)
get gradient rules written with ops onnxruntime runs in float64 too (Where, Exp, Tanh, ...), so a
model imported with these nodes trains. Their derivatives follow PyTorch's backward formulas at
the kinks (HardSwish's slope at -3 is 0, at 3 it is x / 3 + 1 / 2; Shrink's at +-lambd is 0).
``hardshrink`` and ``prelu`` live here too, as tensor ops: ``Tensor`` methods and
``onnxnn.nn.functional`` both call them.

``onnxnn.nn.functional.batch_norm`` records this one fused node in evaluation, which is also what
imported inference graphs contain, and onnxnn's own ``BatchNormalizationTraining`` in training
(``batch_norm_training.py``: onnxruntime's ``training_mode=1`` kernel aliases its statistics outputs
to their inputs). Imported ``training_mode=1`` nodes get their gradient from
``normalization.batch_normalization_training_grad``.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.registry import gradient_rules, non_differentiable, shape_rules
from ._common import Tensor, apply_op, normalize_axes, same_shape
from ..tensor import autocast_arguments
from .conv_gradients import needs_input_grad
from .activations import relu, sigmoid, tanh
from .elementwise import abs, exp, log, where
from .normalization import batch_normalization_training_grad  # the normalization family owns it
from .opmath import rounded, widened

__all__ = ["hardshrink", "prelu"]


@shape_rules.register("BatchNormalization")
def _batch_normalization_shape(inputs, attrs):
    x = inputs[0]
    if len(x.shape) < 2:
        raise RuntimeError(f"BatchNormalization expects an input of rank >= 2, got shape {list(x.shape)}")
    channels = x.shape[1]
    for name, value in zip(("scale", "B", "input_mean", "input_var"), inputs[1:5]):
        if value is not None and value.shape != (channels,):
            raise RuntimeError(
                f"BatchNormalization: {name} of shape {list(value.shape)} does not match the "
                f"{channels} channels of the input of shape {list(x.shape)}"
            )
    outputs = [(x.shape, x.dtype)]
    if attrs.get("training_mode", 0):
        # running_mean and running_var outputs, typed like the input statistics.
        outputs += [((channels,), inputs[3].dtype), ((channels,), inputs[4].dtype)]
    return outputs


@gradient_rules.register("BatchNormalization")
def _batch_normalization_grad(ctx, g, *statistics_grads):
    if ctx.attrs.get("training_mode", 0):
        return batch_normalization_training_grad(ctx, g, *statistics_grads)
    x, scale, mean, variance = ctx.input(0), ctx.input(1), ctx.input(3), ctx.input(4)
    rank = x.dim()
    stat_shape = (1, x.shape[1]) + (1,) * (rank - 2)
    other_axes = normalize_axes([0] + list(range(2, rank)), rank)
    inverse_std = (variance + ctx.attrs.get("epsilon", 1e-5)).rsqrt().reshape(stat_shape)
    centered = x - mean.reshape(stat_shape)
    scaled_g = g * (scale.reshape(stat_shape) * inverse_std)
    # Per-channel parameters are reduced over every non-channel axis here: the autodiff driver only
    # sums numpy-style (trailing-aligned) broadcasting, and these broadcast along dim 1. Per-channel
    # factors multiply after the reduction, a pass over the activations fewer.
    grad_x = scaled_g
    grad_scale = (g * centered).sum(other_axes) * inverse_std.reshape(-1)
    grad_bias = g.sum(other_axes)
    # The statistics of a trained model are buffers: their gradients only when something asks.
    grad_mean = -scaled_g.sum(other_axes) if needs_input_grad(ctx, 3) else None
    grad_variance = None
    if needs_input_grad(ctx, 4):
        grad_variance = (scaled_g * centered).sum(other_axes) * (inverse_std * inverse_std * -0.5).reshape(-1)
    return grad_x, grad_scale, grad_bias, grad_mean, grad_variance


# ---------------------------------------------------------------- activations with attributes

# Hardmax's one-hot output is piecewise constant: no gradient flows through it (as through Floor).
non_differentiable.mark("Hardmax")

# Shrink is the one elementwise.py's unary shape list leaves out. Swish (opset 24) gets none: ops
# newer than onnxnn's opset 21 are imported through their ONNX function bodies (x * Sigmoid(alpha x)),
# whose ops have gradient rules.
shape_rules.register("Shrink")(same_shape)

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875


def _softplus_from_float64_ops(x):
    """log(1 + exp(x)) without overflow, from ops onnxruntime also runs in float64."""
    return relu(x) + log(exp(-abs(x)) + 1.0)


@gradient_rules.register("Selu")
def _selu_grad(ctx, g):
    x = ctx.input(0)
    alpha, gamma = ctx.attrs.get("alpha", _SELU_ALPHA), ctx.attrs.get("gamma", _SELU_GAMMA)
    # x <= 0 picks the negative side, so a NaN passes the positive side's slope, as PyTorch's elu_backward.
    # exp of ``where(x < 0, x, 0)``: finite on the unused side, and no second derivative at exactly 0
    # (PyTorch's elu_double_backward is strict there).
    return (where(x <= 0, g * (exp(where(x < 0, x, 0.0)) * (alpha * gamma)), g * gamma),)


@gradient_rules.register("Celu")
def _celu_grad(ctx, g):
    x, alpha = ctx.input(0), ctx.attrs.get("alpha", 1.0)
    # NaN passes g, as Selu's; the exponent as Elu's (no second derivative at exactly 0).
    return (where(x <= 0, g * exp(where(x < 0, x, 0.0) * (1.0 / alpha)), g),)


def is_pytorchs_hard_sigmoid(attrs) -> bool:
    """Whether a HardSigmoid node's attributes are PyTorch's hardsigmoid (alpha 1/6, beta 1/2, as
    recorded or as a float32 attribute of an imported model), whose pieces meet at exactly -3 and 3."""
    alpha, beta = attrs.get("alpha", 0.2), attrs.get("beta", 0.5)
    return float(np.float32(alpha)) == float(np.float32(1.0 / 6)) and float(beta) == 0.5


@gradient_rules.register("HardSigmoid")
def _hard_sigmoid_grad(ctx, g):
    x = ctx.input(0)
    alpha, beta = ctx.attrs.get("alpha", 0.2), ctx.attrs.get("beta", 0.5)
    if is_pytorchs_hard_sigmoid(ctx.attrs):
        # PyTorch's bounds, on x itself: x / 6 + 1/2 rounds to 1 just below 3 (2.9999998 in float32),
        # which would make the slope 0 there.
        inside = (x > -3.0) & (x < 3.0)
    else:
        linear = x * alpha + beta
        inside = (linear > 0) & (linear < 1)
    return (where(inside, g * alpha, g * 0.0),)


@gradient_rules.register("HardSwish")
def _hard_swish_grad(ctx, g):
    x = ctx.input(0)
    # The middle piece's slope strictly between -3 and 3, as PyTorch's (0 at -3, 1 at 3).
    return (where(x <= -3.0, g * 0.0, where(x < 3.0, g * (x * (1.0 / 3) + 0.5), g)),)


@gradient_rules.register("Mish")
def _mish_grad(ctx, g):
    # float16/bfloat16 in float32, rounded once (PyTorch's opmath): 1 - t^2 cancels in half.
    dtype = ctx.input(0).dtype
    x, g = widened(ctx.input(0)), widened(g)
    t = tanh(_softplus_from_float64_ops(x))
    return (rounded(g * (t + x * sigmoid(x) * (1.0 - t * t)), dtype),)


@gradient_rules.register("Softsign")
def _softsign_grad(ctx, g):
    denominator = abs(ctx.input(0)) + 1.0
    return (g / denominator / denominator,)  # the square overflows first (float16: |x| past 255)


@gradient_rules.register("Shrink")
def _shrink_grad(ctx, g):
    x, lambd = ctx.input(0), ctx.attrs.get("lambd", 0.5)
    return (where((x < -lambd) | (x > lambd), g, g * 0.0),)


@gradient_rules.register("ThresholdedRelu")
def _thresholded_relu_grad(ctx, g):
    x = ctx.input(0)
    return (where(x > ctx.attrs.get("alpha", 1.0), g, g * 0.0),)


@gradient_rules.register("PRelu")
def _prelu_grad(ctx, g):
    x, slope = ctx.input(0), ctx.input(1)
    positive = x > 0  # at 0 the slope's side, as PyTorch's
    # At exactly 0 the mixed second-order terms (d grad_x / d slope, d grad_slope / d x) are 0, as
    # PyTorch's (its double backward takes x >= 0 there): the factor that would carry them is detached.
    zero = x == 0
    grad_x = where(positive, g, g * where(zero, slope.detach(), slope)) if needs_input_grad(ctx, 0) else None
    # The driver sums this back to the slope's (numpy-broadcast) shape.
    grad_slope = where(positive, g * 0.0, g * where(zero, x.detach(), x)) if needs_input_grad(ctx, 1) else None
    return grad_x, grad_slope


# ---------------------------------------------------------------- tensor ops


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """Returns 0 where ``|x| <= lambd``, else ``x`` (a NaN stays NaN, and takes the gradient, as in PyTorch)."""
    if input.dtype is dtypes.float64:  # onnxruntime's float64 Shrink rounds through float32
        zero = Tensor._full((), 0.0, input.dtype, input.device)
        return where((input >= -lambd) & (input <= lambd), zero, input)
    return keep_nans(input, apply_op("Shrink", (input,), {"lambd": float(lambd), "bias": 0.0}, "HardshrinkBackward0"))


def keep_nans(input: Tensor, shrunk: Tensor) -> Tensor:
    """``shrunk`` with ``input``'s NaNs back in place: ONNX's Shrink makes them 0, PyTorch's shrinks
    keep them (and pass them the gradient)."""
    return where(input != input, input, shrunk)


def _prelu_arguments(input, weight) -> tuple:
    """``(input, weight)`` as autocast casts them, checked as PyTorch's prelu checks them then: it
    neither promotes (a float32 input with a float64 weight is refused, before any shape check) nor
    takes integers or bools."""
    for name, value in (("input", input), ("weight", weight)):
        if not isinstance(value, Tensor):
            raise TypeError(f"prelu(): argument '{name}' must be Tensor, not {type(value).__name__}")
    input, weight = autocast_arguments("PRelu", (input, weight))
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {dtypes.scalar_type_name(input.dtype)} and "
            f"{dtypes.scalar_type_name(weight.dtype)}"
        )
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for '{dtypes.scalar_type_name(input.dtype)}'")
    return input, weight


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """Applies ``max(0, x) + weight * min(0, x)``; ``weight`` has one slope, or one per channel (dim 1).

    Example::

        >>> F.prelu(onnxnn.tensor([[-2.0, 3.0]]), onnxnn.tensor([0.25]))
        tensor([[-0.5000,  3.0000]])
    """
    input, weight = _prelu_arguments(input, weight)
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.dim()}")
    count = weight.numel()
    if count != 1:
        if input.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input.shape[1] if input.dim() >= 2 else 1  # PyTorch: a 1-D input has one channel
        if channels != count:
            raise RuntimeError(
                f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                f"{count} and channel size = {channels}."
            )
        # ONNX broadcasts trailing-aligned: per-channel slopes become (C, 1, ..., 1).
        slope = weight.reshape((count,) + (1,) * max(input.dim() - 2, 0))
    else:
        slope = weight.reshape(())
    slope = slope.to(input.dtype)
    if input.dtype is dtypes.float64:  # onnxruntime's CPU provider has no float64 PRelu
        # 0 on the slope's side, as PRelu's rule; there the slope's factor is detached, so the mixed
        # second-order terms vanish at 0 as PyTorch's (and _prelu_grad's).
        return where(input > 0, input, input * where(input == 0, slope.detach(), slope))
    return apply_op("PRelu", (input, slope), None, "PreluKernelBackward0")
