"""Optimizer: the base class of onnxnn's optimizers, with PyTorch's param groups, state and state_dict.

Every optimizer is a stateful class plus a pure functional step over lists of tensors (PyTorch's
``sgd(params, d_p_list, momentum_buffer_list, ...)``). The functional step only records: each new
parameter and state value is a lazy Tensor expression, rebound onto the existing handles. The
class's ``step()`` then realizes every new value with one ``executor.realize`` call, so one
optimizer step is one ONNX graph and one onnxruntime session run. Hyperparameters enter that graph
as fed 0-d inputs, never as embedded constants, so a scheduler changing ``lr`` reuses the compiled
session.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections import OrderedDict, defaultdict
from itertools import chain
from typing import Any, Callable, Iterable

from ..ir import dtypes
from ..runtime.autograd import RemovableHandle, _HookDict, add_hook
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.type_queries import typename as _typename
from ..runtime.internal import full_tensor, realize_step_values, rebind, value_of
from ..runtime.tensor import Tensor
from .step_recording import _as_step_tensor

__all__ = ["Optimizer", "required", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"]


class _RequiredParameter:
    """Marks a hyperparameter that every param group must specify (PyTorch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

_global_step_pre_hooks: OrderedDict = _HookDict()
_global_step_post_hooks: OrderedDict = _HookDict()

# Each optimizer's hooks, by attribute name: never pickled, so created again when unpickled.
_HOOK_DICTS = (
    "_optimizer_step_pre_hooks",
    "_optimizer_step_post_hooks",
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(optimizer, args, kwargs)`` run before the step of every optimizer.

    ``args`` are ``step``'s positional arguments, the optimizer first. The hook may return
    ``(new_args, new_kwargs)`` to replace them (the optimizer still first).
    """
    return add_hook(_global_step_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(optimizer, args, kwargs)`` run after the step of every optimizer."""
    return add_hook(_global_step_post_hooks, hook)


class Optimizer:
    """Base class for all optimizers.

    Args:
        params: an iterable of Tensors, or of dicts (param groups) each holding ``"params"`` and
            optional per-group hyperparameters overriding ``defaults``.
        defaults: the default value of every hyperparameter.

    Subclasses implement ``step(closure=None)``; it records the update of every parameter with a
    gradient and realizes all of them at once with :meth:`_realize_step`.
    """

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict = _HookDict()
        self._optimizer_step_post_hooks: OrderedDict = _HookDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = _HookDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = _HookDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = _HookDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = _HookDict()
        self._patch_step_function()
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, "
                f"but got {_typename(params)}"
            )
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # ------------------------------------------------------------------ pickling and repr
    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def _steps_as_tensors(self) -> None:
        """``step`` entries of an older state (Python numbers) become float32 0-d tensors."""
        for group in self.param_groups:
            for param in group["params"]:
                param_state = self.state.get(param)
                if param_state and "step" in param_state:
                    param_state["step"] = _as_step_tensor(param_state["step"])

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # An unpickled optimizer has no hooks (they are not pickled), nor has one of an older onnxnn.
        for name in _HOOK_DICTS:
            if name not in self.__dict__:
                setattr(self, name, _HookDict())
        self._patch_step_function()
        # Checkpoints written before a hyperparameter existed get its default.
        for group in self.param_groups:
            for name, default in self.defaults.items():
                if default is not required:
                    group.setdefault(name, default)

    def __repr__(self) -> str:
        text = self.__class__.__name__ + " ("
        for index, group in enumerate(self.param_groups):
            text += "\n"
            text += f"Parameter Group {index}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        text += ")"
        return text

    # ------------------------------------------------------------------ step hooks
    @staticmethod
    def profile_hook_step(func: Callable) -> Callable:
        """Wraps a subclass's ``step`` so it runs the global and per-optimizer step hooks."""

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            # The hooks see step's positional arguments with the optimizer first, as in PyTorch, and
            # new ones they return must keep it there.
            self = args[0]
            for pre_hook in chain(_global_step_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
                result = pre_hook(self, args, kwargs)
                if result is not None:
                    if isinstance(result, tuple) and len(result) == 2:
                        args, kwargs = result
                    else:
                        raise RuntimeError(
                            f"{func} must return None or a tuple of (new_args, new_kwargs), but got {result}."
                        )
            output = func(*args, **kwargs)
            for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_step_post_hooks.values()):
                post_hook(self, args, kwargs)
            return output

        wrapper.hooked = True  # type: ignore[attr-defined]  # marks the wrapped step (see _patch_step_function)
        return wrapper

    def _patch_step_function(self) -> None:
        # Only the most derived ``step`` is wrapped, so a subclass calling super().step() runs hooks once.
        if not getattr(self.__class__.step, "hooked", False):
            # Wrapped once per class, as PyTorch does, so step hooks run around every step.
            self.__class__.step = self.profile_hook_step(self.__class__.step)  # type: ignore[method-assign]

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Registers ``hook(optimizer, args, kwargs) -> None | (new_args, new_kwargs)`` run before ``step``.

        ``args`` are ``step``'s positional arguments, the optimizer first (``(optimizer, closure)``
        for ``step(closure)``); returned ``new_args`` replace them, so they start with the optimizer too.
        """
        return add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """Registers ``hook(optimizer, args, kwargs) -> None`` run after ``step`` (``args`` as the pre-hooks')."""
        return add_hook(self._optimizer_step_post_hooks, hook)

    # ------------------------------------------------------------------ state dict hooks
    @staticmethod
    def _add_hook(hooks: OrderedDict, hook: Callable, prepend: bool) -> RemovableHandle:
        handle = add_hook(hooks, hook)
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Registers a hook run at the start of :meth:`state_dict`, before the dict is built.

        The hook is called as ``hook(optimizer) -> None``; it may prepare the optimizer for saving.

        Args:
            hook: the hook.
            prepend: run it before the pre-hooks already registered, instead of after them.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        return self._add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Registers a hook run at the end of :meth:`state_dict`, on the dict it built.

        The hook is called as ``hook(optimizer, state_dict) -> state_dict or None``: it may modify
        the dict in place, or return a new one, which is then returned (and given to later hooks).

        Args:
            hook: the hook.
            prepend: run it before the post-hooks already registered, instead of after them.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        return self._add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Registers a hook run at the start of :meth:`load_state_dict`, before anything is loaded.

        The hook is called as ``hook(optimizer, state_dict) -> state_dict or None``, where
        ``state_dict`` is a shallow copy of the dict passed to ``load_state_dict``: it may modify
        that copy in place, or return a new dict, which is then loaded instead (for instance to
        match a saved dict's parameters to this optimizer's by their names).

        Args:
            hook: the hook.
            prepend: run it before the pre-hooks already registered, instead of after them.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        return self._add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Registers a hook run at the end of :meth:`load_state_dict`, once the state is loaded.

        The hook is called as ``hook(optimizer) -> None``.

        Args:
            hook: the hook.
            prepend: run it before the post-hooks already registered, instead of after them.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        return self._add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ------------------------------------------------------------------ param groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Adds a param group (a dict with ``"params"`` and optional hyperparameters) to ``param_groups``.

        Useful when fine-tuning: unfreeze layers and add them with their own learning rate.

        Raises:
            TypeError: ``param_group`` is not a dict, its params are a set, or one is not a Tensor.
            ValueError: a param is not a leaf, a required hyperparameter is missing, or a param is
                already in another group. Nothing is modified when an error is raised.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering "
                "of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        tensors, names = [], []
        for param in params:
            if isinstance(param, tuple):  # (name, tensor) pairs, as from named_parameters()
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        if names and len(names) != len(tensors):
            raise ValueError("all optimizer params should be with/without names. Some param names are missing")
        for param in tensors:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not self.defaults.get("differentiable", None) and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
        existing = set()
        for group in self.param_groups:
            existing.update(group["params"])
            if bool(names) != ("param_names" in group):
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {'with' if names else 'without'} names to the optimizer"
                )
        if not existing.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        if len(tensors) != len(set(tensors)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this will "
                "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3,
            )
        # Validated: now the group (the caller's dict, as in PyTorch) is completed and added.
        param_group["params"] = tensors
        if names:
            param_group["param_names"] = names
        for name, default in self.defaults.items():
            param_group.setdefault(name, default)
        self.param_groups.append(param_group)

    # ------------------------------------------------------------------ gradients
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Resets the gradients of all optimized tensors.

        Args:
            set_to_none: set ``.grad`` to None (the default) instead of filling it with zeros; the
                next backward then assigns a fresh gradient instead of accumulating.
        """
        for group in self.param_groups:
            for param in group["params"]:
                grad = param.grad
                if grad is None:
                    continue
                if set_to_none:
                    param.grad = None
                    continue
                if grad.grad_fn is not None:
                    grad.detach_()
                else:
                    grad.requires_grad_(False)
                # A realized zero array: zeroing records no graph of its own.
                rebind(grad, value_of(full_tensor(grad.shape, 0, grad.dtype, grad.device)))

    def step(self, closure: Callable[[], Any] | None = None):
        """Performs one optimization step: the updates of all parameters are realized together.

        Args:
            closure: re-evaluates the model and returns the loss (run with gradients enabled).
        """
        loss = self._run_closure(closure)
        _check_floating_point(self.param_groups)
        updated: list[Tensor] = []
        with no_grad():
            for group in self.param_groups:
                updated += self._update_group(group)
        self._realize_step(updated)
        return loss

    def _group_states(self, group: dict, names: tuple[str, ...], fresh_state: Callable[[Tensor], dict]) -> tuple:
        """``(params, grads, *states)``: the group's parameters that have a gradient, their gradients,
        then, for each name in ``names``, that state of each of them. A parameter's first step gives it
        the state ``fresh_state(param)``, whose entries' order ``state_dict`` keeps (PyTorch's)."""
        params: list = []
        grads: list = []
        columns: list[list] = [[] for _ in names]
        state_of = self.state
        for param in group["params"]:
            if param.grad is None:
                continue
            params.append(param)
            grads.append(param.grad)
            state = state_of[param]
            if len(state) == 0:
                state.update(fresh_state(param))
            for column, name in zip(columns, names):
                column.append(state[name])
        return (params, grads, *columns)

    def _update_group(self, group: dict) -> list[Tensor]:
        """Records the update of one param group; returns every parameter and state tensor it rebinds."""
        raise NotImplementedError

    def _run_closure(self, closure: Callable[[], Any] | None):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    @staticmethod
    def _realize_step(tensors: Iterable[Tensor]) -> None:
        """Computes every new parameter and state value of one step (``realization.realize_step``)."""
        realize_step_values(tensors)

    # ------------------------------------------------------------------ state dict
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state as a dict, in PyTorch's format.

        Returns:
            ``{"state": {index: {name: value}}, "param_groups": [{hyperparameters..., "params": [indices]}]}``
            where parameters are numbered in the order they appear across the groups. The hooks of
            :meth:`register_state_dict_pre_hook` run first, those of
            :meth:`register_state_dict_post_hook` last, on this dict.
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        mapping: dict[int, int] = {}
        start_index = 0

        def pack_group(group: dict) -> dict:
            nonlocal start_index
            packed = {key: value for key, value in group.items() if key != "params"}
            mapping.update(
                {
                    id(param): index
                    for index, param in enumerate(group["params"], start_index)
                    if id(param) not in mapping
                }
            )
            packed["params"] = [mapping[id(param)] for param in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(group) for group in self.param_groups]
        packed_state = {
            (mapping[id(key)] if isinstance(key, Tensor) else key): value for key, value in self.state.items()
        }
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Loads an optimizer state produced by :meth:`state_dict`.

        State tensors are copied and cast to their parameter's dtype and device (``step`` is kept
        as saved). The loaded dict is never aliased: stepping afterwards leaves it unchanged. The
        hooks of :meth:`register_load_state_dict_pre_hook` run first, on a shallow copy of
        ``state_dict``, those of :meth:`register_load_state_dict_post_hook` once it is loaded.

        Raises:
            ValueError: the number of groups, or the size of a group, differs from this optimizer's.
        """
        state_dict = state_dict.copy()  # the pre-hooks may edit it in place, never the caller's dict
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(group["params"]) != len(saved["params"]) for group, saved in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )
        id_map = dict(
            zip(
                chain.from_iterable(saved["params"] for saved in saved_groups),
                chain.from_iterable(group["params"] for group in groups),
            )
        )
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                param = id_map[key]
                state[param] = _cast_state(param, value)
            else:
                state[key] = copy.deepcopy(value)

        def update_group(group: dict, new_group: dict) -> dict:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(group, saved) for group, saved in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)


def _check_learning_rate(lr) -> None:
    """PyTorch's checks of an optimizer's ``lr``: a number or a 1-element tensor, not negative."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_adam_hyperparameters(lr, eps, betas, weight_decay) -> None:
    """PyTorch's checks of the Adam family's ``lr``, ``eps``, ``betas`` and ``weight_decay``, in its
    order and with its messages (the first that fails is the one reported)."""
    _check_learning_rate(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for index in (0, 1):
        if not 0.0 <= betas[index] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {betas[index]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _check_floating_point(param_groups: list[dict]) -> None:
    """Refuses a step of an integer or bool parameter with a gradient (only a ``.grad`` assigned by
    hand gets one), before any group's state changes: its update would be truncated, overflow or be
    lost. PyTorch's steps raise in their first op that casts a float result into it.

    One attribute read per parameter: an integer parameter is rare, its gradient read only then.
    """
    for group in param_groups:
        for param in group["params"]:
            if not param.dtype.differentiable and param.grad is not None:
                name = dtypes.scalar_type_name(param.dtype)
                raise RuntimeError(
                    f"result type Float can't be cast to the desired output type {name}: optimizers "
                    "update floating-point parameters only"
                )


def _cast_state(param: Tensor, value, key: str | None = None):
    """A copy of one saved state entry, with tensors moved to ``param``'s device (and float dtype)."""
    if isinstance(value, Tensor):
        if key == "step":
            cast = value
        elif param.is_floating_point():
            cast = value.to(dtype=param.dtype, device=param.device)
        else:
            cast = value.to(device=param.device)
        # Values are immutable, so a fresh handle is a full copy: stepping rebinds only this one.
        return cast.detach()
    if isinstance(value, dict):
        return {name: _cast_state(param, item, key=name) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, item) for item in value)
    return copy.deepcopy(value)
