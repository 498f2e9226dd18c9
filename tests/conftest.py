"""Shared fixtures: every test starts from the same seed."""
from __future__ import annotations

import pytest

import onnxnn


@pytest.fixture(autouse=True)
def _seed():
    onnxnn.manual_seed(0)
    yield
