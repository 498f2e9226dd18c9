"""``Tracer`` and ``symbolic_trace``: a Module's ``forward`` run on Proxies, recorded as a ``Graph``.

While a trace runs, a few public callables are swapped for recording versions and always
restored afterwards (even when tracing fails):

* ``Module.__call__``: a call of a leaf module (onnxnn.nn's own layers) records ``call_module``;
  other modules run their ``forward`` so that their operations are recorded one by one.
* ``Module.__getattribute__`` and ``__getattr__``: a parameter or buffer read in a traced ``forward``
  records ``get_attr``.
* the public functions of ``onnxnn``, ``onnxnn.nn.functional``, ``onnxnn.linalg``, ``onnxnn.special``
  and the ``Tracer``'s autowrap modules (``math``), those named by ``wrap`` (a builtin such as ``len``
  too), and the same functions imported by name in the files of the traced forwards: a call with a
  Proxy anywhere in its arguments records ``call_function``.
* Tensor's binary operators return NotImplemented for a Proxy operand, so that ``tensor + proxy``
  reaches ``Proxy.__radd__``.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import sys
import types
from collections import OrderedDict
from typing import Any, Callable, Iterator

from ..nn import functional as _functional
from ..nn.modules.container import Sequential
from ..nn.modules.module import Module
from ..runtime.tensor import Tensor
from .graph import Graph
from .graph_module import GraphModule
from .node import Argument, Node, check_specialized, map_aggregate
from .proxy import Proxy, TraceError

__all__ = ["Tracer", "symbolic_trace", "wrap"]

# The concrete argument values a traced module checks at each call (``check_specialized``): those whose
# ``==`` is a plain truth. (Tensors and containers of them are traced as given, unchecked.)
_CHECKED_CONSTANTS = (bool, int, float, str)

# onnxnn's function namespaces besides the top level and nn.functional: their public functions
# record ``call_function`` when given a Proxy (torch reaches all of torch.* by __torch_function__).
_FUNCTION_NAMESPACES = ("linalg", "special")

# (globals dict, name) pairs registered by ``wrap``: patched for every trace.
_WRAPPED: list[tuple[dict, str]] = []

# The order of a code object's argument names, which is torch.fx's placeholder order.
_VARNAMES_ORDER = {
    inspect.Parameter.POSITIONAL_ONLY: 0,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: 0,
    inspect.Parameter.KEYWORD_ONLY: 1,
    inspect.Parameter.VAR_POSITIONAL: 2,
    inspect.Parameter.VAR_KEYWORD: 3,
}

_TENSOR_OPERATORS = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift",
    "eq", "ne", "lt", "le", "gt", "ge",
)  # fmt: skip


def wrap(fn_or_name: str | Callable[..., Any]) -> str | Callable[..., Any]:
    """Makes a module-level function a leaf of tracing: calls with Proxies record ``call_function``.

    Call at module scope, with the function or its name; it must be a global of the calling module.

    Example::

        >>> def my_sqrt(x):
        ...     return math.sqrt(x.shape[-1])
        >>> fx.wrap("my_sqrt")
    """
    if callable(fn_or_name):
        name = getattr(fn_or_name, "__name__", None)
    elif isinstance(fn_or_name, str):
        name = fn_or_name
    else:
        raise TypeError("wrap must be called with a function or a function's name")
    if not isinstance(name, str) or name == "<lambda>":
        raise TypeError("wrap: a function defined with def at module scope is needed (lambdas have no global name)")
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    if caller is None or caller.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    _WRAPPED.append((caller.f_globals, name))
    return fn_or_name


def _find_proxy(args: tuple, kwargs: dict) -> Proxy | None:
    found: list[Proxy] = []
    map_aggregate((args, kwargs), lambda leaf: found.append(leaf) if isinstance(leaf, Proxy) else None)
    return found[0] if found else None


def _recording(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, recording a ``call_function`` node when any argument is a Proxy."""

    @functools.wraps(function)
    def record_or_call(*args: Any, **kwargs: Any) -> Any:
        proxy = _find_proxy(args, kwargs)
        if proxy is None:
            return function(*args, **kwargs)
        return proxy.tracer.create_proxy("call_function", function, args, kwargs)

    return record_or_call


class _Patcher:
    """Swaps attributes for the length of a trace and puts every one back on exit."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def patch(self, owner: Any, name: str, replacement: Any) -> None:
        is_dict = isinstance(owner, dict)
        original = owner.get(name, _MISSING) if is_dict else owner.__dict__.get(name, _MISSING)
        if is_dict:
            owner[name] = replacement
        else:
            setattr(owner, name, replacement)
        self._saved.append((owner, name, original, is_dict))

    def restore(self) -> None:
        while self._saved:
            owner, name, original, is_dict = self._saved.pop()
            if is_dict and original is _MISSING:
                del owner[name]
            elif is_dict:
                owner[name] = original
            elif original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


_MISSING = object()


def _public_functions(namespace: Any) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, value in list(vars(namespace).items()):
        if not name.startswith("_") and isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
            yield name, value


class Tracer:
    """Records a Module's ``forward`` as a ``Graph`` by running it on Proxies.

    Override ``is_leaf_module`` to choose which submodules stay ``call_module`` nodes, or
    ``create_proxy``/``create_node`` to annotate what is recorded.

    Example::

        >>> graph = fx.Tracer().trace(model)
        >>> graph_module = fx.GraphModule(model, graph)
    """

    def __init__(
        self, autowrap_modules: tuple[types.ModuleType, ...] = (math,), autowrap_functions: tuple[Callable, ...] = ()
    ) -> None:
        """
        Args:
            autowrap_modules: modules whose public functions record ``call_function`` when given a
                Proxy (``math.sqrt(x.shape[-1])``), wherever the traced code calls them, as in torch.fx.
            autowrap_functions: single functions treated the same way.
        """
        self._autowrap_modules = tuple(autowrap_modules)
        self._autowrap_functions = tuple(autowrap_functions)
        self._patched_globals: set[int] = set()
        self._autowrap_function_ids = {id(function) for function in autowrap_functions}
        self._autowrap_function_ids.update(
            id(function) for module in self._autowrap_modules for _, function in _public_functions(module)
        )
        self.graph = Graph()
        self.root: Module = Module()
        self.module_stack: OrderedDict[str, tuple[str, type]] = OrderedDict()
        # The path of each tensor reachable from the root (by id), filled when the first is needed.
        self.tensor_attrs: dict[int, str] = {}
        self._parameter_names: dict[int, str] | None = None
        self._parameter_proxy_cache: dict[str, Proxy] = {}
        self._module_paths: dict[int, str] | None = None

    # ------------------------------------------------------------------------ what becomes a node
    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """onnxnn.nn's own modules (but not Sequential) are leaves: recorded as ``call_module``."""
        module_name = type(m).__module__ or ""
        return module_name.startswith("onnxnn.nn") and not isinstance(m, Sequential)

    def path_of_module(self, mod: Module) -> str:
        """The qualified name of ``mod`` inside the root. Raises NameError for a foreign module."""
        if self._module_paths is None:
            # A module registered under several names is called by its first, as in torch.fx.
            self._module_paths = {id(module): name for name, module in self.root.named_modules()}
        path = self._module_paths.get(id(mod))
        if path is None:
            raise NameError("module is not installed as a submodule")
        return path

    def create_node(
        self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None, type_expr: Any = None
    ) -> Node:
        """Adds a node to the graph, its ``meta["nn_module_stack"]`` the modules being traced."""
        node = self.graph.create_node(kind, target, args, kwargs, name, type_expr)
        node.meta["nn_module_stack"] = OrderedDict(self.module_stack)
        return node

    def create_proxy(
        self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None, type_expr: Any = None
    ) -> Proxy:
        """Records a node whose arguments are ``create_arg`` of ``args``/``kwargs``; returns its Proxy."""
        node = self.create_node(kind, target, self.create_arg(args), self.create_arg(kwargs), name, type_expr)
        return self.proxy(node)

    def proxy(self, node: Node) -> Proxy:
        return Proxy(node, self)

    def create_arg(self, a: Any) -> Argument:
        """Turns a traced value into a node argument: Proxies to nodes, tensors to ``get_attr``."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, (tuple, list)):
            converted = [self.create_arg(element) for element in a]
            if isinstance(a, list):
                return converted
            return type(a)(*converted) if hasattr(a, "_fields") else tuple(converted)
        if isinstance(a, dict):
            if not all(isinstance(key, str) for key in a):
                raise NotImplementedError(f"dict keys must be strings in traced arguments, got {list(a)}")
            return {key: self.create_arg(value) for key, value in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, Tensor):
            return self._tensor_attribute(a).node
        if isinstance(a, Module):
            raise NotImplementedError(f"a Module ({type(a).__name__}) cannot be an argument of a traced operation")
        return a  # None, numbers, strings, dtypes, devices: stored as they are

    def _tensor_attribute(self, tensor: Tensor) -> Proxy:
        """A new ``get_attr`` proxy for a tensor met as an argument (one node per use, as in
        torch.fx): its parameter, buffer or plain-attribute path, else a new root constant."""
        if not self.tensor_attrs:
            self.tensor_attrs.update(self._collect_tensor_names())
        name = self.tensor_attrs.get(id(tensor))
        if name is None:
            # A tensor built in forward: kept on the root, as torch.fx does.
            name = self._fresh_qualname("_tensor_constant")
            object.__setattr__(self.root, name, tensor)
            self.tensor_attrs[id(tensor)] = name
        return self.create_proxy("get_attr", name, (), {})

    def _collect_tensor_names(self) -> dict[int, str]:
        """Every tensor reachable as an attribute of the root, by its path: a parameter's or buffer's
        first name, else (a plain tensor attribute) the last path found, as torch.fx names them."""
        names: dict[int, str] = {}

        def visit(module: Module, prefix: str) -> None:
            for key, value in vars(module).items():
                if isinstance(value, Tensor):
                    names[id(value)] = prefix + key
            seen: set[int] = set()  # a child under two names of one module: visited once (named_children)
            for key, child in module._modules.items():
                if child is not None and id(child) not in seen:
                    seen.add(id(child))
                    visit(child, f"{prefix}{key}.")

        visit(self.root, "")
        names.update(self._state_names())
        return names

    def _state_names(self) -> dict[int, str]:
        """Each parameter's and buffer's first qualified name, by tensor id."""
        if self._parameter_names is None:
            self._parameter_names = {}
            for collection in (self.root.named_parameters(), self.root.named_buffers()):
                for qualified, tensor in collection:
                    self._parameter_names.setdefault(id(tensor), qualified)
        return self._parameter_names

    def _fresh_qualname(self, prefix: str) -> str:
        counter = 0
        while hasattr(self.root, f"{prefix}{counter}"):
            counter += 1
        return f"{prefix}{counter}"

    # ------------------------------------------------------------------------ control flow
    def to_bool(self, obj: Proxy) -> bool:
        raise TraceError(
            "symbolically traced variables cannot be used as inputs to control flow "
            f"(the value of {obj.node.name} is not known while tracing; pass it in concrete_args to specialize)"
        )

    def iter(self, obj: Proxy) -> Iterator[Proxy]:
        raise TraceError(
            "Proxy object cannot be iterated. This can be attempted when the Proxy is used in a loop "
            "or as a *args or **kwargs function argument."
        )

    def keys(self, obj: Proxy) -> Any:
        return self.create_proxy("call_method", "keys", (obj,), {})

    # ------------------------------------------------------------------------ modules
    def call_module(self, m: Module, forward: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """A submodule call: a ``call_module`` node for a leaf, else its ``forward`` traced inline."""
        path = self.path_of_module(m)
        saved_stack = OrderedDict(self.module_stack)
        self.module_stack[path] = (path, type(m))
        try:
            if self.is_leaf_module(m, path):
                return self.create_proxy("call_module", path, args, kwargs)
            return forward(*args, **kwargs)
        finally:
            self.module_stack = saved_stack

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        """A module attribute read while tracing: parameters and buffers become ``get_attr`` Proxies."""
        if not isinstance(attr_val, Tensor):
            return attr_val
        name = self._state_names().get(id(attr_val))
        if name is None:
            return attr_val
        # One node per parameter or buffer however often it is read, as torch.fx caches them.
        if name not in parameter_proxy_cache:
            parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
        return parameter_proxy_cache[name]

    # ------------------------------------------------------------------------ tracing
    def trace(self, root: Module | Callable[..., Any], concrete_args: dict[str, Any] | None = None) -> Graph:
        """Runs ``root.forward`` (or the function ``root``) on Proxies and returns the recorded graph.

        Args:
            root: the module (or free function) to trace.
            concrete_args: values for some arguments, fixed in the trace instead of becoming
                inputs (use it for flags that steer control flow).

        Raises:
            TraceError: when the program branches on, or iterates over, a traced value.
        """
        if isinstance(root, Module):
            self.root, function = root, type(root).forward
            bound_self: tuple = (root,)
        elif callable(root):
            self.root, function, bound_self = Module(), root, ()
        else:
            raise TypeError(f"symbolic_trace expects a Module or a function, got {type(root).__name__}")
        self.graph = Graph()
        self.module_stack = OrderedDict()
        self.tensor_attrs, self._parameter_names, self._module_paths = {}, None, None
        self._parameter_proxy_cache = {}
        function, args = self._placeholders(function, bound_self, concrete_args or {})
        patcher = _Patcher()
        try:
            self._patch(patcher, getattr(function, "__globals__", {}))
            result = function(*bound_self, *args)
            self.create_node("output", "output", (self.create_arg(result),), {})
        finally:
            patcher.restore()
        return self.graph

    def _placeholders(
        self, function: Callable[..., Any], bound_self: tuple, concrete: dict
    ) -> tuple[Callable[..., Any], list]:
        """One placeholder per parameter of ``function`` (after ``self``), and the function to call
        with their values, all positionally.

        As in torch.fx, keyword-only parameters come after the positional ones, then ``*args`` and
        ``**kwargs`` as the placeholders ``*args``/``**kwargs`` (their Proxies stand for the whole
        tuple and dict; ``concrete_args`` does not apply to them). A function with such parameters
        is called through a copy of its code that takes each of them as one positional argument.
        """
        parameters = sorted(
            list(inspect.signature(function).parameters.values())[len(bound_self) :],
            key=lambda parameter: _VARNAMES_ORDER[parameter.kind],
        )
        # Names forward does not take are ignored, as torch.fx ignores them.
        defaults_traced_value = self._concrete_defaults(parameters, concrete)
        args: list[Any] = []
        specialized: list[tuple[Node, Any, str]] = []
        for parameter in parameters:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                stars = "*" if parameter.kind == parameter.VAR_POSITIONAL else "**"
                args.append(self.proxy(self.create_node("placeholder", stars + parameter.name, (), {})))
            elif parameter.name in concrete:
                # Still an argument of the generated forward (as in torch.fx), defaulting to the traced
                # value where the parameters after it leave Python room for a default.
                value = concrete[parameter.name]
                default = (value,) if defaults_traced_value[parameter.name] else ()
                node = self.create_node("placeholder", parameter.name, default, {})
                if value is None or type(value) in _CHECKED_CONSTANTS:
                    specialized.append((node, value, parameter.name))
                args.append(value)
            else:
                default = () if parameter.default is parameter.empty else (parameter.default,)
                args.append(self.proxy(self.create_node("placeholder", parameter.name, default, {})))
        for node, value, name in specialized:  # after the placeholders: a call with another value raises
            self.create_node("call_function", check_specialized, (node, value, name), {})
        if any(_VARNAMES_ORDER[parameter.kind] for parameter in parameters):
            function = _all_positional(function, len(bound_self), parameters)
        return function, args

    @staticmethod
    def _concrete_defaults(parameters: list[inspect.Parameter], concrete: dict) -> dict[str, bool]:
        """Per concrete parameter, whether its placeholder may default to the traced value.

        The generated ``forward`` lists every placeholder positionally, and a default may not come
        before a parameter without one (``concrete_args={"flag": True}`` for ``forward(self, flag, x)``).
        """
        defaulted_tail = True  # every placeholder after this one has a default
        allowed: dict[str, bool] = {}
        for parameter in reversed(parameters):
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue  # written as ``*args``/``**kwargs``: allowed after defaults
            if parameter.name in concrete:
                allowed[parameter.name] = has_default = defaulted_tail
            else:
                has_default = parameter.default is not parameter.empty
            defaulted_tail = defaulted_tail and has_default
        return allowed

    def _patch_globals(self, patcher: _Patcher, globals_dict: dict, replaced: dict[int, Callable[..., Any]]) -> None:
        """Points a module's globals that name a recorded function (by import) at its recording version."""
        if id(globals_dict) in self._patched_globals:
            return
        self._patched_globals.add(id(globals_dict))
        for name, value in list(globals_dict.items()):
            if name.startswith("_") and id(value) in self._autowrap_function_ids:
                continue  # torch.fx autowraps public names only
            if id(value) in replaced and not isinstance(value, type):
                patcher.patch(globals_dict, name, replaced[id(value)])

    def _patch(self, patcher: _Patcher, root_globals: dict) -> None:
        tracer = self
        original_call = Module.__call__
        original_getattr = Module.__getattr__

        def module_call(mod: Module, *args: Any, **kwargs: Any) -> Any:
            def forward(*args: Any, **kwargs: Any) -> Any:
                # A submodule defined in another file may call functions imported there by name.
                tracer._patch_globals(patcher, getattr(type(mod).forward, "__globals__", {}), replaced)
                return original_call(mod, *args, **kwargs)

            return tracer.call_module(mod, forward, args, kwargs)

        def module_getattr(mod: Module, name: str) -> Any:
            value = original_getattr(mod, name)
            state = mod.__dict__
            if name in state.get("_parameters", ()) or name in state.get("_buffers", ()):
                return tracer.getattr(name, value, tracer._parameter_proxy_cache)
            return value

        # onnxnn's modules also keep their parameters and buffers in the instance dict (a plain
        # attribute read is the fast path), where ``__getattr__`` is never asked: read through
        # ``__getattribute__`` too, or ``self.weight * 2`` would compute on the tensor while
        # tracing and freeze the result into the graph as a constant.
        def module_getattribute(mod: Module, name: str) -> Any:
            value = object.__getattribute__(mod, name)
            if isinstance(value, Tensor) and not name.startswith("__"):
                state = object.__getattribute__(mod, "__dict__")
                if name in state.get("_parameters", ()) or name in state.get("_buffers", ()):
                    return tracer.getattr(name, value, tracer._parameter_proxy_cache)
            return value

        patcher.patch(Module, "__call__", module_call)
        patcher.patch(Module, "__getattr__", module_getattr)
        patcher.patch(Module, "__getattribute__", module_getattribute)
        replaced: dict[int, Callable[..., Any]] = {}
        top_level = sys.modules["onnxnn"]  # the parent package is loaded before fx
        namespaces = [top_level, _functional, *(getattr(top_level, name) for name in _FUNCTION_NAMESPACES)]
        for namespace in (*namespaces, *self._autowrap_modules):
            for name, function in _public_functions(namespace):
                wrapper = replaced.setdefault(id(function), _recording(function))
                patcher.patch(namespace, name, wrapper)
        for function in self._autowrap_functions:
            replaced.setdefault(id(function), _recording(function))
        for globals_dict, name in _WRAPPED:
            # A builtin (``wrap("len")``) is looked up in builtins and shadowed by a global, as in torch.fx.
            original = globals_dict[name] if name in globals_dict else getattr(builtins, name, None)
            if original is not None:
                patcher.patch(globals_dict, name, _recording(original))
        self._patched_globals = set()
        # ``from onnxnn.nn.functional import relu`` in the root's module: the same function, patched too.
        self._patch_globals(patcher, root_globals, replaced)
        for owner in Tensor.__mro__:
            if not owner.__module__.startswith("onnxnn."):
                continue
            for operation in _TENSOR_OPERATORS:
                for dunder in (f"__{operation}__", f"__r{operation}__"):
                    if dunder in vars(owner):
                        patcher.patch(owner, dunder, _deferring_to_proxy(vars(owner)[dunder]))


def _all_positional(function: Callable[..., Any], skip: int, parameters: list[inspect.Parameter]) -> Callable[..., Any]:
    """``function`` taking all its arguments (``skip`` bound ones, then ``parameters``) positionally.

    Keyword-only parameters, ``*args`` and ``**kwargs`` become plain parameters of a copy of the
    code (its local names list them in that order), so a Proxy can stand for the whole tuple or
    dict, as torch.fx does. A function whose signature is not its own code's (a decorator's
    wrapper) is called with its keyword-only parameters by keyword; it cannot take a Proxy as
    ``*args``.
    """
    code = getattr(function, "__code__", None)
    variadic = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    if isinstance(function, types.FunctionType) and code is not None:
        names = code.co_argcount + code.co_kwonlyargcount + bin(code.co_flags & variadic).count("1")
        if list(code.co_varnames[skip:names]) == [parameter.name for parameter in parameters]:
            code = code.replace(
                co_argcount=names, co_posonlyargcount=0, co_kwonlyargcount=0, co_flags=code.co_flags & ~variadic
            )
            return types.FunctionType(code, function.__globals__, function.__name__, None, function.__closure__)
    if any(parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) for parameter in parameters):
        raise TraceError(
            f"symbolic_trace cannot trace the *args or **kwargs of {function!r}: a plain function is needed"
        )
    keywords = [parameter.name for parameter in parameters if parameter.kind == parameter.KEYWORD_ONLY]

    def call_with_keywords(*values: Any) -> Any:
        split = len(values) - len(keywords)
        return function(*values[:split], **dict(zip(keywords, values[split:])))

    return call_with_keywords


def _deferring_to_proxy(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def operator_method(self: Any, other: Any) -> Any:
        if isinstance(other, Proxy):
            return NotImplemented
        return method(self, other)

    return operator_method


def symbolic_trace(root: Module | Callable[..., Any], concrete_args: dict[str, Any] | None = None) -> GraphModule:
    """Traces ``root`` with a ``Tracer`` and returns a ``GraphModule`` running the recorded graph.

    Args:
        root: the module (or function) to trace. No example inputs are needed.
        concrete_args: arguments to fix to a value during tracing (e.g. a flag steering control flow).

    Returns:
        A GraphModule with ``root``'s used submodules, parameters and buffers, whose ``forward``
        is generated from the graph (see ``.code`` and ``.graph``).

    Example::

        >>> gm = fx.symbolic_trace(model)
        >>> print(gm.code)
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else getattr(root, "__name__", "GraphModule")
    return GraphModule(tracer.root, graph, name)
