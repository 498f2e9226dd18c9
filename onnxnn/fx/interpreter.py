"""``Interpreter`` runs a ``GraphModule`` node by node; ``Transformer`` rebuilds it as a new graph.

Each opcode has a method (``placeholder``, ``get_attr``, ``call_function``, ``call_method``,
``call_module``, ``output``) that a subclass overrides to observe or change what a node does, as
in ``torch.fx``: timing each node, recording shapes, swapping one function for another.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Any, Iterator

from ..nn.modules.module import Module
from .graph import Graph
from .graph_module import GraphModule
from .node import Argument, Node, Target, map_arg
from .proxy import Proxy
from .tracer import Tracer

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Runs ``module``'s graph one node at a time through overridable per-opcode methods.

    Args:
        module: the GraphModule (or a Module, with ``graph`` given) to run.
        garbage_collect_values: drop each value after its last use while running.
        graph: the graph to run instead of ``module.graph``.

    Example::

        >>> class NegSigmoid(fx.Interpreter):
        ...     def call_function(self, target, args, kwargs):
        ...         if target is onnxnn.sigmoid:
        ...             return onnxnn.neg(onnxnn.sigmoid(*args, **kwargs))
        ...         return super().call_function(target, args, kwargs)
        >>> NegSigmoid(gm).run(x)
    """

    def __init__(self, module: Module, garbage_collect_values: bool = True, graph: Graph | None = None) -> None:
        self.module = module
        self.submodules = dict(module.named_modules())
        if graph is None:
            if not isinstance(module, GraphModule):
                raise TypeError("Interpreter needs a GraphModule, or the graph to run passed as graph=")
            graph = module.graph
        self.graph = graph
        self.env: dict[Node, Any] = {}
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        self.user_to_last_uses: dict[Node, list[Node]] = {}
        if garbage_collect_values:
            seen: set[Node] = set()
            for node in reversed(self.graph.nodes):
                for input_node in node.all_input_nodes:
                    if input_node not in seen:
                        seen.add(input_node)
                        self.user_to_last_uses.setdefault(node, []).append(input_node)
        self.current_node: Node | None = None
        self.args_iter: Iterator[Any] = iter(())

    def run(self, *args: Any, initial_env: dict[Node, Any] | None = None, enable_io_processing: bool = True) -> Any:
        """Runs the graph on ``args`` and returns what its output node returns.

        Args:
            *args: the values of the placeholders, in order.
            initial_env: values for some nodes, used instead of running them.
            enable_io_processing: kept for torch.fx's signature; inputs and outputs are used as given.
        """
        self.env = dict(initial_env) if initial_env is not None else {}
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as error:
                if self.extra_traceback and not getattr(error, "_fx_node_noted", False):
                    message = f"While executing {node.format_node()}"
                    error.args = (f"{error.args[0]}\n\n{message}" if error.args else message, *error.args[1:])
                    error._fx_node_noted = True  # type: ignore[attr-defined]
                raise
            if self.garbage_collect_values:
                for finished in self.user_to_last_uses.get(node, []):
                    self.env.pop(finished, None)
            if node.op == "output":
                return self.env[node]
        return None

    @contextmanager
    def _set_current_node(self, node: Node) -> Iterator[None]:
        saved, self.current_node = self.current_node, node
        try:
            yield
        finally:
            self.current_node = saved

    def run_node(self, n: Node) -> Any:
        """Runs one node: fetches its arguments' values and calls the method named by its opcode."""
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            return getattr(self, n.op)(n.target, args, kwargs)

    # ------------------------------------------------------------------------ one method per opcode
    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The next value of ``run``'s arguments (or the placeholder's default); for a ``*args``
        placeholder, the list of all remaining values."""
        if isinstance(target, str) and target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(
                f"Expected positional argument for parameter {target}, but one was not passed in!"
            ) from None

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The module attribute at the dotted path ``target``."""
        return self.fetch_attr(target)

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """``target(*args, **kwargs)``."""
        return target(*args, **kwargs)

    def call_method(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """``args[0].target(*args[1:], **kwargs)``."""
        receiver, *rest = args
        return getattr(receiver, target)(*rest, **kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """Calls the submodule at ``target`` (hooks included)."""
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The value the graph returns."""
        return args[0]

    # ------------------------------------------------------------------------ helpers
    def fetch_attr(self, target: str) -> Any:
        """The attribute of ``self.module`` at the dotted path ``target``."""
        value: Any = self.module
        for depth, part in enumerate(target.split(".")):
            if not hasattr(value, part):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(target.split('.')[: depth + 1])}")
            value = getattr(value, part)
        return value

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        """``n.args`` and ``n.kwargs`` with each node replaced by its computed value."""
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return args, kwargs

    def map_nodes_to_values(self, args: Argument, n: Node) -> Any:
        """``args`` with each node replaced by its value; RuntimeError when one is not computed."""

        def value_of(node: Node) -> Any:
            if node not in self.env:
                raise RuntimeError(
                    f"Node {n} referenced nonexistent value {node}! Run Graph.lint() to diagnose such issues"
                )
            return self.env[node]

        return map_arg(args, value_of)


class Transformer(Interpreter):
    """Builds a new GraphModule by running the graph on Proxies through the per-opcode methods.

    Override a method to change what is recorded for a node; the default copies it.

    Example::

        >>> class ReluToGelu(fx.Transformer):
        ...     def call_function(self, target, args, kwargs):
        ...         if target is onnxnn.relu:
        ...             target = onnxnn.nn.functional.gelu
        ...         return super().call_function(target, args, kwargs)
        >>> new_gm = ReluToGelu(gm).transform()
    """

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.new_graph = Graph()
        self.tracer = Tracer()
        self.tracer.graph = self.new_graph
        self.tracer.root = module

    def _proxy(self, op: str, target: Target, args: tuple, kwargs: dict, name: str | None = None) -> Proxy:
        node = self.new_graph.create_node(
            op, target, self.tracer.create_arg(args), self.tracer.create_arg(kwargs), name
        )
        if self.current_node is not None:
            node.meta = dict(self.current_node.meta)
        return Proxy(node, self.tracer)

    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        default = args[0] if args else inspect.Signature.empty
        node = self.new_graph.placeholder(target, default_value=default)
        if self.current_node is not None:
            node.meta = dict(self.current_node.meta)
        return Proxy(node, self.tracer)

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        return self._proxy("get_attr", target, (), {})

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        return self._proxy("call_function", target, args, kwargs)

    def call_method(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        return self._proxy("call_method", target, args, kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        return self._proxy("call_module", target, args, kwargs)

    def transform(self) -> GraphModule:
        """Runs the transformation and returns the new GraphModule."""
        self.env = {}
        self.args_iter = iter(())
        result = None
        for node in self.graph.nodes:
            if node.op == "output":
                result = self.run_node(node)
                break
            self.env[node] = self.run_node(node)
        self.new_graph.output(self.tracer.create_arg(result))
        return GraphModule(self.module, self.new_graph, type(self.module).__name__)
