"""``GraphModule``: an ``nn.Module`` whose ``forward`` is Python generated from a ``Graph``.

The submodules, parameters and buffers the graph refers to are taken from the root (the same
objects, as torch.fx does), in the order the graph first uses them, as torch.fx copies them. Each
instance gets its own class, so that ``recompile`` can set ``forward`` without touching others.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import linecache
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

from ..export.checkpoint import save
from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from ..runtime.tensor import Tensor
from ._codegen import PythonCode
from .graph import Graph

__all__ = ["GraphModule"]

_SOURCE_COUNTER = itertools.count()


def _copy_attribute(source: Module, destination: Module, target: str) -> None:
    """Sets ``destination.<target>`` to ``source.<target>``, creating empty Modules on the way.

    As torch.fx's ``_copy_attr``: nothing is copied under a module already installed whole (a
    ``call_module`` target), and a tensor that is not a Parameter becomes a buffer (persistent
    unless it is a non-persistent buffer of ``source``).
    """
    *path, field = target.split(".")
    for part in path:
        source_child = getattr(source, part)
        child = getattr(destination, part, None)
        if child is source_child:
            return
        if child is None:
            child = Module()
            setattr(destination, part, child)
        source, destination = source_child, child
    value = getattr(source, field)
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        destination.register_buffer(field, value, persistent=field not in source._non_persistent_buffers_set)
    else:
        setattr(destination, field, value)


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
            # In the graph's order, as torch.fx copies: it decides the order of ``state_dict``.
            for target in targets:
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

    def to_folder(self, folder: str | os.PathLike[str], module_name: str = "FxModule") -> None:
        """Writes this module to ``folder`` as a package: ``from <folder> import <module_name>``.

        As torch.fx: ``module.py`` defines ``module_name`` with the generated ``forward``; the state
        is in ``state_dict.pt``; a child that is a Linear, Conv or BatchNorm is rebuilt from its
        repr, any other child is pickled to ``<child>.pt`` (with a warning).

        Args:
            folder: the folder to write (created if missing).
            module_name: the name of the written class.
        """
        folder = Path(folder)
        folder.mkdir(exist_ok=True)
        save(self.state_dict(), folder / "state_dict.pt")
        tab = " " * 4
        lines = ["import builtins", "import math", "import operator", "import os", "import pickle", "", "import onnxnn"]
        # The files are read beside module.py wherever the folder is moved (whatever its path's characters).
        lines += ["from onnxnn.nn import *", "", "_FOLDER = os.path.dirname(os.path.abspath(__file__))", "", ""]
        python_code = self.graph.python_code(root_module="self")
        lines += _global_imports(python_code.globals)
        lines += [
            f"class {module_name}(onnxnn.nn.Module):",
            f"{tab}def __init__(self):",
            f"{tab * 2}super().__init__()",
        ]
        blobified: list[str] = []
        for name, child in self.named_children():
            if type(child).__name__ in _REPR_SAFE and type(child).__module__.startswith("onnxnn.nn"):
                lines.append(f"{tab * 2}setattr(self, {name!r}, {child!r})")
                continue
            with open(folder / f"{name}.pt", "wb") as file:
                pickle.dump(child, file)
            blobified.append(name)
            shown = repr(child).replace("\r", " ").replace("\n", " ")
            loaded = f"pickle.load(open(os.path.join(_FOLDER, {name + '.pt'!r}), 'rb'))"
            lines.append(f"{tab * 2}setattr(self, {name!r}, {loaded})  # {shown}")
        # Non-persistent buffers are not in the state_dict: their values go to a file of their own
        # (torch.fx would leave them empty).
        kept = {
            name: buffer
            for name, buffer in self._buffers.items()
            if buffer is not None and name in self._non_persistent_buffers_set
        }
        if kept:
            save(kept, folder / "buffers.pt")
            lines.append(f"{tab * 2}buffers = onnxnn.load(os.path.join(_FOLDER, 'buffers.pt'))")
        for name, buffer in self._buffers.items():
            if name in kept:
                lines.append(f"{tab * 2}self.register_buffer({name!r}, buffers[{name!r}], persistent=False)")
            elif buffer is not None:
                empty = f"onnxnn.empty({list(buffer.shape)}, dtype={buffer.dtype!r})"
                lines.append(f"{tab * 2}self.register_buffer({name!r}, {empty})")
        for name, parameter in self._parameters.items():
            if parameter is not None:
                empty = f"onnxnn.empty({list(parameter.shape)}, dtype={parameter.dtype!r})"
                lines.append(f"{tab * 2}setattr(self, {name!r}, onnxnn.nn.Parameter({empty}))")
        lines.append(f"{tab * 2}self.load_state_dict(onnxnn.load(os.path.join(_FOLDER, 'state_dict.pt')))")
        lines += [""] + [f"{tab}{line}" if line else line for line in python_code.src.splitlines()]
        (folder / "module.py").write_text("\n".join(lines) + "\n")
        (folder / "__init__.py").write_text("from .module import *\n")
        if blobified:
            warnings.warn(
                "Was not able to save the following children modules as reprs -"
                f"saved as pickled files instead: {blobified}",
                stacklevel=2,
            )

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


# Children ``to_folder`` writes as their repr, which rebuilds them (torch.fx's list).
_REPR_SAFE = {"Linear", "Conv1d", "Conv2d", "Conv3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d"}

# Globals every written module.py has (its imports).
_WRITTEN_GLOBALS = {"builtins", "math", "operator", "onnxnn"}


def _global_imports(globals_: dict[str, Any]) -> list[str]:
    """Lines defining the generated code's other globals (functions, classes) by import; a value
    that cannot be imported by its module and qualified name is left out, with a warning."""
    lines, missing = [], []
    for name, value in globals_.items():
        if name in _WRITTEN_GLOBALS:
            continue
        module, qualified = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        found: Any = None
        if isinstance(module, str) and isinstance(qualified, str) and "<" not in qualified:
            try:
                found = importlib.import_module(module)
                for part in qualified.split("."):
                    found = getattr(found, part)
            except (ImportError, AttributeError):
                found = None
        if found is value:
            lines.append(f"{name} = importlib.import_module({module!r}).{qualified}")
        else:
            missing.append(name)
    if missing:
        warnings.warn(f"to_folder: the generated code uses globals that cannot be imported: {missing}", stacklevel=3)
    return ["import importlib", *lines, "", ""] if lines else []


def _rebuild(base: type, class_name: str, state: dict, graph: Graph) -> GraphModule:
    """Unpickles a GraphModule: its state restored, ``forward`` regenerated from ``graph``."""
    result = GraphModule.__new__(base)
    Module.__init__(result)
    result.__dict__.update(state)
    type(result).__name__ = type(result).__qualname__ = class_name
    result.graph = graph
    return result
