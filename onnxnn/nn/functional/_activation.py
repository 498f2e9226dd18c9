"""Activation functions, softmax and log_softmax.

onnxruntime's CPU provider has no float64 kernels for LeakyRelu, Elu, Softplus, Gelu and Erf, so
float64 inputs (gradient checks, scientific use) take decompositions into ops that have them.
"""
from __future__ import annotations

import warnings

import numpy as np

from ...runtime import ops as _ops
from ...runtime.tensor import Tensor
from ._common import lacks_kernels, stable_softplus

__all__ = ["relu", "relu_", "leaky_relu", "leaky_relu_", "sigmoid", "tanh", "gelu", "silu", "elu", "softplus",
           "hardtanh", "relu6", "logsigmoid", "softmax", "log_softmax"]


def _erf_float64(x: Tensor) -> Tensor:
    """erf to about 1e-15 from float64-capable ops: a positive series on [-3, 3], a continued fraction outside."""
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
    if lacks_kernels(input):
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
    if not lacks_kernels(input):
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
    if lacks_kernels(input):
        # exp of the clamped input: the unused branch must not overflow into the gradient.
        return _ops.where(input > 0, input, (_ops.exp(_ops.clamp(input, max=0.0)) - 1.0) * alpha)
    return _ops.elu(input, alpha)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """Applies ``log(1 + exp(beta * x)) / beta``, the identity where ``beta * x > threshold``."""
    if not lacks_kernels(input):
        return _ops.softplus(input, beta, threshold)
    scaled = input * beta
    return _ops.where(scaled > threshold, input, stable_softplus(scaled) / beta)


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
    return _ops.neg(stable_softplus(_ops.neg(input)))


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
