"""What a tensor's pending history records, for tests that specify which nodes an op writes."""

from __future__ import annotations


def pending_op_types(tensor) -> list[str]:
    """The op types of the pending nodes behind ``tensor``, each node once (depth first from it)."""
    found, stack, seen = [], [tensor._value], set()
    while stack:
        value = stack.pop()
        if value is None or value.data is not None or id(value.node) in seen:
            continue
        seen.add(id(value.node))
        found.append(value.node.op_type)
        stack.extend(value.node.inputs)
    return found
