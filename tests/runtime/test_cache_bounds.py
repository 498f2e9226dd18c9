"""The caches of compiled structures are bounded by the size of what they hold, not by count alone.

Each entry weighs what it holds (its graph's node count; a backward template's source length), and
each cache evicts its least recently used entries once their weights together pass its budget.
Structures that never repeat (an LSTM unrolled over each new sequence length) used to fill the
count bounds with entries of megabytes each (1.8 GB for lengths 2..81), while a structure used
every step must never be evicted (recompiling it every step would cost more than it saves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

import onnxnn
from onnxnn import nn
from onnxnn.ir.caches import WeightedCache
from onnxnn.ir.executors import executor
from onnxnn.ir.plan import plan
from onnxnn.kernels import executor as kernels
from onnxnn.runtime.fastpath import backward_replay, plan_cache


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch, fast_path_on):
    # The backward templates' cache is the fast path's: it is on here whatever ONNXNN_FAST_PATH says.
    # Every size of a structure traced at its first backward, so that sizes give distinct templates.
    monkeypatch.setattr(backward_replay, "TRACE_AFTER_SIGHTINGS", 1)
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


def _pending(size: int):
    """A pending value of one structure (three nodes), a new key per ``size``."""
    return ((onnxnn.arange(size, dtype=onnxnn.float32) * 2.0 + 1.0).exp())._value


def _kernel_plan(size: int):
    return kernels.cached_plan(plan([_pending(size)]))


def _session(size: int):
    return executor("onnxruntime").compile(plan([_pending(size)]))


def _plan_entry(size: int):
    with onnxnn.set_executor("kernels"):
        return plan_cache.entry(plan([_pending(size)]))


def _template(size: int):
    templates = backward_replay._templates
    known = set(templates)
    weight = onnxnn.ones(size, requires_grad=True)
    (weight * weight).exp().sum().backward()
    new = [template for key, template in templates.items() if key not in known]
    # A miss adds the structure's template; a hit marks the one it replayed.
    return new[0] if new else next(template for template in templates.values() if template.recently_used)


@dataclass(frozen=True)
class Cache:
    name: str
    table: Callable[[], object]  # the cache's WeightedCache
    use: Callable[[int], object]  # uses structure ``size`` (compiling it on a miss), returns its entry


CACHES = [
    Cache("kernel plans", lambda: kernels._cache.plans, _kernel_plan),
    Cache("onnxruntime sessions", lambda: executor("onnxruntime").cache.sessions, _session),
    Cache("plan entries", lambda: plan_cache._entries["kernels"], _plan_entry),
    Cache("backward templates", lambda: backward_replay._templates, _template),
]


@pytest.mark.parametrize("cache", CACHES, ids=lambda cache: cache.name)
def test_past_the_budget_the_least_recently_used_go_first(cache, monkeypatch):
    table = cache.table()
    entries = {size: cache.use(size) for size in (2, 3, 4)}
    keys = list(table)  # oldest first: 2, 3, 4
    assert cache.use(2) is entries[2]  # a hit: structure 2 is marked recently used
    assert len(keys) == 3 and table.total == sum(table.weights.values())
    weights = [table.weights[key] for key in keys]
    # A budget one entry short evicts structure 3 alone: the older 2, used since, gets a second chance.
    monkeypatch.setattr(table, "budget", table.total - weights[1])
    table.trim()
    assert list(table) == [keys[2], keys[0]]
    # A new structure evicts the least recently used (4) and keeps 2 and itself.
    monkeypatch.setattr(table, "budget", table.total)
    cache.use(5)
    assert keys[0] in table and keys[2] not in table and len(table) == 2
    assert table.total == sum(table.weights.values()) <= table.budget


@pytest.mark.parametrize("cache", CACHES, ids=lambda cache: cache.name)
def test_an_entry_used_every_step_is_never_evicted(cache, monkeypatch):
    table = cache.table()
    hot = cache.use(2)
    cache.use(3)
    monkeypatch.setattr(table, "budget", table.total)  # two entries' weight: each new structure evicts one
    for size in range(4, 24):  # structures that never repeat, between uses of the hot one
        assert cache.use(2) is hot
        cache.use(size)
        assert len(table) == 2 and table.total <= table.budget


def test_an_lstm_over_varying_lengths_keeps_each_cache_within_its_budget(monkeypatch):
    # An LSTM's gradient unrolls the recurrence: every length is a new structure of O(length) nodes.
    tables = [cache.table() for cache in CACHES] + [plan_cache._entries["auto"]]
    budgets = [3000, 3000, 3000, 300_000, 3000]  # nodes, and characters of template sources
    for table, budget in zip(tables, budgets):
        monkeypatch.setattr(table, "budget", budget)
    onnxnn.manual_seed(0)
    lstm = nn.LSTM(4, 8)
    optimizer = onnxnn.optim.SGD(lstm.parameters(), lr=1e-3)
    lengths = range(2, 41)
    for length in list(lengths) + [40, 39, 2]:  # the last lengths again: sessions are compiled for them
        optimizer.zero_grad()
        output, _ = lstm(onnxnn.randn(length, 2, 4))
        output.mean().backward()
        optimizer.step()
        for table, budget in zip(tables, budgets):
            assert table.total == sum(table.weights.values())
            assert table.total <= budget or len(table) == 1
    assert len(backward_replay._templates) < len(lengths) and len(plan_cache._entries["auto"]) < len(lengths)
    assert len(executor("onnxruntime").cache.sessions) >= 1  # the lengths that came back got theirs


def test_backwards_counted_before_their_template_hold_no_structural_keys(monkeypatch):
    # Other sizes of a structure are traced at their TRACE_AFTER_SIGHTINGS-th backward; until then
    # they are counted. A key grows with the graph (tens of KB for an LSTM over packed sequences),
    # so thousands of structures seen once held hundreds of megabytes when the keys were kept.
    monkeypatch.setattr(backward_replay, "TRACE_AFTER_SIGHTINGS", 8)
    for size in range(2, 12):
        weight = onnxnn.ones(size, requires_grad=True)
        (weight * weight).exp().sum().backward()
    assert len(backward_replay._sightings) == 9  # the first size was traced at once
    tables = (backward_replay._sightings, backward_replay._size_families)
    assert all(type(item) is int for table in tables for pair in table.items() for item in pair)


class _Held:
    """A cached value that, as a plan entry, says when the cache has let it go."""

    def __init__(self):
        self.dropped = False


def _evicted(table):
    table.bound(capacity=1)  # the newer entry stays


def _replaced(table):
    table.put("first", _Held(), 1)


def _discarded(table):
    table.discard("first")


def _cleared(table):
    table.clear()


@pytest.mark.parametrize("leave", [_evicted, _replaced, _discarded, _cleared])
def test_a_value_leaving_the_cache_is_marked_dropped_and_the_others_are_not(leave):
    table = WeightedCache(capacity=4, budget=100)
    first, second = _Held(), _Held()
    table.put("first", first, 1)
    table.put("second", second, 1)
    leave(table)
    assert first.dropped
    assert table.get("first") is not first
    assert second.dropped == (leave is _cleared)
