"""The parameters of a module tree, kept between calls while no module of the tree changes.

``Module.zero_grad`` runs at every training step and needs each parameter once: walking the tree
with ``parameters()`` (a generator per module, a set of seen ids, dotted names made and dropped)
costs 4-7 us for a network of two layers, more than clearing the gradients does. The list is kept
per module and checked the way replayed forwards check their state (``_forward_replay``): the
global change epoch first, then each module's own count of changes, which every attribute set and
every change of a table of parameters, buffers or submodules bumps.
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING

from ...ir.caches import register_cache
from . import _forward_replay

if TYPE_CHECKING:
    from .module import Module

__all__ = ["parameters_of"]


class _KeptParameters:
    """One tree's parameters, as ``parameters()`` gave them, and the change counts they hold for."""

    __slots__ = ("owner", "epoch", "instance_dicts", "changes", "parameters")

    def __init__(self, module, owner: weakref.ref):
        self.owner = owner
        self.epoch = _forward_replay._epoch[0]
        modules = list(module.modules())
        self.instance_dicts = [each.__dict__ for each in modules]
        self.changes = _forward_replay._changes(self.instance_dicts)
        self.parameters = tuple(module.parameters())

    def holds(self) -> bool:
        """Whether no module of the tree changed since the list was made (and notes the epoch if so)."""
        if self.epoch == _forward_replay._epoch[0]:
            return True
        if _forward_replay._changes(self.instance_dicts) != self.changes:
            return False
        self.epoch = _forward_replay._epoch[0]
        return True


_kept: dict = {}  # id(module) -> _KeptParameters


def _forget(key: int, reference) -> None:
    kept = _kept.get(key)
    if kept is not None and kept.owner is reference:
        del _kept[key]


register_cache("module parameter lists", _kept.clear)


def parameters_of(module: Module, base: type[Module]) -> tuple:
    """``tuple(module.parameters())``, kept while the tree is unchanged.

    ``base`` is ``Module``, whose walk this keeps: a tree where a class overrides it
    (``parameters``, ``named_parameters``, ``named_modules`` or ``_named_members``) is walked every
    time, since the override may answer differently at each call.
    """
    kept = _kept.get(id(module))
    if kept is not None and (kept.epoch == _forward_replay._epoch[0] or kept.holds()):
        return kept.parameters
    if not _walk_is_base(module, base):
        return tuple(module.parameters())
    # Forgotten when the module is collected (``_forget``), before its id can be reused.
    owner = weakref.ref(module, functools.partial(_forget, id(module)))
    kept = _kept[id(module)] = _KeptParameters(module, owner)
    return kept.parameters


def _walk_is_base(module: Module, base: type[Module]) -> bool:
    """Whether ``module.parameters()`` is ``base``'s own walk over ``base``'s own ``named_modules``."""
    root = type(module)
    if any(getattr(root, name) is not getattr(base, name) for name in _ROOT_WALK):
        return False
    return all(type(each).named_modules is base.named_modules for each in module.modules())


_ROOT_WALK = ("parameters", "named_parameters", "_named_members", "named_modules")
