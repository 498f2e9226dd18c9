"""The fast path's tests exercise its machinery, so it is on for them whatever ONNXNN_FAST_PATH says."""

from __future__ import annotations

import pytest

import onnxnn
from onnxnn.runtime.fastpath import forward_replay


@pytest.fixture(autouse=True)
def _fast_path_on(fast_path_on):
    yield


@pytest.fixture
def fresh_replays():
    """Empty caches and zero replay counts for the test, and the caches emptied after it."""
    onnxnn.clear_caches()
    forward_replay.reset_counts()
    yield
    onnxnn.clear_caches()
