"""Fixtures of the compiled loops' tests."""

from __future__ import annotations

import pytest

from onnxnn.kernels import compiled_convolutions


@pytest.fixture(params=compiled_convolutions.BUILDS)
def build(request):
    """Each build of the layer loops' library this CPU runs (AVX-512, AVX2 with FMA, the baseline; the
    convolution and normalization loops share the choice); the best one after."""
    if not compiled_convolutions.use_build(request.param):
        pytest.skip(f"this CPU does not run the {request.param} build")
    yield request.param
    compiled_convolutions.use_build(None)
