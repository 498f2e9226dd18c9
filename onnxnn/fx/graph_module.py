"""``GraphModule``: an ``nn.Module`` whose ``forward`` is Python generated from a ``Graph``.

The submodules, parameters and buffers the graph refers to are taken from the root (the same
objects, as torch.fx does), in the root's own order so that ``state_dict`` keys match. Each
instance gets its own class, so that ``recompile`` can set ``forward`` without touching others.
"""

from __future__ import annotations

import copy
import itertools
import linecache
from typing import Any

from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from ..runtime.tensor import Tensor
from ._codegen import PythonCode
from .graph import Graph

__all__ = ["GraphModule"]

_SOURCE_COUNTER = itertools.count()


def _definition_order(root: Module) -> dict[str, int]:
    """Each qualified name of ``root`` (module, then its parameters, buffers, children) ranked in order."""
    order: dict[str, int] = {}

    def visit(module: Module, prefix: str) -> None:
        order.setdefault(prefix, len(order))
        dotted = prefix + "." if prefix else ""
        for name in itertools.chain(module._parameters, module._buffers):
            order.setdefault(dotted + name, len(order))
        for name, child in module._modules.items():
            if child is not None:
                visit(child, dotted + name)

    visit(root, "")
    return order


def _copy_attribute(source: Any, destination: Module, target: str) -> None:
    """Sets ``destination.<target>`` to ``source.<target>``, creating empty Modules on the way."""
    *path, field = target.split(".")
    for part in path:
        source = getattr(source, part)
        child = getattr(destination, part, None)
        if not isinstance(child, Module):
            child = Module()
            setattr(destination, part, child)
        destination = child
    value = getattr(source, field)
    if isinstance(value, Tensor) and not isinstance(value, Parameter) and field in getattr(source, "_buffers", {}):
        destination.register_buffer(field, value, persistent=field not in source._non_persistent_buffers_set)
    elif isinstance(value, (Module, Parameter)):
        setattr(destination, field, value)
    else:
        # Plain attributes (tensor constants) stay plain: not parameters or buffers of the copy.
        object.__setattr__(destination, field, value)


class GraphModule(Module):
    """A Module running ``graph``: its ``forward`` is generated Python, readable as ``.code``.

    Args:
        root: the module (or a dict of name to object) holding what the graph's ``call_module``
            and ``get_attr`` nodes refer to.
        graph: the graph to run.
        class_name: the name shown by ``repr`` and ``print_readable``.

    Example::

        >>> gm = fx.symbolic_trace(model)
        >>> for node in gm.graph.nodes:
        ...     if node.target is onnxnn.relu:
        ...         node.target = onnxnn.sigmoid
        >>> gm.recompile()
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> GraphModule:
        # A class of its own per instance: ``recompile`` sets ``forward`` on it (Module calls
        # ``type(self).forward`` through ``self.forward``) without changing other GraphModules.
        if "_fx_per_instance" in vars(cls):
            cls = cls.__bases__[0]

        class GraphModuleImpl(cls):  # type: ignore[valid-type, misc]
            _fx_per_instance = True

        return super().__new__(GraphModuleImpl)

    def __init__(self, root: Module | dict[str, Any], graph: Graph, class_name: str = "GraphModule") -> None:
        super().__init__()
        type(self).__name__ = class_name
        type(self).__qualname__ = class_name
        targets = [node.target for node in graph.nodes if node.op in ("call_module", "get_attr")]
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            rank = _definition_order(root)
            for target in sorted(dict.fromkeys(targets), key=lambda name: rank.get(name, len(rank))):
                _copy_attribute(root, self, target)
        elif isinstance(root, dict):
            for target in dict.fromkeys(targets):
                if target not in root:
                    raise RuntimeError(
                        f"Node {target} referenced target {target} but that target was not provided in root!"
                    )
                self._install(target, root[target])
        else:
            raise RuntimeError(f"Unsupported type {root} passed for root!")
        self.graph = graph

    def _install(self, target: str, value: Any) -> None:
        *path, field = target.split(".")
        destination: Module = self
        for part in path:
            child = getattr(destination, part, None)
            if not isinstance(child, Module):
                child = Module()
                setattr(destination, part, child)
            destination = child
        if isinstance(value, (Module, Parameter)):
            setattr(destination, field, value)
        elif isinstance(value, Tensor):
            destination.register_buffer(field, value)
        else:
            object.__setattr__(destination, field, value)

    # ------------------------------------------------------------------------ graph and code
    @property
    def graph(self) -> Graph:
        """The graph this module runs; assigning one recompiles ``forward``."""
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"GraphModule.graph must be a Graph, got {type(g).__name__}")
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        """The Python source of the generated ``forward``."""
        if "_code" not in self.__dict__:
            raise RuntimeError("Code has not been generated! Please report a bug to onnxnn")
        return self.__dict__["_code"]

    def recompile(self) -> PythonCode:
        """Regenerates ``forward`` from ``self.graph``; call it after editing the graph.

        Returns:
            The generated source and its globals.
        """
        python_code = self.graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        filename = f"<onnxnn.fx generated {next(_SOURCE_COUNTER)}>"
        # Registered with linecache so tracebacks through forward show the generated lines.
        linecache.cache[filename] = (len(python_code.src), None, python_code.src.splitlines(True), filename)
        namespace = dict(python_code.globals)
        exec(compile(python_code.src, filename, "exec"), namespace)  # noqa: S102  (our own generated source)
        type(self).forward = namespace["forward"]
        return python_code

    def print_readable(self, print_output: bool = True) -> str:
        """The generated code as a class definition, printed (when ``print_output``) and returned."""
        body = "\n".join("    " + line if line else line for line in self.code.splitlines())
        text = f"class {type(self).__name__}(onnxnn.nn.Module):\n{body}\n"
        if print_output:
            print(text)
        return text

    def __str__(self) -> str:
        return super().__repr__() + "\n\n\n\n" + self.code

    # ------------------------------------------------------------------------ submodules
    def add_submodule(self, target: str, m: Module) -> bool:
        """Installs ``m`` at the dotted path ``target``, creating empty Modules on the way.

        Returns:
            False when a non-Module attribute is in the way, else True.
        """
        *path, field = target.split(".")
        owner: Module = self
        for part in path:
            child = getattr(owner, part, None)
            if child is None:
                child = Module()
                owner.add_module(part, child)
            if not isinstance(child, Module):
                return False
            owner = child
        owner.add_module(field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Removes the submodule at ``target``. Returns False when there is none."""
        *path, field = target.split(".")
        owner: Any = self
        for part in path:
            owner = getattr(owner, part, None)
            if not isinstance(owner, Module):
                return False
        if field not in owner._modules:
            return False
        delattr(owner, field)
        return True

    def delete_all_unused_submodules(self) -> None:
        """Removes every submodule that no ``call_module`` or ``get_attr`` node needs.

        A module a ``call_module`` node calls needs its own submodules too (a leaf module's layers,
        which its forward runs), as do the modules on the path to any target.
        """
        used: set[str] = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                used.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
                if node.op == "call_module":
                    called = self.get_submodule(node.target)
                    used.update(f"{node.target}.{name}" for name, _ in called.named_modules() if name)
        for name, _ in list(self.named_modules()):
            if name and name not in used:
                self.delete_submodule(name)

    # ------------------------------------------------------------------------ copies
    def __deepcopy__(self, memo: dict) -> GraphModule:
        result = GraphModule.__new__(type(self).__bases__[0])
        memo[id(self)] = result
        state = copy.deepcopy({key: value for key, value in self.__dict__.items() if key != "_graph"}, memo)
        Module.__init__(result)
        result.__dict__.update(state)
        type(result).__name__ = type(result).__qualname__ = type(self).__name__
        result.graph = copy.deepcopy(self.__dict__["_graph"], memo)
        return result

    def __reduce__(self) -> tuple:
        # The per-instance class cannot be pickled by name: rebuild from the base class and the graph.
        state = {key: value for key, value in self.__dict__.items() if key not in ("_graph", "_code")}
        state.pop("_compiled_call_impl", None)
        return (_rebuild, (type(self).__bases__[0], type(self).__name__, state, self.__dict__["_graph"]))

    def __copy__(self) -> GraphModule:
        return GraphModule(self, copy.deepcopy(self.graph), type(self).__name__)


def _rebuild(base: type, class_name: str, state: dict, graph: Graph) -> GraphModule:
    """Unpickles a GraphModule: its state restored, ``forward`` regenerated from ``graph``."""
    result = GraphModule.__new__(base)
    Module.__init__(result)
    result.__dict__.update(state)
    type(result).__name__ = type(result).__qualname__ = class_name
    result.graph = graph
    return result
