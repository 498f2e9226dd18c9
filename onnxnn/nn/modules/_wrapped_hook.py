"""A hook called with its module prepended, the module held weakly: what module-bound hooks
(state-dict hooks, the deprecated backward hooks) register with."""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

__all__ = ["_WrappedHook"]


class _WrappedHook:
    """A hook that is called with its module prepended, holding the module weakly (no cycle)."""

    def __init__(self, hook: Callable, module=None):
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = module is not None
        if module is not None:
            self.module = weakref.ref(module)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)

    def __getstate__(self) -> dict:
        state = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            state["module"] = self.module()
        return state

    def __setstate__(self, state: dict) -> None:
        self.hook = state["hook"]
        self.with_module = state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])
