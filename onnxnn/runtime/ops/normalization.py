"""Normalization ops: LayerNormalization, InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization, LRN, Dropout.

Shape and gradient rules for the nodes imported vision and language models contain, and PyTorch's
``layer_norm``, ``group_norm``, ``instance_norm`` and ``local_response_norm`` on top. Every
gradient is the analytic formula written with ordinary tensor ops: with ``x̂`` the normalized input
over the reduced axes and ``ĝ = g * scale``,
``dx = inv_std * (ĝ - mean(ĝ) - x̂ * mean(ĝ * x̂))``.

BatchNormalization's rules live in ``nn_ops.py``; :func:`batch_normalization_training_grad` here is
the gradient of its ``training_mode=1`` form, for that rule to delegate to.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.graph import shared_attributes
from ...ir.plan import realize_alongside
from ..grad_mode import is_grad_enabled, no_grad
from ...ir.registry import (
    gradient_rules,
    session_lowerings,
    shape_rules,
    size_blind_session_lowerings,
    unmaterialized_gradients,
)
from ._common import check_floating, Tensor, apply_op, normalize_axes
from .conv_gradients import channel_sum, needs_input_grad
from .padding import pad_constant
from .training import int64_initializers, node_emitter
from ..realization import data_of

__all__ = [
    "layer_norm",
    "group_norm",
    "instance_norm",
    "instance_normalization",
    "local_response_norm",
    "check_parameter_dtypes",
]


def check_running_statistics_without_grad(running_mean: Tensor | None, running_var: Tensor | None) -> None:
    """Refuses running statistics that require grad while grad mode is on, as PyTorch's
    ``native_batch_norm`` (which ``batch_norm`` and ``instance_norm`` call) does: they are buffers
    updated in place, and PyTorch defines no gradient for them, in training or in evaluation."""
    if not is_grad_enabled():
        return
    for name, statistic in (("running_mean", running_mean), ("running_var", running_var)):
        if statistic is not None and statistic.requires_grad:
            raise RuntimeError(
                f"The function 'native_batch_norm' is not differentiable with respect to argument '{name}'. "
                "This input cannot have requires_grad True."
            )


def check_parameter_dtypes(input: Tensor, *parameters: Tensor | None) -> None:
    """Refuses parameters (weight, bias, running statistics) of another dtype than ``input``'s, as
    PyTorch's CPU normalizations do, except float32 ones all together with a float16 or bfloat16
    input (its mixed-dtype form, computed in float32): a float64 input is not rounded to a float32
    weight's precision, nor a float32 one widened by a float64 weight."""
    given = {parameter.dtype for parameter in parameters if parameter is not None}
    if not given or given == {input.dtype}:
        return
    if given == {dtypes.float32} and input.dtype in (dtypes.float16, dtypes.bfloat16):
        return
    raise RuntimeError(
        f"mixed dtype (CPU): all inputs must share same datatype. (input of dtype {input.dtype}, "
        f"parameters of dtypes {sorted(str(d) for d in given)})"
    )


def _standardized(x: Tensor, axes: list[int], epsilon: float) -> tuple[Tensor, Tensor]:
    """(x - mean) * inv_std over ``axes`` (kept), and inv_std, in ``x``'s precision."""
    centered = x - x.mean(axes, keepdim=True)
    inv_std = ((centered * centered).mean(axes, keepdim=True) + epsilon).rsqrt()
    return centered * inv_std, inv_std


def _normalized_grad(g_hat: Tensor, x_hat: Tensor, inv_std: Tensor, axes: list[int]) -> Tensor:
    """The gradient through ``x̂ = (x - mean) * inv_std`` given ``ĝ = dL/dx̂``."""
    return inv_std * (g_hat - g_hat.mean(axes, keepdim=True) - x_hat * (g_hat * x_hat).mean(axes, keepdim=True))


def _per_channel(parameter: Tensor, rank: int) -> Tensor:
    """A ``(C,)`` parameter shaped ``(1, C, 1, ...)`` to broadcast over ``(N, C, *spatial)``."""
    return parameter.reshape((1, parameter.shape[0]) + (1,) * (rank - 2))


# ---------------------------------------------------------------- LayerNormalization


def _layer_norm_axis(attrs: dict, rank: int) -> int:
    return normalize_axes([attrs.get("axis", -1)], rank)[0]


@shape_rules.register("LayerNormalization")
def _layer_normalization_shape(inputs, attrs):
    x, scale = inputs[0], inputs[1]
    rank = len(x.shape)
    axis = _layer_norm_axis(attrs, rank)
    normalized = x.shape[axis:]
    for name, value in (("Scale", scale), ("B", inputs[2] if len(inputs) > 2 else None)):
        if value is None:
            continue
        trailing = normalized[len(normalized) - len(value.shape) :] if len(value.shape) <= len(normalized) else None
        if trailing is None or any(v not in (1, n) for v, n in zip(value.shape, trailing)):
            raise RuntimeError(
                f"LayerNormalization: {name} of shape {list(value.shape)} does not broadcast to the "
                f"normalized shape {list(normalized)} of the input of shape {list(x.shape)}"
            )
    stash = dtypes.as_dtype(int(attrs.get("stash_type", 1)))
    statistics = x.shape[:axis] + (1,) * (rank - axis)
    return [(x.shape, x.dtype), (statistics, stash), (statistics, stash)]


# Mean and InvStdDev take a gradient only where something reads them: F.layer_norm records them for
# the rule below to reuse, and zeros for them would cost passes at every backward.
unmaterialized_gradients.mark("LayerNormalization")


@gradient_rules.register("LayerNormalization")
def _layer_normalization_grad(ctx, g, *statistics_grads):
    x = ctx.input(0)
    axes = list(range(_layer_norm_axis(ctx.attrs, x.dim()), x.dim()))
    outputs = len(ctx.function.outputs)
    stash = dtypes.as_dtype(int(ctx.attrs.get("stash_type", 1)))
    if outputs > 2 and stash.itemsize >= x.dtype.itemsize:
        # The node's own Mean and InvStdDev: x_hat in two passes instead of recomputing both statistics.
        # Statistics stashed narrower than x (float64 x, float32 stash: onnxruntime has no float64
        # stash_type) would round the gradient to float32, so those are recomputed in x's precision.
        inv_std = ctx.output(2).to(x.dtype)
        x_hat = (x - ctx.output(1).to(x.dtype)) * inv_std
    else:
        x_hat, inv_std = _standardized(x, axes, float(ctx.attrs.get("epsilon", 1e-5)))
    # g is None where only the Mean and InvStdDev outputs got a gradient: a second-order pass whose
    # first-order loss was linear in Y (a gradient penalty through a LayerNorm).
    grad_x = grad_scale = grad_bias = None
    if needs_input_grad(ctx, 0):
        terms = [] if g is None else [_normalized_grad(g * ctx.input(1), x_hat, inv_std, axes)]
        # The optional Mean and InvStdDev outputs are functions of x too.
        count = float(np.prod([x.shape[axis] for axis in axes]))
        grad_mean, grad_inv_std = (tuple(statistics_grads) + (None, None))[:2]
        if grad_mean is not None:
            terms.append((grad_mean.to(x.dtype) / count).expand(x.shape))
        if grad_inv_std is not None:
            terms.append(-(grad_inv_std.to(x.dtype) * inv_std * inv_std * x_hat / count))
        for term in terms:
            grad_x = term if grad_x is None else grad_x + term
    if g is not None and needs_input_grad(ctx, 1):
        grad_scale = g * x_hat  # the driver sums it down to Scale's (broadcast) shape
    if g is not None and ctx.num_inputs > 2 and ctx.input_value(2) is not None:
        grad_bias = g
    return grad_x, grad_scale, grad_bias


# ---------------------------------------------------------------- Instance and group normalization


def _check_per_channel(op_type: str, x, parameters) -> None:
    if len(x.shape) < 3:
        raise RuntimeError(f"{op_type} expects an input of shape (N, C, *spatial), got {list(x.shape)}")
    for name, value in parameters:
        if value is not None and value.shape != (x.shape[1],):
            raise RuntimeError(
                f"{op_type}: {name} of shape {list(value.shape)} does not match the {x.shape[1]} "
                f"channels of the input of shape {list(x.shape)}"
            )


@shape_rules.register("InstanceNormalization")
def _instance_normalization_shape(inputs, attrs):
    x = inputs[0]
    _check_per_channel("InstanceNormalization", x, (("scale", inputs[1]), ("B", inputs[2])))
    return [(x.shape, x.dtype)]


# onnxruntime's InstanceNormalization (1.31, CPU) takes the mean in float32 and writes
# ``X * k + (B - mean * k)``: where the mean is large against the spread, both terms round by half
# an ulp of the mean (2e-3 for a mean of 1e4 over a spread of 1, six times PyTorch's error). onnxnn's
# sessions give it ``X - X[..., 0]`` instead, each instance shifted by its first element, which is
# exact where X is within a factor 2 of it and leaves a mean of the order of the spread: the output
# is the same (the op does not see a shift), and the mean no longer rounds. One pass more, where the
# corrected two-pass algorithm (shifting by the mean, as kernels/normalization.py does) would cost a
# second, to take that mean. Exports keep the node, as ``torch.onnx.export`` writes it.
@session_lowerings.register("InstanceNormalization")
def _instance_normalization_shifted(node, input_names: list, output_names: list, fresh_name, embedded=None):
    rank = len(node.inputs[0].shape)
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    x, scale, bias = input_names
    spatial = list(range(2, rank))
    first = emit("Slice", x, constant([0] * len(spatial)), constant([1] * len(spatial)), constant(spatial))
    attributes = {"epsilon": float(node.attrs.get("epsilon", 1e-5))}
    emit("InstanceNormalization", emit("Sub", x, first), scale, bias, output=output_names[0], **attributes)
    return nodes, initializers


size_blind_session_lowerings.mark("InstanceNormalization")  # it reads the rank only


@gradient_rules.register("InstanceNormalization")
def _instance_normalization_grad(ctx, g):
    x = ctx.input(0)
    axes = list(range(2, x.dim()))
    # Shifted by each instance's first element, as the forward in onnxnn's sessions (above): the mean
    # rounded to float then errs by an ulp of the spread, not of the mean. The normalization does not
    # see a shift, so the shift takes no gradient.
    first = x.detach()[(slice(None), slice(None)) + (slice(0, 1),) * len(axes)]
    x_hat, inv_std = _standardized(x - first, axes, float(ctx.attrs.get("epsilon", 1e-5)))
    grad_x = grad_scale = grad_bias = None
    if needs_input_grad(ctx, 0):
        grad_x = _normalized_grad(g * _per_channel(ctx.input(1), x.dim()), x_hat, inv_std, axes)
    if needs_input_grad(ctx, 1):
        grad_scale = channel_sum(g * x_hat)
    if needs_input_grad(ctx, 2):
        grad_bias = channel_sum(g)
    return grad_x, grad_scale, grad_bias


@shape_rules.register("GroupNormalization")
def _group_normalization_shape(inputs, attrs):
    x = inputs[0]
    _check_per_channel("GroupNormalization", x, (("scale", inputs[1]), ("bias", inputs[2])))
    groups = int(attrs.get("num_groups", 0))
    if groups <= 0 or x.shape[1] % groups:
        raise RuntimeError(
            f"GroupNormalization: num_groups={groups} does not divide the {x.shape[1]} channels of "
            f"the input of shape {list(x.shape)}"
        )
    return [(x.shape, x.dtype)]


@gradient_rules.register("GroupNormalization")
def _group_normalization_grad(ctx, g):
    x = ctx.input(0)
    groups = int(ctx.attrs["num_groups"])
    # The group's size counted, not -1: an empty batch has no size to infer it from.
    grouped_shape = (x.shape[0], groups, x.shape[1] // groups * int(np.prod(x.shape[2:])))
    grouped = x.reshape(grouped_shape)
    x_hat, inv_std = _standardized(grouped, [2], float(ctx.attrs.get("epsilon", 1e-5)))
    grad_x = grad_scale = grad_bias = None
    if needs_input_grad(ctx, 0):
        g_hat = (g * _per_channel(ctx.input(1), x.dim())).reshape(grouped_shape)
        grad_x = _normalized_grad(g_hat, x_hat, inv_std, [2]).reshape(x.shape)
    if needs_input_grad(ctx, 1):
        grad_scale = channel_sum(g * x_hat.reshape(x.shape))
    if needs_input_grad(ctx, 2):
        grad_bias = channel_sum(g)
    return grad_x, grad_scale, grad_bias


# ---------------------------------------------------------------- BatchNormalization, training form


def batch_normalization_training_grad(ctx, g, *statistics_grads) -> tuple:
    """Gradients of ``BatchNormalization(training_mode=1)`` for X, scale and B (None for the statistics).

    The output uses the batch statistics (biased variance) over every axis but the channel axis, so
    the gradient is the normalization formula over those axes. The running-statistics outputs are
    buffers and send no gradient back.
    """
    x = ctx.input(0)
    axes = [0] + list(range(2, x.dim()))
    x_hat, inv_std = _standardized(x, axes, float(ctx.attrs.get("epsilon", 1e-5)))
    grad_x = _normalized_grad(g * _per_channel(ctx.input(1), x.dim()), x_hat, inv_std, axes)
    return grad_x, channel_sum(g * x_hat), channel_sum(g), None, None


# ---------------------------------------------------------------- Lp and mean-variance normalization
# (RMSNormalization, opset 23, is imported through its ONNX function body, whose ops have rules.)


@shape_rules.register("LpNormalization")
def _lp_normalization_shape(inputs, attrs):
    x = inputs[0]
    if int(attrs.get("p", 2)) not in (1, 2):
        raise RuntimeError(f"LpNormalization: p must be 1 or 2, got {attrs.get('p')}")
    return [(x.shape, x.dtype)]


@gradient_rules.register("LpNormalization")
def _lp_normalization_grad(ctx, g):
    x, y = ctx.input(0), ctx.output()
    axis = normalize_axes([ctx.attrs.get("axis", -1)], x.dim())[0]
    if int(ctx.attrs.get("p", 2)) == 1:
        norm = x.abs().sum([axis], keepdim=True)
        direction = x.sign()  # d|x|/dx
    else:
        norm = (x * x).sum([axis], keepdim=True).sqrt()
        direction = y  # d||x||/dx = x / ||x||
    # dy/dx = (I - direction y^T) / norm applied to g; a zero vector's output is a constant zero.
    zero = norm == 0
    safe = norm + zero.to(norm.dtype)
    grad = (g - direction * (g * y).sum([axis], keepdim=True)) / safe
    return (grad * (~zero).to(grad.dtype),)


@shape_rules.register("MeanVarianceNormalization")
def _mean_variance_normalization_shape(inputs, attrs):
    return [(inputs[0].shape, inputs[0].dtype)]


_MVN_EPSILON = 1e-9  # from the function body ONNX defines the op by


@gradient_rules.register("MeanVarianceNormalization")
def _mean_variance_normalization_grad(ctx, g):
    x = ctx.input(0)
    axes = normalize_axes(list(ctx.attrs.get("axes", [0, 2, 3])), x.dim())
    centered = x - x.mean(axes, keepdim=True)
    std = (centered * centered).mean(axes, keepdim=True).sqrt()
    denominator = std + _MVN_EPSILON
    # y = c / (s + e) with c = x - mean(x), s = sqrt(mean(c^2)); ds/dx = c / (n s).
    through_std = centered * (g * centered).mean(axes, keepdim=True) / (std * denominator * denominator)
    return ((g - g.mean(axes, keepdim=True)) / denominator - through_std,)


# ---------------------------------------------------------------- LRN


def _channel_window_sum(t: Tensor, before: int, after: int) -> Tensor:
    """out[:, c] = sum of t[:, c - before : c + after + 1] (zeros outside the channels)."""
    channels = t.shape[1]
    pads = [0] * (2 * t.dim())
    pads[1], pads[t.dim() + 1] = before, after
    padded = pad_constant(t, pads)
    total = None
    for offset in range(before + after + 1):
        part = padded.narrow(1, offset, channels)
        total = part if total is None else total + part
    return total  # type: ignore[return-value]  # not None: the window has at least one channel


def _lrn_window(size: int) -> tuple[int, int]:
    """ONNX LRN sums channels [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    return (size - 1) // 2, size - 1 - (size - 1) // 2


@shape_rules.register("LRN")
def _lrn_shape(inputs, attrs):
    x = inputs[0]
    if len(x.shape) < 3:
        raise RuntimeError(f"LRN expects an input of shape (N, C, *spatial), got {list(x.shape)}")
    if int(attrs.get("size", 0)) <= 0:
        raise RuntimeError(f"LRN: size must be a positive integer, got {attrs.get('size')}")
    return [(x.shape, x.dtype)]


@gradient_rules.register("LRN")
def _lrn_grad(ctx, g):
    x = ctx.input(0)
    size = int(ctx.attrs["size"])
    alpha, beta = float(ctx.attrs.get("alpha", 1e-4)), float(ctx.attrs.get("beta", 0.75))
    bias = float(ctx.attrs.get("bias", 1.0))
    before, after = _lrn_window(size)
    # y = x * D^-beta with D = bias + alpha/size * (window sum of x^2). x[c'] enters D[c] for every c
    # whose window holds c', i.e. c in [c' - after, c' + before]: the mirrored window.
    denominator = _channel_window_sum(x * x, before, after) * (alpha / size) + bias
    powered = denominator.pow(-beta)
    through_denominator = _channel_window_sum(g * x * powered / denominator, after, before)
    return (g * powered - x * through_denominator * (2.0 * alpha * beta / size),)


# ---------------------------------------------------------------- Dropout (as found in imported graphs)


@shape_rules.register("Dropout")
def _dropout_shape(inputs, attrs):
    x = inputs[0]
    return [(x.shape, x.dtype), (x.shape, dtypes.bool)]


def _dropout_training(ctx) -> bool:
    if ctx.num_inputs < 3 or ctx.input_value(2) is None:
        return False
    return bool(np.asarray(data_of(ctx.input_value(2))))  # a (usually constant) flag: realized if pending


@gradient_rules.register("Dropout")
def _dropout_grad(ctx, g, *unused):
    if not _dropout_training(ctx):
        return g, None, None
    # The kept elements are read off the output rather than the mask output: each run of the node
    # draws a new mask, and the output is the value the forward pass actually used (it may have been
    # realized in an earlier run than the mask). An input element exactly 0 gets no gradient.
    kept = (ctx.output(0).detach() != 0).to(g.dtype)
    if ctx.num_inputs > 1 and ctx.input_value(1) is not None:
        keep_probability = 1.0 - ctx.input(1).detach().to(g.dtype)
    else:
        keep_probability = 0.5
    return g * kept / keep_probability, None, None


# ---------------------------------------------------------------- tensor functions


def _constant_like(input: Tensor, shape: tuple, fill: float) -> Tensor:
    return Tensor._full((), fill, input.dtype, input.device).expand(shape)


def _attribute_rounds(input: Tensor, eps: float) -> bool:
    """Whether a float64 input's ``eps`` would be rounded by ONNX's float32 ``epsilon`` attribute.

    PyTorch adds ``eps`` in double precision; such inputs take the same formula in reductions, so
    float64 results (and finite differences) keep float64 accuracy.
    """
    return input.dtype is dtypes.float64 and float(np.float32(eps)) != float(eps)


def layer_norm(
    input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """Normalizes over the last ``len(normalized_shape)`` dims, as one ONNX ``LayerNormalization`` node.

    Args:
        input: ``(*, *normalized_shape)``.
        normalized_shape: the trailing shape to normalize over (a sequence of ints).
        weight, bias: optional elementwise affine parameters of shape ``normalized_shape``.
        eps: added to the variance.

    Example::

        >>> x = onnxnn.randn(2, 3, 4)
        >>> layer_norm(x, [4]).mean(-1).abs().max().item() < 1e-6
        True
    """
    if isinstance(normalized_shape, int):  # the modules take an int; PyTorch's functionals do not
        raise TypeError("layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not int")
    shape = tuple(int(s) for s in normalized_shape)
    if not shape or tuple(input.shape[-len(shape) :]) != shape or input.dim() < len(shape):
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(str(s) for s in shape)}], but got input of size{list(input.shape)}"
        )
    for name, parameter in (("weight", weight), ("bias", bias)):
        if parameter is not None and tuple(parameter.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{list(parameter.shape)} and normalized_shape = {list(shape)}"
            )
    check_floating(input, "LayerNormKernelImpl")
    check_parameter_dtypes(input, weight, bias)
    # An empty input takes the reductions too: onnxruntime's LayerNormalization refuses a normalized
    # shape of no elements.
    if _attribute_rounds(input, eps) or input.numel() == 0:
        result = _standardized(input, list(range(input.dim() - len(shape), input.dim())), float(eps))[0]
        result = result * weight if weight is not None else result
        return result + bias if bias is not None else result
    scale = weight if weight is not None else _constant_like(input, shape, 1.0)
    operands = (input, scale) if bias is None else (input, scale, bias)
    attributes = shared_attributes((("axis", -len(shape)), ("epsilon", float(eps))))
    # Training keeps the node's Mean and InvStdDev for the gradient (onnxruntime computes them anyway),
    # except for float64 inputs, whose gradient recomputes them (they are stashed as float32).
    keeps_statistics = (
        is_grad_enabled()
        and input.dtype is not dtypes.float64
        and any(t is not None and t.requires_grad for t in (input, weight, bias))
    )
    if not keeps_statistics:
        return apply_op("LayerNormalization", operands, attributes, "NativeLayerNormBackward0", num_outputs=1)
    return apply_op("LayerNormalization", operands, attributes, "NativeLayerNormBackward0")[0]


def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """Normalizes each group of ``C / num_groups`` channels of ``(N, C, *)``, then applies a per-channel affine map.

    Recorded as one ONNX ``GroupNormalization`` node (opset 21: per-channel scale and bias).
    """
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    channels = input.shape[1]
    if num_groups <= 0 or channels % num_groups:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input of "
            f"shape {list(input.shape)} and num_groups={num_groups}"
        )
    for name, parameter in (("weight", weight), ("bias", bias)):
        if parameter is not None and tuple(parameter.shape) != (channels,):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, "
                f"but got {name} of shape {list(parameter.shape)} and input of shape "
                f"{list(input.shape)}"
            )
    check_floating(input, "GroupNormKernelImpl")
    check_parameter_dtypes(input, weight, bias)
    x = input.unsqueeze(-1) if input.dim() == 2 else input
    # An empty batch takes the reductions too: onnxruntime's GroupNormalization (its function body's
    # Reshape to -1) fails on it.
    if _attribute_rounds(input, eps) or input.numel() == 0:
        grouped_shape = (x.shape[0], int(num_groups), channels // int(num_groups) * int(np.prod(x.shape[2:])))
        grouped = _standardized(x.reshape(grouped_shape), [2], float(eps))[0].reshape(input.shape)
        grouped = grouped * _per_channel(weight, input.dim()) if weight is not None else grouped
        return grouped + _per_channel(bias, input.dim()) if bias is not None else grouped
    scale = weight if weight is not None else _constant_like(input, (channels,), 1.0)
    shift = bias if bias is not None else _constant_like(input, (channels,), 0.0)
    # stash_type sets the precision of the statistics: float64 inputs keep float64 (as PyTorch does).
    stash = dtypes.float64 if input.dtype is dtypes.float64 else dtypes.float32
    result = apply_op(
        "GroupNormalization",
        (x, scale, shift),
        {"num_groups": int(num_groups), "epsilon": float(eps), "stash_type": stash.onnx_type},
        "NativeGroupNormBackward0",
    )
    return result.squeeze(-1) if input.dim() == 2 else result


def instance_normalization(input: Tensor, scale: Tensor | None, bias: Tensor | None, epsilon: float) -> Tensor:
    """ONNX ``InstanceNormalization`` of ``(N, C, *spatial)`` (``scale``, ``bias``: ``(C,)``, None for
    1 and 0): the node, or for float64, which onnxruntime's kernel lacks, the same formula in
    reductions (``instance_norm``'s, and an imported node's)."""
    rank = input.dim()
    if input.dtype is dtypes.float64:
        result = _standardized(input, list(range(2, rank)), epsilon)[0]
        if scale is not None:
            result = result * _per_channel(scale, rank)
        return result + _per_channel(bias, rank) if bias is not None else result
    channels = input.shape[1]
    scale = scale if scale is not None else _constant_like(input, (channels,), 1.0)
    bias = bias if bias is not None else _constant_like(input, (channels,), 0.0)
    return apply_op("InstanceNormalization", (input, scale, bias), {"epsilon": epsilon})


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalizes each ``(n, c)`` plane of ``(N, C, *spatial)`` over its spatial dims.

    With ``use_input_stats`` (the default) the statistics come from the input, as one ONNX
    ``InstanceNormalization`` node (reductions for float64, which onnxruntime's kernel lacks), and
    given running statistics are updated in place (the batch mean of the per-instance statistics,
    unbiased variance). Otherwise the running statistics normalize the input.
    """
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    channels = input.shape[1]
    rank = input.dim()
    if use_input_stats and int(np.prod(input.shape[2:])) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(input.shape)}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    # PyTorch's order and words: it batch-normalizes (1, N * C, ...) with these repeated N times
    # (an empty batch is refused too, by PyTorch with words of its own).
    repeats = max(input.shape[0], 1)
    for name, tensor in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if tensor is not None and tensor.numel() != channels:
            raise RuntimeError(f"{name} should contain {repeats * channels} elements not {repeats * tensor.numel()}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    check_floating(input, "batch_norm")
    check_parameter_dtypes(input, running_mean, running_var, weight, bias)
    check_running_statistics_without_grad(running_mean, running_var)
    if not use_input_stats:
        assert running_mean is not None and running_var is not None  # refused above
        return _normalized_by_running_statistics(input, running_mean, running_var, weight, bias, eps)
    result = instance_normalization(input, weight, bias, float(eps))
    if running_mean is not None or running_var is not None:
        axes = list(range(2, rank))
        count = int(np.prod(input.shape[2:]))
        with no_grad():
            x = input.detach()
            instance_mean = x.mean(axes)
            # Computed by the run that computes the input (realize_alongside): pending, they would hold
            # this call's whole graph until read (as BatchNorm's, nn/functional/_normalization.py).
            if running_mean is not None:
                running_mean.mul_(1.0 - momentum).add_(instance_mean.mean(0).to(running_mean.dtype) * momentum)
                realize_alongside(running_mean._value)
            if running_var is not None:
                centered = x - instance_mean.reshape(instance_mean.shape + (1,) * len(axes))
                unbiased = (centered * centered).sum(axes) / max(count - 1, 1)
                running_var.mul_(1.0 - momentum).add_(unbiased.mean(0).to(running_var.dtype) * momentum)
                realize_alongside(running_var._value)
    return result


def _normalized_by_running_statistics(input, running_mean, running_var, weight, bias, eps: float) -> Tensor:
    """One ``BatchNormalization`` node, as ``batch_norm``'s evaluation: exports read the running
    statistics as its mean and variance, which ``from_onnx`` keeps buffers (not Parameters)."""
    channels = input.shape[1]

    def per_channel(tensor: Tensor) -> Tensor:  # (C,) in the input's dtype, as batch_norm's
        return (tensor if tensor.shape == (channels,) else tensor.reshape(channels)).to(input.dtype)

    scale = per_channel(weight) if weight is not None else _constant_like(input, (channels,), 1.0)
    shift = per_channel(bias) if bias is not None else _constant_like(input, (channels,), 0.0)
    return apply_op(
        "BatchNormalization",
        (input, scale, shift, per_channel(running_mean), per_channel(running_var)),
        shared_attributes((("epsilon", float(eps)),)),
        "NativeBatchNormBackward0",
    )


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Normalizes each element by the energy of its neighbours across channels (AlexNet's LRN).

    ``out[c] = input[c] / (k + alpha / size * sum(input[c']^2 for c' in window(c)))^beta`` with
    PyTorch's window ``[c - size // 2, c + (size - 1) // 2]``. Recorded as one ONNX ``LRN`` node for
    4-D inputs and odd ``size`` (where ONNX's window is the same), as elementwise ops otherwise
    (and for float64, which onnxruntime's LRN kernel lacks).
    """
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    if input.dim() == 4 and size % 2 == 1 and input.dtype is not dtypes.float64:
        return apply_op(
            "LRN", (input,), {"size": int(size), "alpha": float(alpha), "beta": float(beta), "bias": float(k)}
        )
    energy = _channel_window_sum(input * input, size // 2, (size - 1) // 2)
    return input / (energy * (alpha / size) + k).pow(beta)
