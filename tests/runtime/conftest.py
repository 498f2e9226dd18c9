"""Fixtures of the runtime tests that read the sessions their own plans compiled."""

from __future__ import annotations

import pytest

import onnxnn
from onnxnn.ir.mode import MODE
from onnxnn.runtime.realization import clear_cache


def _threads(count: int, monkeypatch):
    """``count`` intra-op threads (restored after the test, as set_num_threads would leave them), every
    plan on onnxruntime (these plans are small enough for the kernels), and fresh caches, so that each
    test reads the runners its own plans compiled."""
    monkeypatch.setattr(MODE, "intra_op_threads", count)
    clear_cache()
    with onnxnn.set_executor("onnxruntime"):
        yield
    clear_cache()


@pytest.fixture
def one_thread(monkeypatch):
    yield from _threads(1, monkeypatch)


@pytest.fixture
def two_threads(monkeypatch):
    yield from _threads(2, monkeypatch)
