"""batch_norm (training: onnxnn's BatchNormalizationTraining node, or ordinary ops in 16-bit floats, with
the running-statistics updates; evaluation: ONNX's BatchNormalization node), rms_norm, normalize."""

from __future__ import annotations

from ...ir.domains import ONNXNN_DOMAIN
from ...ir.graph import shared_attributes
from ...ir.plan import realize_alongside
from ...runtime import ops as _ops
from ...runtime.grad_mode import no_grad
from ...runtime.internal import full_tensor
from ...runtime.ops._common import check_floating
from ...runtime.ops.normalization import check_parameter_dtypes, check_running_statistics_without_grad
from ...runtime.ops.opmath import REDUCED_FLOATS, rounded, widened
from ...runtime.tensor import Tensor, apply_op

__all__ = ["batch_norm", "group_norm", "rms_norm", "normalize"]


def _verify_batch_size(size) -> None:
    values_per_channel = size[0]
    for extent in size[2:]:
        values_per_channel *= extent
    if values_per_channel == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(size)}")


def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """Group normalization (``onnxnn.group_norm``), refusing groups of one value as PyTorch's functional
    does: their normalized value is 0 whatever the input."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    if num_groups:
        _verify_batch_size([input.shape[0] * input.shape[1] // num_groups, num_groups] + list(input.shape[2:]))
    return _ops.group_norm(input, num_groups, weight, bias, eps)


def _check_channel_count(name: str, tensor: Tensor | None, channels: int, input: Tensor) -> None:
    if tensor is not None and tensor.numel() != channels:
        raise RuntimeError(
            f"{name} should contain {channels} elements not {tensor.numel()} "
            f"(input of shape {list(input.shape)}, {name} of shape {list(tensor.shape)})"
        )


def _as_dtype(tensor: Tensor, dtype) -> Tensor:
    # Skips Tensor.to's argument parsing in the common case (statistics already in the input's dtype):
    # an evaluation-mode BatchNorm spends a tenth of its Python time there on small inputs.
    return tensor if tensor.dtype is dtype else tensor.to(dtype)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float | Tensor = 0.1,
    eps: float = 1e-5,
) -> Tensor:
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
    shape = input.shape
    if len(shape) < 2:
        raise ValueError(f"expected 2D or more input (got {len(shape)}D input)")
    channels = shape[1]
    per_channel = (channels,)
    for name, tensor in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if tensor is not None and tensor.shape != per_channel:
            _check_channel_count(name, tensor, channels, input)
    check_floating(input, "batch_norm")
    check_parameter_dtypes(input, running_mean, running_var, weight, bias)
    stat_shape = (1, channels) + (1,) * (len(shape) - 2)
    if training:
        if (running_mean is None) != (running_var is None):
            # Only one of them would be updated: PyTorch refuses the pair.
            raise ValueError("running_mean and running_var must either both be None or neither be None")
        _verify_batch_size(shape)
    if input.numel():  # PyTorch's batch_norm returns before native_batch_norm (and its check) on empty input
        check_running_statistics_without_grad(running_mean, running_var)
    if training:
        return _batch_norm_training(input, running_mean, running_var, weight, bias, momentum, eps, stat_shape)
    if running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    like = input.dtype
    scale = _as_dtype(weight, like) if weight is not None else full_tensor((channels,), 1, like, input.device)
    shift = _as_dtype(bias, like) if bias is not None else full_tensor((channels,), 0, like, input.device)
    return apply_op(
        "BatchNormalization",
        (input, scale, shift, _as_dtype(running_mean, like), _as_dtype(running_var, like)),
        shared_attributes((("epsilon", float(eps)),)),
        "NativeBatchNormBackward0",
    )


def _batch_norm_training(input, running_mean, running_var, weight, bias, momentum, eps, stat_shape):
    if input.dtype in REDUCED_FLOATS:
        # Normalized in float32 and rounded once (opmath), as PyTorch's CPU kernel computes half-precision
        # statistics: a channel whose values pass 256 has squares past float16's largest (65504).
        output = _batch_norm_training(
            widened(input), running_mean, running_var, weight, bias, momentum, eps, stat_shape
        )
        return rounded(output, input.dtype)
    like, channels = input.dtype, stat_shape[1]
    scale = _as_dtype(weight, like) if weight is not None else full_tensor((channels,), 1, like, input.device)
    shift = _as_dtype(bias, like) if bias is not None else full_tensor((channels,), 0, like, input.device)
    output, mean, variance = apply_op(
        "BatchNormalizationTraining",
        (input, scale, shift),
        shared_attributes((("epsilon", float(eps)),)),
        "NativeBatchNormBackward0",
        domain=ONNXNN_DOMAIN,
    )
    if input.numel():  # an empty batch leaves the running statistics as they are, as in PyTorch
        _update_running_statistics(running_mean, running_var, mean, variance, momentum, input.numel() // channels)
    return output


def _update_running_statistics(running_mean, running_var, mean, variance, momentum, count: int) -> None:
    """``running = (1 - momentum) * running + momentum * batch`` (the unbiased variance), as PyTorch updates them.

    Half-precision buffers are updated in float32 and rounded once, as PyTorch's: a batch variance past
    65504 still moves them by a finite step. The new statistics are computed by the next run that
    computes the batch's (``realize_alongside``): pending, they would hold this step's whole forward
    graph until something reads them.
    """
    with no_grad():
        for running, batch, factor in ((running_mean, mean, 1.0), (running_var, variance, count / max(count - 1, 1))):
            if running is None:
                continue
            wide = widened(running)
            batch = batch.detach().reshape(-1).to(wide.dtype)
            if factor != 1.0:
                batch = batch * factor
            running.copy_(wide * (1 - momentum) + batch * momentum)
            realize_alongside(running._value)


# rms_norm's default eps: torch.finfo of the dtype it computes in, float32 for float16 and bfloat16
# (PyTorch's since pytorch#142848: the half dtypes' own eps would shrink activations whose RMS is
# below ~0.03 (float16) or ~0.1 (bfloat16) by up to 46x).
_MACHINE_EPSILON = {"float16": 2.0**-23, "bfloat16": 2.0**-23, "float32": 2.0**-23, "float64": 2.0**-52}


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """Divides by the root mean square over the last ``len(normalized_shape)`` dims, then scales by ``weight``.

    ``y = x / sqrt(mean(x^2) + eps) * weight``; ``eps=None`` uses the machine epsilon of the dtype it
    computes in, as PyTorch does: float16 and bfloat16 inputs are computed in float32 (with float32's
    epsilon) and rounded once.
    Recorded as standard ops (ONNX's RMSNormalization needs opset 23).

    Example::

        >>> x = onnxnn.tensor([[3.0, 4.0]])
        >>> F.rms_norm(x, [2], eps=0.0)
        tensor([[0.8485, 1.1314]])
    """
    if isinstance(normalized_shape, int):  # nn.RMSNorm takes an int; PyTorch's functional does not
        raise TypeError("rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not int")
    shape = tuple(int(s) for s in normalized_shape)
    if not shape or input.dim() < len(shape) or tuple(input.shape[-len(shape) :]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(str(s) for s in shape)}], but got input of size{list(input.shape)}"
        )
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(
            f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
            f"{list(weight.shape)} and normalized_shape = {list(shape)}"
        )
    check_floating(input, "rms_norm")
    if eps is None:
        eps = _MACHINE_EPSILON.get(input.dtype.name, 0.0)
    x = widened(input)
    axes = list(range(input.dim() - len(shape), input.dim()))
    result = x * _ops.rsqrt(_ops.mean(x * x, axes, keepdim=True) + eps)
    if weight is not None:
        result = result * weight.to(result.dtype)
    return rounded(result, input.dtype)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """Divides ``input`` by its ``p``-norm along ``dim``, the norm clamped below at ``eps``.

    ``v / max(||v||_p, eps)`` for each vector ``v`` along ``dim``.

    Example::

        >>> F.normalize(onnxnn.tensor([[3.0, 4.0]]), dim=1)
        tensor([[0.6000, 0.8000]])
    """
    if out is not None:
        raise NotImplementedError(
            "normalize(out=...): onnxnn tensors are rebound, not written through; use the returned tensor"
        )
    denominator = _ops.clamp(_ops.norm(input, p, [dim], keepdim=True), min=eps)
    return input / denominator
