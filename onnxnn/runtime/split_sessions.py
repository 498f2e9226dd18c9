"""onnxnn's CPU sessions cut around the nodes that onnxnn's compiled code runs faster (``compiled_forms``).

A convolution's weight gradient over few channels costs onnxruntime a GEMM per kernel tap over a
copied window of the input; onnxnn's compiled loop takes a third of that time
(kernels/compiled_convolutions.py). A plan holding such nodes is built with them as recorded
(``build_model(kept=...)``) and cut in two: the first session computes everything that does not
depend on their results, including their inputs; each of them runs compiled; a second session
computes what depends on them (an optimizer's update recorded in the same step), if anything does.
The runner returns what the one session would have returned.

The compiled nodes use as many threads as onnxnn's sessions (``onnxnn.get_num_threads()`` when the
plan is compiled). A node whose inputs depend on another's result (a gradient of a gradient) keeps
the plan in one session.
"""

from __future__ import annotations

from typing import Callable

import onnx
from onnx import helper

from ..ir.plan import GraphPlan, names_read
from ..ir.registry import compiled_forms
from .threads import get_num_threads

__all__ = ["SplitSession", "split_session"]


class SplitSession:
    """A plan's runner: a first session (or None), the compiled nodes, then a second session (or None).

    Every array of a run has a slot in one list, in the order they appear: the plan's inputs, the
    first session's outputs, each compiled node's outputs, the second session's outputs.
    """

    __slots__ = ("first", "compiled", "threads", "second", "second_slots", "output_slots")

    def __init__(self, first, compiled: list, threads: int, second, second_slots: list, output_slots: list):
        self.first = first
        self.compiled = compiled  # (run, input slots) per compiled node, in graph order
        self.threads = threads
        self.second = second
        self.second_slots = second_slots
        self.output_slots = output_slots

    def __call__(self, inputs: list) -> list:
        arrays = list(inputs)
        if self.first is not None:
            arrays.extend(self.first(inputs))
        for run, slots in self.compiled:
            arrays.extend(run([arrays[slot] for slot in slots], self.threads))
        if self.second is not None:
            arrays.extend(self.second([arrays[slot] for slot in self.second_slots]))
        return [arrays[slot] for slot in self.output_slots]


def split_session(plan: GraphPlan, device, build: Callable, compile_model: Callable) -> SplitSession | None:
    """``plan``'s runner cut around its compiled nodes, or None where it runs as one session.

    Only on the CPU, where the compiled code runs. ``build(kept)`` builds the plan's model with the
    nodes whose ids are in ``kept`` as recorded (as ``build_model(plan, kept=kept)``, with whatever
    else the caller's sessions take: lowerings, symbolic sizes); ``compile_model(model)`` compiles
    one part (a session on the plan's device).
    The compiled nodes read their sizes from their inputs at each run, so a graph shared across
    sizes (``fastpath.dynamic_shapes``) is cut like any other, and gives the same values.
    """
    if device.type != "cpu":
        return None
    runs = {}
    for position, node in enumerate(plan.nodes):
        form = compiled_forms.get(node.op_type, node.domain)
        run = form(node) if form is not None else None
        if run is not None:
            runs[id(node)] = (f"{node.op_type}_{position}", run)  # build_model's name for the node
    if not runs:
        return None
    return _cut(build(frozenset(runs)), {name: run for name, run in runs.values()}, compile_model)


def _cut(model: onnx.ModelProto, runs: dict, compile_model: Callable) -> SplitSession | None:
    graph = model.graph
    first_nodes, compiled_nodes, second_nodes = [], [], []
    downstream: set = set()  # the values computed by compiled nodes and everything after them
    for node in graph.node:
        depends = not downstream.isdisjoint(names_read([node]))
        if node.name in runs and node.domain and len(node.output) == 1:
            if depends:
                return None
            compiled_nodes.append(node)
        elif depends:
            second_nodes.append(node)
        else:
            first_nodes.append(node)
            continue
        downstream.update(node.output)
    if not compiled_nodes:
        return None

    initializers = {initializer.name: initializer for initializer in graph.initializer}
    slots = {graph_input.name: slot for slot, graph_input in enumerate(graph.input)}
    first_computed = {name for node in first_nodes for name in node.output}
    later_read = names_read(compiled_nodes) | names_read(second_nodes)
    first_outputs = [output.name for output in graph.output if output.name in first_computed]
    first_outputs += [name for name in sorted(later_read & first_computed) if name not in first_outputs]
    # None where the compiled nodes read only the plan's inputs (nothing comes before them).
    first = (
        compile_model(_part(model, first_nodes, list(graph.input), first_outputs, initializers))
        if first_outputs
        else None
    )
    for name in first_outputs:
        slots[name] = len(slots)

    compiled = []
    for node in compiled_nodes:
        compiled.append((runs[node.name], [slots[name] for name in node.input]))
        slots[node.output[0]] = len(slots)

    second, second_slots = None, []
    if second_nodes:
        computed = {name for node in second_nodes for name in node.output}
        needed = [name for name in sorted(names_read(second_nodes) - computed) if name and name not in initializers]
        # Element types: the first session's outputs' as onnxruntime inferred them, each compiled
        # node's like its first input's (sizes are left out: they are the plan's, fed as computed).
        types = {value.name: value.type.tensor_type.elem_type for value in graph.input}
        if first is not None:
            types.update((value.name, _ELEMENT_TYPES[value.type]) for value in first.session.get_outputs())
        for node in compiled_nodes:
            types[node.output[0]] = types[node.input[0]]
        second_inputs = [helper.make_tensor_value_info(name, types[name], None) for name in needed]
        second_outputs = [output.name for output in graph.output if output.name in computed]
        second = compile_model(_part(model, second_nodes, second_inputs, second_outputs, initializers))
        second_slots = [slots[name] for name in needed]
        for name in second_outputs:
            slots[name] = len(slots)
    output_slots = [slots[output.name] for output in graph.output]
    return SplitSession(first, compiled, get_num_threads(), second, second_slots, output_slots)


# onnxruntime's names of element types ("tensor(float)") -> ONNX's.
_ELEMENT_TYPES = {f"tensor({name.lower()})": number for name, number in onnx.TensorProto.DataType.items()}


def _part(model: onnx.ModelProto, nodes: list, inputs: list, outputs: list, initializers: dict):
    """A model of ``nodes`` reading ``inputs`` (value infos) and the initializers they read, computing
    ``outputs``: with the full model's value info where it has one, else with the type left to onnxruntime."""
    read = names_read(nodes)
    known = {output.name: output for output in model.graph.output}
    graph = helper.make_graph(
        nodes,
        model.graph.name,
        inputs,
        [known.get(name) or onnx.ValueInfoProto(name=name) for name in outputs],
        [initializer for name, initializer in initializers.items() if name in read],
    )
    return helper.make_model(
        graph, opset_imports=list(model.opset_import), ir_version=model.ir_version, producer_name="onnxnn"
    )
