"""``Graph``: the nodes of a traced program as a doubly linked list, in execution order.

Made by ``symbolic_trace`` (or by hand), edited in place (insert, replace, erase), checked by
``lint`` and turned into Python source by ``python_code``, as ``torch.fx.Graph``.
"""

from __future__ import annotations

import builtins
import copy
import inspect
import keyword
import re
from typing import Any, Callable, Iterator

from ._codegen import PythonCode, is_identifier, python_code
from .node import OPCODES, Argument, Node, Target, _format_argument, _qualified_name, map_arg

__all__ = ["Graph", "PythonCode"]

# Local names the generated code must not shadow: Python's builtins and the globals it refers to.
_RESERVED = set(keyword.kwlist) | set(dir(builtins)) | {"self", "onnxnn", "operator", "math"}
# torch.fx's naming: a name splits into a base and an optional ``_<n>``; other characters become ``_``.
_NAME = re.compile(r"^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\d+))?$")
_ILLEGAL_CHARACTERS = re.compile("[^0-9a-zA-Z_]+")
_CAMEL_HUMP = re.compile(r"(?<=[a-z])([A-Z])")


class _NodeList:
    """The nodes of a graph in order (or reversed); iteration tolerates erasing the current node."""

    def __init__(self, graph: Graph, direction: str = "_next") -> None:
        self._graph = graph
        self._direction = direction

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        node = getattr(root, self._direction)
        while node is not root:
            following = getattr(node, self._direction)
            if not node._erased:
                yield node
            node = following

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, "_prev" if self._direction == "_next" else "_next"))

    def __repr__(self) -> str:
        return repr(list(self))


class _InsertPoint:
    """Where ``create_node`` puts new nodes while the context is active."""

    def __init__(self, graph: Graph, insert: Callable[[Node], None]) -> None:
        self._graph = graph
        self._insert = insert
        self._saved: Callable[[Node], None] | None = None

    def __enter__(self) -> None:
        self._saved, self._graph._insert = self._graph._insert, self._insert

    def __exit__(self, *exc_info: Any) -> None:
        assert self._saved is not None
        self._graph._insert = self._saved


class Graph:
    """A program as a list of ``Node`` objects: placeholders, operations and one output.

    Args:
        owning_module: the ``GraphModule`` whose ``forward`` this graph is (set by GraphModule).

    Example::

        >>> graph = fx.Graph()
        >>> x = graph.placeholder("x")
        >>> y = graph.call_function(onnxnn.relu, (x,))
        >>> graph.output(y)
        >>> print(graph.python_code("self").src)
        def forward(self, x):
            relu = onnxnn.relu(x);  x = None
            return relu
    """

    def __init__(self, owning_module: Any = None) -> None:
        self._root = Node(self, "", "root", "", (), {})
        self._len = 0
        self._names: set[str] = set()
        self._base_count: dict[str, int] = {}
        self._insert: Callable[[Node], None] = self._root.prepend
        self.owning_module = owning_module

    # ------------------------------------------------------------------------ nodes
    @property
    def nodes(self) -> _NodeList:
        """The nodes in order; ``reversed(graph.nodes)`` walks them backwards."""
        return _NodeList(self)

    def find_nodes(self, *, op: str, target: Target = None) -> list[Node]:
        """The nodes with opcode ``op`` (and ``target``, when given), in order."""
        return [node for node in self.nodes if node.op == op and (target is None or node.target == target)]

    def _unique_name(self, candidate: str) -> str:
        """``candidate`` made a fresh identifier, numbered as torch.fx numbers names: a name ending in
        ``_<n>`` keeps its number when free, and each base counts on from its last number."""
        match = _NAME.match(candidate)
        if match is None:
            candidate = _ILLEGAL_CHARACTERS.sub("_", candidate) or "_unnamed"
            if candidate[0].isdigit():
                candidate = "_" + candidate
            match = _NAME.match(candidate)
            assert match is not None
        base, number = match.group(1, 2)
        if number is None or candidate in self._names:
            counter = self._base_count.get(base, 0)
            if candidate in _RESERVED:
                counter += 1
                candidate = f"{base}_{counter}"
        else:
            counter = int(number)
        while candidate in self._names or candidate in _RESERVED:
            counter += 1
            candidate = f"{base}_{counter}"
        self._names.add(candidate)
        self._base_count[base] = counter
        return candidate

    @staticmethod
    def _candidate(op: str, target: Target) -> str:
        """The name torch.fx derives from a target: its ``__name__`` or text, a dunder's inner name,
        in snake case (``sizeOf`` -> ``size_of``)."""
        if callable(target) and not isinstance(target, str):
            name = getattr(target, "__name__", None) or "function"
        else:
            name = str(target)
            if name.startswith("__") and name.endswith("__"):
                name = name[2:-2]
        return _CAMEL_HUMP.sub(r"_\1", name).lower()

    def create_node(
        self,
        op: str,
        target: Target,
        args: tuple | None = None,
        kwargs: dict | None = None,
        name: str | None = None,
        type_expr: Any = None,
    ) -> Node:
        """Creates a node and inserts it at the current insertion point (the end by default).

        Args:
            op: one of ``placeholder``, ``get_attr``, ``call_module``, ``call_function``,
                ``call_method``, ``output``.
            target: the callable (call_function) or the name (others) the node refers to.
            args: positional arguments, nodes anywhere inside.
            kwargs: keyword arguments, nodes anywhere inside.
            name: the name to start from (made unique); derived from ``target`` when None.
            type_expr: an optional annotation of the result's type.

        Returns:
            The new node.
        """
        if op not in OPCODES[:-1]:
            raise ValueError(f"Graph.create_node: op must be one of {OPCODES[:-1]}, got {op!r}")
        args = tuple(args) if args is not None else ()
        kwargs = dict(kwargs) if kwargs is not None else {}
        for node in map_arg_nodes((args, kwargs)):
            if node.graph is not self:
                raise RuntimeError(f"Argument '{node}' of Node '{name or target}' does not belong to this Graph")
        unique = self._unique_name(name or self._candidate(op, target))
        node = Node(self, unique, op, target, args, kwargs, type_expr)
        self._insert(node)
        self._len += 1
        return node

    def placeholder(self, name: str, type_expr: Any = None, default_value: Any = inspect.Signature.empty) -> Node:
        """A ``placeholder`` node: an argument of ``forward`` (with a default when given)."""
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any = None) -> Node:
        """A ``get_attr`` node reading ``qualified_name`` (``"layer.weight"``) from the module."""
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(
        self, module_name: str, args: tuple | None = None, kwargs: dict | None = None, type_expr: Any = None
    ) -> Node:
        """A ``call_module`` node calling the submodule at ``module_name``."""
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_function(
        self,
        the_function: Callable[..., Any],
        args: tuple | None = None,
        kwargs: dict | None = None,
        type_expr: Any = None,
    ) -> Node:
        """A ``call_function`` node calling ``the_function`` (``operator.add``, ``onnxnn.relu``, ...)."""
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def call_method(
        self, method_name: str, args: tuple | None = None, kwargs: dict | None = None, type_expr: Any = None
    ) -> Node:
        """A ``call_method`` node calling ``args[0].method_name(*args[1:], **kwargs)``."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def output(self, result: Argument, type_expr: Any = None) -> Node:
        """The ``output`` node: what ``forward`` returns."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    # ------------------------------------------------------------------------ editing
    def inserting_before(self, n: Node | None = None) -> _InsertPoint:
        """A context in which new nodes go just before ``n``, in creation order (the start of the graph
        when None, where, as after any node, each new node goes first).

        Example::

            >>> with graph.inserting_before(node):
            ...     graph.call_function(operator.mul, (node.args[0], 2))
        """
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise AssertionError("Node to insert before is not in graph.")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n: Node | None = None) -> _InsertPoint:
        """A context in which each new node goes just after ``n`` (at the end of the graph when None).

        As in torch.fx, several nodes created in one context end up in reverse order of creation
        (each goes right after ``n``): a node using another made in the same context would come
        before it. Nest a context per node, or use ``inserting_before(n.next)``, to keep the order.
        """
        if n is None:
            return _InsertPoint(self, self._root.prepend)
        if n.graph is not self:
            raise AssertionError("Node to insert after is not in graph.")
        return _InsertPoint(self, n.append)

    def erase_node(self, to_erase: Node) -> None:
        """Removes a node that no other node uses.

        Raises:
            RuntimeError: when the node still has users, or belongs to another graph.
        """
        if to_erase.users:
            raise RuntimeError(
                f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} "
                f"users in the graph: {to_erase.users}!"
            )
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            return
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        to_erase._update_args_kwargs((), {})

    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Erases, from the end backwards, every node whose result is unused and that has no effects.

        Returns:
            Whether any node was erased.
        """
        self.lint()
        changed = False
        for node in reversed(self.nodes):
            impure = is_impure_node(node) if is_impure_node is not None else node.is_impure()
            if not node.users and not impure:
                self.erase_node(node)
                changed = True
        return changed

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Argument] = lambda x: x) -> Node:
        """Copies ``node`` (of any graph) into this one, its input nodes mapped by ``arg_transform``."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        result = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        result.meta = copy.copy(node.meta)
        return result

    def graph_copy(self, g: Graph, val_map: dict[Node, Node], return_output_node: bool = False) -> Any:
        """Copies every node of ``g`` but its output into this graph, recording copies in ``val_map``.

        Returns:
            ``g``'s output value mapped into this graph (with the output node itself when
            ``return_output_node``), or None when ``g`` has no output.
        """
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                value = map_arg(node.args[0], lambda n: val_map[n])
                return (value, node) if return_output_node else value
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def __deepcopy__(self, memo: dict) -> Graph:
        copied = Graph()
        memo[id(self)] = copied
        val_map: dict[Node, Node] = {}
        result = copied.graph_copy(self, val_map, return_output_node=True)
        if result is not None:
            value, output_node = result
            copied.output(value, output_node.type).meta = copy.copy(output_node.meta)
        return copied

    def __getstate__(self) -> dict:
        # Pickled as a flat list in order (each node's inputs already pickled: no deep recursion);
        # the owning module is not part of a graph's value.
        state = {key: value for key, value in self.__dict__.items() if key not in ("_root", "_insert")}
        state["owning_module"] = None
        state["_node_list"] = list(self.nodes)
        return state

    def __setstate__(self, state: dict) -> None:
        nodes = state.pop("_node_list")
        state.setdefault("_base_count", {})  # pickled before graphs counted names per base
        self.__dict__.update(state)
        self._root = Node(self, "", "root", "", (), {})
        self._insert = self._root.prepend
        for node in nodes:
            self._root.prepend(node)
        for node in nodes:
            for input_node in node._input_nodes:
                input_node.users.setdefault(node)

    # ------------------------------------------------------------------------ checking
    def lint(self) -> None:
        """Checks the graph's consistency; raises RuntimeError naming the first problem found.

        Checked: every node belongs to this graph and has a valid opcode; names are unique; each
        argument node is defined before use; ``users`` agrees with the arguments; with an owning
        module, every ``call_module`` and ``get_attr`` target exists.
        """
        seen: set[Node] = set()
        names: set[str] = set()
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.op not in OPCODES[:-1]:
                raise RuntimeError(f"Node {node} had unknown opcode {node.op}!")
            if node.name in names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            for input_node in node.all_input_nodes:
                if input_node.graph is not self:
                    raise RuntimeError(f"Argument '{input_node}' of Node '{node}' does not belong to this Graph!")
                if input_node not in seen:
                    raise RuntimeError(f"Argument '{input_node}' of Node '{node}' was used before it has been defined!")
                if node not in input_node.users:
                    raise RuntimeError(f"Node '{node}' uses '{input_node}' but is not among its users")
            for user in node.users:
                if user._erased or node not in user._input_nodes:
                    raise RuntimeError(f"Node '{node}' lists '{user}' as a user, which does not use it")
            seen.add(node)
            names.add(node.name)
        if self.owning_module is not None:
            self._lint_targets()

    def _lint_targets(self) -> None:
        for node in self.nodes:
            if node.op not in ("call_module", "get_attr"):
                continue
            owner = self.owning_module
            for depth, part in enumerate(node.target.split(".")):
                if not hasattr(owner, part):
                    walked = ".".join(node.target.split(".")[:depth])
                    kind = "module" if node.op == "call_module" else "attribute"
                    raise RuntimeError(
                        f"Node {node} target {node.target} references nonexistent {kind} {part} "
                        f"of {walked or 'the root'}"
                    )
                owner = getattr(owner, part)

    # ------------------------------------------------------------------------ printing
    def python_code(self, root_module: str = "self") -> PythonCode:
        """The Python source of ``forward(root_module, *placeholders)`` and the globals it needs."""
        if not is_identifier(root_module):
            raise ValueError(f"root_module must be an identifier, got {root_module!r}")
        return python_code(self, root_module)

    def __str__(self) -> str:
        placeholders = ", ".join(node.name for node in self.nodes if node.op == "placeholder")
        lines = [f"graph({placeholders}):"] + [f"    {node.format_node()}" for node in self.nodes]
        return "\n".join(lines)

    def print_tabular(self) -> None:
        """Prints one row per node: opcode, name, target, args and kwargs, in aligned columns."""
        header = ("opcode", "name", "target", "args", "kwargs")
        rows = [
            (
                node.op,
                node.name,
                _qualified_name(node.target),
                _format_argument(node.args),
                _format_argument(node.kwargs),
            )
            for node in self.nodes
        ]
        widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
        print("  ".join(text.ljust(width) for text, width in zip(header, widths)).rstrip())
        print("  ".join("-" * width for width in widths))
        for row in rows:
            print("  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())


def map_arg_nodes(argument: Argument) -> list[Node]:
    """The nodes inside ``argument``, in order of appearance (repeats kept)."""
    found: list[Node] = []
    map_arg(argument, found.append)
    return found
