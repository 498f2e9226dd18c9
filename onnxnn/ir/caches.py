"""Every cache onnxnn keeps, registered by name, so one call drops them all.

Caches are keyed by structure (op types, attributes, shapes, dtypes), never by data, and bounded
by count. ``onnxnn.clear_caches()`` drops every one (compiled sessions and kernel plans,
generated code, replay templates, symbolic-size families, shared constants, ...): a program then
runs as on its first step, with the same results.

The caches of compiled structures are also bounded by the total size of what they hold
(``WeightedCache``): an entry grows with its graph, and structures that never repeat (an LSTM
unrolled over each new sequence length) would otherwise fill hundreds of entries of megabytes each.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

__all__ = ["register_cache", "clear_caches", "cache_names", "WeightedCache"]

_CLEARS: dict[str, Callable[[], None]] = {}


def register_cache(name: str, clear: Callable[[], None]) -> Callable[[], None]:
    """Registers the function that empties the cache called ``name``; returns it."""
    _CLEARS[name] = clear
    return clear


def clear_caches() -> None:
    """Drops every registered cache (and resets its counters)."""
    for clear in _CLEARS.values():
        clear()


def cache_names() -> list[str]:
    return sorted(_CLEARS)


def _mark_dropped(value) -> None:
    if hasattr(value, "dropped"):
        value.dropped = True


class WeightedCache(OrderedDict):
    """Entries oldest first, bounded by their count and by the total of their weights.

    A weight is known when the entry is made (its graph's node count, its generated source's length),
    so bounding costs nothing on a hit. ``put`` adds an entry and evicts the oldest ones while there
    are more than ``capacity`` or their weights add up to more than ``budget``; the entry just put
    stays even alone over the budget (its caller runs it now), unless ``capacity`` is 0 (caching
    switched off). An entry whose value has a true ``recently_used`` attribute gets a second chance
    instead: the mark is cleared and the entry moves to the end. A hit on a hot path sets the mark
    (one attribute store) rather than calling ``move_to_end``, which would hash the key again: a
    structural key is a long tuple, whose hash Python does not keep (about a microsecond per hit).
    Entries must be added and removed by ``put``, ``discard`` and ``clear``, which keep the weights.
    A value with a ``dropped`` attribute gets it set when it leaves the cache (evicted, replaced,
    discarded or cleared), so that whoever still holds it knows the cache has let it go.
    """

    def __init__(self, capacity: int, budget: int):
        super().__init__()
        self.capacity = capacity
        self.budget = budget
        self.weights: dict = {}
        self.total = 0

    def put(self, key, value, weight: int) -> None:
        """Adds (or replaces) ``key``'s entry as the most recently used, then evicts past the bounds."""
        self.total += weight - self.weights.get(key, 0)
        self.weights[key] = weight
        replaced = self.get(key)
        if replaced is not None and replaced is not value:
            _mark_dropped(replaced)
        self[key] = value
        self.move_to_end(key)
        self.trim()

    def trim(self) -> None:
        """Evicts the least recently used entries until the count and the total weight are within bounds."""
        while len(self) > self.capacity or (len(self) > 1 and self.total > self.budget):
            key, value = self.popitem(last=False)
            if getattr(value, "recently_used", False) and len(self) >= 1:
                value.recently_used = False  # used since it last came round: kept, as the newest
                self[key] = value
                continue
            self.total -= self.weights.pop(key)
            _mark_dropped(value)

    def bound(self, capacity: int | None = None, budget: int | None = None) -> None:
        """Sets the count bound and/or the weight budget, evicting what no longer fits."""
        if capacity is not None:
            self.capacity = capacity
        if budget is not None:
            self.budget = budget
        self.trim()

    def discard(self, key) -> None:
        value = self.pop(key, None)
        if value is not None:
            self.total -= self.weights.pop(key)
            _mark_dropped(value)

    def clear(self) -> None:
        for value in self.values():
            _mark_dropped(value)
        super().clear()
        self.weights.clear()
        self.total = 0
