"""Activation functions: ReLU, its leaky and exponential forms, GELU, sigmoid, tanh and softplus.

Their gradient rules, then the PyTorch-named functions recording them; their shape rule is
elementwise.py's rule for every unary op.
"""

from __future__ import annotations

import math

from ...ir import dtypes
from ...ir.registry import gradient_rules
from ._common import Tensor
from .clamping import clamp
from .elementwise import _floating, _unary, erf, exp, where
from .opmath import rounded, widened
from .relu_gradient import relu_gradient as _relu_gradient

# ---------------------------------------------------------------- gradient rules


@gradient_rules.register("Relu")
def _relu_grad(ctx, g):
    return (_relu_gradient(g, ctx.output()),)


@gradient_rules.register("LeakyRelu")
def _leaky_relu_grad(ctx, g):
    return (where(ctx.input(0) > 0, g, g * ctx.attrs.get("alpha", 0.01)),)


@gradient_rules.register("Elu")
def _elu_grad(ctx, g):
    x, alpha = ctx.input(0), ctx.attrs.get("alpha", 1.0)
    # alpha * exp(x), as PyTorch's elu_backward of the input: output + alpha loses its digits where
    # exp(x) is small (float32: 4e-4 off at -10, 0 at -20). Half dtypes in float32, rounded once
    # (opmath). ``where(x < 0, x, 0)`` keeps the unused side finite and, unlike a clamp at 0, passes
    # no gradient at exactly 0: the second derivative there is 0, as PyTorch's elu_double_backward
    # (strict x < 0), though the first takes the negative side.
    wide = widened(x)
    negative = rounded(widened(g) * (exp(where(wide < 0, wide, 0.0)) * alpha), x.dtype)
    # x <= 0 picks the negative side, so a NaN passes g, as PyTorch's elu_backward.
    return (where(x <= 0, negative, g),)


def sigmoid_gradient(g: Tensor, out: Tensor) -> Tensor:
    """The gradient of ``out = sigmoid(x)`` for ``g``, the output's: ``g * out * (1 - out)``."""
    return g * out * (1 - out)


def tanh_gradient(g: Tensor, out: Tensor) -> Tensor:
    """The gradient of ``out = tanh(x)`` for ``g``, the output's: ``g * (1 - out * out)``."""
    return g * (1 - out * out)


@gradient_rules.register("Sigmoid")
def _sigmoid_grad(ctx, g):
    return (sigmoid_gradient(g, ctx.output()),)


@gradient_rules.register("Tanh")
def _tanh_grad(ctx, g):
    return (tanh_gradient(g, ctx.output()),)


@gradient_rules.register("Softplus")
def _softplus_grad(ctx, g):
    return (g * sigmoid(ctx.input(0)),)


@gradient_rules.register("Gelu")
def _gelu_grad(ctx, g):
    # float16/bfloat16 in float32, rounded once (PyTorch's opmath): 1 + erf and 1 - inner^2 cancel for
    # x < 0, 15-23 half ulps off when each op rounded. float32 and float64 record the same ops as before.
    dtype = ctx.input(0).dtype
    x, g = widened(ctx.input(0)), widened(g)
    if ctx.attrs.get("approximate", "none") == "tanh":
        k = math.sqrt(2 / math.pi)
        inner = tanh(k * (x + 0.044715 * x * x * x))
        derivative = 0.5 * (1 + inner) + 0.5 * x * (1 - inner * inner) * k * (1 + 3 * 0.044715 * x * x)
        return (rounded(g * derivative, dtype),)
    cdf = 0.5 * (1 + erf(x * (1 / math.sqrt(2))))
    pdf = exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
    return (rounded(g * (cdf + x * pdf), dtype),)


# ---------------------------------------------------------------- tensor functions


def relu(input: Tensor) -> Tensor:
    if not input._value.dtype.is_floating_point:
        if input._value.dtype is dtypes.bool:
            raise RuntimeError("Boolean inputs not supported for relu")
        return clamp(input, min=0)  # onnxruntime's Relu lacks int64, int16 and uint8 kernels
    return _unary("Relu", input, "ReluBackward0")


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return _unary("LeakyRelu", input, "LeakyReluBackward0", {"alpha": float(negative_slope)})


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:
    return _unary("Elu", input, "EluBackward0", {"alpha": float(alpha)})


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    return _unary("Gelu", input, "GeluBackward0", {"approximate": approximate})


def sigmoid(input: Tensor) -> Tensor:
    return _unary("Sigmoid", _floating(input), "SigmoidBackward0")


def tanh(input: Tensor) -> Tensor:
    return _unary("Tanh", _floating(input), "TanhBackward0")


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    if beta == 1.0:
        result = _unary("Softplus", input, "SoftplusBackward0")
    else:
        result = _unary("Softplus", input * beta, "SoftplusBackward0") / beta
    # Above the threshold softplus is the identity in PyTorch (avoids overflow of exp).
    return where(input * beta > threshold, input, result)
