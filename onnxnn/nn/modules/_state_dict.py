"""Module.state_dict / load_state_dict and their hooks.

``state_dict`` is built from each module's ``_save_to_state_dict`` (parameters in registration
order, then persistent buffers, then ``_extra_state``), children after their parent, as in PyTorch.

``load_state_dict`` never leaves a module half-loaded (DESIGN principle 8): every module first
*plans* its copies in ``_load_from_state_dict`` (the override point keeps PyTorch's signature) and
all checks run before anything is written. The valid copies are then made and the load post-hooks
run (also when a size mismatch makes the load fail, as in PyTorch); if the load fails after all,
the copies are rolled back: in-place writes are rebindings, so restoring is rebinding the previous
values. ``set_extra_state`` runs last, once nothing else can fail, so a failed load never calls it
(and ``get_extra_state`` is never called to undo it).
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

from ...runtime.autograd import RemovableHandle, add_hook
from ...runtime.grad_mode import no_grad
from ...runtime.internal import restore_state, save_state
from ...runtime.tensor import Tensor
from ..parameter import Parameter
from ._wrapped_hook import _WrappedHook

if TYPE_CHECKING:
    from .module import Module

__all__ = ["StateDictMixin"]

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the missing and the unexpected keys."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class _PublicStateDictPostHook:
    """A hook registered with ``register_state_dict_post_hook``: it must not return a value."""

    def __init__(self, hook: Callable):
        self.hook = hook

    def __call__(self, module, state_dict, prefix, local_metadata):
        if self.hook(module, state_dict, prefix, local_metadata) is not None:
            raise RuntimeError("state_dict post-hook must return None")


def _mark_public(hook: Callable) -> None:
    """Marks ``hook`` as a public state_dict post-hook, on the function itself as PyTorch does, so that
    registering it again through the private form (whose hooks may return a value) is refused."""
    try:
        hook._from_public_api = True  # type: ignore[attr-defined]  # PyTorch's mark, read by other code too
    except AttributeError:  # a bound method or a builtin takes no attribute (PyTorch would fail here)
        pass


class _LoadPlan:
    """The writes a running ``load_state_dict`` has validated, applied only once all checks pass."""

    def __init__(self):
        self.writes: list = []  # (module, name, current tensor, new value, is parameter, assign)
        self.extra_states: list = []  # (module, state)


_ACTIVE = threading.local()


def _active_plan() -> _LoadPlan | None:
    return getattr(_ACTIVE, "plan", None)


def _apply_write(module, name: str, current: Tensor, value: Tensor, is_parameter: bool, assign: bool) -> None:
    with no_grad():
        if not assign:
            current.copy_(value)
        elif is_parameter:
            if isinstance(value, Parameter):
                value.requires_grad_(current.requires_grad)
            else:
                value = Parameter(value, requires_grad=current.requires_grad)
            module._parameters[name] = value
        else:
            module._buffers[name] = value


class _Undo:
    """Remembers what the applied writes replaced, to restore it if the load fails after all."""

    def __init__(self):
        self.steps: list = []

    def record_write(self, module, name: str, current: Tensor, is_parameter: bool, assign: bool) -> None:
        if assign:
            table = module._parameters if is_parameter else module._buffers
            self.steps.append(lambda: table.__setitem__(name, current))
        else:
            saved = save_state(current)
            self.steps.append(lambda: restore_state(current, saved))

    def undo(self) -> None:
        for step in reversed(self.steps):
            step()


class StateDictMixin:
    """The state_dict methods of :class:`~onnxnn.nn.Module`."""

    # The tables that Module.__init__ creates, used by the methods below.
    _parameters: OrderedDict[str, Parameter | None]
    _buffers: OrderedDict[str, Tensor | None]
    _non_persistent_buffers_set: set[str]
    _modules: OrderedDict[str, Module | None]
    _version: int
    _state_dict_hooks: OrderedDict[int, Callable]
    _state_dict_pre_hooks: OrderedDict[int, Callable]
    _load_state_dict_pre_hooks: OrderedDict[int, Callable]
    _load_state_dict_post_hooks: OrderedDict[int, Callable]

    # ------------------------------------------------------------------------ saving
    def get_extra_state(self) -> Any:
        """Returns extra (picklable) state to store in the ``state_dict`` under ``_extra_state``.

        Implement it together with :meth:`set_extra_state`; it is only called when overridden.
        """
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template="
            "bug-report.yml to report this bug."
        )

    def set_extra_state(self, state: Any) -> None:
        """Restores the extra state found in a ``state_dict`` (the counterpart of :meth:`get_extra_state`)."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template="
            "bug-report.yml to report this bug."
        )

    def _has_extra_state_getter(self) -> bool:
        return type(self).get_extra_state is not StateDictMixin.get_extra_state

    def _has_extra_state_setter(self) -> bool:
        return type(self).set_extra_state is not StateDictMixin.set_extra_state

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """Writes this module's own state (not its children's) into ``destination``."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buffer if keep_vars else buffer.detach()
        if self._has_extra_state_getter():
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """Returns an ordered dictionary of the module's whole state: parameters and persistent buffers.

        Keys are dotted paths (``"l1.weight"``); per module its parameters come first in
        registration order, then persistent buffers, then ``_extra_state``, then its children.
        Entries registered as None are left out. The dictionary has a ``_metadata`` attribute
        holding ``{"version": ...}`` per module path.

        Args:
            destination: a dict to fill and return instead of a new ``OrderedDict``.
            prefix: a prefix added to every key.
            keep_vars: return the tensors themselves instead of detached ones.

        Example::

            >>> list(nn.Linear(2, 1).state_dict().keys())
            ['weight', 'bias']
        """
        if args:
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead. Refer to "
                "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
                " for details.",
                FutureWarning,
                stacklevel=2,
            )
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if result is not None:
                destination = result
        return destination

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Registers ``hook(module, prefix, keep_vars) -> None``, called before ``state_dict`` runs."""
        return add_hook(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Registers ``hook(module, state_dict, prefix, local_metadata) -> None``, called after ``state_dict``.

        The hook may modify ``state_dict`` in place.
        """
        _mark_public(hook)
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = _PublicStateDictPostHook(hook)
        return handle

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        # The older private form: the hook may return a new state_dict.
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook"
            )
        return add_hook(self._state_dict_hooks, hook)

    # ------------------------------------------------------------------------ loading
    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Registers a hook run before this module's part of ``load_state_dict`` is loaded.

        It is called as ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs) -> None`` and may edit ``state_dict`` in place.
        """
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False) -> RemovableHandle:
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = _WrappedHook(hook, self if with_module else None)
        return handle

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Registers ``hook(module, incompatible_keys) -> None``, run after this module's state is loaded.

        ``incompatible_keys.missing_keys`` and ``.unexpected_keys`` may be edited in place; with
        ``strict=True`` what remains in them after the hooks decides whether the load fails.
        """
        return add_hook(self._load_state_dict_post_hooks, hook)

    def _load_from_state_dict(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        """Loads this module's own state (not its children's) from ``state_dict``.

        The override point for modules with special formats; called with PyTorch's arguments.
        Problems are appended to ``error_msgs`` / the key lists. Inside ``load_state_dict`` the
        copies are only planned here and applied once the whole model validated.
        """
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in (*self._parameters.items(), *persistent_buffers.items()) if v is not None}
        assign = bool(local_metadata.get("assign_to_params_buffers", False))
        plan = _active_plan()
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(input_param)}"
                )
                continue
            # Backward compatibility: 1-element checkpoints of what is now a 0-d tensor (only one
            # element: a longer 1-D tensor is a size mismatch, as in PyTorch).
            if len(param.shape) == 0 and len(input_param.shape) == 1 and input_param.shape[0] == 1:
                input_param = input_param[0]
            if input_param.shape != param.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {input_param.shape} "
                    f"from checkpoint, the shape in current model is {param.shape}."
                )
                continue
            write = (self, name, param, input_param, name in self._parameters, assign)
            if plan is not None:
                plan.writes.append(write)
            else:
                _apply_write(*write)
        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if self._has_extra_state_setter():
            if extra_state_key in state_dict:
                if plan is not None:
                    plan.extra_states.append((self, state_dict[extra_state_key]))
                else:
                    self.set_extra_state(state_dict[extra_state_key])
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_state_key:
                    input_name = key[len(prefix) :].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict: Mapping, strict: bool = True, assign: bool = False):
        """Copies parameters and buffers from ``state_dict`` into this module and its descendants.

        Everything is checked before anything is written: a load that raises leaves the model
        exactly as it was. ``set_extra_state`` runs last; if one raises, the tensors are restored
        but the extra states set before it stay set (their previous values are never asked for).

        Args:
            state_dict: a mapping of dotted keys to tensors (as returned by :meth:`state_dict`).
            strict: require the keys to match this module's ``state_dict()`` keys exactly.
            assign: put the given tensors into the module (as Parameters keeping the current
                ``requires_grad``) instead of copying their values into the current tensors.

        Returns:
            ``NamedTuple`` with ``missing_keys`` and ``unexpected_keys`` (lists of str).

        Raises:
            RuntimeError: listing every missing / unexpected key (when ``strict``) and every
                shape mismatch, e.g. ``Error(s) in loading state_dict for Net: ...``.

        Example::

            >>> net.load_state_dict(other.state_dict())
            <All keys matched successfully>
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys: list = []
        unexpected_keys: list = []
        error_msgs: list = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # hooks and overrides may edit it: never the caller's
        if metadata is not None:
            state_dict._metadata = metadata  # type: ignore[attr-defined]  # PyTorch keeps it as an attribute of the dict

        plan = _LoadPlan()
        modules_in_order: list = []

        def plan_module(module, local_state_dict: dict, prefix: str = "") -> None:
            local_metadata = dict({} if metadata is None else metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(
                local_state_dict, prefix, local_metadata, True, missing_keys, unexpected_keys, error_msgs
            )
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    plan_module(child, child_state_dict, child_prefix)
            modules_in_order.append(module)  # post-order: the order PyTorch runs post-hooks in

        previous = _active_plan()
        _ACTIVE.plan = plan
        try:
            plan_module(self, state_dict)
        finally:
            _ACTIVE.plan = previous

        # The validated writes are applied before the post-hooks, which see the loaded tensors as in
        # PyTorch and may clear (or add) incompatible keys; they run even when a size mismatch makes
        # the load fail, as PyTorch's do. A load that fails after all is rolled back. The extra
        # states are set last, once nothing else can fail: getting them to undo a setter would call
        # get_extra_state, which PyTorch's load never does.
        undo = _Undo()
        try:
            for module, name, current, value, is_parameter, assign_flag in plan.writes:
                undo.record_write(module, name, current, is_parameter, assign_flag)
                _apply_write(module, name, current, value, is_parameter, assign_flag)
            incompatible_keys = _IncompatibleKeys(missing_keys, unexpected_keys)
            for module in modules_in_order:
                for hook in module._load_state_dict_post_hooks.values():
                    out = hook(module, incompatible_keys)
                    assert out is None, (
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not expected to "
                        "return new values, if incompatible_keys need to be modified, it should be done inplace."
                    )
            if error_msgs or (strict and (missing_keys or unexpected_keys)):
                raise RuntimeError(self._load_error_message(strict, missing_keys, unexpected_keys, error_msgs))
            for module, extra_state in plan.extra_states:
                module.set_extra_state(extra_state)
        except BaseException:
            undo.undo()
            raise
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    def _load_error_message(self, strict: bool, missing_keys: list, unexpected_keys: list, error_msgs: list) -> str:
        messages = list(error_msgs)
        if strict:
            if unexpected_keys:
                messages.insert(
                    0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected_keys))
                )
            if missing_keys:
                messages.insert(
                    0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing_keys))
                )
        return "Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__, "\n\t".join(messages))
