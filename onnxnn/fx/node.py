"""``Node``: one operation of an FX ``Graph``, and the helpers that walk the arguments it holds.

A node is one of six opcodes, as in ``torch.fx``: ``placeholder`` (a forward argument), ``get_attr``
(a parameter, buffer or constant of the module), ``call_module``, ``call_function``,
``call_method`` and ``output``. Arguments are Python values in which other nodes may appear at
any depth of tuples, lists, dicts and slices; each node keeps the set of nodes using it
(``users``) in step with every change of its arguments.
"""

from __future__ import annotations

import builtins
import operator
import sys
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Argument", "Node", "Target", "map_aggregate", "map_arg"]

Target = Any  # a str for placeholder/get_attr/call_module/call_method/output, a callable for call_function
Argument = Any  # a Node, a primitive, or a tuple/list/dict/slice of Arguments

OPCODES = ("placeholder", "get_attr", "call_module", "call_function", "call_method", "output", "root")

# Functions whose call changes state: dead-code elimination never removes their nodes.


def check_specialized(value: Any, expected: Any, name: str) -> None:
    """Raises where the argument ``name``, traced as the constant ``expected`` (``concrete_args``), is
    given another value: the graph holds only the branches that value took (as torch.fx asserts)."""
    if value is not expected and value != expected:
        raise AssertionError(f"{name} has been specialized to have value {expected!r} but got another value")


_SIDE_EFFECT_FUNCTIONS = {operator.setitem, operator.delitem, builtins.print, check_specialized}


def map_aggregate(argument: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Applies ``fn`` to every leaf of ``argument``, rebuilding tuples, lists, dicts and slices.

    Args:
        argument: a value that may nest tuples, lists, dicts and slices.
        fn: called on each leaf (anything else).

    Returns:
        The same structure with each leaf replaced by ``fn(leaf)``.
    """
    if isinstance(argument, tuple):
        mapped = tuple(map_aggregate(element, fn) for element in argument)
        # A named tuple is rebuilt with its own type so that field access keeps working.
        return type(argument)(*mapped) if hasattr(argument, "_fields") else mapped
    if isinstance(argument, list):
        return [map_aggregate(element, fn) for element in argument]
    if isinstance(argument, dict):
        return type(argument)((key, map_aggregate(value, fn)) for key, value in argument.items())
    if isinstance(argument, slice):
        return slice(
            map_aggregate(argument.start, fn), map_aggregate(argument.stop, fn), map_aggregate(argument.step, fn)
        )
    return fn(argument)


def map_arg(argument: Argument, fn: Callable[[Node], Argument]) -> Argument:
    """Applies ``fn`` to every ``Node`` inside ``argument`` (other leaves are kept).

    Example::

        >>> map_arg((node_a, [1, node_b]), lambda n: n.name)
        ('a', [1, 'b'])
    """
    if not callable(fn):
        raise TypeError("torch.fx.map_arg(a, fn): fn must be a callable")
    return map_aggregate(argument, lambda leaf: fn(leaf) if isinstance(leaf, Node) else leaf)


def _nodes_in(argument: Argument) -> dict[Node, None]:
    found: dict[Node, None] = {}
    map_arg(argument, lambda node: found.setdefault(node))
    return found


def _qualified_name(target: Any) -> str:
    """How a call_function target reads in printed graphs: ``operator.add``, ``onnxnn.relu``."""
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None)
    # Public names first: onnxnn.relu rather than the module defining it.
    for public in ("onnxnn", "onnxnn.nn.functional"):
        namespace = sys.modules.get(public)
        if isinstance(name, str) and namespace is not None and getattr(namespace, name, None) is target:
            return f"{public}.{name}"
    module = getattr(target, "__module__", None)
    qualified = getattr(target, "__qualname__", None) or name or repr(target)
    if module in ("_operator", "operator"):
        module = "operator"
    return f"{module}.{qualified}" if module else qualified


class Node:
    """One operation of a ``Graph``: an opcode, a target, arguments, and the nodes that use it.

    Nodes are made by ``Graph.create_node`` (or ``placeholder``, ``call_function``, ...), never
    directly. ``args`` and ``kwargs`` may be reassigned; ``users`` follows.

    Example::

        >>> for node in graph_module.graph.nodes:
        ...     print(node.op, node.target, node.args)
    """

    def __init__(
        self,
        graph: Graph,
        name: str,
        op: str,
        target: Target,
        args: tuple,
        kwargs: dict,
        return_type: Any = None,
    ) -> None:
        if op not in OPCODES:
            raise ValueError(f"Node op must be one of {OPCODES[:-1]}, got {op!r}")
        if op == "call_function" and not callable(target):
            raise ValueError(
                f"Node '{name}': target {target} has type {type(target).__name__} but a Callable is expected"
            )
        if op in ("placeholder", "get_attr", "call_module", "call_method", "output") and not isinstance(target, str):
            raise ValueError(f"Node '{name}': target {target} has type {type(target).__name__} but a str is expected")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.type = return_type
        self._input_nodes: dict[Node, None] = {}
        self.users: dict[Node, None] = {}
        self.meta: dict[str, Any] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._prev: Node = self
        self._next: Node = self
        self._erased = False
        self._update_args_kwargs(args, kwargs)

    # ------------------------------------------------------------------------ position in the list
    @property
    def next(self) -> Node:
        """The node after this one in the graph (the graph's sentinel after the last)."""
        return self._next

    @property
    def prev(self) -> Node:
        """The node before this one in the graph (the graph's sentinel before the first)."""
        return self._prev

    def prepend(self, x: Node) -> None:
        """Moves ``x`` (of the same graph) to just before this node."""
        if x is self:
            raise RuntimeError("Trying to prepend a node to itself")
        if x.graph is not self.graph:
            raise RuntimeError("Attempting to move a Node into a different Graph")
        x._remove_from_list()
        previous = self._prev
        previous._next, x._prev, x._next, self._prev = x, previous, self, x

    def append(self, x: Node) -> None:
        """Moves ``x`` (of the same graph) to just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        previous, following = self._prev, self._next
        previous._next, following._prev = following, previous
        self._prev = self._next = self

    # ------------------------------------------------------------------------ arguments and users
    @property
    def args(self) -> tuple:
        """The positional arguments; assigning updates the users of old and new input nodes."""
        return self._args

    @args.setter
    def args(self, value: tuple) -> None:
        self._update_args_kwargs(tuple(value), self._kwargs)

    @property
    def kwargs(self) -> dict:
        """The keyword arguments; assigning updates the users of old and new input nodes."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value: dict) -> None:
        self._update_args_kwargs(self._args, dict(value))

    @property
    def all_input_nodes(self) -> list[Node]:
        """Every distinct node in ``args`` and ``kwargs``, in order of appearance."""
        return list(self._input_nodes)

    def _update_args_kwargs(self, args: tuple, kwargs: dict) -> None:
        for node in self._input_nodes:
            node.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        self._input_nodes = _nodes_in((args, kwargs))
        for node in self._input_nodes:
            node.users.setdefault(self)

    def update_arg(self, index: int, argument: Argument) -> None:
        """Sets ``args[index]`` to ``argument``."""
        args = list(self._args)
        args[index] = argument
        self.args = tuple(args)

    def update_kwarg(self, key: str, argument: Argument) -> None:
        """Sets ``kwargs[key]`` to ``argument``."""
        self.kwargs = {**self._kwargs, key: argument}

    def replace_all_uses_with(
        self,
        replace_with: Node,
        delete_user_cb: Callable[[Node], bool] = lambda user: True,
        *,
        propagate_meta: bool = False,
    ) -> list[Node]:
        """Makes every user of this node use ``replace_with`` instead.

        Args:
            replace_with: the node to use in place of this one.
            delete_user_cb: called on each user; the user is changed only when it returns True.
            propagate_meta: copy this node's ``meta`` into ``replace_with`` (which must have none).

        Returns:
            The users that were changed.
        """
        if propagate_meta:
            if replace_with.meta:
                raise RuntimeError(
                    "Called node.replace_all_uses_with(replace_with, propagate_meta=True), "
                    "but replace_with already has .meta keys"
                )
            replace_with.meta.update(self.meta)
        changed = [user for user in list(self.users) if delete_user_cb(user)]
        for user in changed:
            user.replace_input_with(self, replace_with)
        return changed

    def replace_input_with(self, old_input: Node, new_input: Node) -> None:
        """Replaces every occurrence of ``old_input`` in this node's arguments by ``new_input``."""

        def swap(node: Node) -> Node:
            return new_input if node is old_input else node

        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def is_impure(self) -> bool:
        """Whether the node has effects beyond its result (dead-code elimination keeps it)."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            return self.target in _SIDE_EFFECT_FUNCTIONS
        if self.op == "call_method":
            # In-place Tensor methods (add_, copy_, ...) rebind their receiver.
            return self.target.endswith("_") and not self.target.endswith("__")
        if self.op == "call_module" and self.graph.owning_module is not None:
            module = self.graph.owning_module.get_submodule(self.target)
            return bool(getattr(module, "_is_impure", False))
        return False

    def __getstate__(self) -> dict:
        # Links and users are rebuilt by Graph.__setstate__ from the node order and the arguments.
        return {key: value for key, value in self.__dict__.items() if key not in ("_prev", "_next", "users")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._prev = self._next = self
        self.users = {}

    # ------------------------------------------------------------------------ printing
    def format_node(self) -> str:
        """One readable line: ``%name : [num_users=N] = op[target=...](args = ..., kwargs = ...)``."""
        if self.op == "output":
            return f"return {_format_argument(self._args[0])}"
        head = f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target={_qualified_name(self.target)}]"
        if self.op == "placeholder":
            return head + (f"(default={self._args[0]!r})" if self._args else "")
        if self.op == "get_attr":
            return head
        return head + f"(args = {_format_argument(self._args)}, kwargs = {_format_argument(self._kwargs)})"

    def __repr__(self) -> str:
        return self.name


def _format_argument(argument: Argument) -> str:
    if isinstance(argument, Node):
        return f"%{argument.name}"
    if isinstance(argument, tuple):
        inner = ", ".join(_format_argument(element) for element in argument)
        return f"({inner},)" if len(argument) == 1 else f"({inner})"
    if isinstance(argument, list):
        return "[" + ", ".join(_format_argument(element) for element in argument) + "]"
    if isinstance(argument, dict):
        return "{" + ", ".join(f"{key}: {_format_argument(value)}" for key, value in argument.items()) + "}"
    return str(argument)
