"""The fast path's tests exercise its machinery, so it is on for them whatever ONNXNN_FAST_PATH says."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fast_path_on(fast_path_on):
    yield
