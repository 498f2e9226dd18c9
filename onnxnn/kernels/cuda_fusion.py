"""Elementwise fusion on CUDA: a chain of elementwise nodes becomes one kernel that CuPy generates.

On a GPU each elementwise node of a plan is a kernel launch and a pass over memory: GELU's tanh
form is eight of each, and a training step's gradient adds as many again. A group of elementwise
nodes whose intermediates nothing outside the group reads computes per element in registers
instead: one launch, one read of each input, one write (``cupy.ElementwiseKernel``, compiled by
NVRTC once per source and cached by CuPy, in memory and on disk).

``EXPRESSIONS`` holds one C expression builder per op (found by ``(domain, op_type)``, like every
other per-op concern): ``build(operands, attrs, types)`` returns the node's value as a C expression
of its operands' expressions, or None where the node's attributes take it out of fusion. The
expressions compute what the numpy formulas of the op's kernel compute (the same IEEE operations;
transcendental functions from CUDA's math library, as CuPy's own ufuncs call them), and
contraction into fused multiply-adds is off (``--fmad=false``), so a sum of products rounds once
per operation, as the unfused kernels do.

``fusion_groups`` decides what fuses, from the plan's wiring alone: float32, float64 and bool
values (float16 and bfloat16 round after every op, which one kernel would not), one output per
node, groups grown from a root node through producers whose every reader is in the group and
whose value is no plan output. A group of one node fuses only where the op's kernel makes
several passes (Sigmoid's stable form is five). Size-one float constants the plan holds become
literals in the source.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..ir.caches import WeightedCache, register_cache
from ..ir.domains import ONNXNN_DOMAIN
from .elementwise import UNARY_UFUNCS

__all__ = ["EXPRESSIONS", "FusibleOp", "FusedElementwise", "fusion_groups", "fused_kernel", "C_TYPES"]

C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.bool_): "bool"}
_PARAMETER_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.bool_): "bool"}
# Each generated kernel is compiled without contracting a * b + c into one rounding.
COMPILE_OPTIONS = ("--fmad=false",)


class Types(NamedTuple):
    """The C types a node's expression is written in: ``value``, its float inputs' (or bool's), and
    ``result``, its output's."""

    value: str
    result: str


class FusibleOp(NamedTuple):
    """An op's entry in ``EXPRESSIONS``.

    ``build(operands, attrs, types)``: the C expression (operands: the inputs' expressions, None for
    an omitted optional input). ``alone``: whether one such node is worth a kernel of its own (its
    kernel makes several passes). ``converts``: its inputs and output may have different float types
    (Cast); elsewhere the float inputs share the output's type, or the output is bool.
    """

    build: Callable
    alone: bool = False
    converts: bool = False


EXPRESSIONS: dict[tuple[str, str], FusibleOp] = {}


def _fusible(*op_types: str, domain: str = "", alone: bool = False, converts: bool = False):
    def register(build: Callable) -> Callable:
        for op_type in op_types:
            EXPRESSIONS[(domain, op_type)] = FusibleOp(build, alone, converts)
        return build

    return register


def literal(value: float, ctype: str) -> str:
    """A C literal of ``ctype`` holding ``value`` exactly (a float32 value's decimal is exact as a double)."""
    if ctype == "bool":
        return "true" if value else "false"
    return f"(({ctype}){float(value)!r})"


def _maximum(a: str, b: str) -> str:
    # numpy's maximum: a NaN in either operand wins; of two equal values (0 and -0) the second.
    return f"(({a} > {b} || {a} != {a}) ? {a} : {b})"


def _minimum(a: str, b: str) -> str:
    return f"(({a} < {b} || {a} != {a}) ? {a} : {b})"


def _sign(x: str, ctype: str) -> str:
    return f"(({ctype})(({x} > 0) - ({x} < 0)))"


for _op_type, _operator in [("Add", "+"), ("Sub", "-"), ("Mul", "*"), ("Div", "/")]:
    _fusible(_op_type)(lambda operands, attrs, types, _operator=_operator: f"({operands[0]} {_operator} {operands[1]})")

for _op_type, _operator in [
    ("Equal", "=="),
    ("Less", "<"),
    ("Greater", ">"),
    ("LessOrEqual", "<="),
    ("GreaterOrEqual", ">="),
    ("And", "&&"),
    ("Or", "||"),
    ("Xor", "!="),
]:
    _fusible(_op_type)(lambda operands, attrs, types, _operator=_operator: f"({operands[0]} {_operator} {operands[1]})")

# C's math functions are numpy's ufuncs but for the inverse functions' prefix (arcsin: asin).
for _op_type, _function in [
    *[(op_type, ufunc.replace("arc", "a", 1)) for op_type, ufunc in UNARY_UFUNCS],
    ("Abs", "fabs"),
    ("Erf", "erf"),
]:
    _fusible(_op_type)(lambda operands, attrs, types, _function=_function: f"{_function}({operands[0]})")


@_fusible("Neg")
def _negative(operands, attrs, types):
    return f"(-{operands[0]})"


@_fusible("Not")
def _not(operands, attrs, types):
    return f"(!{operands[0]})"


@_fusible("Identity")
def _identity(operands, attrs, types):
    return operands[0]


@_fusible("Reciprocal")
def _reciprocal(operands, attrs, types):
    return f"({literal(1, types.value)} / {operands[0]})"


@_fusible("Sign", alone=True)
def _sign_op(operands, attrs, types):
    x = operands[0]
    return f"({x} != {x} ? {x} : {_sign(x, types.value)})"


@_fusible("Relu")
def _relu(operands, attrs, types):
    return _maximum(operands[0], literal(0, types.value))


@_fusible("Pow")
def _power(operands, attrs, types):
    return f"pow({operands[0]}, {operands[1]})"


@_fusible("Where")
def _where(operands, attrs, types):
    return f"({operands[0]} ? {operands[1]} : {operands[2]})"


def _folded(combine: Callable) -> Callable:
    def build(operands, attrs, types):
        result = operands[0]
        for other in operands[1:]:
            result = combine(result, other)
        return result

    return build


_fusible("Max")(_folded(_maximum))
_fusible("Min")(_folded(_minimum))
_fusible("Sum")(_folded(lambda a, b: f"({a} + {b})"))


@_fusible("Mean")
def _mean(operands, attrs, types):
    return f"({_folded(lambda a, b: f'({a} + {b})')(operands, attrs, types)} / {literal(len(operands), types.value)})"


@_fusible("Sigmoid", alone=True)
def _sigmoid(operands, attrs, types):
    # The kernel's stable form: exp of -|x| never overflows, and both branches share it.
    x, one = operands[0], literal(1, types.value)
    exponential = f"exp(-fabs({x}))"
    return f"({x} >= 0 ? {one} / ({one} + {exponential}) : {exponential} / ({one} + {exponential}))"


def _softplus_of(x: str, ctype: str) -> str:
    # logaddexp(0, x): max(x, 0) + log1p(exp(-|x|)), NaN passing through.
    return f"({_maximum(x, literal(0, ctype))} + log1p(exp(-fabs({x}))))"


@_fusible("Softplus", alone=True)
def _softplus(operands, attrs, types):
    return _softplus_of(operands[0], types.value)


@_fusible("Mish", alone=True)
def _mish(operands, attrs, types):
    return f"({operands[0]} * tanh({_softplus_of(operands[0], types.value)}))"


@_fusible("Softsign", alone=True)
def _softsign(operands, attrs, types):
    x = operands[0]
    return f"({x} / ({literal(1, types.value)} + fabs({x})))"


@_fusible("LeakyRelu", alone=True)
def _leaky_relu(operands, attrs, types):
    x = operands[0]
    return f"({x} >= 0 ? {x} : {x} * {literal(attrs.get('alpha', 0.01), types.value)})"


@_fusible("Elu", alone=True)
def _elu(operands, attrs, types):
    x = operands[0]
    return f"({x} > 0 ? {x} : expm1({x}) * {literal(attrs.get('alpha', 1.0), types.value)})"


@_fusible("ThresholdedRelu", alone=True)
def _thresholded_relu(operands, attrs, types):
    x = operands[0]
    alpha = literal(attrs.get("alpha", 1.0), types.value)
    return f"({x} > {alpha} ? {x} : {literal(0, types.value)})"


@_fusible("PRelu", alone=True)
def _prelu(operands, attrs, types):
    x, slope = operands
    return f"({x} < 0 ? {x} * {slope} : {x})"


def _clamped(x: str, low: str | None, high: str | None) -> str:
    # ONNX applies the lower bound first: where low > high, every element becomes high.
    if low is not None:
        x = _maximum(x, low)
    if high is not None:
        x = _minimum(x, high)
    return x


@_fusible("Clip", alone=True)
def _clip(operands, attrs, types):
    low = operands[1] if len(operands) > 1 else None
    high = operands[2] if len(operands) > 2 else None
    if low is None and "min" in attrs:
        low = literal(attrs["min"], types.value)
    if high is None and "max" in attrs:
        high = literal(attrs["max"], types.value)
    return _clamped(operands[0], low, high)


_fusible("Hardtanh", domain=ONNXNN_DOMAIN, alone=True)(lambda operands, attrs, types: _clamped(*operands))


@_fusible("Cast", converts=True)
def _cast(operands, attrs, types):
    if types.result == "bool":
        return f"({operands[0]} != 0)"
    return f"(({types.result}){operands[0]})"


@_fusible("ReluGradient", domain=ONNXNN_DOMAIN, alone=True)
def _relu_gradient(operands, attrs, types):
    # The gradient passes where the output is above 0 (a NaN output passes it too).
    gradient, output = operands
    return f"({output} <= 0 ? {literal(0, types.value)} : {gradient})"


@_fusible("HardtanhGradient", domain=ONNXNN_DOMAIN, alone=True)
def _hardtanh_gradient(operands, attrs, types):
    gradient, output, low, high = operands
    return f"(({output} <= {low} || {output} >= {high}) ? {literal(0, types.value)} : {gradient})"


@_fusible("AbsGradient", domain=ONNXNN_DOMAIN, alone=True)
def _abs_gradient(operands, attrs, types):
    gradient, x = operands
    return f"({gradient} * ({x} != {x} ? {literal(0, types.value)} : {_sign(x, types.value)}))"


# ---------------------------------------------------------------- what fuses


class NodeView(NamedTuple):
    """What ``fusion_groups`` reads of one step: its op, attributes, input slots and dtypes (None for
    an omitted input), and its output slots and dtypes (the outputs something reads)."""

    domain: str
    op_type: str
    attrs: dict
    input_slots: tuple
    input_dtypes: tuple
    output_slots: tuple
    output_dtypes: tuple


def _types(view: NodeView) -> Types | None:
    """The C types of a node's expression, or None where the node cannot fuse (an output nothing reads
    or several, a dtype outside float32/float64/bool, float inputs of another type than the output's)."""
    entry = EXPRESSIONS.get((view.domain, view.op_type))
    if entry is None or len(view.output_slots) != 1:
        return None
    result = view.output_dtypes[0]
    if result not in C_TYPES or any(dtype is not None and dtype not in C_TYPES for dtype in view.input_dtypes):
        return None
    floats = {dtype for dtype in view.input_dtypes if dtype is not None and dtype.kind == "f"}
    if entry.converts:
        value = next(iter(floats)) if len(floats) == 1 else result
        return Types(C_TYPES[value], C_TYPES[result])
    if result.kind == "f":
        if floats - {result}:
            return None  # mixed float types: the kernel converts first, which the expression would not
        return Types(C_TYPES[result], C_TYPES[result])
    if len(floats) > 1:
        return None
    return Types(C_TYPES[next(iter(floats))] if floats else "bool", "bool")


def fusion_groups(views: list, kept_slots: set) -> list[list[int]]:
    """The groups of steps that fuse, each its members' step indices in order (the last one is the
    root, whose output the group computes).

    Args:
        views: one ``NodeView`` per step, in the plan's (topological) order.
        kept_slots: slots whose values leave the plan (its outputs): never internal to a group.
    """
    producer = {}
    readers: dict[int, set] = {}
    for index, view in enumerate(views):
        for slot in view.output_slots:
            producer[slot] = index
        for slot in view.input_slots:
            if slot:
                readers.setdefault(slot, set()).add(index)
    types = [_types(view) for view in views]
    grouped: set = set()
    groups = []
    for root in range(len(views) - 1, -1, -1):
        if root in grouped or types[root] is None:
            continue
        members = {root}
        pending = [root]
        while pending:
            for slot in views[pending.pop()].input_slots:
                source = producer.get(slot)
                if (
                    source is None
                    or source in members
                    or source in grouped
                    or types[source] is None
                    or slot in kept_slots
                    or not readers[slot] <= members
                ):
                    continue
                members.add(source)
                pending.append(source)
        view = views[root]
        if len(members) > 1 or EXPRESSIONS[(view.domain, view.op_type)].alone:
            grouped |= members
            groups.append(sorted(members))
    return sorted(groups, key=lambda group: group[-1])


# ---------------------------------------------------------------- the generated kernel


class FusedElementwise:
    """A fused group as a kernel of the executor: ``fused(xp, inputs, attrs) -> [output]``.

    ``inputs`` are the group's array inputs in ``input_slots`` order. The output has the recorded
    shape, or, for a plan compiled for every size, the broadcast of the inputs' shapes and of the
    literal constants' (a size-one constant may add leading axes).
    """

    __slots__ = ("kernel", "dtype", "shape", "constant_shapes", "source", "__name__")

    def __init__(self, kernel, dtype: np.dtype, shape: tuple | None, constant_shapes: tuple, source: str, name: str):
        self.kernel = kernel
        self.dtype = dtype
        self.shape = shape
        self.constant_shapes = constant_shapes
        self.source = source
        self.__name__ = name

    def __call__(self, xp, inputs, attrs):
        shape = self.shape
        if shape is None:
            shape = np.broadcast_shapes(*(array.shape for array in inputs), *self.constant_shapes)
        out = xp.empty(shape, self.dtype)
        self.kernel(*inputs, out)
        return [out]


# Generated kernels by source, least recently used dropped first: a program whose structures keep
# changing must not keep every kernel it ever made (CuPy keeps the compiled binaries on disk).
_KERNELS = WeightedCache(capacity=1024, budget=1 << 22)  # entries; characters of source
register_cache("fused CUDA kernels", _KERNELS.clear)


def fused_kernel(cupy, views: list, group: list, constants: dict, output_shape: tuple | None) -> tuple:
    """The fused kernel of one group and the slots it reads, in its inputs' order.

    Args:
        cupy: the CuPy module.
        views: every step's ``NodeView``.
        group: the group's step indices (``fusion_groups``), the root last.
        constants: slot -> (host value, shape) of the size-one constants written as literals.
        output_shape: the root output's recorded shape (None: computed per call).

    Returns:
        (FusedElementwise, input slots)
    """
    expressions: dict = {}
    input_slots: list = []
    parameters: list = []
    constant_shapes: list = []
    lines: list = []
    root = group[-1]
    for index in group:
        view = views[index]
        types = _types(view)
        if types is None:
            raise ValueError(
                f"fused_kernel: node {index} ({view.op_type}) cannot be fused (fusion_groups admits none such)"
            )
        operands: list[str | None] = []
        for slot, dtype in zip(view.input_slots, view.input_dtypes):
            if dtype is None:
                operands.append(None)
                continue
            expression = expressions.get(slot)
            if expression is None:
                if slot in constants:
                    value, shape = constants[slot]
                    expression = literal(value, C_TYPES[dtype])
                    constant_shapes.append(shape)
                else:
                    expression = f"in{len(input_slots)}"
                    input_slots.append(slot)
                    parameters.append(f"{_PARAMETER_TYPES[dtype]} {expression}")
                expressions[slot] = expression
            operands.append(expression)
        while operands and operands[-1] is None:
            operands.pop()
        value = EXPRESSIONS[(view.domain, view.op_type)].build(operands, view.attrs, types)
        if index == root:
            lines.append(f"result = {value};")
        else:
            name = f"t{len(lines)}"
            lines.append(f"const {types.result} {name} = {value};")
            expressions[view.output_slots[0]] = name
    dtype = views[root].output_dtypes[0]
    in_params = ", ".join(parameters)
    out_params = f"{_PARAMETER_TYPES[dtype]} result"
    source = "\n".join(lines)
    name = "onnxnn_fused_" + "_".join(views[index].op_type.lower() for index in group)[:80]
    key = (in_params, out_params, source)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = cupy.ElementwiseKernel(in_params, out_params, source, name, options=COMPILE_OPTIONS)
        _KERNELS.put(key, kernel, len(source))
    else:
        _KERNELS.move_to_end(key)
    fused = FusedElementwise(kernel, dtype, output_shape, tuple(constant_shapes), source, name)
    return fused, tuple(input_slots)
