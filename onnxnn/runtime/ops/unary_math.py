"""Gradient rules of the trigonometric and hyperbolic ops and of float Mod.

The Tensor API does not record these yet (their shape rules sit with the other elementwise
ops); imported models do, so each op needs its rule. Derivatives are written with recorded
ops, so second derivatives come from the same rules.
"""

from __future__ import annotations

from ...ir.registry import gradient_rules
from ._common import apply_op


def _unary(op_type: str, x):
    return apply_op(op_type, (x,))


@gradient_rules.register("Tan")
def _tan_grad(ctx, g):
    out = ctx.output()
    return (g * (1 + out * out),)


@gradient_rules.register("Asin")
def _asin_grad(ctx, g):
    x = ctx.input(0)
    return (g / (1 - x * x).sqrt(),)


@gradient_rules.register("Acos")
def _acos_grad(ctx, g):
    x = ctx.input(0)
    return (-g / (1 - x * x).sqrt(),)


@gradient_rules.register("Atan")
def _atan_grad(ctx, g):
    x = ctx.input(0)
    return (g / (1 + x * x),)


@gradient_rules.register("Sinh")
def _sinh_grad(ctx, g):
    return (g * _unary("Cosh", ctx.input(0)),)


@gradient_rules.register("Cosh")
def _cosh_grad(ctx, g):
    return (g * _unary("Sinh", ctx.input(0)),)


@gradient_rules.register("Asinh")
def _asinh_grad(ctx, g):
    x = ctx.input(0)
    return (g / (x * x + 1).sqrt(),)


@gradient_rules.register("Acosh")
def _acosh_grad(ctx, g):
    x = ctx.input(0)
    return (g / (x * x - 1).sqrt(),)


@gradient_rules.register("Atanh")
def _atanh_grad(ctx, g):
    x = ctx.input(0)
    return (g / (1 - x * x),)


@gradient_rules.register("Mod")
def _mod_grad(ctx, g):
    # Float Mod is fmod (ONNX requires fmod=1 for floats): a - trunc(a / b) * b. The quotient is
    # recovered from the output and rounded, so it is the exact integer the op subtracted.
    if not ctx.attrs.get("fmod", 0):
        raise NotImplementedError("gradient of Mod with fmod=0 (an integer op)")
    a, b = ctx.input(0), ctx.input(1)
    # Detached: the rounded quotient's zero derivative would meet Div's rule (0 / 0 where b == 0).
    quotient = _unary("Round", ((a - ctx.output()) / b).detach())
    return g, -g * quotient
