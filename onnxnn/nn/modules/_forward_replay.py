"""Which module calls replay their forward instead of recording it again (``fastpath.forward_replay``).

A replay records what the forward recorded for the same structure, without running it. That is
only right when running it again would record the same nodes and do nothing else, which holds
for a call of a module tree where:

- every module is one of onnxnn's classes (its forward is onnxnn's code: layers, containers, an
  imported graph), without hooks or parametrizations (user code), and holding no tensor outside
  its parameters and buffers and no function that is not onnxnn's (``activation=`` of a
  transformer layer may be a user's);
- nothing watches or changes recording: no trace, observer, profiler, autocast, anomaly mode,
  eager mode, export (``unbounded_depth``) or backward pass; the default dtype is the one of the trace.

Training mode and recorded gradients are part of the structure: ``train()``/``eval()`` sets an
attribute, which drops the tree's traces, and which tensors require gradients is keyed
(``forward_replay.call``); a replay recording gradients makes the backward functions the forward
made. What a forward does besides recording in training mode, a replay repeats: it draws new
dropout masks and updates running statistics (``runtime/fastpath/forward_replay.py``).

The facts about a module tree are gathered once and kept until one of its modules changes (an
attribute set or deleted, a table of parameters, buffers or submodules changed: ``changed``
counts it in the module's instance dict), which also drops its traced structures. The lists,
dicts and sets its modules keep in attributes (``Upsample.size`` is the list given, as in
PyTorch) change without an attribute being set: at every call, what they hold is compared with
what they held (``_containers``), and a change drops the traced structures too. A tree whose
forward itself sets an attribute of one of its modules is never replayed; one that changes a
list of theirs at every call is never traced.

A compiled module (``Module.compile``, ``onnxnn.compile``) keeps a tree of its own, on which the
first rule is lifted: its modules may be anyone's classes, and their plain tensor attributes are
state read at every call like parameters; its calls run as ``runtime/fastpath/compiled_calls.py``
says, whose strict traces refuse what else a user's forward could do that a replay would not.
"""

from __future__ import annotations

import functools
import types
import weakref
from operator import is_

from ...ir.caches import register_cache
from ...ir.dtypes import get_default_dtype
from ...ir.mode import MODE
from ...runtime.fastpath import compiled_calls, forward_replay
from ...runtime.tensor import Tensor
from . import _hooks

__all__ = ["changed", "replays", "call", "compiled_call", "CompiledCall"]

# Bumped by every change of any module: while it stays the same, no tree needs a closer look.
_epoch = [0]
_FUNCTION_TYPES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)
# Module.__init__'s tables: the parameter, buffer and submodule tables count their changes
# (``changed``), hooks are looked at every call, and the rest is not read by a forward.
_MODULE_TABLES = frozenset(
    {
        "_parameters",
        "_buffers",
        "_modules",
        "_non_persistent_buffers_set",
        "_backward_pre_hooks",
        "_backward_hooks",
        "_forward_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_forward_pre_hooks",
        "_forward_pre_hooks_with_kwargs",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
    }
)


def changed(instance_dict: dict) -> None:
    """Notes that the module whose instance dict this is changed (an attribute, a table)."""
    instance_dict["_changes"] = instance_dict.get("_changes", 0) + 1
    _epoch[0] += 1


def _changes(instance_dicts: list) -> list:
    return [state.get("_changes", 0) for state in instance_dicts]


def replays() -> bool:
    """Whether a module call now may replay (the modes of the module doc; not the module's own facts)."""
    grad_mode = MODE.grad  # per thread: each of its attributes costs more than a plain one
    return (
        MODE.fast_path
        and MODE.trace is None
        and MODE.observer is None
        and MODE.profiler is None
        and MODE.autocast is None
        and not MODE.eager
        and not (grad_mode.recording_only or grad_mode.unbounded_depth or grad_mode.in_backward)
        # Backward functions made in anomaly mode keep the stack of the forward that made them.
        and not (grad_mode.enabled and MODE.anomaly)
    )


class WatchedTree:
    """A module tree's modules as they were when it was looked at, to tell whether any changed since.

    Every attribute set and every change of a table of parameters, buffers or submodules bumps the
    module's own change count and the global epoch (``changed``): while the epoch stays, nothing
    changed anywhere; after it moved, the tree's own counts say whether the change was in it.
    """

    __slots__ = ("epoch", "owner", "instance_dicts", "changes")

    def __init__(self, module, modules: list, trees: dict):
        """Watches ``modules`` (``module``'s tree, or part of it) for ``trees``, the dict keeping this
        by ``id(module)``, which forgets it when the module is collected (before its id can be reused)."""
        self.epoch = _epoch[0]
        self.owner = weakref.ref(module, functools.partial(_forget, trees, id(module)))
        self.instance_dicts = [each.__dict__ for each in modules]
        self.changes = _changes(self.instance_dicts)

    def unchanged(self) -> bool:
        """Whether no module of the tree changed since it was built (and notes the epoch if so)."""
        if self.epoch == _epoch[0]:
            return True
        if _changes(self.instance_dicts) != self.changes:
            return False
        self.epoch = _epoch[0]
        return True


class _Tree(WatchedTree):
    """What a module call's replay needs to know about the module tree, as its modules were."""

    __slots__ = ("hook_tables", "state", "containers", "templates", "replayable", "changes_itself", "default_dtype")

    def __init__(self, module, changes_itself: bool, compiled: bool = False):
        self.templates = compiled_calls.CompiledTemplates() if compiled else forward_replay.ForwardTemplates()
        self.changes_itself = changes_itself
        self.default_dtype = get_default_dtype()
        # While the module itself cannot replay (a user's class, training mode), nothing below it
        # matters, and only its own changes can alter that: its subtree is not walked at every
        # call of a user's module whose forward sets an attribute.
        self.replayable = not changes_itself and _replayable_module(module, compiled)
        modules = list(module.modules()) if self.replayable else [module]
        super().__init__(module, modules, _compiled_trees if compiled else _trees)
        self.hook_tables: list = []
        self.state: list = []
        self.containers: list = []
        if not (self.replayable and all(_replayable_module(each, compiled) for each in modules[1:])):
            self.replayable = False
            return
        self.containers = _containers(self.instance_dicts)
        # Replacing a table is a change; hooks added to or removed from one are not, so a call looks.
        self.hook_tables = [
            table
            for each in modules
            for table in (each._forward_pre_hooks, each._forward_hooks, each._backward_pre_hooks, each._backward_hooks)
        ]
        self.state = [*module.parameters(), *module.buffers()]
        if compiled:  # anyone's module may keep a tensor in a plain attribute and read it
            self.state += [
                item
                for each in modules
                for name, item in each.__dict__.items()
                if isinstance(item, Tensor) and name not in each._parameters and name not in each._buffers
            ]

    def contents_changed(self) -> None:
        """Forgets the traced structures: a list, dict or set of the tree was changed in place.

        The tree is otherwise as it was, so only its containers are looked at again (a forward that
        changes one at every call costs that, and is never traced).
        """
        self.containers = _containers(self.instance_dicts)
        self.templates = type(self.templates)()


_trees: dict = {}  # id(module) -> _Tree
_compiled_trees: dict = {}  # id(module) -> _Tree of its compiled calls (``CompiledCall``)
# id(module) -> ``forward_replay.first_call`` of modules called once: their tree is built at their second.
_called_once: dict = {}
_MOST_CALLED_ONCE = 4096


def _clear() -> None:
    _trees.clear()
    _compiled_trees.clear()
    _called_once.clear()
    forward_replay.reset_counts()
    compiled_calls.reset_counts()


register_cache("forward replay templates", _clear)


def _forget(trees: dict, key: int, reference) -> None:
    tree = trees.get(key)
    if tree is not None and tree.owner is reference:
        del trees[key]


def _containers(instance_dicts: list) -> list:
    """The lists, dicts and sets modules keep in attributes (their instance dicts; nested in tuples
    and in each other too), each with what it holds now (``_contents``).

    A forward may read them (``Upsample.size``, a pooling's ``kernel_size``: PyTorch keeps the list
    it was given), and changing one in place sets no attribute: only its contents tell.
    """
    found: list = []
    seen: set = set()
    for instance_dict in instance_dicts:
        for name, item in instance_dict.items():
            if name not in _MODULE_TABLES:
                _add_containers(item, found, seen)
    return found


def _add_containers(item, found: list, seen: set) -> None:
    if isinstance(item, (list, dict, set)):
        if id(item) in seen:
            return
        seen.add(id(item))
        found.append((item, _contents(item)))
        for inner in item.values() if isinstance(item, dict) else item:
            _add_containers(inner, found, seen)
    elif type(item) is tuple:
        for inner in item:
            _add_containers(inner, found, seen)


def _contents(container) -> tuple:
    # The very objects held, compared by identity: 16 and 16.0, 0.0 and -0.0 are equal but record
    # other nodes; an equal object that is not the same one costs a trace, never a wrong replay.
    if isinstance(container, dict):
        return (*container, *container.values())
    return tuple(container)


def _same_contents(containers: list) -> bool:
    """Whether every container holds the very objects it held when its tree was built."""
    for container, contents in containers:
        now = (*container, *container.values()) if isinstance(container, dict) else tuple(container)  # _contents
        if len(now) != len(contents) or not all(map(is_, now, contents)):
            return False
    return True


def _replayable_module(module, compiled: bool = False) -> bool:
    if "parametrizations" in module._modules:
        return False
    if compiled:
        # A compiled call traces anyone's forward, strictly (runtime/fastpath/compiled_calls.py), for
        # inference: in evaluation mode only.
        return not module.training
    if not type(module).__module__.startswith("onnxnn.") or module._compiled_call_impl is not None:
        return False
    registered = module._parameters.keys() | module._buffers.keys()
    for name, item in module.__dict__.items():
        if isinstance(item, Tensor) and name not in registered:
            return False
        if isinstance(item, _FUNCTION_TYPES) and not (getattr(item, "__module__", None) or "").startswith("onnxnn."):
            return False
    return True


def call(module, args: tuple, kwargs: dict, compiled: bool = False):
    """``module.forward(*args, **kwargs)``, replayed where the module doc allows it.

    The caller has checked ``replays()`` and that no global hooks are registered. ``compiled``:
    the module's compiled call (``CompiledCall``), whose tree may hold anyone's modules.
    """
    # A tree is forgotten when its module is collected (``_forget``), before its id can be reused.
    trees = _compiled_trees if compiled else _trees
    tree = trees.get(id(module))
    if tree is None:
        if not compiled and id(module) not in _called_once:
            # Its first call only notes its structure: a tree costs more than a plain call of a small
            # module (an MLP's six: 0.17 ms of its first forward's 1.3 in a fresh process), and a
            # structure is traced at its second call anyway. (A collected module's id that comes back
            # counts as a sighting: it costs at most one trace.)
            if len(_called_once) >= _MOST_CALLED_ONCE:
                _called_once.clear()
            _called_once[id(module)] = forward_replay.first_call(args, kwargs)
            return module.forward(*args, **kwargs)
        tree = trees[id(module)] = _Tree(module, False, compiled)
        if not compiled:
            first = _called_once.pop(id(module), None)  # another thread's second call may have taken it
            if tree.replayable:
                forward_replay.note_first_call(tree.templates, first, tree.state)
    elif tree.epoch != _epoch[0] and not tree.unchanged():  # the epoch inline: most calls stop there
        tree = trees[id(module)] = _Tree(module, tree.changes_itself, compiled)
    elif tree.containers and not _same_contents(tree.containers):
        tree.contents_changed()
    if not tree.replayable or tree.default_dtype is not get_default_dtype() or any(tree.hook_tables):
        return module.forward(*args, **kwargs)
    epoch = _epoch[0]
    if compiled:
        templates = tree.templates
        assert isinstance(templates, compiled_calls.CompiledTemplates)  # a compiled tree's (``_Tree``)
        result = compiled_calls.call(templates, module.forward, args, kwargs, tree.state)
    else:
        result = forward_replay.call(tree.templates, module.forward, args, kwargs, tree.state)
    if _epoch[0] != epoch and not tree.unchanged():
        # Its forward changed a module of the tree: every call would trace it again.
        tree.changes_itself = True
        tree.replayable = False
    return result


def compiled_call(module, args: tuple, kwargs: dict):
    """A compiled module's call: its whole call as one compiled graph where it may be.

    Under ``no_grad``, in evaluation mode, with nothing watching or changing recording and no
    hook registered, the call is traced whole and run as in ``runtime/fastpath/compiled_calls.py``;
    otherwise (training, recording gradients, hooks) it is the module's plain call.
    """
    if not MODE.grad.enabled and replays() and _hooks.hookless(module):
        return call(module, args, kwargs, compiled=True)
    return module._call_impl(*args, **kwargs)


class CompiledCall:
    """``Module.compile``'s call implementation (``compiled_call`` of its module)."""

    __slots__ = ("module",)

    def __init__(self, module):
        # A reference cycle (the module holds this), as PyTorch's compiled bound method makes one.
        self.module = module

    def __call__(self, *args, **kwargs):
        return compiled_call(self.module, args, kwargs)
