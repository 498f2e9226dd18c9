"""Ops over narrow integers that onnxruntime has no kernel for, computed in int32 and cast back.

onnxruntime 1.31's CPU provider implements MatMul, Einsum, CumSum and Trilu for none of int8, uint8,
int16 and uint16, and ReduceMax, ReduceMin, ArgMax, ArgMin, Clip, Max, Min, Pad, Relu and NonZero for
some of them (single-node models, checked against 1.31; ONNX itself allows no int8 MatMul or CumSum),
so ``x @ y``, ``x.tril()``, ``x.max()`` or ``x.clamp(0, 1)`` of such tensors failed when onnxruntime
ran them, and so did an exported model. Every such node is recorded as the standard op; when a model
is built, its value inputs are cast to int32, which holds each of their values exactly, the op runs
there, and its outputs of the input's dtype are cast back. That is exact for the ops that only
select, compare or move values (max, clamp, pad, tril, argmax), and for sums and products too:
int32 arithmetic wraps modulo 2**32, and the narrowing Cast keeps the low bits, which are what the
narrow dtype's own wrapping arithmetic (PyTorch's) leaves. onnxnn's kernels run the nodes as recorded.

One table says, per op, which inputs carry the values, which outputs come back in their dtype and
which dtypes onnxruntime lacks. Where an op has a decomposition of its own (MatMul's matrix-vector
form, Clip's infinite bounds, int64 ReduceMax's exact form), that decomposition writes the widened
node. ReduceSum, ReduceProd and Pow have exact integer forms (``integer_sums.py``) that widen
themselves; Where keeps its own table (``where_widened.py``), which covers bool as well.
"""

from __future__ import annotations

from typing import NamedTuple

from onnx import helper

from ...ir import dtypes
from ...ir.model_building import onnx_attribute_value
from ...ir.registry import decompositions, value_blind_decompositions
from . import clip_bounds, linalg  # noqa: F401  (their MatMul and Clip decompositions are wrapped here)
from .integer_sums import WIDE_DTYPE  # its ReduceMax/ReduceMin decomposition too
from .training import node_emitter

__all__: list[str] = []

_ALL_NARROW = frozenset({dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16})
_SIXTEEN_BITS = frozenset({dtypes.int16, dtypes.uint16})


class _Widening(NamedTuple):
    """What of an op is widened: the inputs holding values, the outputs of their dtype, the dtypes lacked."""

    values: tuple[int, ...] | None  # input positions; None: every input (a variadic Max or Einsum)
    outputs: tuple[int, ...]  # output positions cast back to the narrow dtype
    lacked: frozenset


# The dtypes each op lacks on onnxruntime's CPU provider (1.31).
_WIDENED: dict[str, _Widening] = {
    "MatMul": _Widening((0, 1), (0,), _ALL_NARROW),
    "Einsum": _Widening(None, (0,), _ALL_NARROW),
    "CumSum": _Widening((0,), (0,), _ALL_NARROW),
    "Trilu": _Widening((0,), (0,), _ALL_NARROW),
    "ReduceMax": _Widening((0,), (0,), _SIXTEEN_BITS),
    "ReduceMin": _Widening((0,), (0,), _SIXTEEN_BITS),
    "ArgMax": _Widening((0,), (), _SIXTEEN_BITS),
    "ArgMin": _Widening((0,), (), _SIXTEEN_BITS),
    "Clip": _Widening((0, 1, 2), (0,), _SIXTEEN_BITS),
    "Max": _Widening(None, (0,), _SIXTEEN_BITS),
    "Min": _Widening(None, (0,), _SIXTEEN_BITS),
    "Pad": _Widening((0, 2), (0,), _SIXTEEN_BITS),
    "Relu": _Widening((0,), (0,), _SIXTEEN_BITS),
    "NonZero": _Widening((0,), (), frozenset({dtypes.int8, dtypes.int16, dtypes.uint16})),
}


def _widened_inputs(emit, names: list, positions) -> list:
    """``names`` with those at ``positions`` (all for None; omitted ones stay empty) cast to ``WIDE_DTYPE``."""
    return [
        emit("Cast", name, to=WIDE_DTYPE.onnx_type) if name and (positions is None or index in positions) else name
        for index, name in enumerate(names)
    ]


def _expand_widened(own_decomposition, node, input_names: list, output_names: list, fresh_name):
    """The node in ``WIDE_DTYPE`` (written by the op's own decomposition, if it has one), cast back."""
    op_type = node.op_type
    widening = _WIDENED[op_type]
    dtype = node.inputs[0].dtype
    if dtype not in widening.lacked:
        return None if own_decomposition is None else own_decomposition(node, input_names, output_names, fresh_name)
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    wide_inputs = _widened_inputs(emit, input_names, widening.values)
    wide_outputs = [
        fresh_name("widened") if index in widening.outputs else name for index, name in enumerate(output_names)
    ]
    written = None if own_decomposition is None else own_decomposition(node, wide_inputs, wide_outputs, fresh_name)
    if written is None:
        attributes = {key: onnx_attribute_value(value) for key, value in node.attrs.items()}
        nodes.append(helper.make_node(op_type, wide_inputs, wide_outputs, name=fresh_name(op_type), **attributes))
    else:
        nodes.extend(written[0])
        initializers.extend(written[1])
    for index in widening.outputs:
        emit("Cast", wide_outputs[index], output=output_names[index], to=dtype.onnx_type)
    return nodes, initializers


def _widening_around(op_type: str):
    """The wrapper of ``op_type``'s decomposition (or its absence) that widens the node first."""

    def wrapper(own_decomposition):
        def expand(node, input_names: list, output_names: list, fresh_name):
            return _expand_widened(own_decomposition, node, input_names, output_names, fresh_name)

        over = "" if own_decomposition is None else f" over {own_decomposition.__qualname__}"
        expand.__qualname__ = f"widened {op_type}{over}"
        # The widening reads dtypes only: the op stays value-blind unless its own decomposition is not.
        if own_decomposition is None or ("", op_type) in value_blind_decompositions:
            value_blind_decompositions.mark(op_type)
        return expand

    return wrapper


def _register(op_type: str) -> None:
    """Registers the widening of ``op_type`` around the op's own decomposition (run on the widened node)."""
    decompositions.wrap(op_type, _widening_around(op_type))


for _op_type in _WIDENED:
    _register(_op_type)
