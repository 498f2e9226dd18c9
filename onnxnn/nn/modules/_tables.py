"""A module's tables of parameters, buffers and submodules, mirrored into its instance dict.

PyTorch keeps registered state in three tables and finds ``module.weight`` through
``Module.__getattr__``, which Python calls only after the ordinary lookup has failed. On CPython
3.10 and 3.11 that failure raises (and discards) an AttributeError first: half a microsecond per
read, against 30 ns for an instance attribute. A layer's forward reads several (a BatchNorm five),
so in an inference call of a small CNN these reads took over a quarter of the Python time.

So each table also writes its entries into the instance dicts of the modules that own it, where
the ordinary lookup finds them. The tables stay the one truth: every way of changing one (item
assignment, ``del``, ``pop``, ``update``, ``clear``...) updates the mirrors, so code that writes
``module._parameters[name]`` directly, as PyTorch's utilities do, stays correct, and
``Module.__getattr__`` remains for anything else. Each change is also counted in the owners'
instance dicts (``_forward_replay.changed``): a replayed forward must not outlive what it read.

A whole table replaced is re-mirrored too: ``Module.__setattr__`` installs it, and so does
``object.__setattr__(module, "_parameters", table)`` (code restoring state past the module's own
``__setattr__``), which finds the class's ``TableSlot``. The slot has no ``__get__``, so reading
``module._parameters`` still finds the instance dict's entry at once, with no Python call. A table
written straight into ``module.__dict__`` runs no code at all and is not mirrored: the old
entries stay readable as attributes until the table is installed by one of the two ways above.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

from ._forward_replay import changed

__all__ = ["TABLE_NAMES", "MirroredTable", "TableSlot", "install_table"]

TABLE_NAMES = frozenset({"_parameters", "_buffers", "_modules"})
_MISSING = object()


class MirroredTable(OrderedDict):
    """An OrderedDict whose entries also live in its owners' instance dicts (see the module docstring).

    A table has more than one owner only after a shallow copy of a module, which shares the tables
    as PyTorch's does.
    """

    def __init__(self, *args, **kwargs):
        self._owners: list = []  # weak references to the modules mirroring this table
        super().__init__(*args, **kwargs)

    def _instance_dicts(self) -> list:
        return [owner.__dict__ for owner in (reference() for reference in self._owners) if owner is not None]

    def bind(self, module) -> None:
        """Makes ``module`` an owner: its instance dict gets every entry, now and after each change."""
        if not any(reference() is module for reference in self._owners):
            self._owners.append(weakref.ref(module))
        state = module.__dict__
        for name, value in self.items():
            if name not in TABLE_NAMES:
                state[name] = value

    def unbind(self, module) -> None:
        """Stops mirroring into ``module`` and removes the entries it mirrored."""
        self._owners = [reference for reference in self._owners if reference() not in (module, None)]
        state = module.__dict__
        for name, value in self.items():
            if state.get(name, _MISSING) is value:
                del state[name]

    def _mirror(self, name, value) -> None:
        for state in self._instance_dicts():
            changed(state)
            if name not in TABLE_NAMES:
                state[name] = value

    def _forget(self, name) -> None:
        for state in self._instance_dicts():
            changed(state)
            if name not in TABLE_NAMES:  # never mirrored: the owner's attribute of that name is a table
                state.pop(name, None)

    def __setitem__(self, name, value) -> None:
        super().__setitem__(name, value)
        self._mirror(name, value)

    def __delitem__(self, name) -> None:
        super().__delitem__(name)
        self._forget(name)

    def pop(self, name, *default):
        had = name in self
        value = super().pop(name, *default)
        if had:
            self._forget(name)
        return value

    def popitem(self, last: bool = True):
        name, value = super().popitem(last)
        self._forget(name)
        return name, value

    def clear(self) -> None:
        names = list(self)
        super().clear()
        for name in names:
            self._forget(name)

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = default
        return self[name]

    def update(self, *args, **kwargs) -> None:
        for name, value in OrderedDict(*args, **kwargs).items():
            self[name] = value

    def __ior__(self, other):  # type: ignore[override,misc]  # dict's |= takes what update() takes
        self.update(other)
        return self

    def move_to_end(self, name, last: bool = True) -> None:
        super().move_to_end(name, last)
        for state in self._instance_dicts():
            changed(state)  # a container's order is its forward's

    def __repr__(self) -> str:
        return repr(OrderedDict(self))  # printed as the OrderedDict it stands for

    def __reduce__(self):
        # The owners are weak references (not picklable); the module re-binds its tables when restored.
        return (type(self), (), None, None, iter(self.items()))


def install_table(module, name: str, table) -> MirroredTable:
    """Sets ``module``'s table ``name`` to ``table`` (made a MirroredTable), replacing any previous one."""
    state = module.__dict__
    previous = state.get(name)
    if isinstance(previous, MirroredTable) and previous is not table:
        previous.unbind(module)
    if not isinstance(table, MirroredTable):
        table = MirroredTable(table)
    state[name] = table
    table.bind(module)
    changed(state)
    return table


class TableSlot:
    """``Module``'s class attribute for each table: ``object.__setattr__`` and ``object.__delattr__``
    of a table name come here, so the mirrors follow a table set past ``Module.__setattr__``.

    Only setting and deleting are intercepted (a data descriptor without ``__get__``): reads find
    the instance dict's table directly (see the module docstring).
    """

    def __init__(self, name: str):
        self.name = name

    def __set__(self, module, table) -> None:
        install_table(module, self.name, table)

    def __delete__(self, module) -> None:
        state = module.__dict__
        if self.name not in state:
            raise AttributeError(f"'{type(module).__name__}' object has no attribute '{self.name}'")
        previous = state.pop(self.name)
        if isinstance(previous, MirroredTable):
            previous.unbind(module)
        changed(state)
