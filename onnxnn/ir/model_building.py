"""A plan written out as an ONNX model: ``build_model``, for onnxruntime sessions and for export.

The plan (``ir.plan``) says which nodes compute what from which fed inputs; ``build_model`` names
the values, applies the decompositions of ops onnxruntime lacks and, for onnxnn's own sessions, the
lowerings measured faster there, and embeds the initializers.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import helper

from .attributes import attribute_subgraphs
from .dtypes import dtype
from .graph import OPSET_VERSION
from .plan import IR_VERSION, GraphPlan, computed_values
from .registry import decompositions, session_lowerings, size_blind_session_lowerings

__all__ = ["build_model", "plan_opset", "onnx_attribute_value", "names_read", "work_estimate"]


def onnx_attribute_value(value):
    """An attribute value as onnx.helper takes it (dtypes as ONNX element types, arrays as tensors)."""
    if isinstance(value, dtype):
        return value.onnx_type
    if isinstance(value, np.ndarray):
        return onnx.numpy_helper.from_array(value)
    return value


def plan_opset(plan: GraphPlan) -> int:
    """The default-domain opset a plan's graph is built at: the newest its nodes were recorded at.

    onnxnn's own ops are recorded at ``OPSET_VERSION``; an imported node that means something only
    a newer opset defines carries that opset (``ir.graph.VersionedNode``). Older nodes mean the same
    at the newer opset (see ``OPSET_VERSION``), so one graph holds them all.
    """
    opset = OPSET_VERSION
    for node in plan.nodes:
        if node.opset > opset:
            opset = node.opset
    return opset


# Numeric dtypes whose ONNX tensors are their bytes as they are (little-endian); numpy_helper
# handles the others (bfloat16, 4-bit and 8-bit floats, strings).
_RAW_DATA_TYPES = {
    np.dtype(numpy_type): helper.np_dtype_to_tensor_dtype(np.dtype(numpy_type))
    for numpy_type in (
        np.float32,
        np.float64,
        np.float16,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.bool_,
    )
}


def _add_initializer(graph: onnx.GraphProto, array: np.ndarray, name: str) -> None:
    """Appends ``array`` to ``graph``'s initializers as ``name``.

    The tensor is written where it will stay: building it apart and appending it (what
    ``make_graph`` does) copies its bytes once more, a second for VGG's 0.5 GB of weights.
    """
    array = np.asarray(array)
    data_type = _RAW_DATA_TYPES.get(array.dtype)
    if data_type is None or sys.byteorder != "little":
        graph.initializer.append(onnx.numpy_helper.from_array(array, name))
        return
    tensor = graph.initializer.add()
    tensor.name = name
    tensor.data_type = data_type
    tensor.dims.extend(array.shape)
    tensor.raw_data = np.asarray(array, order="C").tobytes()


def build_model(
    plan: GraphPlan,
    input_roles: list | None = None,
    output_names: list | None = None,
    opset_version: int | None = None,
    graph_name: str = "onnxnn",
    lower: bool | str = False,
    kept: frozenset = frozenset(),
) -> onnx.ModelProto:
    """Builds the ONNX model of a plan.

    Args:
        plan: the canonical subgraph (from ``plan()``).
        input_roles: per realized input of the plan, ``("input", name)`` for a graph input or
            ``("initializer", name)`` to embed its value; by default all are graph inputs
            ``input_0, input_1, ...``. Static constants (axes, shapes) are always initializers.
        output_names: names of the plan's outputs (default ``output_0, ...``).
        opset_version: the default-domain opset to declare; by default the plan's (``plan_opset``).
            One older than a node's opset raises ValueError: the node means nothing there.
        lower: write standard ops in the forms ``session_lowerings`` gives them (for onnxnn's own
            sessions; exported graphs keep the ops as recorded); ``"size_blind"``: only the forms
            that read no size (``size_blind_session_lowerings``), for a graph shared across sizes.
        kept: ``id()`` of the plan's nodes to write as recorded, neither decomposed nor lowered (those
            that ``runtime/split_sessions.py`` runs outside the session).
    """
    newest = plan_opset(plan)
    if opset_version is None:
        opset_version = newest
    elif opset_version < newest:
        raise ValueError(
            f"build_model: the plan has nodes recorded at opset {newest}, which cannot be declared at "
            f"opset {opset_version}"
        )
    names: dict = {}
    graph_inputs, initializers, onnx_nodes = [], [], []
    for position, value in enumerate(plan.inputs):
        role, name = input_roles[position] if input_roles else ("input", f"input_{position}")
        names[id(value)] = name
        if role == "input":
            graph_inputs.append(helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape))
        else:
            initializers.append((value.data, name))
    # Pending outputs are named by the node that computes them: no Identity renames, which also
    # sidestep an onnxruntime optimizer bug (EliminateIdentity) on graphs with many outputs.
    output_names = output_names or [f"output_{position}" for position in range(len(plan.outputs))]
    # Names given to inputs and initializers (an imported model's weights may be called
    # "node_7_0") are never reused for the names generated below, which would break SSA.
    taken = {name for _, name in (input_roles or ())} | set(output_names)

    def generated(name: str) -> str:
        while name in taken:
            name = "onnxnn::" + name
        return name

    # Which node computes each value, as the plan's walk found it: never ``Node.position`` or a
    # value's data now, which another thread may have changed since (see ``GraphPlan``).
    computed = computed_values(plan)
    produced: dict = {}
    renames = []
    for name, value in zip(output_names, plan.outputs):
        key = computed.get(id(value))
        if key is not None and key not in produced:
            produced[key] = name
        else:
            renames.append((name, value))

    def name_of(value) -> str:
        key = computed.get(id(value))
        if key is not None:
            return produced.get(key) or generated(f"node_{key[0]}_{key[1]}")
        name = names.get(id(value))
        if name is None:
            name = names[id(value)] = generated(f"constant_{len(initializers)}")
            initializers.append((value.data, name))
        return name

    fed = {
        id(value)
        for position, value in enumerate(plan.inputs)
        if input_roles is None or input_roles[position][0] == "input"
    }

    def embedded(node, position: int) -> bool:
        """Whether the node's input at ``position`` is a constant of the model (neither fed nor computed)."""
        value = node.inputs[position]
        return value is not None and id(value) not in computed and id(value) not in fed

    domains = {""}
    empty_intermediates: dict = {}  # name -> value: see below
    for node_index, node in enumerate(plan.nodes):
        inputs = ["" if value is None else name_of(value) for value in node.inputs]
        for name, value in zip(inputs, node.inputs):
            if value is not None and 0 in value.shape and id(value) in computed:
                empty_intermediates[name] = value
        outputs = [
            produced.get((node_index, i)) or generated(f"node_{node_index}_{i}") for i in range(node.num_outputs)
        ]
        names_used = [0]

        def fresh_name(stem: str, node_index=node_index, names_used=names_used) -> str:
            names_used[0] += 1
            return f"node_{node_index}_{stem}_{names_used[0]}"

        expand = decompositions.get(node.op_type, node.domain) if id(node) not in kept else None
        expansion = None if expand is None else expand(node, inputs, outputs, fresh_name)
        if expansion is not None:
            expanded, expanded_initializers = expansion
            onnx_nodes.extend(expanded)
            initializers.extend(expanded_initializers)
            domains.update(onnx_node.domain for onnx_node in expanded)
            continue
        lowering = session_lowerings.get(node.op_type, node.domain) if lower and id(node) not in kept else None
        if lowering is not None and lower == "size_blind":
            size_blind = size_blind_session_lowerings.get(node.op_type, node.domain)
            lowering = lowering if size_blind is True else size_blind
        if lowering is not None:
            lowered = lowering(node, inputs, outputs, fresh_name, lambda position, node=node: embedded(node, position))
            if lowered is not None:
                onnx_nodes.extend(lowered[0])
                initializers.extend(lowered[1])
                domains.update(onnx_node.domain for onnx_node in lowered[0])
                continue
        attributes = {k: onnx_attribute_value(v) for k, v in node.attrs.items()}
        onnx_nodes.append(
            helper.make_node(
                node.op_type,
                inputs,
                outputs,
                name=f"{node.op_type}_{node_index}",
                domain=node.domain or None,
                **attributes,
            )
        )
        domains.add(node.domain)
    identity_nodes = [helper.make_node("Identity", [name_of(value)], [name]) for name, value in renames]
    graph_outputs = [
        helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape)
        for name, value in zip(output_names, plan.outputs)
    ]
    # An intermediate of size 0 keeps its shape in the model: some of onnxruntime's fusions break on
    # empty tensors, and the session's choice of them reads the model (``disabled_optimizers``).
    value_infos = [
        helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape)
        for name, value in empty_intermediates.items()
        if name not in output_names
    ]
    graph = helper.make_graph(
        onnx_nodes + identity_nodes, graph_name, graph_inputs, graph_outputs, value_info=value_infos
    )
    opsets = [helper.make_opsetid(domain, opset_version if domain == "" else 1) for domain in sorted(domains)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION, producer_name="onnxnn")
    # The initializers go into the model's own graph last: make_model copies the graph it is given.
    # A constant that a decomposition or lowering left unread (an update's step count where it does
    # not apply) is left out: onnxruntime would only warn and drop it.
    read = names_read(model.graph.node)
    for initializer in initializers:
        if isinstance(initializer, onnx.TensorProto):
            if initializer.name in read:
                model.graph.initializer.append(initializer)  # a decomposition's small constant
        elif initializer[1] in read:
            _add_initializer(model.graph, *initializer)
    return model


def work_estimate(model: onnx.ModelProto) -> int:
    """Elements in the graph's inputs, outputs and initializers: a cheap proxy for its arithmetic."""
    total = 0
    for value_info in list(model.graph.input) + list(model.graph.output):
        size = 1
        for dim in value_info.type.tensor_type.shape.dim:
            size *= max(dim.dim_value, 1)
        total += size
    for initializer in model.graph.initializer:
        size = 1
        for dim in initializer.dims:
            size *= dim
        total += size
    return total


def names_read(nodes) -> set:
    """The names the nodes read, in their subgraphs too (a branch may read the outer graph's constants)."""
    read: set = set()
    for node in nodes:
        read.update(node.input)
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                read |= names_read(subgraph.node)
                read.update(output.name for output in subgraph.output)
    return read
