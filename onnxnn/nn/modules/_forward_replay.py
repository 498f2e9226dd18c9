"""Which module calls replay their forward instead of recording it again (``fastpath.forward_replay``).

A replay records what the forward recorded for the same structure, without running it. That is
only right when running it again would record the same nodes and do nothing else, which holds
for a call of a module tree where:

- every module is one of onnxnn's classes (its forward is onnxnn's code: layers, containers, an
  imported graph), in evaluation mode (training mode updates running statistics and draws
  dropout masks), without hooks or parametrizations (user code), and holding no tensor outside
  its parameters and buffers and no function that is not onnxnn's (``activation=`` of a
  transformer layer may be a user's);
- gradients are not recorded, and nothing watches or changes recording: no trace, observer,
  profiler, autocast, eager mode, export (``unbounded_depth``) or backward pass; the default
  dtype is the one of the trace.

The facts about a module tree are gathered once and kept until one of its modules changes (an
attribute set or deleted, a table of parameters, buffers or submodules changed: ``changed``
counts it in the module's instance dict), which also drops its traced structures. A tree whose
forward itself changes one of its modules is never replayed.
"""

from __future__ import annotations

import functools
import types
import weakref

from ...ir.caches import register_cache
from ...ir.dtypes import get_default_dtype
from ...ir.mode import MODE
from ...runtime.fastpath import forward_replay
from ...runtime.tensor import Tensor

__all__ = ["changed", "replays", "call"]

# Bumped by every change of any module: while it stays the same, no tree needs a closer look.
_epoch = [0]
_FUNCTION_TYPES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)


def changed(instance_dict: dict) -> None:
    """Notes that the module whose instance dict this is changed (an attribute, a table)."""
    instance_dict["_changes"] = instance_dict.get("_changes", 0) + 1
    _epoch[0] += 1


def _changes(instance_dicts: list) -> list:
    return [state.get("_changes", 0) for state in instance_dicts]


def replays() -> bool:
    """Whether a module call now may replay (the modes of the module doc; not the module's own facts)."""
    return (
        not MODE.grad.enabled
        and MODE.fast_path
        and MODE.trace is None
        and MODE.observer is None
        and MODE.profiler is None
        and MODE.autocast is None
        and not MODE.eager
        and not MODE.recording_only
        and not MODE.unbounded_depth
        and not MODE.in_backward
    )


class _Tree:
    """What a module call's replay needs to know about the module tree, as its modules were."""

    __slots__ = (
        "epoch",
        "owner",
        "instance_dicts",
        "changes",
        "hook_tables",
        "state",
        "templates",
        "replayable",
        "changes_itself",
        "default_dtype",
    )

    def __init__(self, module, changes_itself: bool):
        self.epoch = _epoch[0]
        self.owner = weakref.ref(module, functools.partial(_forget, _trees, id(module)))
        self.templates = forward_replay.ForwardTemplates()
        self.changes_itself = changes_itself
        self.default_dtype = get_default_dtype()
        # While the module itself cannot replay (a user's class, training mode), nothing below it
        # matters, and only its own changes can alter that: its subtree is not walked at every
        # call of a user's module whose forward sets an attribute.
        self.replayable = not changes_itself and _replayable_module(module)
        modules = list(module.modules()) if self.replayable else [module]
        self.instance_dicts = [each.__dict__ for each in modules]
        self.changes = _changes(self.instance_dicts)
        self.hook_tables: list = []
        self.state: list = []
        if not (self.replayable and all(map(_replayable_module, modules[1:]))):
            self.replayable = False
            return
        # Replacing a table is a change; hooks added to or removed from one are not, so a call looks.
        self.hook_tables = [
            table
            for each in modules
            for table in (each._forward_pre_hooks, each._forward_hooks, each._backward_pre_hooks, each._backward_hooks)
        ]
        self.state = [*module.parameters(), *module.buffers()]

    def unchanged(self) -> bool:
        """Whether no module of the tree changed since it was built (and notes the epoch if so)."""
        if self.epoch == _epoch[0]:
            return True
        if _changes(self.instance_dicts) != self.changes:
            return False
        self.epoch = _epoch[0]
        return True


_trees: dict = {}  # id(module) -> _Tree


def _clear() -> None:
    _trees.clear()
    forward_replay.reset_counts()


register_cache("forward replay templates", _clear)


def _forget(trees: dict, key: int, reference) -> None:
    tree = trees.get(key)
    if tree is not None and tree.owner is reference:
        del trees[key]


def _replayable_module(module) -> bool:
    if not type(module).__module__.startswith("onnxnn.") or module.training:
        return False
    if module._compiled_call_impl is not None or "parametrizations" in module._modules:
        return False
    registered = module._parameters.keys() | module._buffers.keys()
    for name, item in module.__dict__.items():
        if isinstance(item, Tensor) and name not in registered:
            return False
        if isinstance(item, _FUNCTION_TYPES) and not (getattr(item, "__module__", None) or "").startswith("onnxnn."):
            return False
    return True


def call(module, args: tuple, kwargs: dict):
    """``module.forward(*args, **kwargs)``, replayed where the module doc allows it.

    The caller has checked ``replays()`` and that no global hooks are registered.
    """
    # A tree is forgotten when its module is collected (``_forget``), before its id can be reused.
    tree = _trees.get(id(module))
    if tree is None:
        tree = _trees[id(module)] = _Tree(module, False)
    elif not tree.unchanged():
        tree = _trees[id(module)] = _Tree(module, tree.changes_itself)
    if not tree.replayable or tree.default_dtype is not get_default_dtype() or any(tree.hook_tables):
        return module.forward(*args, **kwargs)
    epoch = _epoch[0]
    result = forward_replay.call(tree.templates, module.forward, args, kwargs, tree.state)
    if _epoch[0] != epoch and not tree.unchanged():
        # Its forward changed a module of the tree: every call would trace it again.
        tree.changes_itself = True
        tree.replayable = False
    return result
