"""Shared fixtures: every test starts from the same seed, and no result depends on timing."""
from __future__ import annotations

import sys

import pytest

import onnxnn
from onnxnn.runtime import executor


@pytest.fixture(autouse=True)
def _seed():
    onnxnn.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _no_executor_trials(request, monkeypatch):
    """auto's trials keep whichever executor ran a small plan faster, by wall time, which would let
    a test's exact comparison of two runs depend on the machine's load. Small plans stay on the
    kernels here; tests of the trials themselves opt in with ``@pytest.mark.executor_trials``."""
    if request.node.get_closest_marker("executor_trials") is None:
        monkeypatch.setattr(executor, "TRIAL_FROM_RUN", sys.maxsize)
