"""``Sigmoid``, ``Elu``, ``Selu``, ``Celu``, ``HardSigmoid``, ``HardSwish`` in onnxnn's sessions, as PyTorch's.

- onnxruntime's CPU Sigmoid (1.31) approximates the logistic function with a small absolute error,
  which is a large relative one wherever the output is small: float32 ``sigmoid(-10)`` is off by
  2e-4 of itself, ``sigmoid(-17)`` by a factor of two, and from -20 on it is 0 (PyTorch: 2.06e-9);
  float64 loses digits the same way and is 0 from about -37 on. Anything read on a logarithmic
  scale then breaks: ``log(sigmoid(x))`` is -inf, a distribution's probabilities from logits are 0
  and its mean (``Geometric``'s ``1 / p - 1``) inf. onnxnn's sessions run PyTorch's formula
  ``1 / (1 + exp(-x))``, one Exp whose relative error is an ulp or two, float64 included; it
  underflows where PyTorch's does (float32 from -88.7: exp overflows, the reciprocal is 0).
- onnxruntime's CPU Elu, Selu and Celu (1.31) compute ``exp(x) - 1``, which cancels for small
  negative x: float32 ``elu(-1e-9)`` is 0 (PyTorch: -1e-9), every |x| < 2.7e-8 gives 0, and near
  -0.01 the result is 20-30 ulps off. onnxnn's sessions run the negative side as Kahan's
  ``expm1``: with ``u = exp(x)`` rounded, ``(u - 1) * x / log(u)``, and ``x`` where u rounds to 1
  (the rounding errors of u cancel between ``u - 1`` and ``log(u)``); at most 2 ulps.
- HardSigmoid and HardSwish are ONNX's ``alpha * x + beta``, which rounds to a multiple of ulp(0.5)
  near x = -3, where the result is near 0: float32 ``hardswish(-2.9999998)`` was 25% off. PyTorch
  computes ``x + 3`` first (exact there, by Sterbenz), clamps it to [0, 6] and divides by 6; so do
  these forms (PyTorch's attributes alpha = 1/6, beta = 0.5 only; other attributes keep the node).

On a 2-core machine's one thread, per million float32 elements: Sigmoid 0.52 ms against the
approximation's 0.27 (4 nodes), Elu 3.9 ms against the plain node's
1.5 (11 nodes: Exp, Log and cheap arithmetic; computing in float64 instead costs 4.8 ms);
HardSigmoid 0.33 ms against 0.10 (3 nodes) and HardSwish 0.47 against 0.23 (4 nodes). float16 and
bfloat16 are computed in float32 and rounded once.

onnxnn's kernels compute them the same way (kernels/elementwise.py); float64 Elu, Selu, Celu and the
hard ones take decompositions (nn/functional/_activation.py). Exports keep the standard nodes, as
``torch.onnx.export`` writes them: a model served by plain onnxruntime gets its formulas
(docs/differences.md). A float64 HardSigmoid or HardSwish node (an imported model's) is written in
these forms in sessions and exports alike, since onnxruntime has no float64 kernel for them.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.registry import (
    decompositions,
    session_lowerings,
    size_blind_session_lowerings,
    value_blind_decompositions,
)
from .nn_ops import is_pytorchs_hard_sigmoid
from .opmath import REDUCED_FLOATS

__all__ = ["FormBuilder", "exact_sigmoid"]

# The dtype each form computes in: float16 and bfloat16 in float32, rounded once (PyTorch's "opmath").
_COMPUTED_IN = {dtypes.float32: dtypes.float32}
_COMPUTED_IN.update({dtype: dtypes.float32 for dtype in REDUCED_FLOATS})
_COMPUTED_IN_WITH_FLOAT64 = {**_COMPUTED_IN, dtypes.float64: dtypes.float64}

_SELU_ALPHA = 1.67326319217681884765625  # ONNX's defaults (float32 attributes)
_SELU_GAMMA = 1.05070102214813232421875


class FormBuilder:
    """Collects nodes and scalar constants of one lowering (or decomposition), in the dtype it computes in."""

    def __init__(self, fresh_name, computed):
        self.fresh_name, self.computed = fresh_name, computed
        self.nodes: list = []
        self.constants: list = []

    def constant(self, value: float) -> str:
        name = self.fresh_name("constant")
        self.constants.append(numpy_helper.from_array(np.array(value, self.computed.numpy_dtype), name))
        return name

    def op(self, op_type: str, *inputs: str, output: str | None = None, **attrs) -> str:
        output = output or self.fresh_name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=self.fresh_name(op_type), **attrs))
        return output


def _lowering(form, computed_in: dict = _COMPUTED_IN):
    """A lowering computing ``form(builder, x) -> name`` in the dtype ``computed_in`` maps the input's to
    (the half dtypes widened and rounded once); dtypes it does not map keep the node."""

    def lower(node, input_names: list, output_names: list, fresh_name, embedded=None):
        dtype = node.inputs[0].dtype
        computed = computed_in.get(dtype)
        if computed is None:
            return None
        build = FormBuilder(fresh_name, computed)
        x = input_names[0]
        if computed is not dtype:
            x = build.op("Cast", x, to=computed.onnx_type)
        result = form(build, x, node.attrs or {})
        if result is None:
            return None
        if computed is not dtype:
            result = build.op("Cast", result, to=dtype.onnx_type)
        # Each form's result is its last node's output: that node writes the node's output instead.
        assert build.nodes[-1].output[0] == result
        build.nodes[-1].output[0] = output_names[0]
        return build.nodes, build.constants

    return lower


def _expm1(build: FormBuilder, x: str) -> str:
    """Kahan's ``exp(x) - 1`` for x <= 0 (any value for x > 0, which the callers do not select).

    ``u = exp(x)``: ``(u - 1) * (x / log(u))``, x itself where u rounds to 1 (-0 stays -0: x is
    Where's second branch, whose zeros onnxruntime keeps the sign of). Where u is 0 (x below -103),
    ``x / log(u)`` is 0 and the result -0: the callers clamp x first.
    """
    one = build.constant(1.0)
    u = build.op("Exp", x)
    ratio = build.op("Div", x, build.op("Log", u))
    kahan = build.op("Mul", build.op("Sub", u, one), ratio)
    return build.op("Where", build.op("Less", u, one), kahan, x)


def _exponential_linear(build: FormBuilder, x: str, input_scale: float, negative_scale: float, positive_scale: float):
    """``x * positive_scale`` for x > 0, else ``negative_scale * expm1(x * input_scale)`` (PyTorch's elu kernel)."""
    # x >= -87: exp stays normal (expm1 is -1 in float32 from -17.4 on); a NaN stays NaN (Max propagates it).
    scaled = x if input_scale == 1.0 else build.op("Mul", x, build.constant(input_scale))
    clamped = build.op("Max", scaled, build.constant(-87.0))
    negative = _expm1(build, clamped)
    if negative_scale != 1.0:
        negative = build.op("Mul", negative, build.constant(negative_scale))
    positive = x if positive_scale == 1.0 else build.op("Mul", x, build.constant(positive_scale))
    return build.op("Where", build.op("Greater", x, build.constant(0.0)), positive, negative)


def exact_sigmoid(build: FormBuilder, x: str) -> str:
    """PyTorch's sigmoid, ``1 / (1 + exp(-x))``, as nodes: what onnxnn's sessions run for a Sigmoid."""
    return build.op("Reciprocal", build.op("Add", build.op("Exp", build.op("Neg", x)), build.constant(1.0)))


session_lowerings.register("Sigmoid")(
    _lowering(lambda build, x, attrs: exact_sigmoid(build, x), _COMPUTED_IN_WITH_FLOAT64)
)


@session_lowerings.register("Elu")
@_lowering
def _elu(build, x, attrs):
    return _exponential_linear(build, x, 1.0, float(attrs.get("alpha", 1.0)), 1.0)


@session_lowerings.register("Selu")
@_lowering
def _selu(build, x, attrs):
    alpha, gamma = float(attrs.get("alpha", _SELU_ALPHA)), float(attrs.get("gamma", _SELU_GAMMA))
    return _exponential_linear(build, x, 1.0, alpha * gamma, gamma)


@session_lowerings.register("Celu")
@_lowering
def _celu(build, x, attrs):
    alpha = float(attrs.get("alpha", 1.0))
    return _exponential_linear(build, x, 1.0 / alpha, alpha, 1.0)


def _clamped_shift(build: FormBuilder, x: str) -> str:
    """``clamp(x + 3, 0, 6)``: x + 3 is exact where the result is near 0 (Sterbenz)."""
    return build.op("Clip", build.op("Add", x, build.constant(3.0)), build.constant(0.0), build.constant(6.0))


def _hard_sigmoid(build, x, attrs):
    if not is_pytorchs_hard_sigmoid(attrs):
        return None
    return build.op("Div", _clamped_shift(build, x), build.constant(6.0))


def _hard_swish(build, x, attrs):
    # x times hardsigmoid's value (PyTorch: x * clamp / 6, which overflows from 5.7e37): one rounding more.
    return build.op("Mul", x, build.op("Div", _clamped_shift(build, x), build.constant(6.0)))


def _any_hard_sigmoid(build, x, attrs):
    """PyTorch's form for its attributes, else ONNX's ``clamp(alpha x + beta, 0, 1)``."""
    pytorchs = _hard_sigmoid(build, x, attrs)
    if pytorchs is not None:
        return pytorchs
    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    shifted = build.op("Add", build.op("Mul", x, build.constant(alpha)), build.constant(beta))
    return build.op("Clip", shifted, build.constant(0.0), build.constant(1.0))


session_lowerings.register("HardSigmoid")(_lowering(_hard_sigmoid))
session_lowerings.register("HardSwish")(_lowering(_hard_swish))
# onnxruntime has no float64 HardSigmoid or HardSwish kernel (1.31): a float64 node (an imported
# model's; onnxnn's own float64 hardsigmoid records these forms itself) is written in them, in
# sessions and exports. The gradient stays the node's rule (the attribute's alpha, as PyTorch's
# float32 one sixth), and onnxnn's kernels run the node.
_FLOAT64_ONLY = {dtypes.float64: dtypes.float64}
decompositions.register("HardSigmoid")(_lowering(_any_hard_sigmoid, _FLOAT64_ONLY))
decompositions.register("HardSwish")(_lowering(_hard_swish, _FLOAT64_ONLY))
value_blind_decompositions.mark("HardSigmoid", "HardSwish")


for _op_type in ("Sigmoid", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish"):
    size_blind_session_lowerings.mark(_op_type)
