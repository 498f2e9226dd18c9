"""Adamax, NAdam, RAdam, Adadelta and ASGD's fused nodes (``ir/update_formulas.py``): shape rules and decompositions.

onnxruntime lacks these ops, so ``build_model`` writes each node as standard ONNX: per tensor, its
formula run on an emitter of the nodes that numpy's names stand for, the hyperparameters cast once
per tensor dtype. The node's last nodes write its outputs directly (an Identity only where a
formula returns a value it did not compute).
"""

from __future__ import annotations

from ...ir.domains import TRAINING_DOMAIN
from ...ir.registry import decompositions, non_differentiable, shape_rules
from ...ir.update_formulas import FUSED_UPDATES, FusedUpdate
from .training import fused_update_shapes, hyperparameter_caster, node_emitter

__all__: list[str] = []


class _OnnxArithmetic:
    """numpy's names for the formulas' operations, each emitting one ONNX node on value names."""

    def __init__(self, emit):
        self.emit = emit

    def add(self, first: str, second: str) -> str:
        return self.emit("Add", first, second)

    def subtract(self, first: str, second: str) -> str:
        return self.emit("Sub", first, second)

    def multiply(self, first: str, second: str) -> str:
        return self.emit("Mul", first, second)

    def divide(self, first: str, second: str) -> str:
        return self.emit("Div", first, second)

    def maximum(self, first: str, second: str) -> str:
        return self.emit("Max", first, second)

    def sqrt(self, value: str) -> str:
        return self.emit("Sqrt", value)

    def negative(self, value: str) -> str:
        return self.emit("Neg", value)

    def absolute(self, value: str) -> str:
        return self.emit("Abs", value)


def _register(update: FusedUpdate) -> None:
    def shape(inputs, attrs):
        return fused_update_shapes(update.op_type, inputs, update.hyperparameters, update.optional, update.tensor_lists)

    def decomposition(node, input_names: list, output_names: list, fresh_name):
        start = len(update.hyperparameters)
        hyperparameter_names = input_names[:start]
        tensors, names = node.inputs[start:], input_names[start:]
        count = len(tensors) // len(update.tensor_lists)
        nodes: list = []
        emit = node_emitter(nodes, fresh_name)
        typed = hyperparameter_caster(emit, node.inputs[0].dtype)
        arithmetic = _OnnxArithmetic(emit)
        for index in range(count):
            dtype = tensors[index].dtype
            factors = {
                name: typed(given, dtype) if given else None
                for name, given in zip(update.hyperparameters, hyperparameter_names)
            }
            first_node = len(nodes)
            x, g, *states = names[index::count]
            results = update.formula(arithmetic, x, g, states, factors, node.attrs)
            _write_outputs(nodes, first_node, results, output_names[index::count], emit)
        return nodes, []

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
