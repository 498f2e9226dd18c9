"""``tensor.data`` and ``tensor.detach()`` share their tensor's value: an in-place write through
either changes both.

PyTorch's ``p.data`` is a tensor over ``p``'s storage, outside autograd, and scripts write through
it: ``m.weight.data.normal_(0, 0.02)``, ``target.data.copy_(tau * p.data + (1 - tau) * target.data)``,
``p.data.clamp_(-c, c)``. onnxnn's values are immutable and an in-place op rebinds its tensor
(DESIGN principle 5), so the tensors over one storage form an alias group: a write that rebinds one
member rebinds every other live member to the same value. Only the value moves, as only the storage
is shared in PyTorch: each member keeps its own autograd history and version counter (``.data`` is
PyTorch's documented way around the version checks; here a backward still reads the values it
saved, which were never overwritten).

``detach()`` joins the group the same way (PyTorch's detached tensor is a view of the storage:
``x.detach().zero_()`` zeroes ``x``, and ``state_dict()``'s tensors write the module's). PyTorch
shares its version counter too, so a backward that saved the old value refuses to run there;
here it reads the value it saved.

A write that changes a member's shape in place (``t_``, ``unsqueeze_``) or replaces its storage
(``p.data = other``, which then joins ``other``'s) takes it out of its group. Views of a member
(``p.data[0]``) alias the group, and the ``.data``, ``detach()`` or Parameter of a view is a
detached view of its root rather than a group member (``views.py``).

Groups are found by the members' ids, never through a tensor's attributes, so copies and pickles of
a tensor never carry its group.
"""

from __future__ import annotations

import functools
import weakref

from ..ir.graph import hold

__all__ = ["ALIAS_GROUPS", "join_value_of", "share_value", "leave_group", "anchor"]

# id(tensor) -> its group (a dict of id -> weak reference, for every live member); only tensors
# that share their value with another live tensor are here. A write looks itself up only when the
# dict is not empty (``if ALIAS_GROUPS and id(tensor) in ALIAS_GROUPS``): most programs never make one.
ALIAS_GROUPS: dict[int, dict[int, weakref.ref]] = {}


def join_value_of(source, tensor) -> None:
    """``tensor`` joins ``source``'s group: it has ``source``'s value, and they share it from now on
    (``.data``, ``detach()``, ``nn.Parameter(w)`` and ``nn.Buffer(w)`` of a tensor that is no view,
    which PyTorch makes over ``w``'s storage; ``views.share_storage``)."""
    group = ALIAS_GROUPS.get(id(source))
    if group is None:
        group = {}
        _join(group, source)
    _join(group, tensor)


def share_value(tensor) -> list:
    """Gives every other live member of ``tensor``'s group the value ``tensor`` was just rebound to;
    returns the members it changed (whose views follow them: ``views.after_write``)."""
    value = tensor._value
    changed = []
    for reference in list(ALIAS_GROUPS[id(tensor)].values()):
        member = reference()
        if member is not None and member is not tensor and member._value is not value:
            member._value = value
            hold(value, member, rebound=False)
            changed.append(member)
    return changed


def anchor(tensor):
    """The group's first live member (the tensor whose ``.data`` was taken), else ``tensor``: views of a
    ``.data`` link there, so that ``p.data[0].zero_()`` reaches ``p`` once the ``.data`` is gone."""
    group = ALIAS_GROUPS.get(id(tensor))
    for reference in () if group is None else group.values():
        member = reference()
        if member is not None:
            return member
    return tensor


def leave_group(tensor) -> None:
    """Takes ``tensor`` out of its group (its storage is replaced, or its shape changed in place)."""
    group = ALIAS_GROUPS.pop(id(tensor), None)
    if group is not None:
        _drop(group, id(tensor))


def _join(group: dict, tensor) -> None:
    key = id(tensor)
    group[key] = weakref.ref(tensor, functools.partial(_forget, group, key))
    ALIAS_GROUPS[key] = group


def _forget(group: dict, key: int, _reference) -> None:
    # A member was collected: its id may be reused by a new tensor, which must not find the group.
    if ALIAS_GROUPS.get(key) is group:
        del ALIAS_GROUPS[key]
    _drop(group, key)


def _drop(group: dict, key: int) -> None:
    group.pop(key, None)
    if len(group) == 1:  # a lone member shares its value with nobody: writes need no look-up
        (last,) = group
        if ALIAS_GROUPS.get(last) is group:
            del ALIAS_GROUPS[last]
        group.clear()
