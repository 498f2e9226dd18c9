"""Shared fixtures: every test starts from the same seed, and each test module leaves no compiled
sessions, kernel plans or traced backwards behind.

The caches are keyed by graph structure and bounded by count (512 sessions, 512 plans, 256
templates), not by bytes: across the suite's thousands of distinct structures they would stay full,
each onnxruntime session holding its own memory arena and a specialized session holding a model's
weights as initializers. Dropping them after every module keeps the suite's peak resident memory
near that of its largest single test.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

import pytest

# The suite starts many Python processes (the CLI, servers, mpiexec ranks, examples), each importing
# onnxnn. Where PYTHONDONTWRITEBYTECODE is set, as in many containers, a clean clone has no bytecode
# and every one of them compiled the package again: in a clean clone, tests/cli, tests/serve and
# tests/distributed took 85 s instead of 42. The test processes write bytecode (set before importing
# onnxnn), and the processes they start read it.
sys.dont_write_bytecode = False

import onnxnn  # noqa: E402


def pytest_collection_finish(session):
    """Moves everything alive after collection out of the garbage collector's sight.

    The collected items (12,000 of them, with their marks and parameters), the test modules and the
    libraries they import live until the run ends, and every full collection walked them all: the
    ``gc.collect()`` after each module took 0.3-0.6 s, a fifth of the suite's time. Frozen, they
    are never scanned again; anything created later is collected as before.
    """
    gc.freeze()


@pytest.fixture(autouse=True)
def _seed():
    onnxnn.manual_seed(0)
    yield


def _release_freed_heap() -> None:
    """Returns glibc's freed heap pages to the system (numpy's arrays below its mmap threshold live there)."""
    name = ctypes.util.find_library("c")
    if name is None or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl): nothing to trim
        pass


def drop_caches() -> None:
    """Drops every compiled session, kernel plan and traced backward, and the memory they held.

    What survives the collection is what lives on past the module (libraries' lazily built state, such
    as torch's operator tables and the sympy it imports, a quarter of a million objects, and the run's
    reports): it is frozen as ``pytest_collection_finish`` freezes the collected items, so the next
    full collections (this one after each module, the interpreter's own) do not walk it again. That
    took 0.1-0.15 s per collection. Objects created later are collected as before.
    """
    onnxnn.clear_caches()
    gc.collect()
    gc.freeze()
    _release_freed_heap()


@pytest.fixture(autouse=True, scope="module")
def _drop_caches_after_module():
    yield
    drop_caches()


@pytest.fixture
def fresh_caches():
    """For modules of large models whose tests share no structure (``pytest.mark.usefixtures``):
    a finished test's sessions and weights would only add to the next one's peak."""
    yield
    drop_caches()


@pytest.fixture
def fast_path_on():
    """For tests of the fast path's own machinery: on even when the suite runs with ONNXNN_FAST_PATH=0
    (the whole suite must pass both ways; these tests check what the fast path does when it runs)."""
    with onnxnn.set_fast_path(True):
        yield
