"""The server the serving tests share (one process for the session), and the model files it serves."""

from __future__ import annotations

import time

import pytest

from .models import write_bool_model, write_broken_model, write_fixed_shape_model, write_gather_model, write_mlp
from .process import ServerProcess

pytest.importorskip("starlette")  # the serve extra, in the test extra: CI runs these for real
tritonclient_http = pytest.importorskip("tritonclient.http")


@pytest.fixture(scope="session")
def model_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    return {
        "mlp": write_mlp(folder / "mlp.onnx"),
        "fixed": write_fixed_shape_model(folder / "fixed.onnx"),
        "broken": write_broken_model(folder / "broken.onnx"),
        "boolean": write_bool_model(folder / "boolean.onnx"),
        "gather": write_gather_model(folder / "gather.onnx"),
    }


# The body limit is small so that the test's too-large body is small too.
MAX_BODY_BYTES = 64 * 1024


@pytest.fixture(scope="session")
def server(model_files):
    """mlp, boolean and gather (batched, 50 ms window), fixed (two inputs, fixed shapes), broken (fails to load)."""
    running = ServerProcess(
        [
            model_files["mlp"],
            model_files["fixed"],
            f"broken={model_files['broken']}",
            model_files["boolean"],
            model_files["gather"],
            "--max-batch-size",
            "16",
            "--max-queue-delay-ms",
            "50",
            "--max-body-bytes",
            str(MAX_BODY_BYTES),
        ]
    )
    yield running
    running.stop()


def wait_until(condition, timeout: float = 30.0, interval: float = 0.01) -> None:
    """Poll ``condition`` until true; an AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)
