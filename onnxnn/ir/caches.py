"""Every cache onnxnn keeps, registered by name, so one call drops them all.

Caches are keyed by structure (op types, attributes, shapes, dtypes), never by data, and bounded
by count. ``onnxnn.clear_caches()`` drops every one (compiled sessions and kernel plans,
generated code, replay templates, symbolic-size families, shared constants, ...): a program then
runs as on its first step, with the same results.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["register_cache", "clear_caches", "cache_names"]

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
