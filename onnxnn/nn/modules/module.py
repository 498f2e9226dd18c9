"""Module: the base class of every neural-network module, with PyTorch's ``torch.nn.Module`` API.

Attribute assignment routes Parameters, buffers and submodules into ``_parameters``,
``_buffers`` and ``_modules``. The walks over the tree (``parameters()``, ``buffers()``,
``modules()``...) live in ``_tree_walks.py``, hooks in ``_hooks.py``, state_dict in
``_state_dict.py`` and dtype/device conversion in ``_conversion.py``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from ...runtime.autograd import RemovableHandle  # noqa: F401  (PyTorch code reaches it through this module)
from ...runtime.compilation import compile as compile_callable
from ...runtime.tensor import Tensor
from ...runtime.type_queries import typename as _typename
from ..parameter import Buffer, Parameter
from . import _forward_replay, _hooks
from ._conversion import ConversionMixin
from ._forward_replay import replays as _replays
from ._parameter_lists import parameters_of
from ._tables import TABLE_NAMES, MirroredTable, TableSlot, install_table
from ._hooks import (
    _global_backward_hooks,
    _global_backward_pre_hooks,
    _global_forward_hooks,
    _global_forward_pre_hooks,
    ModuleHooksMixin,
    hookless,
    register_module_backward_hook,
    register_module_buffer_registration_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
    register_module_module_registration_hook,
    register_module_parameter_registration_hook,
)
from ._tree_walks import TreeWalksMixin
from ._state_dict import _IncompatibleKeys, StateDictMixin  # noqa: F401  (_IncompatibleKeys: as in PyTorch)

__all__ = [
    "Module",
    "register_module_forward_pre_hook",
    "register_module_forward_hook",
    "register_module_full_backward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_backward_hook",
    "register_module_buffer_registration_hook",
    "register_module_module_registration_hook",
    "register_module_parameter_registration_hook",
]


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * spaces + line for line in lines)


def _forward_unimplemented(self, *input: Any) -> None:
    """Defines the computation performed at every call; every subclass overrides it.

    Call the module instance rather than ``forward`` directly: the call runs the registered hooks.
    """
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')


def _registered(hooks: dict, module: "Module", name: str, value):
    """Runs the global registration hooks on ``value``; each may return a replacement."""
    for hook in hooks.values():
        output = hook(module, name, value)
        if output is not None:
            value = output
    return value


class Module(TreeWalksMixin, ModuleHooksMixin, StateDictMixin, ConversionMixin):
    """Base class for all neural network modules; your models should subclass it.

    Modules can contain other modules, assigned as regular attributes; they are then registered
    and converted too by :meth:`to` and friends. Call ``super().__init__()`` before assigning.

    Example::

        >>> class Model(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.weight = nn.Parameter(onnxnn.randn(4, 3))
        ...     def forward(self, x):
        ...         return x @ self.weight
    """

    dump_patches: bool = False
    _version: int = 1
    training: bool
    call_super_init: bool = False
    _compiled_call_impl: Callable | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if self.call_super_init is False and kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'"
            )
        if self.call_super_init is False and args:
            raise TypeError(
                f"{type(self).__name__}.__init__() takes 1 positional argument but {len(args) + 1} were given"
            )
        # object.__setattr__: our own __setattr__ needs these tables to exist first.
        setattr_ = super().__setattr__
        setattr_("training", True)
        install_table(self, "_parameters", MirroredTable())
        install_table(self, "_buffers", MirroredTable())
        setattr_("_non_persistent_buffers_set", set())
        setattr_("_backward_pre_hooks", OrderedDict())
        setattr_("_backward_hooks", OrderedDict())
        setattr_("_is_full_backward_hook", None)
        setattr_("_forward_hooks", OrderedDict())
        setattr_("_forward_hooks_with_kwargs", OrderedDict())
        setattr_("_forward_hooks_always_called", OrderedDict())
        setattr_("_forward_pre_hooks", OrderedDict())
        setattr_("_forward_pre_hooks_with_kwargs", OrderedDict())
        setattr_("_state_dict_hooks", OrderedDict())
        setattr_("_state_dict_pre_hooks", OrderedDict())
        setattr_("_load_state_dict_pre_hooks", OrderedDict())
        setattr_("_load_state_dict_post_hooks", OrderedDict())
        install_table(self, "_modules", MirroredTable())
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    forward: Callable[..., Any] = _forward_unimplemented

    # ------------------------------------------------------------------------ calling
    def _call_impl(self, *args, **kwargs):
        # Without hooks a call is just forward (checked on every call).
        if hookless(self):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(self.forward, args, kwargs)

    def _wrapped_call_impl(self, *args, **kwargs):
        # hookless, inlined with the compiled check: this runs for every module of every call, and
        # each frame more costs a call 0.15 us (a third of a module call's own overhead).
        if (
            self._compiled_call_impl is None
            and not self._forward_pre_hooks
            and not self._forward_hooks
            and not self._backward_pre_hooks
            and not self._backward_hooks
            and not _global_forward_pre_hooks
            and not _global_forward_hooks
            and not _global_backward_pre_hooks
            and not _global_backward_hooks
        ):
            # A structure seen before records without running forward (nn/modules/_forward_replay.py).
            if _replays():
                return _forward_replay.call(self, args, kwargs)
            return self.forward(*args, **kwargs)
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    __call__: Callable[..., Any] = _wrapped_call_impl

    def compile(self, *args, **kwargs) -> None:
        """Compiles this module's calls in place, with ``onnxnn.compile``'s arguments.

        A compiled module's call under ``no_grad``, in evaluation mode and without hooks, is traced
        whole (its Python forward runs only when a new structure of arguments comes) and computed
        at once as one graph; with inference weights embedded it runs that session directly. Other
        calls (training, recording gradients, hooks registered) are plain calls. Unlike
        ``onnxnn.compile(module)``, the ``state_dict`` keys stay as they are.

        Example::

            >>> model.eval().compile()
            >>> with onnxnn.no_grad():
            ...     y = model(x)
        """
        plain = compile_callable(self._call_impl, *args, **kwargs)  # checks the arguments as torch.compile does
        self._compiled_call_impl = plain if kwargs.get("disable") else _forward_replay.CompiledCall(self)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_compiled_call_impl", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name in TABLE_NAMES:
            if name in state:
                install_table(self, name, state[name])  # re-binds (pickled tables forget their owners)
        defaults = {
            "_forward_pre_hooks": OrderedDict,
            "_forward_pre_hooks_with_kwargs": OrderedDict,
            "_forward_hooks": OrderedDict,
            "_forward_hooks_with_kwargs": OrderedDict,
            "_forward_hooks_always_called": OrderedDict,
            "_state_dict_hooks": OrderedDict,
            "_state_dict_pre_hooks": OrderedDict,
            "_load_state_dict_pre_hooks": OrderedDict,
            "_load_state_dict_post_hooks": OrderedDict,
            "_non_persistent_buffers_set": set,
            "_backward_pre_hooks": OrderedDict,
            "_backward_hooks": OrderedDict,
        }
        for name, factory in defaults.items():
            if name not in self.__dict__:
                self.__dict__[name] = factory()
        self.__dict__.setdefault("_is_full_backward_hook", None)

    # ------------------------------------------------------------------------ registration
    def _check_new_name(self, kind: str, table: str, name) -> None:
        """PyTorch's checks of a name about to be registered as a ``kind`` (buffer or parameter)."""
        if table not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in self.__dict__[table]:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Adds a buffer: state that is not a parameter (e.g. BatchNorm's ``running_mean``).

        Args:
            name: the attribute name of the buffer.
            tensor: the buffer, or None to reserve the name (left out of ``state_dict`` and
                conversions).
            persistent: whether the buffer is part of the module's ``state_dict``.

        Example::

            >>> self.register_buffer("running_mean", onnxnn.zeros(num_features))
        """
        self._check_new_name("buffer", "_buffers", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (torch Tensor or None required)"
            )
        tensor = _registered(_hooks._global_buffer_registration_hooks, self, name, tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Adds a parameter, accessible as an attribute under ``name``.

        Args:
            name: the attribute name of the parameter.
            param: the parameter, or None to reserve the name (left out of ``state_dict``).
        """
        self._check_new_name("parameter", "_parameters", name)
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' (torch.nn.Parameter or None required)"
            )
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method."
            )
        param = _registered(_hooks._global_parameter_registration_hooks, self, name, param)
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module | None") -> None:
        """Adds a child module, accessible as an attribute under ``name``."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        module = _registered(_hooks._global_module_registration_hooks, self, name, module)
        self._modules[name] = module

    def register_module(self, name: str, module: "Module | None") -> None:
        """Alias for :meth:`add_module`."""
        self.add_module(name, module)

    # ------------------------------------------------------------------------ attribute routing
    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: registered state lives in the three tables.
        state = self.__dict__
        if "_parameters" in state and name in state["_parameters"]:
            return state["_parameters"][name]
        if "_buffers" in state and name in state["_buffers"]:
            return state["_buffers"][name]
        if "_modules" in state and name in state["_modules"]:
            return state["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        _forward_replay.changed(self.__dict__)  # what its forward reads may have changed
        if name in TABLE_NAMES:  # a whole table replaced (containers renumbering their modules)
            install_table(self, name, value)
            return

        def remove_from(*tables) -> None:
            for table in tables:
                if name in table:
                    if isinstance(table, dict):
                        del table[name]
                    else:
                        table.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' (torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
            for hook in _hooks._global_module_registration_hooks.values():
                output = hook(self, name, value)
                if output is not None:
                    value = output
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' (torch.nn.Module or None expected)"
                )
            for hook in _hooks._global_module_registration_hooks.values():
                output = hook(self, name, value)
                if output is not None:
                    value = output
            modules[name] = value
            return
        buffers = self.__dict__.get("_buffers")
        if isinstance(value, Buffer) or (buffers is not None and name in buffers):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(torch.nn.Buffer, torch.Tensor or None expected)"
                )
            if isinstance(value, Buffer):
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            self.register_buffer(name, value, persistent)
            return
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        _forward_replay.changed(self.__dict__)
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            super().__delattr__(name)

    def __dir__(self) -> list:
        keys = {*dir(type(self)), *self.__dict__, *self._parameters, *self._modules, *self._buffers}
        return sorted(key for key in keys if not key[0].isdigit())

    # ------------------------------------------------------------------------ lookup by path
    def _get_name(self) -> str:
        return type(self).__name__

    def get_submodule(self, target: str) -> "Module":
        """Returns the submodule at the dotted path ``target`` (``""`` is this module).

        Raises:
            AttributeError: naming the module that lacks the next step, or a step that is not a Module.
        """
        if target == "":
            return self
        module = self
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(module._get_name() + " has no attribute `" + item + "`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return module

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Sets the submodule at the dotted path ``target`` (its parent must exist).

        Args:
            strict: only replace an existing submodule; otherwise a new name may be added.
        """
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        if not isinstance(module, Module):
            raise ValueError("`module` is not an nn.Module, found " + str(type(module)))
        parent = self if len(atoms) == 1 else self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]):
            if not isinstance(getattr(parent, atoms[-1]), Module):
                raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target: str) -> Parameter:
        """Returns the parameter at the dotted path ``target`` (e.g. ``"net_b.linear.weight"``)."""
        module_path, _, param_name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, param_name):
            raise AttributeError(module._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(module, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """Returns the buffer at the dotted path ``target``."""
        module_path, _, buffer_name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, buffer_name):
            raise AttributeError(module._get_name() + " has no attribute `" + buffer_name + "`")
        buffer = getattr(module, buffer_name)
        if buffer_name not in module._buffers:
            raise AttributeError("`" + buffer_name + "` is not a buffer")
        return buffer

    # ------------------------------------------------------------------------ modes and grads
    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Applies ``fn`` to every submodule (children first, recursively) and then to self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def train(self, mode: bool = True) -> "Module":
        """Sets this module and its descendants in training mode (``mode=False``: evaluation); returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        """Sets the module in evaluation mode, the same as ``self.train(False)``; returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Sets ``requires_grad`` of every parameter (e.g. to freeze part of a model); returns self."""
        if not isinstance(requires_grad, bool):  # checked first: a refused flag changes no parameter
            raise TypeError(
                "requires_grad_(): argument 'requires_grad' (position 1) must be bool, not "
                f"{type(requires_grad).__name__}"
            )
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Resets the gradients of all parameters: to None, or with ``set_to_none=False`` to zeros."""
        for param in parameters_of(self, Module):
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
                continue
            grad = param.grad
            if grad.grad_fn is not None:
                grad.detach_()
            else:
                grad.requires_grad_(False)
            grad.zero_()

    # ------------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        """The module-specific part of the repr; override it (one or several lines)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


# Set after the class body, whose type annotations (on the mixins) say what reading a table gives:
# the slots only route ``object.__setattr__`` of a whole table to install_table (see _tables.py).
for _table_name in sorted(TABLE_NAMES):
    setattr(Module, _table_name, TableSlot(_table_name))
