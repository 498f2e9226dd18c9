"""The fused updates of ``ir/update_formulas.py`` (Adamax, NAdam, ...): shape rules and decompositions.

onnxruntime lacks these ops, so ``build_model`` writes each node as standard ONNX: per tensor, its
formula run on an emitter of the nodes that numpy's names stand for, the hyperparameters cast once
per tensor dtype and the formula's numbers made constants of that dtype. The node's last nodes
write its outputs directly (an Identity only where a formula returns a value it did not compute).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir.domains import TRAINING_DOMAIN
from ...ir.registry import decompositions, non_differentiable, shape_rules
from ...ir.update_formulas import FUSED_UPDATES, FusedUpdate
from .training import fused_update_shapes, hyperparameter_caster, node_emitter

__all__: list[str] = []


_BINARY = {
    "add": "Add",
    "subtract": "Sub",
    "multiply": "Mul",
    "divide": "Div",
    "maximum": "Max",
    "minimum": "Min",
    "less": "Less",
    "greater": "Greater",
}
_UNARY = {"sqrt": "Sqrt", "negative": "Neg", "absolute": "Abs", "sign": "Sign"}


class _OnnxArithmetic:
    """numpy's names for the formulas' operations, each emitting one ONNX node on value names; a
    Python number operand is a constant of the tensor's dtype (one initializer per value)."""

    def __init__(self, emit, fresh_name, dtype, initializers: list):
        self.emit, self.fresh_name, self.dtype, self.initializers = emit, fresh_name, dtype, initializers
        self.constants: dict = {}

    def operand(self, value) -> str:
        if isinstance(value, str):
            return value
        if value not in self.constants:
            name = self.constants[value] = self.fresh_name("constant")
            self.initializers.append(numpy_helper.from_array(np.array(value, self.dtype.numpy_dtype), name))
        return self.constants[value]

    def where(self, condition: str, chosen, other) -> str:
        return self.emit("Where", condition, self.operand(chosen), self.operand(other))

    def __getattr__(self, name: str):
        if name in _BINARY:
            return lambda first, second: self.emit(_BINARY[name], self.operand(first), self.operand(second))
        if name in _UNARY:
            return lambda value: self.emit(_UNARY[name], value)
        raise AttributeError(f"update formulas use no {name!r} (update_formulas.py's names only)")


def _register(update: FusedUpdate) -> None:
    def shape(inputs, attrs):
        return fused_update_shapes(update.op_type, inputs, update.hyperparameters, update.optional, update.tensor_lists)

    def decomposition(node, input_names: list, output_names: list, fresh_name):
        start = len(update.hyperparameters)
        hyperparameter_names = input_names[:start]
        tensors, names = node.inputs[start:], input_names[start:]
        count = len(tensors) // len(update.tensor_lists)
        nodes: list = []
        initializers: list = []
        emit = node_emitter(nodes, fresh_name)
        typed = hyperparameter_caster(emit, node.inputs[0].dtype)
        arithmetic_of: dict = {}  # dtype -> its emitter (one node's tensors share a dtype)
        for index in range(count):
            dtype = tensors[index].dtype
            if dtype not in arithmetic_of:
                arithmetic_of[dtype] = _OnnxArithmetic(emit, fresh_name, dtype, initializers)
            arithmetic = arithmetic_of[dtype]
            factors = {
                name: typed(given, dtype) if given else None
                for name, given in zip(update.hyperparameters, hyperparameter_names)
            }
            first_node = len(nodes)
            x, g, *states = names[index::count]
            results = update.formula(arithmetic, x, g, states, factors, node.attrs)
            _write_outputs(nodes, first_node, results, output_names[index::count], emit)
        return nodes, initializers

    shape_rules.register(update.op_type, domain=TRAINING_DOMAIN)(shape)
    non_differentiable.mark(update.op_type, domain=TRAINING_DOMAIN)
    decompositions.register(update.op_type, domain=TRAINING_DOMAIN)(decomposition)


def _write_outputs(nodes: list, first_node: int, results, outputs: list, emit) -> None:
    """Names each result computed by ``nodes[first_node:]`` after its output, in the nodes that
    write and read it; a result it did not compute (an input) is copied by an Identity node."""
    produced = {name for node in nodes[first_node:] for name in node.output}
    renamed: dict = {}
    for result, output in zip(results, outputs):
        if result in produced and result not in renamed:
            renamed[result] = output
        else:
            emit("Identity", renamed.get(result, result), output=output)
    for node in nodes[first_node:]:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        node.output[:] = [renamed.get(name, name) for name in node.output]


for _update in FUSED_UPDATES.values():
    _register(_update)
