"""Elementwise ops: shape rules, gradient rules and the tensor functions that emit them.

Each ONNX op's entries sit together: its shape rule, its gradient rule (a one-liner where the
math allows), then the PyTorch-named functions recording it. Broadcast gradients are summed back
to input shapes by the autodiff driver, never here.
"""

from __future__ import annotations

import builtins
import math
import warnings


from ...ir import dtypes
from ...ir.graph import Value
from ...ir.registry import gradient_rules, non_differentiable, shape_rules
from ...ir.caches import register_cache
from ._common import (
    Tensor,
    apply_op,
    broadcast_values,
    expanded_zeros,
    promote_operands,
    promote_pair,
    same_shape,
    static_scalar,
)
from ..creation import check_number_fits
from .abs_gradient import abs_gradient as _abs_gradient
from .alpha_scaling import scaled_sum
from .indexing import nonzero
from .opmath import rounded, widened, with_float32_number

# ---------------------------------------------------------------- shape rules


@shape_rules.register("Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "PRelu", "Sum", "Mean")
def _broadcast_shape(inputs, attrs):
    return [(broadcast_values(inputs), inputs[0].dtype)]


shape_rules.register(
    "Neg",
    "Abs",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Relu",
    "LeakyRelu",
    "Sigmoid",
    "Tanh",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Erf",
    "Softplus",
    "Softsign",
    "Identity",
    "Elu",
    "Selu",
    "Celu",
    "HardSigmoid",
    "HardSwish",
    "Gelu",
    "Mish",
    "ThresholdedRelu",
    "BitwiseNot",
)(same_shape)


@shape_rules.register("Cast")
def _cast_shape(inputs, attrs):
    return [(inputs[0].shape, dtypes.as_dtype(attrs["to"]))]


@shape_rules.register("Where")
def _where_shape(inputs, attrs):
    return [(broadcast_values(inputs), inputs[1].dtype)]


non_differentiable.mark("BitwiseNot")

# ---------------------------------------------------------------- gradient rules


@gradient_rules.register("Sign", "Floor", "Ceil", "Round")
def _piecewise_constant_grad(ctx, g):
    # Zero wherever the derivative exists, as PyTorch's SignBackward0, FloorBackward0, ...: the output
    # requires grad and a leaf reached only through it gets zeros, not None.
    return (expanded_zeros(ctx.input_shape(0), g.dtype, g.device),)


@gradient_rules.register("Add")
def _add_grad(ctx, g):
    return g, g


@gradient_rules.register("Sum")
def _sum_grad(ctx, g):
    return (g,) * ctx.num_inputs


@gradient_rules.register("Mean")
def _mean_grad(ctx, g):
    return (g / ctx.num_inputs,) * ctx.num_inputs


@gradient_rules.register("Sub")
def _sub_grad(ctx, g):
    return g, -g


@gradient_rules.register("Mul")
def _mul_grad(ctx, g):
    return (
        g * ctx.input(1) if ctx.needs_input_grad(0) else None,
        g * ctx.input(0) if ctx.needs_input_grad(1) else None,
    )


@gradient_rules.register("Div")
def _div_grad(ctx, g):
    # The dividend is read only for the divisor's gradient: ``y / 2`` does not keep ``y``, which may
    # then change in place (PyTorch saves it only when the divisor requires grad).
    b = ctx.input(1)
    return (
        g / b if ctx.needs_input_grad(0) else None,
        # PyTorch's (a / b) / b: b * b overflows or underflows first (float16: any b past 256).
        -g * ((ctx.input(0) / b) / b) if ctx.needs_input_grad(1) else None,
    )


@gradient_rules.register("Pow")
def _pow_grad(ctx, g):
    base, exponent = ctx.input(0), ctx.input(1)
    exponent = exponent.to(base.dtype)
    # x ** 0 is constant: its derivative is 0 even at x == 0, where 0 * 0 ** -1 would be nan. The
    # unused branch reads base 1 there: its own derivative (a second derivative's) is then 0, not NaN.
    constant = exponent == 0
    grad_base = where(constant, 0.0, g * exponent * where(constant, 1.0, base) ** (exponent - 1))
    # d/d exponent is PyTorch's out * log(base): NaN for base < 0, 0 only where base == 0 and exponent >= 0.
    zero = (base == 0) & (exponent >= 0)  # log(1) there: the unused branch's derivative is then 0, not NaN
    return grad_base, g * where(zero, 0.0, ctx.output() * log(where(zero, 1.0, base)))


@gradient_rules.register("Neg")
def _neg_grad(ctx, g):
    return (-g,)


@gradient_rules.register("Identity")
def _identity_grad(ctx, g):
    source = ctx.node.inputs[0].device
    if g._value.device is not source:  # a device copy's (``to("cuda")``): the gradient goes back
        g = g.to(source)
    return (g,)


@gradient_rules.register("Abs")
def _abs_grad(ctx, g):
    return (_abs_gradient(g, ctx.input(0)),)


@gradient_rules.register("Exp")
def _exp_grad(ctx, g):
    return (g * ctx.output(),)


@gradient_rules.register("Log")
def _log_grad(ctx, g):
    return (g / ctx.input(0),)


@gradient_rules.register("Sqrt")
def _sqrt_grad(ctx, g):
    return (g / (ctx.output() * 2),)


@gradient_rules.register("Reciprocal")
def _reciprocal_grad(ctx, g):
    out = ctx.output()
    return (-g * out * out,)


@gradient_rules.register("Sin")
def _sin_grad(ctx, g):
    return (g * cos(ctx.input(0)),)


@gradient_rules.register("Cos")
def _cos_grad(ctx, g):
    return (-g * sin(ctx.input(0)),)


@gradient_rules.register("Erf")
def _erf_grad(ctx, g):
    x = ctx.input(0)
    return (g * (2 / math.sqrt(math.pi)) * exp(-(x * x)),)


@gradient_rules.register("Cast")
def _cast_grad(ctx, g):
    source = ctx.input_value(0).dtype
    return (g.to(source) if source.is_floating_point else None,)


@gradient_rules.register("CastLike")
def _cast_like_grad(ctx, g):
    # In the function bodies imported ops newer than opset 21 run as (Swish's, RMSNormalization's).
    source = ctx.input_value(0).dtype
    return (g.to(source) if source.is_floating_point else None, None)


@gradient_rules.register("Where")
def _where_grad(ctx, g):
    condition = ctx.input(0)
    zero = static_scalar(0, g._value.dtype)
    return None, apply_op("Where", (condition, g, zero)), apply_op("Where", (condition, zero, g))


def _masked(condition: Tensor, g: Tensor) -> Tensor:
    """``g`` where ``condition`` holds, else 0: the gradient of a selection."""
    return apply_op("Where", (condition, g, static_scalar(0, g._value.dtype)))


def _select_grad(ctx, g):
    """Max/Min: the gradient goes to the inputs equal to the result, split evenly on ties (as PyTorch)."""
    if ctx.num_inputs == 2:
        # PyTorch's maximum/minimum: halves on a tie, and all of it to an input compared with a NaN
        # (the rule below would divide by no input equal to a NaN result).
        x, y = ctx.input(0), ctx.input(1)
        shared = where(x == y, g / 2, g)
        x_loses, y_loses = (x < y, y < x) if ctx.node.op_type == "Max" else (x > y, y > x)
        return _masked(~x_loses, shared), _masked(~y_loses, shared)
    out = ctx.output()
    masks = [(ctx.input(i) == out).to(g.dtype) for i in range(ctx.num_inputs)]
    count = masks[0]
    for mask in masks[1:]:
        count = count + mask
    return tuple(g * mask / count for mask in masks)


gradient_rules.register("Max", "Min")(_select_grad)

# ---------------------------------------------------------------- tensor functions


def _binary(op_type: str, a, b, name: str):
    promoted = promote_pair(a, b) or promote_operands([a, b])
    return apply_op(op_type, tuple(promoted[0]), None, name)


def _unary(op_type: str, x: Tensor, name: str, attrs: dict | None = None) -> Tensor:
    return apply_op(op_type, (x,), attrs, name)


def _floating(x: Tensor) -> Tensor:
    """Integer inputs of float-valued functions (exp, sqrt, ...) become the default float dtype."""
    return x if x._value.dtype.is_floating_point else x.to(dtypes.get_default_dtype())


def add(input, other, *, alpha=1) -> Tensor:
    """``input + alpha * other`` with broadcasting and PyTorch's type promotion (``alpha`` scales in
    the result dtype)."""
    if alpha != 1 or type(alpha) is not int:  # alpha=True, 1.0 are checked against the result dtype
        return scaled_sum("Add", input, other, alpha, "AddBackward0")
    (a, b), result_dtype = promote_pair(input, other) or promote_operands([input, other])
    if result_dtype is dtypes.bool:
        # onnxruntime has no bool Add; PyTorch's sum of bools is their logical or.
        return apply_op("Or", (a, b))
    return apply_op("Add", (a, b), None, "AddBackward0")


def _is_bool(operand) -> bool:
    if isinstance(operand, Tensor):
        return operand._value.dtype is dtypes.bool
    return isinstance(operand, bool)


def sub(input, other, *, alpha=1) -> Tensor:
    if _is_bool(input) and _is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if _is_bool(input) or _is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    if alpha != 1 or type(alpha) is not int:
        return scaled_sum("Sub", input, other, alpha, "SubBackward0")
    return _binary("Sub", input, other, "SubBackward0")


def mul(input, other) -> Tensor:
    widened = with_float32_number("Mul", input, other, "MulBackward0")
    if widened is not None:
        return widened
    (a, b), result_dtype = promote_pair(input, other) or promote_operands([input, other])
    if result_dtype is dtypes.bool:
        # onnxruntime has no bool Mul; PyTorch's product of bools is their logical and.
        return apply_op("And", (a, b))
    unchanged = _times_static_one(a, b)
    if unchanged is not None:
        return unchanged
    return apply_op("Mul", (a, b), None, "MulBackward0")


def _times_static_one(a, b) -> Tensor | None:
    """``x * 1`` for a static all-ones factor (backward()'s implicit seed gradient): a new handle on x.

    Gradient rules multiply the incoming gradient into their result, and for a scalar loss the
    first one receives that seed: skipping the product saves a node in every training step. Only
    outside autograd (neither operand requires grad) and when the product has x's shape.
    """
    for one, x in ((a, b), (b, a)):
        one_is_value = type(one) is Value
        value = one if one_is_value else one._value
        if value.static is None or type(x) is not Tensor or x._requires_grad:
            continue
        if not one_is_value and one._requires_grad:
            return None
        if (
            len(value.shape) <= len(x._value.shape)
            and _is_all_ones(value)
            and broadcast_values((x._value, value)) == x._value.shape
        ):
            return Tensor._from_value(x._value)
    return None


def _is_all_ones(value) -> bool:
    known = _ALL_ONES.get(value.static)
    if known is None:
        if len(_ALL_ONES) >= 1024:
            _ALL_ONES.clear()
        known = _ALL_ONES[value.static] = bool((value.data == 1).all())
    return known


_ALL_ONES: dict = {}  # static constants' keys (their content) -> whether every element is one
register_cache("all-ones constants", _ALL_ONES.clear)


multiply = mul
subtract = sub


def pow(input, exponent) -> Tensor:
    """``input ** exponent``; an integer tensor to a float power is a float tensor."""
    if _is_bool(input) and _is_bool(exponent):
        if isinstance(exponent, Tensor):
            raise NotImplementedError("\"pow\" not implemented for 'Bool'")  # PyTorch's, for two bool tensors
        # A bool tensor to a bool number (no bool Pow): itself, or True everywhere (x ** 0).
        return input.clone() if exponent else apply_op("Or", (input, apply_op("Not", (input,))), None, "PowBackward0")
    if isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        if exponent == 1 and dtypes.result_type([(input._value.dtype, 1)], [exponent]) is input._value.dtype:
            return input.clone()  # a new tensor: an in-place change of the result must not reach input
        if exponent < 0 and not isinstance(exponent, float) and not input._value.dtype.is_floating_point:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        if isinstance(exponent, int) and not isinstance(exponent, bool) and input._value.dtype.category == 1:
            check_number_fits(exponent, input._value.dtype)  # PyTorch's: uint8 ** 300 is refused, not 0
        if type(exponent) is int and exponent >= 0 and input._value.dtype.category == 1:
            return _integer_power(input, exponent)
        if exponent == 2 and input._value.dtype.is_floating_point:
            return apply_op("Mul", (input, input), None, "PowBackward0")
        if exponent == 0.5 and input._value.dtype.is_floating_point:
            # PyTorch's kernel takes sqrt here: -inf gives NaN and -0 gives -0 (C's pow, onnxruntime's
            # Pow: inf and 0).
            return apply_op("Sqrt", (input,), None, "PowBackward0")
    return _binary("Pow", input, exponent, "PowBackward0")


def _integer_power(base: Tensor, exponent: int) -> Tensor:
    """``base ** exponent`` for an integer base, by repeated squaring: onnxruntime's integer Pow goes
    through double (int64 results past 2**53 lose their last digits, an overflow saturates), its Mul
    is exact and wraps, as PyTorch's power does (and onnxruntime has no Pow for int8, uint8, int16)."""
    if exponent == 0:
        return add(mul(base, 0), 1)
    while not exponent & 1:  # the lowest set bit's square starts the product
        base = apply_op("Mul", (base, base))
        exponent >>= 1
    result, square = base, base
    exponent >>= 1
    while exponent:
        square = apply_op("Mul", (square, square))
        if exponent & 1:
            result = apply_op("Mul", (result, square))
        exponent >>= 1
    return result


def neg(input: Tensor) -> Tensor:
    if input._value.dtype is dtypes.bool:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            "to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    if input._value.dtype.name.startswith("uint"):  # ONNX's Neg has no unsigned types: 0 - x wraps as PyTorch's
        return apply_op("Sub", (static_scalar(0, input._value.dtype), input), None, "NegBackward0")
    return _unary("Neg", input, "NegBackward0")


negative = neg


def abs(input: Tensor) -> Tensor:
    if input.dtype is dtypes.bool:  # refused when called, as PyTorch's kernel is (ONNX's Abs has no bool)
        raise NotImplementedError("\"abs\" not implemented for 'Bool'")
    return _unary("Abs", input, "AbsBackward0")


def exp(input: Tensor) -> Tensor:
    return _unary("Exp", _floating(input), "ExpBackward0")


def log(input: Tensor) -> Tensor:
    return _unary("Log", _floating(input), "LogBackward0")


def sqrt(input: Tensor) -> Tensor:
    return _unary("Sqrt", _floating(input), "SqrtBackward0")


def rsqrt(input: Tensor) -> Tensor:
    """``1 / sqrt(x)``; float16/bfloat16 compute in float32 and round once, as PyTorch's kernel."""
    x = _floating(input)
    return rounded(_unary("Reciprocal", sqrt(widened(x)), "RsqrtBackward0"), x._value.dtype)


def reciprocal(input: Tensor) -> Tensor:
    return _unary("Reciprocal", _floating(input), "ReciprocalBackward0")


def sin(input: Tensor) -> Tensor:
    return _unary("Sin", _floating(input), "SinBackward0")


def cos(input: Tensor) -> Tensor:
    return _unary("Cos", _floating(input), "CosBackward0")


def erf(input: Tensor) -> Tensor:
    return _unary("Erf", _floating(input), "ErfBackward0")


def sign(input: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of each element; 0 for NaN, as PyTorch gives (ONNX's Sign gives NaN).
    A bool tensor is its own sign, as in PyTorch."""
    return signed_unit(input, "SignBackward0")


def signed_unit(input: Tensor, name: str) -> Tensor:
    """``sign``, its gradient function called ``name`` (``sgn`` records the same nodes as SgnBackward0)."""
    if input.dtype is dtypes.bool:
        return clone(input)  # ONNX's Sign has no bool form
    result = onnx_sign(input)
    if not input.dtype.is_floating_point:
        return result
    zero = Tensor._full((), 0.0, input.dtype, input.device)
    return apply_op("Where", (apply_op("IsNaN", (input,)), zero, result), None, name)


def onnx_sign(input: Tensor) -> Tensor:
    """ONNX's Sign, NaN for NaN: one node, for the gradient rules (whose results are NaN there anyway)."""
    return _unary("Sign", input, "SignBackward0")


def floor(input: Tensor) -> Tensor:
    refuse_bool(input, "floor")
    return _unary("Floor", input, "FloorBackward0") if input.dtype.is_floating_point else clone(input)


def ceil(input: Tensor) -> Tensor:
    refuse_bool(input, "ceil")
    return _unary("Ceil", input, "CeilBackward0") if input.dtype.is_floating_point else clone(input)


def refuse_bool(input: Tensor, name: str) -> None:
    """PyTorch's rounding kernels (floor, ceil, round, trunc) have no bool version."""
    if input._value.dtype is dtypes.bool:
        raise NotImplementedError(f"\"{name}_vml_cpu\" not implemented for 'Bool'")


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Rounds half to even; with ``decimals``, to that many decimal places (negative: tens, hundreds...).

    As PyTorch computes it: ``round(x * 10**d) / 10**d``, or ``round(x / 10**-d) * 10**-d`` for
    negative ``d``, in ``input``'s dtype (float32 for float16 and bfloat16, rounded once at the end).
    """
    refuse_bool(input, "round")
    if not decimals:
        return _unary("Round", input, "RoundBackward0") if input.dtype.is_floating_point else clone(input)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(
            f"\"round\" with decimals not implemented for '{dtypes.scalar_type_name(input.dtype)}'"
        )
    wide = widened(input)  # in float16, 60000 * 100 would be inf and 0.35 * 10 round to 3.5 first
    scale = Tensor._full((), 10.0 ** builtins.abs(decimals), wide.dtype, input.device)
    if decimals > 0:
        result = _binary("Div", _unary("Round", mul(wide, scale), "RoundBackward1"), scale, "DivBackward0")
    else:
        result = mul(_unary("Round", _binary("Div", wide, scale, "DivBackward0"), "RoundBackward1"), scale)
    return rounded(result, input.dtype)


def maximum(input, other) -> Tensor:
    if _is_bool(input) and _is_bool(other):  # ONNX's Max has no bool: a logical or
        return apply_op("Or", tuple(promote_operands([input, other])[0]), None, "MaximumBackward0")
    return _binary("Max", input, other, "MaximumBackward0")


def minimum(input, other) -> Tensor:
    if _is_bool(input) and _is_bool(other):
        return apply_op("And", tuple(promote_operands([input, other])[0]), None, "MinimumBackward0")
    return _binary("Min", input, other, "MinimumBackward0")


def where(condition: Tensor, input=None, other=None):
    """Elementwise ``input if condition else other``, broadcasting all three.

    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``, as in PyTorch.
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if not isinstance(condition, Tensor):
        raise TypeError("where(): condition must be a bool tensor")
    if condition._value.dtype is not dtypes.bool:
        condition = _bool_condition(condition)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = Tensor._full((), input, dtypes.result_type([], [input, other]), condition.device)
    (a, b), result_dtype = promote_operands([input, other])
    if not result_dtype.is_floating_point:  # PyTorch refuses an integer that does not fit (a float becomes inf)
        for operand in (input, other):
            if not isinstance(operand, Tensor):
                check_number_fits(operand, result_dtype)
    return apply_op("Where", (condition, a, b), None, "WhereBackward0")


def _bool_condition(condition: Tensor) -> Tensor:
    """PyTorch's ``where`` takes a bool condition, and a uint8 one with a deprecation warning (read as
    ``!= 0``); any other dtype is a RuntimeError, not a truth test."""
    if condition._value.dtype is not dtypes.uint8:
        raise RuntimeError(
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{dtypes.scalar_type_name(condition._value.dtype)}"
        )
    warnings.warn(
        "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a future "
        "version of PyTorch. Use a boolean condition instead.",
        UserWarning,
        stacklevel=3,
    )
    return condition.to(dtypes.bool)


def clone(input: Tensor) -> Tensor:
    return apply_op("Identity", (input,), None, "CloneBackward0")
