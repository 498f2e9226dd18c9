"""Python source for a ``Graph``: the ``forward`` a ``GraphModule`` runs.

Each node becomes one assignment; ``operator`` functions read as Python operators, onnxnn's
public functions by their public names (``onnxnn.relu``, ``onnxnn.nn.functional.conv2d``), and any
other callable or constant as a global of the generated function, named so that no node's local
name hides it.
"""

from __future__ import annotations

import builtins
import keyword
import math
import operator
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..ir.dtypes import dtype as _dtype
from ..nn import functional as _functional
from .node import Argument, Node

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["PythonCode"]

_BINARY = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.floordiv: "//",
    operator.mod: "%",
    operator.pow: "**",
    operator.matmul: "@",
    operator.and_: "&",
    operator.or_: "|",
    operator.xor: "^",
    operator.lshift: "<<",
    operator.rshift: ">>",
    operator.eq: "==",
    operator.ne: "!=",
    operator.lt: "<",
    operator.le: "<=",
    operator.gt: ">",
    operator.ge: ">=",
}
# In-place operators, written as statements (the node then names the updated first operand), as torch.fx.
_INPLACE = {
    operator.iadd: "+=",
    operator.iand: "&=",
    operator.ifloordiv: "//=",
    operator.ilshift: "<<=",
    operator.imod: "%=",
    operator.imul: "*=",
    operator.imatmul: "@=",
    operator.ior: "|=",
    operator.ipow: "**=",
    operator.irshift: ">>=",
    operator.isub: "-=",
    operator.itruediv: "/=",
    operator.ixor: "^=",
}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class PythonCode:
    """The generated source of ``forward`` and the globals it runs with."""

    src: str
    globals: dict[str, Any] = field(default_factory=dict)


def is_identifier(name: str) -> bool:
    """Whether ``name`` can be written as a Python attribute or variable name."""
    return bool(_IDENTIFIER.match(name)) and not keyword.iskeyword(name)


def attribute_path(root: str, target: str) -> str:
    """``self.layer1`` / ``getattr(self.layers, "0")`` for a dotted attribute path."""
    expression = root
    for part in target.split("."):
        quoted = f'"{part}"' if part.isidentifier() or part.isdigit() else repr(part)  # torch.fx's quotes
        expression = f"{expression}.{part}" if is_identifier(part) else f"getattr({expression}, {quoted})"
    return expression


class _Writer:
    def __init__(self, graph: Graph, root_module: str) -> None:
        self.root_module = root_module
        self.globals: dict[str, Any] = {"builtins": builtins}
        # A ``*args`` placeholder's parameter is ``args`` (the node, ``_args``, is assigned from it).
        self.taken = {node.name for node in graph.nodes} | {root_module}
        self.taken |= {node.target.lstrip("*") for node in graph.nodes if node.op == "placeholder"}
        self.graph = graph

    def global_name(self, value: Any, preferred: str) -> str:
        """A global of the generated code holding ``value``, clear of every node's name."""
        candidate = re.sub(r"\W", "_", preferred) or "_fx_global"
        if candidate[0].isdigit() or keyword.iskeyword(candidate):
            candidate = "_" + candidate
        base, counter = candidate, 0
        while candidate in self.taken or (candidate in self.globals and self.globals[candidate] is not value):
            counter += 1
            candidate = f"{base}_{counter}"
        self.globals[candidate] = value
        return candidate

    def module_name(self, module: Any, name: str) -> str:
        return self.global_name(module, name)

    def callable_expression(self, target: Any) -> str:
        name = getattr(target, "__name__", None)
        top_level = sys.modules["onnxnn"]  # the parent package, loaded before any of its submodules
        if isinstance(name, str) and is_identifier(name):
            if getattr(top_level, name, None) is target:
                return f"{self.module_name(top_level, 'onnxnn')}.{name}"
            if getattr(_functional, name, None) is target:
                return f"{self.module_name(top_level, 'onnxnn')}.nn.functional.{name}"
            for namespace in ("linalg", "special"):
                if getattr(getattr(top_level, namespace, None), name, None) is target:
                    return f"{self.module_name(top_level, 'onnxnn')}.{namespace}.{name}"
            if getattr(builtins, name, None) is target:
                return f"{self.module_name(builtins, 'builtins')}.{name}"
            if getattr(operator, name, None) is target:
                return f"{self.module_name(operator, 'operator')}.{name}"
            if getattr(math, name, None) is target:
                return f"{self.module_name(math, 'math')}.{name}"
        return self.global_name(target, name if isinstance(name, str) else "_fx_callable")

    def argument(self, value: Argument) -> str:
        if isinstance(value, Node):
            return value.name
        if isinstance(value, tuple):
            inner = ", ".join(self.argument(element) for element in value)
            if hasattr(value, "_fields"):
                return f"{self.global_name(type(value), type(value).__name__)}({inner})"
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.argument(element) for element in value) + "]"
        if isinstance(value, dict) and type(value) is dict:
            return "{" + ", ".join(f"{self.argument(key)}: {self.argument(item)}" for key, item in value.items()) + "}"
        if isinstance(value, slice):
            parts = (self.argument(value.start), self.argument(value.stop), self.argument(value.step))
            return f"slice({', '.join(parts)})"
        if isinstance(value, float) and not math.isfinite(value):
            return f"float({repr(value)!r})"
        if value is None or isinstance(value, (bool, int, float, complex, str)) or value is Ellipsis:
            return repr(value)
        if isinstance(value, _dtype):
            return f"{self.module_name(sys.modules['onnxnn'], 'onnxnn')}.{repr(value).rsplit('.', 1)[-1]}"
        return self.global_name(value, "_fx_constant")

    def operand(self, value: Argument) -> str:
        text = self.argument(value)
        return f"({text})" if text.startswith("-") or " " in text and not text.startswith(("(", "[", "{")) else text

    def call_arguments(self, args: tuple, kwargs: dict) -> str:
        parts = [self.argument(value) for value in args]
        parts += [f"{key} = {self.argument(value)}" for key, value in kwargs.items()]  # torch.fx's spacing
        return ", ".join(parts)

    def expression(self, node: Node) -> str:
        args, kwargs = node.args, node.kwargs
        if node.op == "get_attr":
            return attribute_path(self.root_module, node.target)
        if node.op == "call_module":
            return f"{attribute_path(self.root_module, node.target)}({self.call_arguments(args, kwargs)})"
        if node.op == "call_method":
            receiver, *rest = args
            return f"{self.operand(receiver)}.{node.target}({self.call_arguments(tuple(rest), kwargs)})"
        target = node.target
        if not kwargs and len(args) == 2 and target in _BINARY:
            return f"{self.operand(args[0])} {_BINARY[target]} {self.operand(args[1])}"
        if not kwargs and len(args) == 1 and target in _UNARY:
            return f"{_UNARY[target]}{self.operand(args[0])}"
        if not kwargs and len(args) == 2 and target is operator.getitem:
            return f"{self.operand(args[0])}[{self.argument(args[1])}]"
        if not kwargs and len(args) == 2 and target is builtins.getattr and isinstance(args[1], str):
            if is_identifier(args[1]):
                return f"{self.operand(args[0])}.{args[1]}"
        return f"{self.callable_expression(target)}({self.call_arguments(args, kwargs)})"

    def statement(self, node: Node) -> str:
        """The line computing ``node``: an assignment, or an in-place statement then the assignment."""
        args = node.args
        if node.op == "call_function" and not node.kwargs and isinstance(args[0] if args else None, Node):
            receiver = self.operand(args[0])
            if node.target is operator.setitem and len(args) == 3:
                update = f"{receiver}[{self.argument(args[1])}] = {self.argument(args[2])}"
                return f"{update};  {node.name} = {receiver}"
            if node.target in _INPLACE and len(args) == 2:
                return f"{receiver} {_INPLACE[node.target]} {self.argument(args[1])};  {node.name} = {receiver}"
        return f"{node.name} = {self.expression(node)}"

    def write(self) -> PythonCode:
        parameters = [self.root_module]
        body = []
        written: set[str] = set()
        last_uses = _last_uses(self.graph)
        for node in self.graph.nodes:
            if node.op == "placeholder":
                # As torch.fx writes it: the parameter by its target (``input``, ``*args``), then the
                # node's name (``input_1``, ``_args``) bound to it where they differ.
                raw = str(node.target).lstrip("*")
                if is_identifier(raw) and raw not in written and raw != self.root_module:
                    parameter = str(node.target)
                else:  # a target Python cannot take as a parameter (or twice): the node's own name
                    parameter, raw = node.name, node.name
                written.add(raw)
                default = f" = {self.argument(node.args[0])}" if node.args else ""
                parameters.append(parameter + default)
                if raw != node.name:
                    body.append(f"{node.name} = {raw}")
            elif node.op == "output":
                body.append(f"return {self.argument(node.args[0])}")
            else:
                body.append(f"{self.statement(node)}{_release(node, last_uses)}")
        if not body or not body[-1].startswith("return"):
            body.append("return None")
        lines = [f"def forward({', '.join(parameters)}):"] + [f"    {line}" for line in body]
        return PythonCode("\n".join(lines) + "\n", self.globals)


def _last_uses(graph: Graph) -> dict[Node, list[Node]]:
    """For each node, the nodes it is the last user of (in argument order), as torch.fx finds them."""
    seen: set[Node] = set()
    last_uses: dict[Node, list[Node]] = {}
    for node in reversed(graph.nodes):
        for input_node in node.all_input_nodes:
            if input_node not in seen:
                seen.add(input_node)
                last_uses.setdefault(node, []).append(input_node)
    return last_uses


def _release(node: Node, last_uses: dict[Node, list[Node]]) -> str:
    """``;  a = b = None`` after a node's line: the values no later line reads, freed as soon as
    possible (and written as torch.fx writes them); a node nobody uses frees its own result."""
    released = [*last_uses.get(node, ()), *([node] if not node.users else [])]
    return ";  " + " = ".join([n.name for n in released] + ["None"]) if released else ""


def python_code(graph: Graph, root_module: str) -> PythonCode:
    """The source of ``forward(root_module, *placeholders)`` for ``graph`` and its globals."""
    return _Writer(graph, root_module).write()
