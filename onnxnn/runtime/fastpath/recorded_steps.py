"""Recorded nodes written out as straight-line Python: what a replayed forward or backward runs.

A replay creates the same ``Node`` and ``Value`` objects that recording would, one step per traced
node, without the rules, Tensors and bookkeeping that produced them. Both replays number the
values they handle in slots (one local variable ``value_<slot>`` each) and write each step with
``write_steps``: interpreting the same tables costs about twice as much per node.
"""

from __future__ import annotations

from ...ir.graph import Node, Value, VersionedNode
from ..depth import MAX_PENDING_DEPTH, bound_depth

__all__ = ["recorded_step", "write_steps", "produced_by", "slot_values", "REPLAY_NAMESPACE"]

# What the written steps refer to besides their own per-step constants.
REPLAY_NAMESPACE = {
    "Node": Node,
    "VersionedNode": VersionedNode,
    "Value": Value,
    "MAX_PENDING_DEPTH": MAX_PENDING_DEPTH,
    "bound_depth": bound_depth,
}


def recorded_step(node: Node, outputs: tuple, refs: tuple, first_history_slot: int) -> tuple:
    """One traced node as a step: its op, attributes, signature and opset, the slots of its inputs
    (``refs``; slots from ``first_history_slot`` on may be pending), and its outputs' metadata."""
    return (
        node.op_type,
        node.domain,
        node.attrs,
        node.signature,
        node.opset if type(node) is VersionedNode else None,  # recorded at a newer opset than onnxnn's
        refs,
        tuple([ref for ref in refs if ref >= first_history_slot]),  # constants have no history
        tuple((value.shape, value.dtype) for value in outputs),
        outputs[0].device,
    )


def write_steps(steps: list, slot: int, namespace: dict, lines: list, prefix: str = "", after_node=None) -> int:
    """Appends to ``lines`` the code that records ``steps``, their outputs in slots from ``slot`` on.

    Per-step constants go into ``namespace`` (names start with ``prefix``, which keeps two
    writers' apart in one namespace). ``after_node(step, outputs)``, when given, returns the lines
    that follow a step's node (``node``) and its outputs (the names ``outputs``), before its history
    may be realized (what recording does once the node exists). Returns the first slot after the outputs.
    """
    for step, (op_type, domain, attrs, signature, opset, refs, pending_refs, metas, device) in enumerate(steps):
        name = f"{prefix}{step}"
        namespace.update({f"attrs_{name}": attrs, f"signature_{name}": signature, f"device_{name}": device})
        # Depth as recording computes it: one more than the deepest pending input's.
        depths = []
        for ref in dict.fromkeys(pending_refs):
            lines.append(f"    depth_{ref} = value_{ref}.node.depth if value_{ref}.data is None else 0")
            depths.append(f"depth_{ref}")
        depth = "0" if not depths else depths[0] if len(depths) == 1 else f"max({', '.join(depths)})"
        inputs = "".join(f"value_{ref}, " for ref in refs)
        if opset is None:
            lines.append(
                f"    node = Node({op_type!r}, {domain!r}, ({inputs}), attrs_{name}, {len(metas)}, "
                f"{depth} + 1, signature_{name})"
            )
        else:
            lines.append(
                f"    node = VersionedNode({op_type!r}, {domain!r}, ({inputs}), attrs_{name}, {len(metas)}, "
                f"{depth} + 1, {opset}, signature_{name})"
            )
        outputs = []
        for index, (shape, dtype) in enumerate(metas):
            namespace.update({f"shape_{name}_{index}": shape, f"dtype_{name}_{index}": dtype})
            lines.append(
                f"    value_{slot} = Value(node, {index}, shape_{name}_{index}, dtype_{name}_{index}, device_{name})"
            )
            outputs.append(f"value_{slot}")
            slot += 1
        if after_node is not None:
            lines.extend(after_node(step, outputs))
        if pending_refs:
            lines.append(f"    if node.depth > MAX_PENDING_DEPTH: bound_depth(node, [{', '.join(outputs)}])")
    return slot


def produced_by(records: list) -> dict:
    """Each traced node's output value -> the index of its ``(node, outputs)`` record."""
    produced = {}
    for index, (_, outputs) in enumerate(records):
        for value in outputs:
            produced[value] = index
    return produced


def slot_values(records: list, produced: dict, targets: list, locations: dict) -> tuple | None:
    """Numbers what a replay of the traced ``records`` needs to compute ``targets`` (values).

    Slots hold the constants first (slot 0 is None, for absent inputs), then the values a replay
    gathers from its caller (``locations`` says where to find each; static constants are never
    gathered), then each needed node's outputs, nodes in recording (topological) order.

    Returns:
        ``(constants, gathers, steps, slots)``: the constant values, the gathered locations, the
        ``recorded_step`` of each needed node and each value's slot; None where the records read
        a pending value from outside them (a replay could not find it again).
    """
    needed, stack = set(), list(targets)
    while stack:
        index = produced.get(stack.pop())
        if index is not None and index not in needed:
            needed.add(index)
            stack.extend(value for value in records[index][0].inputs if value is not None)
    order = sorted(needed)
    constants: list = [None]
    gathers: list = []
    constant_slots: dict = {}
    gather_slots: dict = {}
    used = [value for index in order for value in records[index][0].inputs]
    for value in used + list(targets):
        if value is None or value in produced or value in constant_slots or value in gather_slots:
            continue
        where = locations.get(value) if value.static is None else None
        if where is not None:
            gather_slots[value] = len(gathers)
            gathers.append(where)
        elif value.data is not None:  # a structural or rule-made constant: the same in every replay
            constant_slots[value] = len(constants)
            constants.append(value)
        else:
            return None
    slots = dict(constant_slots)
    slots.update((value, len(constants) + index) for value, index in gather_slots.items())
    slots[None] = 0
    next_slot = len(constants) + len(gathers)
    steps = []
    for index in order:
        node, outputs = records[index]
        refs = tuple([slots[value] for value in node.inputs])
        for value in outputs:
            slots[value] = next_slot
            next_slot += 1
        steps.append(recorded_step(node, outputs, refs, len(constants)))
    return constants, gathers, steps, slots
