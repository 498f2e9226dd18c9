"""Activation functions, softmax, softmin and log_softmax.

onnxruntime's CPU provider has no float64 kernels for LeakyRelu, Elu, Softplus, Gelu, Erf, Selu,
Celu, HardSigmoid, HardSwish, Mish, Softsign and PRelu (and its float64 Shrink rounds through
float32), so float64 inputs (gradient checks, scientific use) take decompositions into ops that
have them; float32 and float16 record the single ONNX op (Celu also lacks a float16 kernel).
"""

from __future__ import annotations

import warnings

import numpy as np

from ...ir import dtypes
from ...runtime import ops as _ops
from ...ir import random as _random
from ...runtime.internal import apply_in_place, constant_tensor, drawn_constant_tensor, full_tensor
from ...runtime.ops._common import check_floating, normalize_axes
from ...runtime.ops.hardtanh import hardtanh as _hardtanh
from ...runtime.ops.nn_ops import keep_nans
from ...runtime.ops.opmath import REDUCED_FLOATS, rounded, widened
from ...runtime.tensor import Tensor, apply_op
from ._common import lacks_kernels, stable_softplus

__all__ = [
    "relu",
    "relu_",
    "leaky_relu",
    "leaky_relu_",
    "sigmoid",
    "tanh",
    "gelu",
    "silu",
    "elu",
    "softplus",
    "hardtanh",
    "relu6",
    "logsigmoid",
    "softmax",
    "log_softmax",
    "threshold",
    "threshold_",
    "hardtanh_",
    "elu_",
    "selu",
    "selu_",
    "celu",
    "celu_",
    "hardsigmoid",
    "hardswish",
    "mish",
    "softsign",
    "tanhshrink",
    "hardshrink",
    "softshrink",
    "prelu",
    "rrelu",
    "rrelu_",
    "glu",
    "softmin",
    "gumbel_softmax",
]


# The activations PyTorch computes only for floating inputs, with the kernel its NotImplementedError
# names: refused at the call, where onnxnn would promote an integer input to float (silu, glu, the
# softmaxes) or fail only when the graph runs, with another error.
_FLOATING_ONLY_KERNELS = {
    "leaky_relu": "leaky_relu_cpu",
    "gelu": "GeluKernelImpl",
    "silu": "silu_cpu",
    "elu": "elu_cpu",
    "selu": "elu_cpu",
    "celu": "elu_cpu",
    "softplus": "softplus_cpu",
    "logsigmoid": "log_sigmoid_cpu",
    "softmax": "softmax_kernel_impl",
    "log_softmax": "log_softmax_kernel_impl",
    "softmin": "softmax_kernel_impl",
    "hardsigmoid": "hardsigmoid_cpu",
    "hardswish": "hardswish_cpu",
    "mish": "mish_cpu",
    "softshrink": "softshrink_check",
    "rrelu": "rrelu_with_noise_out_cpu",
    "glu": "glu_cpu",
}


def _check_floating(function: str, input: Tensor) -> None:
    check_floating(input, _FLOATING_ONLY_KERNELS[function])


def _in_place(input: Tensor, function, *args) -> Tensor:
    """Runs ``function`` on the tensor's current value and rebinds the tensor to the result."""
    return apply_in_place(input, function, *args)


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
    _check_floating("leaky_relu", input)
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
    _check_floating("gelu", input)
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    if not lacks_kernels(input):
        return _ops.gelu(input, approximate)
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * np.sqrt(2 / np.pi)
        return input * 0.5 * (_ops.tanh(inner) + 1.0)  # halved first: x * 2 overflows from 8.99e307
    # Phi(x) = erfc(-x / sqrt(2)) / 2: 1 + erf(x / sqrt(2)) cancels for x < 0 (1840 ulps at -3.6, 0 below
    # -8.3). What remains is the rounding of x / sqrt(2), which erfc magnifies about x^2 times.
    return input * 0.5 * _ops.erfc(input * -(1 / np.sqrt(2)))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``x * sigmoid(x)`` elementwise."""
    _check_floating("silu", input)
    if inplace:
        return _in_place(input, silu)
    if input.dtype in REDUCED_FLOATS:
        # In float32, rounded once (PyTorch's opmath): a half sigmoid rounded into the subnormals
        # before the product was 6 ulps off. One widened x gathers both gradient paths in float32.
        wide = widened(input)
        return rounded(_ops.mul(wide, _ops.sigmoid(wide)), input.dtype)
    return _ops.mul(input, _ops.sigmoid(input))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Applies ``x if x > 0 else alpha * (exp(x) - 1)`` elementwise."""
    _check_floating("elu", input)
    if inplace:
        return _in_place(input, elu, alpha)
    if lacks_kernels(input):
        # expm1 of the clamped input: the unused branch must not overflow into the gradient. x <= 0 picks
        # the negative side, so a NaN passes the gradient, as PyTorch's elu_backward. expm1, not exp - 1,
        # which is 0 for |x| < 1e-16 (PyTorch's elu(-1e-20) is -1e-20).
        return _ops.where(input <= 0, _negative_expm1(input) * alpha, input)
    return _ops.elu(input, alpha)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """Applies ``log(1 + exp(beta * x)) / beta``, the identity where ``beta * x > threshold``."""
    _check_floating("softplus", input)
    if not lacks_kernels(input):
        return _ops.softplus(input, beta, threshold)
    scaled = input * beta
    return _ops.where(scaled > threshold, input, stable_softplus(scaled) / beta)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """Clamps to ``[min_val, max_val]`` elementwise."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if inplace:
        return _in_place(input, _hardtanh, min_val, max_val)
    return _hardtanh(input, min_val, max_val)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``min(max(0, x), 6)`` elementwise."""
    return hardtanh(input, 0.0, 6.0, inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """Applies ``log(sigmoid(x)) = -softplus(-x)`` elementwise, stable for large ``|x|``."""
    _check_floating("logsigmoid", input)
    return _ops.neg(stable_softplus(_ops.neg(input)))


def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Applies ``exp(x) / sum(exp(x))`` along ``dim`` (computed in ``dtype`` when given)."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    if dtype is None:  # with a dtype, PyTorch converts the input first
        _check_floating("softmax", input)
    return _ops.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Applies ``log(softmax(x))`` along ``dim``, computed stably in one op."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    if dtype is None:  # with a dtype, PyTorch converts the input first
        _check_floating("log_softmax", input)
    return _ops.log_softmax(input, dim, dtype)


# ---------------------------------------------------------------- the rest of torch.nn.functional's activations


def _float_scalar(input: Tensor, value: float) -> Tensor:
    return full_tensor((), value, input.dtype, input.device)


def _threshold(input: Tensor, threshold_value: float, value: float) -> Tensor:
    # ``x <= threshold``, not ``not x > threshold``: a NaN stays NaN, as in PyTorch.
    return _ops.where(input <= threshold_value, _float_scalar(input, value), input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """Returns ``value`` where ``x <= threshold``, else ``x`` (NaN included)."""
    if inplace:
        return _in_place(input, _threshold, threshold, value)
    return _threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`."""
    return _in_place(input, _threshold, threshold, value)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _negative_expm1(input: Tensor, scale: float = 1.0) -> Tensor:
    """``expm1(x / scale)`` for ``x < 0``, computed on ``min(x, 0)`` (the unused positive branch must
    not overflow into the gradient); at exactly 0 it is ``x / scale``: the same value (a signed zero)
    and first derivative, and a second derivative of 0, as PyTorch's elu_double_backward (strict x < 0)."""
    clamped = _ops.clamp(input, max=0.0)
    inverse = 1.0 / scale
    curve = _ops.expm1(clamped if scale == 1.0 else clamped * inverse)
    return _ops.where(input < 0, curve, input if scale == 1.0 else input * inverse)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))`` with SELU's fixed constants."""
    _check_floating("selu", input)
    if inplace:
        return _in_place(input, selu)
    if lacks_kernels(input):
        return _ops.where(input <= 0, _negative_expm1(input) * _SELU_ALPHA, input) * _SELU_SCALE  # NaN as elu's
    return apply_op("Selu", (input,), {"alpha": _SELU_ALPHA, "gamma": _SELU_SCALE}, "EluBackward0")


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Applies ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` elementwise."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    _check_floating("celu", input)
    if inplace:
        return _in_place(input, celu, alpha)
    # onnxruntime's Celu kernel is wrong for a negative alpha (celu(-2, alpha=-1) gives -2, not 1 - e^2).
    if lacks_kernels(input) or input.dtype is dtypes.float16 or alpha < 0:
        return _ops.where(input <= 0, _negative_expm1(input, alpha) * alpha, input)  # NaN as elu's
    return apply_op("Celu", (input,), {"alpha": float(alpha)}, "CeluBackward0")


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``relu6(x + 3) / 6`` elementwise."""
    _check_floating("hardsigmoid", input)
    if inplace:
        return _in_place(input, hardsigmoid)
    if lacks_kernels(input):
        # The ends selected, so that the slope is 0 at -3 and 3, as HardSigmoid's rule; a NaN stays NaN and
        # takes no gradient (PyTorch's hardsigmoid_backward: 0 outside (-3, 3)). (x + 3) / 6 as PyTorch's:
        # x + 3 is exact near -3 (Sterbenz), where x / 6 + 0.5 rounds to a multiple of ulp(0.5).
        inside = _ops.where(input < 3.0, (input + 3.0) / 6.0, 1.0)
        return _ops.where(input > -3.0, inside, _ops.where(input <= -3.0, 0.0, input.detach()))
    return apply_op("HardSigmoid", (input,), {"alpha": 1.0 / 6, "beta": 0.5}, "HardsigmoidBackward0")


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``x * relu6(x + 3) / 6`` elementwise (MobileNetV3's h-swish)."""
    _check_floating("hardswish", input)
    if inplace:
        return _in_place(input, hardswish)
    if lacks_kernels(input):
        # x times hardsigmoid(x), except that NaN takes the factor 1 (the ends selected as in hardsigmoid):
        # its gradient then passes, as PyTorch's hardswish_backward.
        # (x + 3) / 6 as hardsigmoid's.
        return input * _ops.where(input <= -3.0, 0.0, _ops.where(input < 3.0, (input + 3.0) / 6.0, 1.0))
    return apply_op("HardSwish", (input,), None, "HardswishBackward0")


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """Applies ``x * tanh(softplus(x))`` elementwise."""
    _check_floating("mish", input)
    if inplace:
        return _in_place(input, mish)
    if lacks_kernels(input):
        return input * _ops.tanh(stable_softplus(input))
    return apply_op("Mish", (input,), None, "MishBackward0")


def softsign(input: Tensor) -> Tensor:
    """Applies ``x / (1 + |x|)`` elementwise."""
    if lacks_kernels(input):
        return input / (_ops.abs(input) + 1.0)
    return apply_op("Softsign", (input,), None, "DivBackward0")


def tanhshrink(input: Tensor) -> Tensor:
    """Applies ``x - tanh(x)`` elementwise."""
    return input - _ops.tanh(input)


hardshrink = _ops.hardshrink  # a tensor op (runtime/ops/nn_ops.py): Tensor.hardshrink calls it too


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """Moves ``x`` towards 0 by ``lambd``, and to 0 where ``|x| <= lambd``."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    _check_floating("softshrink", input)
    if lacks_kernels(input):
        zero = _float_scalar(input, 0.0)
        inside = _ops.where(input < -lambd, input + lambd, _ops.where(input != input, input, zero))
        return _ops.where(input > lambd, input - lambd, inside)
    shrunk = apply_op("Shrink", (input,), {"lambd": float(lambd), "bias": float(lambd)}, "SoftshrinkBackward0")
    return keep_nans(input, shrunk)


prelu = _ops.prelu  # a tensor op (runtime/ops/nn_ops.py): Tensor.prelu calls it too


def rrelu(
    input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False
) -> Tensor:
    """Randomized leaky ReLU: in training each negative element gets a slope drawn from ``U(lower, upper)``.

    Not training, the slope is ``(lower + upper) / 2``. The slopes come from onnxnn's generator and
    enter the graph as data, as dropout's mask does.
    """
    if lower > upper:  # in evaluation too, as PyTorch's
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    _check_floating("rrelu", input)
    if inplace:
        return _in_place(input, rrelu, lower, upper, training)
    if not training:
        return leaky_relu(input, (lower + upper) / 2)
    numpy_dtype = input.dtype.numpy_dtype
    shape = tuple(input.shape)

    def draw_slopes() -> np.ndarray:
        return np.asarray(_random.uniform(shape, np.float64, lower, upper).astype(numpy_dtype), order="C")

    # Drawn so that a forward replay draws new slopes (a layer with RReLU replays in training).
    slope_tensor = drawn_constant_tensor(draw_slopes, input.dtype, input.device)
    # The slope where input <= 0, as PyTorch's rrelu_with_noise (its gradient at 0; a NaN passes as is).
    return _ops.where(input <= 0, input * slope_tensor, input)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """The gated linear unit: ``a * sigmoid(b)``, ``a`` and ``b`` the two halves of ``input`` along ``dim``."""
    _check_floating("glu", input)
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    axis = normalize_axes([dim], input.dim())[0]
    size = input.shape[axis]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {axis} is size {size}")
    half = size // 2
    return input.narrow(axis, 0, half) * _ops.sigmoid(input.narrow(axis, half, half))


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Applies ``softmax(-x)`` along ``dim``."""
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    _check_floating("softmin", input)
    return _ops.softmax(_ops.neg(input), dim, None)


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """Samples from the Gumbel-softmax distribution: ``softmax((logits + g) / tau)``, ``g`` standard Gumbel noise.

    With ``hard=True`` the result is the one-hot vector of the sample's argmax in value, with the
    soft sample's gradient (the straight-through estimator). The noise comes from onnxnn's
    generator and enters the graph as data.
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    uniform = _random.uniform(tuple(logits.shape), np.float64)
    # -log(Exponential(1)) is standard Gumbel; 1 - u lies in (0, 1], so the logarithms stay finite.
    exponential = np.maximum(-np.log1p(-uniform), np.finfo(np.float64).tiny)
    gumbels = constant_tensor(
        np.asarray(-np.log(exponential), order="C").astype(logits.dtype.numpy_dtype), logits.dtype, logits.device
    )
    y_soft = _ops.softmax((logits + gumbels) / tau, dim, None)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = _ops.scatter(full_tensor(tuple(logits.shape), 0.0, logits.dtype, logits.device), dim, index, value=1.0)
    return y_hard - y_soft.detach() + y_soft
