"""``onnxnn.compile``: PyTorch's ``torch.compile`` entry point, and the module wrapper it returns.

A function is returned as it is (its graphs are compiled and cached by structure anyway:
``runtime/compilation.py``); a module is wrapped in an ``OptimizedModule`` whose calls are
compiled whole (``runtime/fastpath/compiled_calls.py``), as ``torch.compile`` wraps one.
"""

from __future__ import annotations

from typing import Any, Callable

from .nn.modules._forward_replay import compiled_call
from .nn.modules._hooks import hookless
from .nn.modules.module import Module
from .runtime.compilation import compile as _compile_function

__all__ = ["compile", "OptimizedModule"]


def compile(
    model: Callable | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable = "onnxnn",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
):
    """Compiles a module's calls whole, or returns a function ready to run as compiled graphs.

    A module comes back wrapped in an ``OptimizedModule`` (its ``state_dict`` keys start with
    ``_orig_mod.``, as PyTorch's do; ``model.compile()`` compiles in place instead). Its calls
    under ``no_grad``, in evaluation mode and without hooks are traced once per structure of
    arguments and later run as one graph, without running the forward's Python, as ``jax.jit``
    runs a traced function. A structure is what ``torch.compile`` guards on: each tensor
    argument's shape, dtype and device, Python type (``Parameter``), ``requires_grad``, whether it
    has a ``.grad``, is a view (``_base``) and is contiguous; the Python scalars given; the
    modules' attributes, submodules, hooks and training modes; and their tensors' shapes, dtypes
    and ``requires_grad``. Their tensors are read as they are at each call (a weight changed in
    place, loaded or left pending by ``w.data.clamp_()``), and the returned tensors alias each
    other and the arguments as the forward's did (``(y, y[0])``, a view of the argument).

    What else the forward's Python reads is frozen at its trace: Python side effects that are not
    tensor operations on its arguments and its modules' tensors (appending to a list), globals and
    closures that are not tensors (a global float), attributes of objects that are not modules or
    containers (``self.config.scale``), a patched ``forward``, and whether a module's tensor has a
    ``.grad``. A forward that reads tensor data (``.item()``, a branch on values), draws random
    numbers, changes its arguments or modules, or reads a tensor from outside its arguments and
    modules (a global, a closure) is never traced: it runs as a plain call, as do calls that record
    gradients or train. A function comes back as it is: every onnxnn computation is already
    compiled and cached by structure.

    Args:
        model: a module or function; without it, returns a decorator.
        fullgraph, dynamic, options: accepted as in ``torch.compile``.
        backend: "onnxnn" (or "inductor", "eager", "aot_eager", accepted so ported scripts run).
        mode: one of torch.compile's modes.
        disable: return ``model`` itself.

    Returns:
        An ``OptimizedModule`` for a module, else ``model``.

    Example::

        >>> fast = onnxnn.compile(model.eval())
        >>> with onnxnn.no_grad():
        ...     y = fast(x)
    """
    checked = _compile_function(
        model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
    )
    if model is None:  # a decorator, its options checked now as torch.compile checks them
        return lambda function: compile(
            function, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if isinstance(model, Module) and not disable:
        return OptimizedModule(model)
    return checked


class OptimizedModule(Module):
    """A module whose calls are compiled whole (what ``onnxnn.compile(module)`` returns).

    It holds the module as ``_orig_mod``: parameters, buffers and ``state_dict`` keys are the
    module's under that prefix, its training mode is the module's, and attributes it lacks are
    read from and written to the module, as on PyTorch's ``OptimizedModule``.
    """

    _own_attributes = frozenset({"_orig_mod", "forward", "_super_module_initialized", "__dict__"})

    def __init__(self, module: Module):
        object.__setattr__(self, "_super_module_initialized", False)
        super().__init__()
        self._super_module_initialized = True
        self._orig_mod = module

    # Its own hooks run, but the module tree is never replayed as a plain call would be: the
    # compiled call replays it (and runs the module's hooks where it has any). Without hooks of
    # its own, the call goes to the compiled call directly: each frame on the way costs an
    # inference call a microsecond or two, its code evicted by onnxruntime's run.
    def __call__(self, *args, **kwargs):
        if hookless(self):
            return compiled_call(self._orig_mod, args, kwargs)
        return self._call_with_hooks(self.forward, args, kwargs)

    def forward(self, *args, **kwargs) -> Any:
        return compiled_call(self._orig_mod, args, kwargs)

    @property  # type: ignore[override]
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        # Module.__init__ sets the default before the module is known: the module's mode stays.
        if self._super_module_initialized:
            self._orig_mod.training = value

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._own_attributes:
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._own_attributes:
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)
