"""Module hooks: global hook tables and per-module hook registration.

Forward hooks run in ``Module._call_impl``; the backward hooks' machinery (PyTorch's
``BackwardHook``) is in ``_backward_hooks.py``.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Callable

from ...runtime.autograd import RemovableHandle, add_hook
from ...runtime.tensor import Tensor
from ._backward_hooks import BackwardHook, attach_non_full_backward_hooks

__all__ = [
    "register_module_forward_pre_hook",
    "register_module_forward_hook",
    "register_module_full_backward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_backward_hook",
    "register_module_buffer_registration_hook",
    "register_module_module_registration_hook",
    "register_module_parameter_registration_hook",
]

# Global hooks, shared by every module. Handles get ids from one counter, so a global and a
# local hook never share an id (the with_kwargs / always_call tables rely on that).
_global_buffer_registration_hooks: OrderedDict = OrderedDict()
_global_module_registration_hooks: OrderedDict = OrderedDict()
_global_parameter_registration_hooks: OrderedDict = OrderedDict()
_global_backward_pre_hooks: OrderedDict = OrderedDict()
_global_backward_hooks: OrderedDict = OrderedDict()
_global_forward_pre_hooks: OrderedDict = OrderedDict()
_global_forward_hooks: OrderedDict = OrderedDict()
_global_forward_hooks_with_kwargs: OrderedDict = OrderedDict()
_global_forward_hooks_always_called: OrderedDict = OrderedDict()


class _GlobalBackwardKind:
    """Whether the global backward hooks are full (True), legacy (False) or not chosen yet (None)."""

    is_full: bool | None = None

    @classmethod
    def choose(cls, full: bool) -> None:
        if cls.is_full is (not full):
            raise RuntimeError(
                "Cannot use both regular backward hooks and full backward hooks as a "
                "global Module hook. Please use only one of them."
            )
        cls.is_full = full


def hookless(module) -> bool:
    """Whether calling ``module`` is just its forward: no hook of its own and no global one."""
    return not (
        module._forward_pre_hooks
        or module._forward_hooks
        or module._backward_pre_hooks
        or module._backward_hooks
        or _global_forward_pre_hooks
        or _global_forward_hooks
        or _global_backward_pre_hooks
        or _global_backward_hooks
    )


def register_module_buffer_registration_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, name, buffer) -> None or new buffer`` run by every ``register_buffer``."""
    return add_hook(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, name, submodule) -> None or new submodule`` run by every ``add_module``."""
    return add_hook(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, name, param) -> None or new parameter`` run by every ``register_parameter``."""
    return add_hook(_global_parameter_registration_hooks, hook)


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """Registers a forward pre-hook common to all modules, run before every module's own pre-hooks.

    The hook is called as ``hook(module, args) -> None or modified args`` (a single returned
    value is wrapped in a tuple).

    Returns:
        a handle whose ``remove()`` unregisters the hook.
    """
    return add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(
    hook: Callable, *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """Registers a forward hook common to all modules, run before every module's own forward hooks.

    The hook is called as ``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``
    with ``with_kwargs=True``) and may return a replacement output. With ``always_call=True`` it
    also runs when forward raises.
    """
    handle = RemovableHandle(
        _global_forward_hooks, _global_forward_hooks_with_kwargs, _global_forward_hooks_always_called
    )
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, grad_output) -> None or new grad_output`` common to all modules."""
    return add_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, grad_input, grad_output) -> None or new grad_input`` common to all modules."""
    _GlobalBackwardKind.choose(full=True)
    return add_hook(_global_backward_hooks, hook)


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """Deprecated global form of ``register_backward_hook``; use :func:`register_module_full_backward_hook`."""
    _GlobalBackwardKind.choose(full=False)
    return add_hook(_global_backward_hooks, hook)


class ModuleHooksMixin:
    """The per-module hook registration methods of :class:`~onnxnn.nn.Module`."""

    # The hook tables (handle id -> hook or flag) that Module.__init__ creates, used by the methods below.
    _forward_pre_hooks: OrderedDict[int, Callable]
    _forward_pre_hooks_with_kwargs: OrderedDict[int, bool]
    _forward_hooks: OrderedDict[int, Callable]
    _forward_hooks_with_kwargs: OrderedDict[int, bool]
    _forward_hooks_always_called: OrderedDict[int, bool]
    _backward_pre_hooks: OrderedDict[int, Callable]
    _backward_hooks: OrderedDict[int, Callable]
    _is_full_backward_hook: bool | None  # None until the first module backward hook says which kind

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """Registers a forward pre-hook, called before every ``forward()``.

        The hook is called as ``hook(module, args) -> None or modified input``; a single returned
        value is wrapped in a tuple. With ``with_kwargs=True`` it is called as
        ``hook(module, args, kwargs) -> None or (new_args, new_kwargs)``.

        Args:
            hook: the user-defined hook.
            prepend: fire before the existing forward pre-hooks of this module (global hooks
                registered with ``register_module_forward_pre_hook`` still fire first).
            with_kwargs: pass the keyword arguments of the call to the hook.

        Returns:
            a handle whose ``remove()`` unregisters the hook (also a context manager).
        """
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
    ) -> RemovableHandle:
        """Registers a forward hook, called after every ``forward()`` has computed an output.

        The hook is called as ``hook(module, args, output) -> None or modified output`` (with
        ``with_kwargs=True``: ``hook(module, args, kwargs, output)``).

        Args:
            hook: the user-defined hook.
            prepend: fire before the existing forward hooks of this module (global hooks fire first).
            with_kwargs: pass the keyword arguments of the call to the hook.
            always_call: run the hook even when the module's call raises.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(
            self._forward_hooks, self._forward_hooks_with_kwargs, self._forward_hooks_always_called
        )
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Registers ``hook(module, grad_output) -> None or new grad_output``, called in backward.

        ``grad_output`` is a tuple with one entry per module output (None for non-Tensors).
        Global backward pre-hooks fire before this module's.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Registers ``hook(module, grad_input, grad_output) -> None or new grad_input``.

        The hook runs once the gradients with respect to the module's positional tensor inputs
        are computed; what it returns replaces ``grad_input`` in the rest of the backward pass.
        Entries are None for non-Tensor arguments and tensors that do not require grad.

        Example::

            >>> handle = module.register_full_backward_hook(
            ...     lambda m, grad_input, grad_output: [onnxnn.full_like(grad_input[0], 42.)])

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        if self._is_full_backward_hook is False:
            raise RuntimeError(
                "Cannot use both regular backward hooks and full backward hooks on a "
                "single Module. Please use only one of them."
            )
        self._is_full_backward_hook = True
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """Registers a backward hook on the last autograd node of the module's output (deprecated).

        Deprecated in favor of :meth:`register_full_backward_hook`; calling the module warns
        (``FutureWarning``) when the hook will miss part of ``grad_input`` or ``grad_output``.
        """
        if self._is_full_backward_hook is True:
            raise RuntimeError(
                "Cannot use both regular backward hooks and full backward hooks on a "
                "single Module. Please use only one of them."
            )
        self._is_full_backward_hook = False
        return add_hook(self._backward_hooks, hook)

    def _get_backward_hooks(self) -> tuple[list, list]:
        full_hooks: list = []
        non_full_hooks: list = []
        if _GlobalBackwardKind.is_full is True:
            full_hooks += _global_backward_hooks.values()
        elif _GlobalBackwardKind.is_full is False:
            non_full_hooks += _global_backward_hooks.values()
        if self._is_full_backward_hook is True:
            full_hooks += self._backward_hooks.values()
        elif self._is_full_backward_hook is False:
            non_full_hooks += self._backward_hooks.values()
        return full_hooks, non_full_hooks

    def _get_backward_pre_hooks(self) -> list:
        return [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]

    def _call_with_hooks(self, forward_call: Callable, args: tuple, kwargs: dict):
        """The slow path of ``__call__``: forward pre-hooks, forward, forward hooks, backward hooks."""
        result = None
        called_always = set()
        try:
            full_backward_hooks: list
            non_full_backward_hooks: list
            full_backward_hooks, non_full_backward_hooks = [], []
            backward_pre_hooks = []
            if self._backward_pre_hooks or _global_backward_pre_hooks:
                backward_pre_hooks = self._get_backward_pre_hooks()
            if self._backward_hooks or _global_backward_hooks:
                full_backward_hooks, non_full_backward_hooks = self._get_backward_hooks()

            for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    args_kwargs = hook(self, args, kwargs)
                    if args_kwargs is not None:
                        if isinstance(args_kwargs, tuple) and len(args_kwargs) == 2:
                            args, kwargs = args_kwargs
                        else:
                            raise RuntimeError(
                                "forward pre-hook must return None or a tuple of "
                                f"(new_args, new_kwargs), but got {args_kwargs}."
                            )
                else:
                    new_args = hook(self, args)
                    if new_args is not None:
                        args = new_args if isinstance(new_args, tuple) else (new_args,)

            backward_hook = None
            if full_backward_hooks or backward_pre_hooks:
                backward_hook = BackwardHook(self, full_backward_hooks, backward_pre_hooks)
                args = backward_hook.setup_input_hook(args)

            result = forward_call(*args, **kwargs)

            for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called:
                    called_always.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
                    hook_result = hook(self, args, kwargs, result)
                else:
                    hook_result = hook(self, args, result)
                if hook_result is not None:
                    result = hook_result

            if backward_hook is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn(
                        "For backward hooks to be called, module output should be a Tensor or a "
                        f"tuple of Tensors but received {type(result)}",
                        stacklevel=3,
                    )
                result = backward_hook.setup_output_hook(result)

            if non_full_backward_hooks:
                attach_non_full_backward_hooks(self, non_full_backward_hooks, args, result)
            return result
        except Exception:
            self._run_always_called_hooks(args, kwargs, result, called_always)
            raise

    def _run_always_called_hooks(self, args, kwargs, result, already_called: set) -> None:
        """After forward raised: run the ``always_call`` forward hooks that did not run yet."""
        for kind, hooks, always_called, with_kwargs in (
            (
                "global module forward hook",
                _global_forward_hooks,
                _global_forward_hooks_always_called,
                _global_forward_hooks_with_kwargs,
            ),
            (
                "module forward hook",
                self._forward_hooks,
                self._forward_hooks_always_called,
                self._forward_hooks_with_kwargs,
            ),
        ):
            for hook_id, hook in hooks.items():
                if hook_id not in always_called or hook_id in already_called:
                    continue
                try:
                    if hook_id in with_kwargs:
                        hook_result = hook(self, args, kwargs, result)
                    else:
                        hook_result = hook(self, args, result)
                    if hook_result is not None:
                        result = hook_result
                except Exception as error:
                    warnings.warn(
                        f"{kind} with ``always_call=True`` raised an exception that was silenced as "
                        f"another error was raised in forward: {error}"
                    )
