"""Functional forms of the layers: ``onnxnn.nn.functional`` (PyTorch's ``torch.nn.functional``).

Every function records standard ONNX nodes through Tensor ops. Composite operations decompose into
ops onnxruntime runs fast (Softmax, ReduceMean, MatMul, ...), so few extra gradient rules are
needed; batch normalization in evaluation is one ``BatchNormalization`` node.

Example::

    >>> import onnxnn.nn.functional as F
    >>> x = onnxnn.randn(4, 3)
    >>> F.relu(x).shape
    onnxnn.Size([4, 3])
"""
from __future__ import annotations

import warnings

import numpy as np

from ..runtime import dtypes
from ..runtime import ops as _ops
from ..runtime import random as _random
from ..runtime.grad_mode import no_grad
from ..runtime.ops._common import int64_constant
from ..runtime.tensor import Tensor, apply_op

__all__ = [
    "linear", "relu", "relu_", "leaky_relu", "leaky_relu_", "sigmoid", "tanh", "gelu", "silu", "elu",
    "softplus", "hardtanh", "relu6", "logsigmoid", "softmax", "log_softmax", "dropout", "batch_norm",
    "one_hot", "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]

# PyTorch's scalar type names, used in its dtype-mismatch messages.
_SCALAR_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                      "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                      "bool": "Bool"}


def _scalar_type_name(value_dtype: dtypes.dtype) -> str:
    return _SCALAR_TYPE_NAMES[value_dtype.name]


# ---------------------------------------------------------------- linear


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Applies ``y = x W^T + b``.

    Recorded as ``MatMul(x, Transpose(W))`` plus ``Add``: onnxruntime fuses the pair, and it measured
    as fast as ``Gemm`` while serving every input rank with one formulation.

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features)`` or None.

    Returns:
        ``(*, out_features)``.
    """
    in_features = weight.shape[-1]
    if input.dim() == 0 or input.shape[-1] != in_features:
        rows = input.numel() // input.shape[-1] if input.dim() and input.shape[-1] else 1
        columns = input.shape[-1] if input.dim() else 1
        out_features = weight.shape[0] if weight.dim() == 2 else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{columns} and "
                           f"{in_features}x{out_features})")
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_scalar_type_name(input.dtype)} "
                           f"and {_scalar_type_name(weight.dtype)}")
    weight_t = weight.t()
    if input.dim() == 2 and weight.dim() == 2:
        product = apply_op("MatMul", (input, weight_t), None, "MmBackward0")
        add_name = "AddmmBackward0"
    else:
        product = _ops.matmul(input, weight_t)
        # PyTorch folds 3-D inputs into one addmm and views the result back.
        add_name = "ViewBackward0" if input.dim() == 3 else "AddBackward0"
    if bias is None:
        return product
    if bias.dtype is not product.dtype:
        bias = bias.to(product.dtype)
    return apply_op("Add", (product, bias), None, add_name)


# ---------------------------------------------------------------- activations
#
# onnxruntime's CPU provider has no float64 kernels for LeakyRelu, Elu, Softplus, Gelu and Erf, so
# float64 inputs (gradient checks, scientific use) take decompositions into ops that have them.


def _lacks_kernels(input: Tensor) -> bool:
    return input.dtype is dtypes.float64


def _erf_float64(x: Tensor) -> Tensor:
    """erf to about 1e-15 from Exp/Mul/Add/Div: a positive series inside [-3, 3], erfc's continued fraction outside."""
    inner = _ops.clamp(x, -3.0, 3.0)
    squared = inner * inner
    doubled = squared * 2.0
    # erf(x) = 2/sqrt(pi) * x * exp(-x^2) * sum_n (2x^2)^n / (3 * 5 * ... * (2n + 1)): no cancellation.
    series = doubled * (1.0 / 91) + 1.0
    for k in range(44, 0, -1):
        series = series * doubled * (1.0 / (2 * k + 1)) + 1.0
    central = inner * _ops.exp(-squared) * series * (2 / np.sqrt(np.pi))

    def tail(z: Tensor) -> Tensor:
        # erfc(z) = exp(-z^2) / sqrt(pi) / (z + (1/2) / (z + 1 / (z + (3/2) / (z + ...)))) for z >= 3.
        fraction = z
        for k in range(25, 0, -1):
            fraction = z + (k / 2) / fraction
        return _ops.exp(-(z * z)) / (fraction * np.sqrt(np.pi))

    upper = tail(_ops.clamp(x, min=3.0))
    lower = tail(_ops.clamp(-x, min=3.0))
    return _ops.where(x > 3.0, 1.0 - upper, _ops.where(x < -3.0, lower - 1.0, central))


def _softplus_unit(input: Tensor) -> Tensor:
    """``log(1 + exp(x))`` without overflow."""
    if _lacks_kernels(input):
        return _ops.relu(input) + _ops.log(_ops.exp(-_ops.abs(input)) + 1.0)
    return _ops.softplus(input)


def _in_place(input: Tensor, function, *args) -> Tensor:
    """Runs ``function`` on the tensor's current value and rebinds the tensor to the result."""
    return input._assign(function(input._alias(), *args))


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``max(0, x)`` elementwise; ``inplace`` rebinds ``input`` to the result."""
    if inplace:
        return _in_place(input, _ops.relu)
    return _ops.relu(input)


def relu_(input: Tensor) -> Tensor:
    """In-place :func:`relu`."""
    return relu(input, inplace=True)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """Applies ``max(0, x) + negative_slope * min(0, x)`` elementwise."""
    if inplace:
        return _in_place(input, leaky_relu, negative_slope)
    if _lacks_kernels(input):
        return _ops.where(input > 0, input, input * negative_slope)
    return _ops.leaky_relu(input, negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def sigmoid(input: Tensor) -> Tensor:
    """Applies ``1 / (1 + exp(-x))`` elementwise."""
    return _ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Applies the hyperbolic tangent elementwise."""
    return _ops.tanh(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Applies ``x * Phi(x)`` (``approximate='none'``) or its tanh approximation (``'tanh'``)."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    if not _lacks_kernels(input):
        return _ops.gelu(input, approximate)
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * np.sqrt(2 / np.pi)
        return input * (_ops.tanh(inner) + 1.0) * 0.5
    return input * (_erf_float64(input * (1 / np.sqrt(2))) + 1.0) * 0.5


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``x * sigmoid(x)`` elementwise."""
    if inplace:
        return _in_place(input, silu)
    return _ops.mul(input, _ops.sigmoid(input))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Applies ``x if x > 0 else alpha * (exp(x) - 1)`` elementwise."""
    if inplace:
        return _in_place(input, elu, alpha)
    if _lacks_kernels(input):
        # exp of the clamped input: the unused branch must not overflow into the gradient.
        return _ops.where(input > 0, input, (_ops.exp(_ops.clamp(input, max=0.0)) - 1.0) * alpha)
    return _ops.elu(input, alpha)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """Applies ``log(1 + exp(beta * x)) / beta``, the identity where ``beta * x > threshold``."""
    if not _lacks_kernels(input):
        return _ops.softplus(input, beta, threshold)
    scaled = input * beta
    return _ops.where(scaled > threshold, input, _softplus_unit(scaled) / beta)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """Clamps to ``[min_val, max_val]`` elementwise."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if inplace:
        return _in_place(input, _ops.clamp, min_val, max_val)
    return _ops.clamp(input, min_val, max_val)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``min(max(0, x), 6)`` elementwise."""
    return hardtanh(input, 0.0, 6.0, inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """Applies ``log(sigmoid(x)) = -softplus(-x)`` elementwise, stable for large ``|x|``."""
    return _ops.neg(_softplus_unit(_ops.neg(input)))


def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Applies ``exp(x) / sum(exp(x))`` along ``dim`` (computed in ``dtype`` when given)."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    return _ops.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Applies ``log(softmax(x))`` along ``dim``, computed stably in one op."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    return _ops.log_softmax(input, dim, dtype)


# ---------------------------------------------------------------- dropout


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    The mask comes from onnxnn's generator (seeded by ``manual_seed``) and enters the graph as data,
    so a changing mask never changes the compiled graph. Not training, it is the identity.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    numpy_dtype = input.dtype.numpy_dtype
    if p == 1.0:
        noise = np.zeros((), dtype=numpy_dtype)
    else:
        keep = _random.bernoulli(tuple(input.shape), 1.0 - p)
        noise = keep.astype(numpy_dtype) * numpy_dtype.type(1.0 / (1.0 - p))
    noise_tensor = Tensor._from_array(np.ascontiguousarray(noise, dtype=numpy_dtype), input.dtype, input.device)
    if inplace:
        return input._assign(_ops.mul(input._alias(), noise_tensor))
    return _ops.mul(input, noise_tensor)


# ---------------------------------------------------------------- batch normalization


def _verify_batch_size(size) -> None:
    values_per_channel = size[0]
    for extent in size[2:]:
        values_per_channel *= extent
    if values_per_channel == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(size)}")


def _check_channel_count(name: str, tensor: Tensor | None, channels: int, input: Tensor) -> None:
    if tensor is not None and tensor.numel() != channels:
        raise RuntimeError(f"{name} should contain {channels} elements not {tensor.numel()} "
                           f"(input of shape {list(input.shape)}, {name} of shape {list(tensor.shape)})")


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float | Tensor = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalizes each channel (dim 1) of ``input`` over the other dims, then scales and shifts it.

    Training, it normalizes with the batch mean and biased variance and, when running statistics are
    given, rebinds them to ``(1 - momentum) * running + momentum * batch`` (the unbiased variance
    for ``running_var``), as PyTorch does. Otherwise it normalizes with the running statistics.

    Args:
        input: ``(N, C, *)``.
        running_mean, running_var: ``(C)`` buffers, or None (training only).
        weight, bias: ``(C)`` affine parameters, or None.
        momentum: the update factor; a 0-d tensor is accepted too (the cumulative average of
            ``BatchNorm`` with ``momentum=None`` passes ``1 / num_batches_tracked``).
        eps: added to the variance for stability.
    """
    if input.dim() < 2:
        raise ValueError(f"expected 2D or more input (got {input.dim()}D input)")
    channels = input.shape[1]
    for name, tensor in (("running_mean", running_mean), ("running_var", running_var),
                         ("weight", weight), ("bias", bias)):
        _check_channel_count(name, tensor, channels, input)
    stat_shape = (1, channels) + (1,) * (input.dim() - 2)
    if training:
        _verify_batch_size(input.shape)
        return _batch_norm_training(input, running_mean, running_var, weight, bias, momentum, eps, stat_shape)
    if running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    like = input.dtype
    scale = weight.to(like) if weight is not None else Tensor._full((channels,), 1, like, input.device)
    shift = bias.to(like) if bias is not None else Tensor._full((channels,), 0, like, input.device)
    return apply_op("BatchNormalization", (input, scale, shift, running_mean.to(like), running_var.to(like)),
                    {"epsilon": float(eps)}, "NativeBatchNormBackward0")


def _batch_norm_training(input, running_mean, running_var, weight, bias, momentum, eps, stat_shape):
    axes = [0] + list(range(2, input.dim()))
    mean = _ops.mean(input, axes, keepdim=True)
    centered = input - mean
    variance = _ops.mean(centered * centered, axes, keepdim=True)
    inverse_std = _ops.rsqrt(variance + eps)
    if running_mean is not None or running_var is not None:
        count = input.numel() // stat_shape[1]
        with no_grad():
            if running_mean is not None:
                batch_mean = mean.detach().reshape(-1).to(running_mean.dtype)
                running_mean.copy_(running_mean * (1 - momentum) + batch_mean * momentum)
            if running_var is not None:
                unbiased = variance.detach().reshape(-1).to(running_var.dtype) * (count / max(count - 1, 1))
                running_var.copy_(running_var * (1 - momentum) + unbiased * momentum)
    scale = inverse_std if weight is None else inverse_std * weight.reshape(stat_shape)
    if bias is None:
        return apply_op("Mul", (centered, scale), None, "NativeBatchNormBackward0")
    return apply_op("Add", (centered * scale, bias.reshape(stat_shape)), None, "NativeBatchNormBackward0")


# ---------------------------------------------------------------- losses


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """Maps the deprecated ``size_average``/``reduce`` pair to a reduction, warning as PyTorch does."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{result}' instead.",
                  stacklevel=3)
    return result


def _reduce_loss(loss: Tensor, reduction: str, name: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return apply_op("ReduceMean", (loss,), {"keepdims": 0}, name)
    if reduction == "sum":
        return apply_op("ReduceSum", (loss,), {"keepdims": 0}, name)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_size_mismatch(input: Tensor, target: Tensor) -> None:
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.size()}) that is different to the input size "
                      f"({input.size()}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """The mean (or sum, or elementwise) squared error ``(input - target)^2``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_size_mismatch(input, target)
    difference = input - target
    loss = difference * difference
    if weight is not None:
        loss = loss * weight
    return _reduce_loss(loss, reduction, "MseLossBackward0")


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """The mean (or sum, or elementwise) absolute error ``|input - target|``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_size_mismatch(input, target)
    loss = _ops.abs(input - target)
    if weight is not None:
        loss = loss * weight
    return _reduce_loss(loss, reduction, "L1LossBackward0")


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of class indices: ``(*) -> (*, num_classes)``.

    With ``num_classes=-1`` the count is ``max + 1``, which reads the indices.
    """
    if tensor.dtype.is_floating_point or tensor.dtype is dtypes.bool:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    mask = _class_mask(tensor.unsqueeze(-1), num_classes, -1)
    return mask.to(dtypes.int64)


def _class_mask(target: Tensor, num_classes: int, class_dim: int) -> Tensor:
    """Boolean ``target == c`` for every class c, laid out along ``class_dim`` (where target has size 1)."""
    shape = [1] * target.dim()
    shape[class_dim] = num_classes
    classes = Tensor._from_value(int64_constant(np.arange(num_classes).reshape(shape)))
    if target.dtype is not dtypes.int64:
        target = target.to(dtypes.int64)
    return _ops.eq(target, classes)


def _check_class_targets(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int) -> None:
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    if target.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Long but found {_scalar_type_name(target.dtype)}")
    if input.dim() == 1 and target.dim() != 0:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input.dim() >= 2:
        if target.dim() == 0 or target.shape[0] != input.shape[0]:
            target_batch = target.shape[0] if target.dim() else 1
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                             f"({target_batch}).")
        expected = input.shape[:1] + input.shape[2:]
        if tuple(target.shape) != tuple(expected):
            if input.dim() == 2:
                raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
            raise RuntimeError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    classes = input.shape[1] if input.dim() >= 2 else input.shape[0]
    if weight is not None and (weight.dim() != 1 or weight.numel() != classes):
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but "
                           f"got weight tensor of shape: {list(weight.shape)}")
    # Indices already in memory are checked as PyTorch's CPU kernel does; pending ones would need a run.
    data = target._value.data
    if data is not None:
        invalid = (data != ignore_index) & ((data < 0) | (data >= classes))
        if invalid.any():
            raise IndexError(f"Target {int(data[invalid].reshape(-1)[0])} is out of bounds.")


def _nll_terms(log_probs: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int):
    """Per-element ``-w[t] * log_probs[t]`` and the weight ``w[t]`` (0 where ignored); class dim is 1."""
    classes = log_probs.shape[1]
    mask = _class_mask(target.unsqueeze(1), classes, 1)
    picked = _ops.where(mask, log_probs, 0.0).sum(1)
    valid = _ops.ne(target, ignore_index)
    if weight is None:
        sample_weight = valid.to(log_probs.dtype)
        loss = _ops.where(valid, -picked, 0.0)
    else:
        class_weight = weight.to(log_probs.dtype).reshape((1, classes) + (1,) * (log_probs.dim() - 2))
        sample_weight = _ops.where(valid, _ops.where(mask, class_weight, 0.0).sum(1), 0.0)
        loss = _ops.where(valid, -picked * sample_weight, 0.0)
    return loss, sample_weight


def _batched(input: Tensor, target: Tensor) -> tuple[Tensor, Tensor, bool]:
    """Gives an unbatched ``(C)`` input and its 0-d target a batch dim of 1."""
    if input.dim() == 1:
        return input.unsqueeze(0), target.reshape(1), True
    return input, target, False


def _nll_from_log_probs(log_probs: Tensor, target: Tensor, weight, ignore_index: int, reduction: str,
                        name: str) -> Tensor:
    log_probs, target, unbatched = _batched(log_probs, target)
    loss, sample_weight = _nll_terms(log_probs, target, weight, ignore_index)
    if reduction == "none":
        return loss.reshape(()) if unbatched else loss
    if reduction == "sum":
        return apply_op("ReduceSum", (loss,), {"keepdims": 0}, name)
    return apply_op("Div", (loss.sum(), sample_weight.sum()), None, name)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices ``target`` under log-probabilities ``input``.

    Args:
        input: ``(N, C)``, ``(C)`` or ``(N, C, d1, ...)`` log-probabilities.
        target: class indices ``(N)``, ``()`` or ``(N, d1, ...)``.
        weight: ``(C)`` class weights; 'mean' divides by the summed weights of the targets.
        ignore_index: a target value that contributes neither loss nor weight.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_class_targets(input, target, weight, ignore_index)
    return _nll_from_log_probs(input, target, weight, ignore_index, reduction, "NllLossBackward0")


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between ``softmax(input)`` along the class dim and ``target``.

    ``target`` holds class indices (shape of ``input`` without the class dim) or, when it has the
    shape of ``input``, class probabilities. ``label_smoothing`` mixes the target with the uniform
    distribution, as PyTorch does.

    Example::

        >>> logits = onnxnn.randn(3, 5, requires_grad=True)
        >>> F.cross_entropy(logits, onnxnn.tensor([1, 0, 4])).backward()
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    class_dim = 0 if input.dim() == 1 else 1
    classes = input.shape[class_dim]
    if target.shape == input.shape:
        return _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing,
                                            class_dim)
    _check_class_targets(input, target, weight, ignore_index)
    log_probs = _ops.log_softmax(input, class_dim)
    nll = _nll_from_log_probs(log_probs, target, weight, ignore_index, reduction, "NllLossBackward0")
    if label_smoothing == 0.0:
        return nll
    log_probs, target, unbatched = _batched(log_probs, target)
    ignored = _ops.eq(target, ignore_index)
    weighted = log_probs
    if weight is not None:
        weighted = log_probs * weight.to(log_probs.dtype).reshape((1, classes) + (1,) * (log_probs.dim() - 2))
    smooth = _ops.where(ignored, 0.0, -weighted.sum(1))
    if reduction == "none":
        smooth = smooth.reshape(()) if unbatched else smooth
    elif reduction == "sum":
        smooth = smooth.sum()
    else:
        _, sample_weight = _nll_terms(log_probs, target, weight, ignore_index)
        smooth = smooth.sum() / sample_weight.sum()
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / classes)


def _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing, class_dim):
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                           f"{_scalar_type_name(target.dtype)}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    classes = input.shape[class_dim]
    if weight is not None and (weight.dim() != 1 or weight.numel() != classes):
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but "
                           f"got weight tensor of shape: {list(weight.shape)}")
    log_probs = _ops.log_softmax(input, class_dim)
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    product = log_probs * target
    if weight is not None:
        shape = [1] * input.dim()
        shape[class_dim] = classes
        product = product * weight.to(input.dtype).reshape(shape)
    if reduction == "none":
        return -product.sum(class_dim)
    total = -apply_op("ReduceSum", (product,), {"keepdims": 0}, "SumBackward0")
    if reduction == "sum":
        return total
    return total / (input.numel() // classes)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """``-w * (t * log(x) + (1 - t) * log(1 - x))`` for probabilities ``x``; logs clamped at -100 as in PyTorch."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.size()}) that is different to the input size "
                         f"({input.size()}) is deprecated. Please ensure they have the same size.")
    log_x = _ops.clamp(_ops.log(input), min=-100.0)
    log_one_minus_x = _ops.clamp(_ops.log(1 - input), min=-100.0)
    loss = -(target * log_x + (1 - target) * log_one_minus_x)
    if weight is not None:
        loss = loss * weight
    return _reduce_loss(loss, reduction, "BinaryCrossEntropyBackward0")


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits.

    ``loss = (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)``, optionally times ``weight``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    negative_log_sigmoid = _softplus_unit(_ops.neg(input))
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        negative_log_sigmoid = log_weight * negative_log_sigmoid
    loss = (1 - target) * input + negative_log_sigmoid
    if weight is not None:
        loss = loss * weight
    return _reduce_loss(loss, reduction, "BinaryCrossEntropyWithLogitsBackward0")
