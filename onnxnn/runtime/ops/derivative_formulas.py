"""Composites whose gradient is PyTorch's derivative formula: onnxnn's ``Hypot``, ``Atan2``,
``Lgamma``, ``Digamma``, ``Polygamma``, ``Xlogy`` and ``Xlog1py`` ops.

    Hypot(H, X, Y) -> H        Atan2(A, Y, X) -> A        Lgamma(L, X) -> L    (and so on)

Each node passes on its first input, the function's value, computed by a composite of standard ops
from the operands detached: C's overflow-safe hypot (``hypot_of`` here), atan2's quadrants, signed
zeros and infinities (``pointwise.atan2``), the gamma functions' series (``special_functions``).
``build_model`` writes the node as Identity and onnxnn's kernels pass the array on, so every
executor computes the composite's value, bit for bit. The node is there for its gradient rule,
PyTorch's formula (``derivatives.yaml``) recorded as ops:

- hypot: ``G * X / H`` and ``G * Y / H``, H the node's output;
- atan2: ``G * X / (X^2 + Y^2)`` and ``-G * Y / (X^2 + Y^2)``, 0 at the origin;
- lgamma, digamma, polygamma(n): ``G`` times digamma, polygamma(1), polygamma(n + 1) of X
  (registered by ``special_functions``, which computes those);
- xlogy, xlog1py: ``xlogy(G, Y)``, 0 where ``X == 0`` and ``Y <= 0``, and ``G * X / Y`` (xlog1py's
  with ``-1`` and ``Y + 1``), registered beside the functions (``pointwise``, ``onnxnn.special``)
  through ``x_log_gradients``.

Differentiating the composites instead goes wrong beyond the first derivative: hypot's Max and Min
split the gradient where ``|X| == |Y|``, so the recorded function is linear there and its second
derivatives are 0; atan2's ``atan(Y / X)`` has a second derivative that is the difference of two
terms of order ``1 / X``, which cancel near the Y axis (all digits in float64 at ``X = 1e-8``). The
formulas are well-conditioned, and so is each higher derivative, which differentiates them. The
gamma functions' composites have no usable derivative at their poles and at infinities (a Where's
branches, a reflection's ``inf - inf``: NaN), where the formulas give PyTorch's infinities. xlogy's
Where at ``X == 0`` cuts d/dX there (PyTorch's is ``log(Y)``, +inf at ``Y = inf``) and its d/dY is
0 where PyTorch's ``X / Y`` is NaN (``Y = 0``) or a signed zero.
"""

from __future__ import annotations

from typing import Callable

from ...ir.domains import ONNXNN_DOMAIN
from ...ir.mode import MODE
from ...ir.registry import decompositions, gradient_rules, shape_rules, value_blind_decompositions
from ..tensor import Tensor, apply_op
from . import comparison as _c
from . import division as _division
from . import elementwise as _e
from ._common import same_shape, static_scalar
from .training import node_emitter

__all__ = ["derivative_formula", "hypot_of", "with_derivative_formula", "x_log_gradients"]

# op_type -> PyTorch's name of its backward node (the op's gradient rule is in ``gradient_rules``).
FORMULAS: dict[str, str] = {}


def _decomposition(node, input_names: list, output_names: list, fresh_name):
    nodes: list = []
    node_emitter(nodes, fresh_name)("Identity", input_names[0], output=output_names[0])
    return nodes, []


def derivative_formula(op_type: str, backward_name: str) -> Callable:
    """Registers the decorated gradient rule as the derivative formula of onnxnn's ``op_type`` node,
    whose backward node PyTorch names ``backward_name``; the node's value is its first input."""

    def register(rule: Callable) -> Callable:
        FORMULAS[op_type] = backward_name
        shape_rules.register(op_type, domain=ONNXNN_DOMAIN)(same_shape)
        decompositions.register(op_type, domain=ONNXNN_DOMAIN)(_decomposition)
        value_blind_decompositions.mark(op_type, domain=ONNXNN_DOMAIN)
        gradient_rules.register(op_type, domain=ONNXNN_DOMAIN)(rule)
        return rule

    return register


def hypot_of(x: Tensor, y: Tensor) -> Tensor:
    """``sqrt(x^2 + y^2)`` of two tensors of one float dtype (float32 or float64), with PyTorch's gradient.

    The value is C's hypot's: the larger magnitude times ``sqrt(1 + r^2)``, r the ratio of the
    smaller to it (``hypot(1e38, 3)`` is 1e38, not the inf that squaring gives), and +inf where
    either is infinite, even beside a NaN.
    """
    settled_x, settled_y = x.detach(), y.detach()
    a, b = _e.abs(settled_x), _e.abs(settled_y)
    larger = _e.maximum(a, b)
    ratio = _division.div(_e.minimum(a, b), _e.where(_c.eq(larger, 0), 1.0, larger))
    scaled = _e.mul(larger, _e.sqrt(_e.add(_e.mul(ratio, ratio), 1.0)))
    value = _e.where(_c.logical_or(_c.isinf(settled_x), _c.isinf(settled_y)), float("inf"), scaled)
    return with_derivative_formula("Hypot", value, (x, y))


@derivative_formula("Hypot", "HypotBackward0")
def _hypot_gradient(ctx, g):
    """PyTorch's ``grad * self / result`` and ``grad * other / result``."""
    result = ctx.output(0)
    gradients: list[Tensor | None] = [None]
    for index in (1, 2):
        if ctx.needs_input_grad(index):
            gradients.append(apply_op("Div", (apply_op("Mul", (g, ctx.input(index))), result)))
        else:
            gradients.append(None)
    return tuple(gradients)


@derivative_formula("Atan2", "Atan2Backward0")
def _atan2_gradient(ctx, g):
    """PyTorch's ``atan2_backward``, ``grad * other * r`` and ``grad * -self * r``, 0 at the origin.

    Its ``r = 1 / (self^2 + other^2)`` is taken as ``1 / h^2``, h the hypot (itself with its
    formula's gradient): the squares overflow above about 1e154 in float64 (1e19 in float32) and
    vanish below their reciprocals, where PyTorch's gradient is 0 or NaN; the quotients by h are
    exact there too, and give PyTorch's zeros and NaNs at infinities.
    """
    y, x = ctx.input(1), ctx.input(2)
    dtype = g._value.dtype
    h = hypot_of(x, y)
    # At the origin x and y are zeros: a divisor of 1 makes both gradients zeros of PyTorch's signs.
    divisor = apply_op("Where", (apply_op("Equal", (h, static_scalar(0, dtype))), static_scalar(1, dtype), h))
    y_gradient = x_gradient = None
    if ctx.needs_input_grad(1):
        y_gradient = apply_op("Div", (apply_op("Mul", (g, apply_op("Div", (x, divisor)))), divisor))
    if ctx.needs_input_grad(2):
        negated = apply_op("Neg", (apply_op("Div", (y, divisor)),))
        x_gradient = apply_op("Div", (apply_op("Mul", (g, negated)), divisor))
    return None, y_gradient, x_gradient


def x_log_gradients(ctx, g, x_log: Callable, shift: float) -> tuple:
    """PyTorch's xlogy and xlog1py formulas, ``x_log`` the function and ``shift`` 0 or 1:
    ``x_log(grad, other)`` made 0 where ``self == 0`` and ``other <= -shift``, and
    ``grad * self / (other + shift)``.

    ``x_log`` records its own formula node, so that the second derivatives are PyTorch's too.
    """
    x, y = ctx.input(1), ctx.input(2)
    x_gradient = y_gradient = None
    if ctx.needs_input_grad(1):
        outside_domain = _c.logical_and(_c.eq(x, 0), _c.le(y, -shift))
        x_gradient = _e.where(outside_domain, 0.0, x_log(g, y))
    if ctx.needs_input_grad(2):
        y_gradient = _division.div(_e.mul(g, x), y if shift == 0 else _e.add(y, shift))
    return None, x_gradient, y_gradient


def with_derivative_formula(
    op_type: str, value: Tensor, operands: tuple[Tensor, ...], attributes: dict | None = None
) -> Tensor:
    """``value``, computed from ``operands`` detached, as the output of an ``op_type`` node of
    ``FORMULAS`` (with ``attributes``), whose gradient is the formula's. ``value`` itself where no
    gradient is recorded: the forward graph is then the composite's alone."""
    if not MODE.grad.enabled or not any(operand._requires_grad for operand in operands):
        return value
    return apply_op(op_type, (value, *operands), attributes, FORMULAS[op_type], domain=ONNXNN_DOMAIN)
