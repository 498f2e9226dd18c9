"""``replace_pattern``: find every occurrence of a traced pattern in a GraphModule and swap in a replacement.

The pattern and the replacement are functions (or modules) traced with ``symbolic_trace``; their
placeholders stand for any value. A match is anchored at a node matching the pattern's returned
node and grows backwards through the arguments; the nodes inside a match other than its anchor
must not be used outside it, so that removing them changes nothing else, as in ``torch.fx``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..nn.modules.module import Module
from .graph_module import GraphModule
from .node import Node
from .tracer import symbolic_trace

__all__ = ["Match", "replace_pattern"]


class Match(NamedTuple):
    """One replaced occurrence: its anchor (the pattern's returned node, as in torch.fx) and ``nodes_map``.

    ``nodes_map`` maps each pattern node to the node it matched in the searched graph (a pattern
    placeholder may map to a literal argument): ``nodes_map[anchor]`` is the replaced node.
    """

    anchor: Node
    nodes_map: dict[Node, Any]


def _graph_of(function: Callable[..., Any] | Module | GraphModule) -> GraphModule:
    return function if isinstance(function, GraphModule) else symbolic_trace(function)


def _match(pattern: Node, node: Node, nodes_map: dict[Node, Any]) -> bool:
    """Whether ``node`` (in the searched graph) matches ``pattern``, binding placeholders in ``nodes_map``.

    As torch.fx's SubgraphMatcher: a placeholder stands for any one value, but two placeholders
    never stand for the same node (``f(a, b)`` does not match ``f(x, x)``).
    """
    if pattern in nodes_map:
        return nodes_map[pattern] is node
    if any(bound is node for bound in nodes_map.values()):
        return False
    if pattern.op == "placeholder":
        nodes_map[pattern] = node
        return True
    if pattern.op != node.op or pattern.target != node.target:
        return False
    if len(pattern.args) != len(node.args) or list(pattern.kwargs) != list(node.kwargs):
        return False
    nodes_map[pattern] = node
    pattern_arguments = [*pattern.args, *pattern.kwargs.values()]
    return _match_arguments(pattern_arguments, [*node.args, *node.kwargs.values()], nodes_map)


def _match_arguments(pattern_arguments: list | tuple, arguments: list | tuple, nodes_map: dict[Node, Any]) -> bool:
    """Matches two argument lists element by element, into nested lists and tuples (``cat([a, b])``)."""
    if len(pattern_arguments) != len(arguments):
        return False
    for pattern_argument, argument in zip(pattern_arguments, arguments):
        if isinstance(pattern_argument, Node) and isinstance(argument, Node):
            matched = _match(pattern_argument, argument, nodes_map)
        elif isinstance(pattern_argument, (list, tuple)) and isinstance(argument, (list, tuple)):
            matched = _match_arguments(pattern_argument, argument, nodes_map)
        else:
            matched = _match_literal(pattern_argument, argument, nodes_map)
        if not matched:
            return False
    return True


def _match_literal(pattern_argument: Any, argument: Any, nodes_map: dict[Node, Any]) -> bool:
    """A pattern placeholder binds a literal (``add(x, 1)`` matches ``add(a, b)``); literals match equal literals."""
    if isinstance(pattern_argument, Node):
        if pattern_argument.op != "placeholder":
            return False
        if pattern_argument in nodes_map:
            bound = nodes_map[pattern_argument]
            return not isinstance(bound, Node) and type(bound) is type(argument) and bool(bound == argument)
        nodes_map[pattern_argument] = argument
        return True
    if isinstance(argument, Node):
        return False
    return type(pattern_argument) is type(argument) and bool(pattern_argument == argument)


def replace_pattern(
    gm: GraphModule,
    pattern: Callable[..., Any] | Module,
    replacement: Callable[..., Any] | Module,
) -> list[Match]:
    """Replaces each non-overlapping occurrence of ``pattern`` in ``gm`` by ``replacement``, and recompiles.

    Args:
        gm: the GraphModule to rewrite in place.
        pattern: a function (or module) whose traced graph is searched for; it returns one value.
        replacement: a function with the same arguments, traced and spliced in for each match.

    Returns:
        The matches that were replaced, in graph order.

    Example::

        >>> def pattern(x):
        ...     return onnxnn.relu(onnxnn.relu(x))
        >>> def replacement(x):
        ...     return onnxnn.relu(x)
        >>> fx.replace_pattern(gm, pattern, replacement)
    """
    pattern_graph = _graph_of(pattern).graph
    replacement_graph = _graph_of(replacement).graph
    pattern_output = pattern_graph.find_nodes(op="output")[0].args[0]
    if not isinstance(pattern_output, Node):
        raise ValueError("replace_pattern: the pattern must return a single traced value")
    pattern_inputs = pattern_graph.find_nodes(op="placeholder")
    replacement_inputs = replacement_graph.find_nodes(op="placeholder")
    if len(pattern_inputs) != len(replacement_inputs):
        raise ValueError(
            f"replace_pattern: the pattern takes {len(pattern_inputs)} arguments, "
            f"the replacement {len(replacement_inputs)}"
        )
    graph = gm.graph
    matches: list[Match] = []
    consumed: set[Node] = set()
    for node in list(graph.nodes):
        nodes_map: dict[Node, Any] = {}
        if node in consumed or not _match(pattern_output, node, nodes_map):
            continue
        inner = {matched for key, matched in nodes_map.items() if key.op != "placeholder"}
        if inner & consumed or any(user not in inner for n in inner - {node} for user in n.users):
            continue  # overlapping a previous match, or an inner value is needed outside the pattern
        consumed |= inner
        matches.append(Match(pattern_output, nodes_map))
    replaced: dict[Node, Node] = {}  # an earlier match's anchor -> its replacement (later matches may use it)
    for match in matches:
        anchor = match.nodes_map[pattern_output]
        nodes_map = match.nodes_map
        values: dict[Node, Any] = {
            replacement_input: _bound_value(nodes_map[pattern_input], replaced)
            for pattern_input, replacement_input in zip(pattern_inputs, replacement_inputs)
        }
        with graph.inserting_before(anchor):
            result = graph.graph_copy(replacement_graph, values)
        if not isinstance(result, Node):
            raise ValueError("replace_pattern: the replacement must return a single traced value")
        anchor.replace_all_uses_with(result)
        replaced[anchor] = result
        inner_nodes = [matched for key, matched in nodes_map.items() if key.op != "placeholder"]
        for matched in reversed(list(graph.nodes)):
            if matched in inner_nodes and not matched.users:
                graph.erase_node(matched)
    # The replacement's get_attr/call_module targets are looked up on gm itself.
    for copied in graph.nodes:
        if copied.op in ("get_attr", "call_module") and not _has_path(gm, copied.target):
            raise RuntimeError(f"replace_pattern: the replacement refers to {copied.target}, which gm does not have")
    graph.lint()
    gm.recompile()
    return matches


def _bound_value(value: Any, replaced: dict[Node, Node]) -> Any:
    """What a placeholder bound: a node (or an earlier match's replacement of it), or a literal as it is."""
    return replaced.get(value, value) if isinstance(value, Node) else value


def _has_path(module: Module, target: str) -> bool:
    owner: Any = module
    for part in target.split("."):
        if not hasattr(owner, part):
            return False
        owner = getattr(owner, part)
    return True
