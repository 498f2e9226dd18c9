"""The float64 forms of the unary ops onnxruntime lacks: Acos, Acosh, Asin, Asinh, Atan, Atanh, Cosh,
Erf, Sinh and Tan written as standard ONNX arithmetic.

onnxruntime's CPU provider has no float64 kernel for these ten (checked with single-node models
against 1.31), so a float64 ``atan`` could not run on the onnxruntime executor, "auto" sent a whole
plan holding one to onnxnn's kernels, and an exported float64 model holding one could not be
served. onnxnn records the standard op (its kernels, and float32 and float16 sessions, run it as it
is) and, for float64 inputs only, writes it in sessions and exports as ops onnxruntime runs in
double: Exp, Log, Sqrt, Sin, Cos, Add, Sub, Mul, Div, Abs, Neg, Sign, Min, Round, Floor, Less,
Greater, Cast and Where. Gradients are unchanged: the rules differentiate the recorded op, and the
ops they record (Cosh for Sinh, Exp for Erf) are written the same way.

Each form is within 3 ulps of the exact values over the whole domain (measured on dense grids
against numpy and 120-bit mpmath), with numpy's results at the special values: signed zeros, infinities, NaN, and
NaN outside the domain. Branches whose unused values may overflow or be NaN are selected with
Where; branch flags that several terms share become 0/1 factors of finite values. An odd
function is its value at ``|x|`` times the sign of ``x + 1 / x`` (-1 at -0 and at -inf): a
product keeps the sign of a zero, where onnxruntime's Where returns +0 for a -0 it selects from
its second input (1.31).

- ``log1p(v) = log(u) - ((u - 1) - v) / u`` with ``u = 1 + v`` (Asinh, Acosh, Atanh): the difference
  is the rounding error of ``u``, exactly, so tiny ``v`` keep their relative accuracy.
- Sinh is Cephes' ``a + a^3 P(a^2) / Q(a^2)`` below 1, ``(e^a - e^-a) / 2`` above (cancelling at
  most a factor coth(1) = 1.3); Cosh is ``(e^a + e^-a) / 2`` everywhere. Beyond ``a = 700``, where
  ``e^a`` nears overflow and the result need not, ``e^a / 2 = e^(a - 695) * (e^695 / 2)``.
- Asinh is ``log1p(a + a^2 / (1 + sqrt(1 + a^2)))``, Acosh ``log1p(t + sqrt(t (t + 2)))`` with
  ``t = x - 1`` exact near 1, both ``log(2x)`` from ``2^60`` on; Atanh is ``log1p(2a / (1 - a)) / 2``.
- Atan is Cephes': reduction to ``|t| <= 0.66`` (``k pi/4`` added back, its low bits too), then
  ``t + t^3 P(t^2) / Q(t^2)``. Asin is ``atan(x / sqrt((1 - x)(1 + x)))`` and Acos
  ``2 atan(sqrt((1 - x) / (1 + x)))``, both exact in their differences near +-1.
- Tan reduces ``x`` by the nearest multiple ``n pi/2`` with pi/2 in four parts (fdlibm's medium
  reduction, its two subtractions compensated exactly), so the reduced argument keeps its relative
  accuracy next to a zero or a pole, then takes Cephes' ``z + z^3 P(z^2) / Q(z^2)`` (``-1 / that`` for
  odd ``n``). Beyond ``|x| = 2^20 pi/2`` the products ``n p_i`` stop being exact and ``sin(x) / cos(x)``
  of onnxruntime's own kernels takes over (8 ulps there, measured).
- Erf is Cephes' ``a T(a^2) / U(a^2)`` up to ``a = 1``, then ``1 - erfc(a)`` with erfc's rational
  approximation times ``e^(-a^2)``, saturating to +-1 from ``a = 6`` (erfc(6) is below 2^-54).

The same reduction serves float64 Sin and Cos in onnxnn's own sessions (a session lowering; exports
keep the plain nodes). onnxruntime has double kernels for them, but they reduce the argument with an
absolute error of about 4e-16 (1.31): ``sin(pi)`` was 0 and cos up to 1e5 ulps off near its zeros
on 1 < |x| < 20. The lowering takes Cephes' ``z + z^3 S(z^2)`` or ``1 - z^2/2 + z^4 C(z^2)`` (the
first subtraction compensated) by the quadrant, its sign by ``n mod 4``, and onnxruntime's kernel
beyond ``2^20 pi/2``: within 1.5 ulps on a dense grid of [-1e6, 1e6] and at the doubles nearest
``k pi/2``, for 4.5 times the plain node's time (37 against 8.3 ms for 1e6 elements, one thread).

Each form is 11 (Cosh) to 65 (Erf) elementwise nodes, so on large tensors it takes 10 to 40 times
the time of numpy's one-pass function: it makes these ops run and serve on onnxruntime, not faster.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.registry import (
    decompositions,
    session_lowerings,
    size_blind_session_lowerings,
    value_blind_decompositions,
)

__all__: list[str] = []

OP_TYPES = ("Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cosh", "Erf", "Sinh", "Tan")

_LN2 = math.log(2.0)


class _Value:
    """A float64 (or bool) value of the graph being written; arithmetic on it emits ONNX nodes."""

    __slots__ = ("graph", "name")

    def __init__(self, graph: _Graph, name: str):
        self.graph = graph
        self.name = name

    def _binary(self, op_type: str, other, reflected: bool = False) -> _Value:
        operand = self.graph.operand(other)
        return (
            self.graph.node(op_type, operand, self.name) if reflected else self.graph.node(op_type, self.name, operand)
        )

    def __add__(self, other) -> _Value:
        return self._binary("Add", other)

    def __radd__(self, other) -> _Value:
        return self._binary("Add", other, reflected=True)

    def __sub__(self, other) -> _Value:
        return self._binary("Sub", other)

    def __rsub__(self, other) -> _Value:
        return self._binary("Sub", other, reflected=True)

    def __mul__(self, other) -> _Value:
        return self._binary("Mul", other)

    def __rmul__(self, other) -> _Value:
        return self._binary("Mul", other, reflected=True)

    def __truediv__(self, other) -> _Value:
        return self._binary("Div", other)

    def __rtruediv__(self, other) -> _Value:
        return self._binary("Div", other, reflected=True)

    def __neg__(self) -> _Value:
        return self.graph.node("Neg", self.name)

    def __lt__(self, other) -> _Value:
        return self._binary("Less", other)

    def __gt__(self, other) -> _Value:
        return self._binary("Greater", other)

    def minimum(self, other) -> _Value:
        return self._binary("Min", other)  # NaN where either is NaN (onnxruntime's Min, as numpy's)

    def sign(self) -> _Value:
        return self.graph.node("Sign", self.name)

    def abs(self) -> _Value:
        return self.graph.node("Abs", self.name)

    def sqrt(self) -> _Value:
        return self.graph.node("Sqrt", self.name)

    def exp(self) -> _Value:
        return self.graph.node("Exp", self.name)

    def log(self) -> _Value:
        return self.graph.node("Log", self.name)

    def sin(self) -> _Value:
        return self.graph.node("Sin", self.name)

    def cos(self) -> _Value:
        return self.graph.node("Cos", self.name)

    def round(self) -> _Value:
        return self.graph.node("Round", self.name)

    def floor(self) -> _Value:
        return self.graph.node("Floor", self.name)


class _Graph:
    """The nodes and float64 scalar constants of one decomposition (each constant written once)."""

    def __init__(self, fresh_name):
        self.fresh_name = fresh_name
        self.nodes: list = []
        self.initializers: list = []
        self._constants: dict[str, str] = {}

    def node(self, op_type: str, *inputs: str, **attributes) -> _Value:
        output = self.fresh_name(op_type)
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=self.fresh_name(op_type), **attributes)
        )
        return _Value(self, output)

    def operand(self, value) -> str:
        """The name of a value, or of a float64 constant holding a Python number."""
        if isinstance(value, _Value):
            return value.name
        key = float(value).hex()  # tells -0.0 from 0.0
        if key not in self._constants:
            name = self._constants[key] = self.fresh_name("constant")
            self.initializers.append(numpy_helper.from_array(np.array(value, np.float64), name))
        return self._constants[key]

    def finish(self, result: _Value, output: str) -> tuple[list, list]:
        """The nodes and initializers, the node computing ``result`` writing ``output`` instead."""
        for onnx_node in self.nodes:
            for position, name in enumerate(onnx_node.output):
                if name == result.name:
                    onnx_node.output[position] = output
            for position, name in enumerate(onnx_node.input):
                if name == result.name:
                    onnx_node.input[position] = output
        return self.nodes, self.initializers


def _where(condition: _Value, when_true, when_false) -> _Value:
    graph = condition.graph
    return graph.node("Where", condition.name, graph.operand(when_true), graph.operand(when_false))


def _flag(condition: _Value) -> _Value:
    """1.0 where ``condition`` holds, else 0.0: a factor selecting among finite values."""
    return condition.graph.node("Cast", condition.name, to=dtypes.float64.onnx_type)


def _polynomial(x: _Value, coefficients: tuple) -> _Value:
    """``c[0] x^n + ... + c[n]`` by Horner's rule."""
    result = x * coefficients[0] + coefficients[1]
    for coefficient in coefficients[2:]:
        result = result * x + coefficient
    return result


def _monic(x: _Value, coefficients: tuple) -> _Value:
    """``x^n + c[0] x^(n-1) + ... + c[n-1]`` by Horner's rule."""
    result = x + coefficients[0]
    for coefficient in coefficients[1:]:
        result = result * x + coefficient
    return result


def _odd(x: _Value, at_magnitude: _Value) -> _Value:
    """An odd function of ``x`` from its value at ``|x|``: that times the sign of ``x + 1 / x``, which
    is x's at -0 (-inf) and at -inf too; a product keeps the sign of a zero result, a Where does not."""
    return at_magnitude * (x + 1.0 / x).sign()


def _log1p(v: _Value) -> _Value:
    """``log(1 + v)`` for ``v >= 0`` (NaN below -1): ``log(u) - ((u - 1) - v) / u`` with ``u = 1 + v``.

    ``u - 1`` and its difference from ``v`` are exact, so the second term is the rounding error of
    ``u`` (divided by ``u``, its effect on the logarithm): tiny ``v`` keep their relative accuracy
    (``u = 1`` gives ``v``). The correction is taken at ``min(v, 2^60)``, where it is 0 already, so
    that ``v = inf`` gives inf.
    """
    bounded = v.minimum(2.0**60)
    u = 1.0 + bounded
    return (1.0 + v).log() - ((u - 1.0) - bounded) / u


# ---------------------------------------------------------------- hyperbolic functions

# e^a nears overflow at 709.78 where cosh and sinh need not: beyond _EXP_SPLIT, e^a / 2 is
# e^(a - 695) times e^695 / 2 (a - 695 is exact there; the constant rounds to within 0.007 ulp).
_EXP_SPLIT = 700.0
_HALF_E_695 = 3.4169209147890054e301
# Cephes' sinh: a + a^3 P(a^2) / Q(a^2) for a <= 1.
_SINH_P = (
    -7.89474443963537015605e-1,
    -1.63725857525983828727e2,
    -1.15614435765005216044e4,
    -3.51754964808151394800e5,
)
_SINH_Q = (-2.77711081420602794433e2, 3.61578279834431989373e4, -2.11052978884890840399e6)


def _half_exp(a: _Value) -> _Value:
    """``e^a / 2`` for ``a >= 0``, finite up to ``a = 710.47`` as the result is."""
    far = _flag(a > _EXP_SPLIT)
    return (a - far * 695.0).exp() * (far * _HALF_E_695 + 0.5)


def _sinh(x: _Value) -> _Value:
    a = x.abs()
    square = a * a
    near = a + a * square * _polynomial(square, _SINH_P) / _monic(square, _SINH_Q)
    half = _half_exp(a)
    # (e^a - e^-a) / 2: from a = 1 the difference cancels at most a factor coth(1) = 1.3.
    return _odd(x, _where(a < 1.0, near, half - 0.25 / half))


def _cosh(x: _Value) -> _Value:
    half = _half_exp(x.abs())
    return half + 0.25 / half  # a sum of positive terms: as accurate as e^a


def _asinh(x: _Value) -> _Value:
    a = x.abs()
    # asinh(a) = log1p(a + a^2 / (1 + sqrt(1 + a^2))); from 2^60 on, log(2a) = log1p(a) + log(2)
    # (a^2 would overflow from 2^512).
    far = _flag(a > 2.0**60)
    bounded = a.minimum(2.0**60)
    square = bounded * bounded
    near = square / ((square + 1.0).sqrt() + 1.0)
    return _odd(x, _log1p(a + near * (1.0 - far)) + far * _LN2)


def _acosh(x: _Value) -> _Value:
    # acosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1); NaN below 1 from sqrt(t).
    # From 2^60 on, log(2x) = log1p(x) + log(2) (t^2 would overflow from 2^512).
    t = x - 1.0
    far = _flag(x > 2.0**60)
    bounded = t.minimum(2.0**60)
    near = bounded + bounded.sqrt() * (bounded + 2.0).sqrt()
    return _log1p(near * (1.0 - far) + x * far) + far * _LN2


def _atanh(x: _Value) -> _Value:
    a = x.abs()
    # atanh(a) = log1p(2a / (1 - a)) / 2: inf at 1, NaN beyond (a negative ratio below -1).
    return _odd(x, _log1p((a + a) / (1.0 - a)) * 0.5)


# ---------------------------------------------------------------- inverse trigonometric functions

_TAN_3PI_8 = 2.414213562373095
_PI_4 = math.pi / 4
_PI_4_LOW = 3.061616997868383e-17  # pi/4 - float64(pi/4)
# Cephes' atan: t + t^3 P(t^2) / Q(t^2) for |t| <= 0.66.
_ATAN_P = (
    -8.750608600031904122785e-1,
    -1.615753718733365076637e1,
    -7.500855792314704667340e1,
    -1.228866684490136173410e2,
    -6.485021904942025371773e1,
)
_ATAN_Q = (
    2.485846490142306297962e1,
    1.650270098316988542046e2,
    4.328810604912902668951e2,
    4.853903996359136964868e2,
    1.945506571482613964425e2,
)


def _atan(x: _Value) -> _Value:
    return _odd(x, _atan_of_magnitude(x.abs()))


def _atan_of_magnitude(a: _Value) -> _Value:
    """``atan(a)`` for ``a >= 0`` (or NaN).

    Reduced to ``|t| <= 0.66`` by ``atan(a) = k pi/4 + atan(t)``: ``t = a`` (k = 0) up to 0.66,
    ``t = (a - 1) / (a + 1)`` (k = 1; ``a - 1`` is exact) up to ``tan(3 pi/8)``, ``t = -1 / a``
    (k = 2) beyond; one quotient ``(a g - m) / (a m + g)`` with the branch flags ``m = [a > 0.66]``,
    ``f = [a > tan(3 pi/8)]``, ``g = 1 - f``. Its numerator reads a bounded ``a``: 0 * inf is NaN.
    """
    middle = _flag(a > 0.66)
    far = _flag(a > _TAN_3PI_8)
    not_far = 1.0 - far
    bounded = a.minimum(1e300)
    t = (bounded * not_far - middle) / (a * middle + not_far)
    square = t * t
    ratio = square * _polynomial(square, _ATAN_P) / _monic(square, _ATAN_Q)
    k = middle + far
    return k * _PI_4 + ((t * ratio + t) + k * _PI_4_LOW)


def _asin(x: _Value) -> _Value:
    # 1 - x is exact for x >= 1/2 (and 1 + x for x <= -1/2): the root keeps its relative accuracy at +-1.
    return _atan(x / ((1.0 - x) * (1.0 + x)).sqrt())


def _acos(x: _Value) -> _Value:
    # acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): no pi/2 - asin(x), which cancels near 1.
    return _atan_of_magnitude(((1.0 - x) / (1.0 + x)).sqrt()) * 2.0


# ---------------------------------------------------------------- tan

# pi/2 in 33-bit parts (fdlibm's pio2_1, pio2_2, pio2_3) and the rest: n * part is exact for n <= 2^20.
_PI_2_PARTS = (1.5707963267341256, 6.077100506303966e-11, 2.0222662487111665e-21)
_PI_2_REST = 8.4784276603689e-32
_REDUCIBLE = 2.0**20 * math.pi / 2 - 1.0
# Cephes' tan: z + z^3 P(z^2) / Q(z^2) for |z| <= pi/4.
_TAN_P = (-1.30936939181383777646e4, 1.15351664838587416140e6, -1.79565251976484877988e7)
_TAN_Q = (1.36812963470692954678e4, -1.32089234440210967447e6, 2.50083801823357915839e7, -5.38695755929454629881e7)


def _two_difference(a: _Value, b: _Value) -> tuple[_Value, _Value]:
    """``(a - b, its rounding error)`` exactly (Knuth's TwoSum, whatever the magnitudes)."""
    difference = a - b
    b_part = a - difference
    a_part = difference + b_part
    return difference, (a - a_part) + (b_part - b)


def _reduce_half_pi(a: _Value) -> tuple[_Value, _Value]:
    """``(n, z)`` with ``a = n pi/2 + z``, ``n`` the nearest integer and ``|z| <= pi/4``, for
    ``0 <= a < 2^20 pi/2``: z to a rounding of itself, however close ``a`` is to a multiple of pi/2."""
    n = (a * (2 / math.pi)).round()
    head = a - n * _PI_2_PARTS[0]  # exact: n * part is exact and a is that close to it
    reduced, first_error = _two_difference(head, n * _PI_2_PARTS[1])
    reduced, second_error = _two_difference(reduced, n * _PI_2_PARTS[2])
    return n, reduced + ((first_error + second_error) - n * _PI_2_REST)


def _tan(x: _Value) -> _Value:
    a = x.abs()
    n, z = _reduce_half_pi(a)
    square = z * z
    tangent = z + z * (square * _polynomial(square, _TAN_P) / _monic(square, _TAN_Q))
    n_is_odd = (n * 0.5).floor() < n * 0.5
    near = _where(n_is_odd, -1.0 / tangent, tangent)
    return _odd(x, _where(a < _REDUCIBLE, near, a.sin() / a.cos()))


# ---------------------------------------------------------------- sin and cos (sessions only)

# Cephes' sin and cos on |z| <= pi/4: z + z^3 S(z^2) and 1 - z^2/2 + z^4 C(z^2).
_SIN_S = (
    1.58962301576546568060e-10,
    -2.50507477628578072866e-8,
    2.75573136213857245213e-6,
    -1.98412698295895385996e-4,
    8.33333333332211858878e-3,
    -1.66666666666666307295e-1,
)
_COS_C = (
    -1.13585365213876817300e-11,
    2.08757008419747316778e-9,
    -2.75573141792967388112e-7,
    2.48015872888517045348e-5,
    -1.38888888888730564116e-3,
    4.16666666666665929218e-2,
)


def _sine_of_magnitude(a: _Value, quarter_turns: float) -> _Value:
    """``sin(a + quarter_turns pi/2)`` for ``a >= 0`` (or NaN): ``+-sin z`` or ``+-cos z`` by the
    quadrant ``m = n + quarter_turns`` mod 4 of the reduced ``a = n pi/2 + z``; onnxruntime's own
    kernel beyond ``2^20 pi/2``, where the reduction stops being exact."""
    n, z = _reduce_half_pi(a)
    square = z * z
    sine = z + z * (square * _polynomial(square, _SIN_S))
    # 1 - z^2/2 plus its rounding error, exactly (1 - w is exact for w in [0.69, 1]; fdlibm's __kernel_cos).
    half_square = square * 0.5
    w = 1.0 - half_square
    cosine = w + (((1.0 - w) - half_square) + square * square * _polynomial(square, _COS_C))
    m = n + quarter_turns
    halves = (m * 0.5).floor()
    near = _where(halves < m * 0.5, cosine, sine)  # odd m: the cosine
    negative = halves - (halves * 0.5).floor() * 2.0  # 1 where m mod 4 is 2 or 3
    near = near * (1.0 - 2.0 * negative)
    far = a.cos() if quarter_turns else a.sin()
    return _where(a < _REDUCIBLE, near, far)


def _sin(x: _Value) -> _Value:
    return _odd(x, _sine_of_magnitude(x.abs(), 0.0))


def _cos(x: _Value) -> _Value:
    return _sine_of_magnitude(x.abs(), 1.0)  # cos(a) = sin(a + pi/2)


# ---------------------------------------------------------------- erf

# Cephes' erf: a T(a^2) / U(a^2) for a <= 1; erfc(a) = e^(-a^2) P(a) / Q(a) for 1 <= a < 8.
_ERF_T = (
    9.60497373987051638749e0,
    9.00260197203842689217e1,
    2.23200534594684319226e3,
    7.00332514112805075473e3,
    5.55923013010394962768e4,
)
_ERF_U = (
    3.35617141647503099647e1,
    5.21357949780152679795e2,
    4.59432382970980127987e3,
    2.26290000613890934246e4,
    4.92673942608635921086e4,
)
_ERFC_P = (
    2.46196981473530512524e-10,
    5.64189564831068821977e-1,
    7.46321056442269912687e0,
    4.86371970985681366614e1,
    1.96520832956077098242e2,
    5.26445194995477358631e2,
    9.34528527171957607540e2,
    1.02755188689515710272e3,
    5.57535335369399327526e2,
)
_ERFC_Q = (
    1.32281951154744992508e1,
    8.67072140885989742329e1,
    3.54937778887819891062e2,
    9.75708501743205489753e2,
    1.82390916687909736289e3,
    2.24633760818710981792e3,
    1.65666309194161350182e3,
    5.57535340817727675546e2,
)
_ERF_SATURATES = 6.0  # erfc(6) = 2e-17: 1 - erfc rounds to 1 from there


def _erf(x: _Value) -> _Value:
    a = x.abs()
    square = a * a
    near = a * _polynomial(square, _ERF_T) / _monic(square, _ERF_U)
    # Held at 6 beyond it (1 - erfc(6) rounds to 1), so that P(a) / Q(a) never reads inf / inf; NaN
    # stays NaN (Min keeps it).
    b = a.minimum(_ERF_SATURATES)
    erfc = (-(b * b)).exp() * _polynomial(b, _ERFC_P) / _monic(b, _ERFC_Q)
    return _odd(x, _where(a > 1.0, 1.0 - erfc, near))


_FORMULAS = {
    "Acos": _acos,
    "Acosh": _acosh,
    "Asin": _asin,
    "Asinh": _asinh,
    "Atan": _atan,
    "Atanh": _atanh,
    "Cosh": _cosh,
    "Erf": _erf,
    "Sinh": _sinh,
    "Tan": _tan,
}


@decompositions.register(*OP_TYPES)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    if node.inputs[0].dtype is not dtypes.float64:
        return None  # onnxruntime has float kernels (float16 and bfloat16 ops compute in float32)
    graph = _Graph(fresh_name)
    result = _FORMULAS[node.op_type](_Value(graph, input_names[0]))
    return graph.finish(result, output_names[0])


value_blind_decompositions.mark(*OP_TYPES)

_SESSION_FORMULAS = {"Cos": _cos, "Sin": _sin}


@session_lowerings.register(*_SESSION_FORMULAS)
def _session_lowering(node, input_names: list, output_names: list, fresh_name, embedded=None):
    """float64 Sin and Cos in onnxnn's sessions (exports keep the plain node, as PyTorch's exporter
    writes it): onnxruntime's double kernels (1.31) reduce their argument with an absolute error of
    about 4e-16, which left sin(pi) = 0 and cos near its zeros 1e5 ulps off."""
    if node.inputs[0].dtype is not dtypes.float64:
        return None  # float32 is within 1.4 ulps (measured); float16 and bfloat16 compute in float32
    graph = _Graph(fresh_name)
    result = _SESSION_FORMULAS[node.op_type](_Value(graph, input_names[0]))
    return graph.finish(result, output_names[0])


size_blind_session_lowerings.mark(*_SESSION_FORMULAS)
