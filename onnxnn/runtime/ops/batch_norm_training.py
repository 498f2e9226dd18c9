"""Batch normalization with the batch's statistics: onnxnn's ``BatchNormalizationTraining`` op.

``F.batch_norm(training=True)`` records one node of onnxnn's domain,

    BatchNormalizationTraining(X, scale, B; epsilon) -> Y, mean, var

with ``mean`` and ``var`` the per-channel mean and biased variance of ``X`` over every axis but
axis 1 and ``Y = (X - mean) / sqrt(var + epsilon) * scale + B``. The running statistics are
updated from ``mean`` and ``var`` outside the node, as PyTorch updates them.

Why a node of its own: recorded as ordinary ops (23 nodes), the normalization and the gradient
autograd derives through them write the activations' size about twelve times. The decomposition
here writes it three times (the centered input, its square, and the output of onnxruntime's
one-pass inference ``BatchNormalization`` given the batch's statistics; it reads it once more, for
the corrected two-pass algorithm's mean of the centered input), and the gradient rule,
reading the saved statistics, four (``per_channel_affine`` does ``g * k + shift`` in one). One
layer's forward and backward on 32x16x32x32 float32, one thread: 1.79 -> 1.22 ms; a small ResNet's
training step 5-7% faster (its statistics outputs are marked in ``unmaterialized_gradients``).

onnxruntime's own ``training_mode=1`` node is not used: its kernel aliases the running-statistics
outputs to their inputs, so an initializer there keeps one batch's inf or NaN and passes it to
every later run. Off the CPU, explicit ops replace the epsilon-0 inference node: onnxruntime's CUDA
provider raises BatchNormalization's epsilon to cuDNN's minimum, 1e-5. (A graph built for the CPU
and exported keeps that node; run on CUDA, it normalizes with epsilon 1e-5 more.)

A backward that is not itself differentiated records the gradient as one node too,

    BatchNormalizationTrainingGradient(G, X, scale, mean, var[, A[, min, max]]; epsilon) -> dX, dscale, dB

which ``build_model`` writes out as the formulas below and onnxnn's CPU sessions run as a compiled
loop where it takes the node (kernels/compiled_normalization.py; as for the forward node: two reads
of each channel, one from memory, against about eight passes). A backward recorded for a further
derivative (``create_graph=True``) records the formulas as ops, which autograd differentiates.

When ``G`` is a pending ReLU gradient (``ReluGradient(G', A)``: the normalization's output went
through a ReLU, as in most convolutional networks), the node reads ``G'`` and the ReLU's output
``A`` instead and masks ``G'`` itself: the loop then makes no pass of its own for ReLU's gradient,
and the ReluGradient node, read by nothing else, is never computed. A Hardtanh's gradient
(``HardtanhGradient(G', A, min, max)``: MobileNet's ReLU6) folds in alike, with its bounds.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir.domains import ONNXNN_DOMAIN
from ...ir.graph import shared_attributes
from ...ir.registry import decompositions, gradient_rules, shape_rules, unmaterialized_gradients
from ..grad_mode import is_grad_enabled
from ..internal import full_tensor
from ..tensor import Tensor, apply_op
from .hardtanh import GRADIENT_OP_TYPE as HARDTANH_GRADIENT
from .hardtanh import check_bounds, emit_hardtanh_gradient
from .relu_gradient import OP_TYPE as RELU_GRADIENT
from .relu_gradient import emit_relu_gradient
from .training import int64_initializers, node_emitter

__all__: list[str] = []

OP_TYPE = "BatchNormalizationTraining"
GRADIENT_OP_TYPE = "BatchNormalizationTrainingGradient"
_NO_EPSILON = shared_attributes((("epsilon", 0.0),))


@shape_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _shape(inputs, attrs):
    x, scale, bias = inputs
    if len(x.shape) < 2:
        raise RuntimeError(f"{OP_TYPE} expects an input of rank >= 2, got shape {list(x.shape)}")
    _check_per_channel(OP_TYPE, x, (("scale", scale), ("B", bias)))
    channels = x.shape[1:2]
    return [(x.shape, x.dtype), (channels, x.dtype), (channels, x.dtype)]


def _check_per_channel(op_type: str, x, named_values) -> None:
    """Raises RuntimeError naming the first of ``named_values`` that is not a vector of ``x``'s channels and dtype."""
    channels = x.shape[1:2]
    for name, value in named_values:
        if value.shape != channels or value.dtype is not x.dtype:
            raise RuntimeError(
                f"{op_type}: {name} must be {x.dtype.name} of shape {list(channels)} for X of shape "
                f"{list(x.shape)}, got {value.dtype.name} of shape {list(value.shape)}"
            )


@decompositions.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    """The statistics by ReduceMean, then onnxruntime's one-pass inference BatchNormalization."""
    rank = len(node.inputs[0].shape)
    x, scale, bias = input_names
    initializers: list = []
    constant = int64_initializers(initializers, fresh_name)
    axes, flat = constant([0] + list(range(2, rank))), constant([-1])
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)

    # The corrected two-pass algorithm (Chan, Golub and LeVeque, 1983): onnxruntime's float32 ReduceMean
    # errs by many ulps of a large mean, and rounding the mean at all costs ``ulp(mean) / std`` in the
    # output (BatchNorm after a conv over unnormalized 0-255 images). So the statistics are those of
    # the centered values ``c = X - mean(X)``, whose mean ``r`` is small, and the output normalizes ``c``
    # with mean ``r``: the large mean never enters a rounding there. One read of ``c`` more.
    kept_shift = emit("ReduceMean", x, axes, keepdims=1)
    centered = emit("Sub", x, kept_shift)
    kept_residual = emit("ReduceMean", centered, axes, keepdims=1)
    # Mul and ReduceMean, not ReduceSumSquare: onnxruntime's takes 3x their time over axes (0, 2, 3).
    kept_squares = emit("ReduceMean", emit("Mul", centered, centered), axes, keepdims=1)
    # mean(c^2) - r^2 >= 0 but for rounding, where the channel is constant: Relu clamps it (NaN passes).
    kept_variance = emit("Relu", emit("Sub", kept_squares, emit("Mul", kept_residual, kept_residual)))
    emit("Reshape", emit("Add", kept_shift, kept_residual), flat, output=output_names[1])
    variance = emit("Reshape", kept_variance, flat, output=output_names[2])
    # epsilon is added here in the input's dtype, not by the node's FLOAT (32-bit) attribute, so a
    # float64 normalization adds PyTorch's epsilon itself.
    epsilon = fresh_name("epsilon")
    initializers.append(
        numpy_helper.from_array(np.array(_epsilon(node.attrs), node.inputs[0].dtype.numpy_dtype), epsilon)
    )
    if _exact_batch_normalization(node.inputs[0]):
        shifted_variance = emit("Add", variance, epsilon)
        residual = emit("Reshape", kept_residual, flat)
        emit(
            "BatchNormalization", centered, scale, bias, residual, shifted_variance, output=output_names[0], epsilon=0.0
        )
        return nodes, initializers
    channel_shape = constant([1, -1] + [1] * (rank - 2))
    factor = emit("Div", emit("Reshape", scale, channel_shape), emit("Sqrt", emit("Add", kept_variance, epsilon)))
    shift = emit("Sub", emit("Reshape", bias, channel_shape), emit("Mul", kept_residual, factor))
    emit("Add", emit("Mul", centered, factor), shift, output=output_names[0])
    return nodes, initializers


def _exact_batch_normalization(value) -> bool:
    """Whether onnxruntime's BatchNormalization computes with the epsilon it is given (0 here): on the
    CPU it does; the CUDA provider raises it to cuDNN's minimum, 1e-5, so elsewhere explicit ops run."""
    return value.device.type == "cpu"


def _epsilon(attrs) -> float:
    return float(attrs.get("epsilon", 1e-5))


# The statistics outputs take a gradient only where a loss reads them (a second-order gradient does):
# otherwise their zeros would cost two passes over the activations at every backward.
unmaterialized_gradients.mark(OP_TYPE, domain=ONNXNN_DOMAIN)


@gradient_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient(ctx, g, g_mean=None, g_variance=None):
    """With ``c = X - mean``, ``k = scale / sqrt(var + epsilon)`` and n elements per channel:

    dX = k * (g - sum(g) / n) - c * k * sum(g * c) / (n * (var + epsilon)), dscale = sum(g * c) *
    k / scale (that is, ``sum(g * c) / sqrt(var + epsilon)``), dB = sum(g); gradients reaching the
    statistics themselves add ``g_mean / n + g_var * 2 c / n`` to dX.
    """
    x = ctx.input(0)
    rank = x.dim()
    channels = x.shape[1]
    axes = [0] + list(range(2, rank))
    stat_shape = (1, channels) + (1,) * (rank - 2)
    count = x.numel() // channels if channels else 0
    if count == 0:  # an empty batch: its statistics are NaN, but no value moves the parameters (PyTorch's zeros)
        zeros = full_tensor((channels,), 0, x.dtype, x.device)
        return (None if g is None else g * 0.0), zeros, zeros
    if g is not None and g_mean is None and g_variance is None and not is_grad_enabled():
        # A backward not recorded for differentiation: one node (the module doc).
        inputs: tuple = (g, x, ctx.input(1), ctx.output(1), ctx.output(2))
        producer = g._value.node if g._value.data is None else None
        if producer is not None and producer.domain == ONNXNN_DOMAIN and producer.op_type in _FOLDED_GRADIENTS:
            incoming, activation_output, *bounds = producer.inputs
            inputs = (incoming, *inputs[1:], activation_output, *bounds)
        return apply_op(GRADIENT_OP_TYPE, inputs, ctx.attrs, "NativeBatchNormBackwardBackward0", domain=ONNXNN_DOMAIN)
    mean = ctx.output(1).reshape(stat_shape)
    inverse_std = (ctx.output(2).reshape(stat_shape) + _epsilon(ctx.attrs)).rsqrt()
    centered = x - mean
    grad_x = grad_scale = grad_bias = None
    if g is not None:
        sum_g = g.sum(axes, keepdim=True)
        sum_gc = (g * centered).sum(axes, keepdim=True)
        factor = ctx.input(1).reshape(stat_shape) * inverse_std
        per_element = factor * (-1.0 / count)
        through_statistics = centered * (per_element * inverse_std * inverse_std * sum_gc)
        grad_x = per_channel_affine(g, factor, per_element * sum_g) + through_statistics
        grad_scale = (sum_gc * inverse_std).reshape(-1)
        grad_bias = sum_g.reshape(-1)
    if g_mean is not None:
        through_mean = g_mean.reshape(stat_shape) * (1.0 / count)
        grad_x = through_mean.expand(x.shape) if grad_x is None else grad_x + through_mean
    if g_variance is not None:
        through_variance = centered * (g_variance.reshape(stat_shape) * (2.0 / count))
        grad_x = through_variance if grad_x is None else grad_x + through_variance
    return grad_x, grad_scale, grad_bias


# The activations' gradients whose pass the gradient node takes over (see the module doc).
_FOLDED_GRADIENTS = (RELU_GRADIENT, HARDTANH_GRADIENT)


@shape_rules.register(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient_shape(inputs, attrs):
    if len(inputs) not in (5, 6, 8):
        raise RuntimeError(
            f"{GRADIENT_OP_TYPE} takes 5, 6 or 8 inputs (G, X, scale, mean, var[, A[, min, max]]), got {len(inputs)}"
        )
    g, x, scale, mean, variance = inputs[:5]
    channels = x.shape[1:2]
    check_bounds(GRADIENT_OP_TYPE, inputs[6:], x.dtype)
    for name, value in (("G", g), ("A", inputs[5] if len(inputs) > 5 else g)):
        if value.shape != x.shape or value.dtype is not x.dtype:
            raise RuntimeError(
                f"{GRADIENT_OP_TYPE}: {name} must be {x.dtype.name} of X's shape {list(x.shape)}, "
                f"got {value.dtype.name} of shape {list(value.shape)}"
            )
    _check_per_channel(GRADIENT_OP_TYPE, x, (("scale", scale), ("mean", mean), ("var", variance)))
    return [(x.shape, x.dtype), (channels, x.dtype), (channels, x.dtype)]


@decompositions.register(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient_decomposition(node, input_names: list, output_names: list, fresh_name):
    """``_gradient``'s formulas as ONNX nodes (after ReLU's gradient where A is given, Hardtanh's where its
    bounds are too), the count of elements per channel read at run time."""
    x_value = node.inputs[1]
    rank, dtype = len(x_value.shape), x_value.dtype
    g, x, scale, mean, variance = input_names[:5]
    initializers: list = []
    constant = int64_initializers(initializers, fresh_name)
    axes, flat, channel_shape = (
        constant([0] + list(range(2, rank))),
        constant([-1]),
        constant([1, -1] + [1] * (rank - 2)),
    )
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    epsilon = fresh_name("epsilon")
    initializers.append(numpy_helper.from_array(np.array(_epsilon(node.attrs), dtype.numpy_dtype), epsilon))
    if len(input_names) == 6 and input_names[5]:
        g = emit_relu_gradient(emit, initializers, fresh_name, g, input_names[5], dtype)
    elif len(input_names) == 8:
        output, low, high = input_names[5:8]
        g = emit_hardtanh_gradient(emit, initializers, fresh_name, g, output, low, high, dtype)

    centered = emit("Sub", x, emit("Reshape", mean, channel_shape))
    sum_g = emit("ReduceSum", g, axes, keepdims=1)
    sum_gc = emit("ReduceSum", emit("Mul", g, centered), axes, keepdims=1)
    inverse_std = emit("Reciprocal", emit("Sqrt", emit("Add", emit("Reshape", variance, channel_shape), epsilon)))
    factor = emit("Mul", emit("Reshape", scale, channel_shape), inverse_std)
    count = emit("Cast", emit("Div", emit("Size", x), emit("Shape", x, start=1, end=2)), to=dtype.onnx_type)
    per_element = emit("Neg", emit("Div", factor, count))
    shift = emit("Mul", per_element, sum_g)
    centered_factor = emit("Mul", emit("Mul", per_element, emit("Mul", inverse_std, inverse_std)), sum_gc)
    through_statistics = emit("Mul", centered, centered_factor)
    if _exact_batch_normalization(x_value):  # per_channel_affine's one pass
        channels = emit("Shape", x, start=1, end=2)
        zeros = emit("ConstantOfShape", channels, value=numpy_helper.from_array(np.zeros(1, dtype.numpy_dtype)))
        ones = emit("ConstantOfShape", channels, value=numpy_helper.from_array(np.ones(1, dtype.numpy_dtype)))
        flat_factor, flat_shift = emit("Reshape", factor, flat), emit("Reshape", shift, flat)
        affine = emit("BatchNormalization", g, flat_factor, flat_shift, zeros, ones, epsilon=0.0)
    else:
        affine = emit("Add", emit("Mul", g, factor), shift)
    emit("Add", affine, through_statistics, output=output_names[0])
    emit("Reshape", emit("Mul", sum_gc, inverse_std), flat, output=output_names[1])
    emit("Reshape", sum_g, flat, output=output_names[2])
    return nodes, initializers


def per_channel_affine(x: Tensor, scale: Tensor, shift: Tensor) -> Tensor:
    """``x * scale + shift`` per channel (axis 1) in one pass over ``x``: inference BatchNormalization
    with mean 0, variance 1 and epsilon 0, which computes exactly that (``scale / sqrt(1)`` is ``scale``)."""
    channels = x.shape[1]
    if not _exact_batch_normalization(x):
        stat_shape = (1, channels) + (1,) * (x.dim() - 2)
        return x * scale.reshape(stat_shape) + shift.reshape(stat_shape)
    zeros = full_tensor((channels,), 0, x.dtype, x.device)
    ones = full_tensor((channels,), 1, x.dtype, x.device)
    return apply_op(
        "BatchNormalization", (x, scale.reshape(-1), shift.reshape(-1), zeros, ones), _NO_EPSILON, "AddcmulBackward0"
    )
