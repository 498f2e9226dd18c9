"""Recording: every Tensor op becomes one ``Node`` whose output ``Value``s have known shapes.

:func:`record` looks up the op's shape rule (``ir.registry.shape_rules``), creates the node and
returns at once: nothing runs until a value is needed. Ops without a rule (standard ops of an
imported model) get their shapes from onnx's shape inference, or are computed on the spot.
"""

from __future__ import annotations

from ..ir.device import CPU
from ..ir.dtypes import as_dtype
from ..ir.graph import Node, Value, VersionedNode
from ..ir.mode import MODE, trace_data_read
from ..ir.plan import OPSET_VERSION
from ..ir.registry import shape_rules
from .depth import pending_depth
from .shape_inference import infer_node_outputs, run_node_eagerly

__all__ = ["record", "record_scanned", "different_devices"]


def record(
    op_type: str, inputs: tuple, attrs: dict | None = None, domain: str = "", num_outputs: int | None = None
) -> tuple:
    """Records one ONNX node over ``inputs`` and returns its output values, shapes already known.

    Callers bound the pending depth (see ``MAX_PENDING_DEPTH`` and ``refresh_depth``) once they
    have kept what they need of the node; recording itself never runs anything.

    Raises:
        NotImplementedError: no shape rule is registered for the op.
        RuntimeError: the inputs live on different devices, or the shape rule rejects them.
    """
    where = None
    depth = 0
    for value in inputs:
        if value is None or value.static is not None:
            continue  # structural constants (axes, shapes) are embedded in the graph, on no device
        if where is None:
            where = value.device
        elif value.device is not where:
            raise different_devices(op_type, where, value.device)
        if value.data is None and value.node.depth > depth:
            depth = value.node.depth
    return record_scanned(op_type, inputs, attrs, domain, num_outputs, where, depth)


def different_devices(op_type: str, first, second) -> RuntimeError:
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, "
        f"{first} and {second}! (when checking arguments for {op_type})"
    )


def record_scanned(
    op_type: str,
    inputs: tuple,
    attrs: dict | None,
    domain: str,
    num_outputs: int | None,
    where,
    depth: int,
    opset: int | None = None,
) -> tuple:
    """``record`` once the caller has found the inputs' device and deepest pending node.

    ``opset``, when given, records a default-domain op at that (newer) opset: a ``VersionedNode``.
    """
    if attrs is None:
        attrs = _NO_ATTRIBUTES
    rule = _SHAPE_RULES.get((domain, op_type))
    if rule is None:
        return _record_without_rule(op_type, inputs, attrs, domain, num_outputs, opset)
    metas = rule(inputs, attrs)
    if num_outputs is not None and num_outputs < len(metas):
        metas = metas[:num_outputs]  # optional outputs the caller does not want (MaxPool's Indices)
    if opset is None:
        node = Node(op_type, domain, inputs, attrs, len(metas), depth + 1)
    else:
        node = VersionedNode(op_type, domain, inputs, attrs, len(metas), depth + 1, opset)
    if where is None:  # only structural constants: the device they were made for (a root gradient's)
        where = next((value.device for value in inputs if value is not None), CPU)
    if len(metas) == 1:
        shape, out_dtype = metas[0]
        outputs: tuple[Value, ...] = (Value(node, 0, shape, out_dtype, where),)
    else:
        outputs = tuple([Value(node, i, shape, out_dtype, where) for i, (shape, out_dtype) in enumerate(metas)])
    trace = MODE.trace
    if trace is not None:
        trace.records.append((node, outputs))
    observer = MODE.observer
    if observer is not None:
        observer(node, outputs)
    return outputs


def _node(
    op_type: str, domain: str, inputs: tuple, attrs: dict, num_outputs: int, depth: int, opset: int | None
) -> Node:
    if opset is None:
        return Node(op_type, domain, inputs, attrs, num_outputs, depth)
    return VersionedNode(op_type, domain, inputs, attrs, num_outputs, depth, opset)


_SHAPE_RULES = shape_rules.table  # bound once: record() runs for every op
_NO_ATTRIBUTES: dict = {}  # shared by every node without attributes; node attributes are never mutated


def _record_without_rule(
    op_type: str, inputs: tuple, attrs: dict, domain: str, num_outputs: int | None, opset: int | None
) -> tuple:
    """Ops with no registered shape rule: ONNX shape inference, or computing the node at once."""
    where = next((value.device for value in inputs if value is not None), CPU)
    at = OPSET_VERSION if opset is None else opset
    metas = infer_node_outputs(op_type, domain, inputs, attrs, num_outputs, at)
    if metas is None:
        trace_data_read()  # the node is computed now: what follows depends on its data
        arrays = run_node_eagerly(op_type, domain, inputs, attrs, num_outputs, at)
        node = _node(op_type, domain, inputs, attrs, len(arrays), 1, opset)
        return tuple(Value(node, i, array.shape, as_dtype(array.dtype), where, array) for i, array in enumerate(arrays))
    node = _node(op_type, domain, inputs, attrs, len(metas), 1 + max(map(pending_depth, inputs), default=0), opset)
    outputs = tuple(Value(node, i, shape, out_dtype, where) for i, (shape, out_dtype) in enumerate(metas))
    trace = MODE.trace
    if trace is not None:
        trace.records.append((node, outputs))
    observer = MODE.observer
    if observer is not None:
        observer(node, outputs)
    return outputs
