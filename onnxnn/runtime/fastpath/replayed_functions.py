"""The backward functions a forward replay makes where gradients are recorded (``forward_replay``).

A plain call recording gradients makes a backward function per op whose inputs require them
(``tensor.apply_op``): its edges to the functions of the ops before it, to the arguments' history and
to the leaves' accumulators, and the versions of the tensors it saved. A replay makes the same ones,
so a backward (and its replay, ``backward_replay``) finds the graph a plain call leaves.
``backward_steps`` reads them from a traced forward, once; ``backward_lines`` writes the code that
makes them again beside each replayed node.

The forward's intermediate tensors are not made by a replay, so their saved versions are not kept:
nothing outside the forward held them to change them in place. A trace whose forward changed an
intermediate in place after an op saved it is not replayed (a plain call's backward refuses it).
"""

from __future__ import annotations

from ..autograd import AccumulateGrad, Function, gradient_edge, saved_version
from ..tensor import Tensor

__all__ = ["backward_steps", "backward_lines"]


def backward_steps(
    records: list, produced: dict, slots: dict, returned: list, tensors: list, state: list
) -> tuple | None:
    """What a replay recording gradients makes besides the nodes: ``(functions, saved, returned_functions)``.

    ``functions``: per step (index into the replayed steps) whose node got a backward function that
    the returned tensors' history reaches, ``(edges, versions, name)``: per input, its edge as
    ``("function", step, output_nr)`` or ``(list, index)`` of the argument or state tensor read
    (``"tensors"`` or ``"state"``: a leaf's accumulator or an argument's history), or None; its saved
    version as ``(list, index)`` of that tensor, or None (an intermediate's: see the module doc).
    ``saved``: the steps whose node a backward function keeps (``Node.saved``: a plan computes their
    outputs among its own), those nobody reaches too. ``returned_functions``: per returned tensor,
    ``(step, output_nr)`` or None.

    None where a replay could not make the same graph: a node of another kind than a recorded op's
    (a custom ``autograd.Function``), an edge to history other than the arguments', or an
    intermediate changed in place after an op saved it (a plain call's backward would refuse it).
    """
    order = sorted({produced[value] for value in slots if value is not None and value in produced})
    step_of_node = {id(records[record][0]): step for step, record in enumerate(order)}
    found: dict = {}  # step -> Function
    step_of_function: dict = {}
    stack = [tensor._grad_fn for tensor in returned if tensor._grad_fn is not None]
    while stack:
        function = stack.pop()
        if type(function) is AccumulateGrad or id(function) in step_of_function:
            continue
        if type(function) is not Function:
            return None
        step = step_of_node.get(id(function.node))
        if step is None:
            continue  # an argument's history: its edges are checked below
        found[step] = function
        step_of_function[id(function)] = step
        stack.extend(edge[0] for edge in function._edges if edge is not None and edge[0] is not None)
    functions = {}
    for step, function in found.items():
        edges: list[tuple | None] = []
        versions: list[tuple | None] = []
        for value, edge, saved in zip(function.node.inputs, function._edges, function._saved_versions):
            if edge is None or edge[0] is None:
                edges.append(None)
                versions.append(None)
            elif id(edge[0]) in step_of_function:
                if saved is not None and saved[0].value != 0:
                    return None
                edges.append(("function", step_of_function[id(edge[0])], edge[1]))
                versions.append(None)
            else:
                position = _tensor_read(edge, value, tensors, state)
                if position is None or saved is None:
                    return None
                if saved[0] is not _tensor_at(position, tensors, state)._version_counter:
                    return None
                edges.append(position)
                versions.append(position)
        functions[step] = (tuple(edges), tuple(versions), function._name)
    saved = {step for step, record in enumerate(order) if records[record][0].saved}
    returned_functions: list[tuple | None] = []
    for tensor in returned:
        function = tensor._grad_fn
        if function is None:
            returned_functions.append(None)
        elif id(function) in step_of_function:
            returned_functions.append((step_of_function[id(function)], tensor._output_nr))
        else:
            return None
    return functions, saved, returned_functions


def _tensor_read(edge: tuple, value, tensors: list, state: list) -> tuple | None:
    """``(kind, index)`` of the argument or state tensor holding ``value`` whose edge is ``edge``."""
    for kind, candidates in (("tensors", tensors), ("state", state)):
        for index, tensor in enumerate(candidates):
            if tensor._value is value and gradient_edge(tensor) == edge:
                return kind, index
    return None


def _tensor_at(position: tuple, tensors: list, state: list) -> Tensor:
    kind, index = position
    return (tensors if kind == "tensors" else state)[index]


def backward_lines(functions: dict, saved: set, namespace: dict):
    """``write_steps``' ``after_node`` for a replay recording gradients (``backward_steps``)."""
    namespace.update(Function=Function, edge_of=gradient_edge, version_of=saved_version)

    def read(position) -> str:
        kind, index = position
        return f"{kind}[{index}]"

    def edge(item) -> str:
        if item is None:
            return "None"
        if item[0] == "function":
            return f"(function_{item[1]}, {item[2]})"
        return f"edge_of({read(item)})"

    def lines(step: int, outputs: list) -> list:
        if step not in functions:
            return ["    node.saved = True"] if step in saved else []
        edges, versions, name = functions[step]
        namespace[f"name_{step}"] = name
        edge_list = "".join(f"{edge(item)}, " for item in edges)
        version_list = "".join("None, " if item is None else f"version_of({read(item)}), " for item in versions)
        return [
            f"    function_{step} = Function(node, ({''.join(f'{name}, ' for name in outputs)}), "
            f"({edge_list}), ({version_list}), name_{step})",
            "    node.saved = True",
        ]

    return lines
