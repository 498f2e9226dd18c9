"""``onnxnn serve`` as a real subprocess on 127.0.0.1, on a port the system picks (``--port 0``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .models import write_broken_model, write_fixed_shape_model, write_mlp

pytest.importorskip("starlette")  # the serve extra, in the test extra: CI runs these for real
tritonclient_http = pytest.importorskip("tritonclient.http")

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 60.0  # a loaded 2-core machine imports onnxruntime and numpy slowly


class ServerProcess:
    """A running ``onnxnn serve``: its process, its output so far, and its URL once it listens."""

    def __init__(self, arguments: list[str]) -> None:
        environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "onnxnn.cli", "serve", *arguments, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
        )
        self.lines: list[str] = []
        self._listening = threading.Event()
        # Drained on a thread so that a chatty server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._listening.wait(STARTUP_TIMEOUT):
            self.stop()
            raise RuntimeError("onnxnn serve did not start:\n" + "".join(self.lines))
        address = next(line for line in self.lines if "listening on http://" in line).split("http://")[1].strip()
        self.address = address  # host:port, the form tritonclient takes
        self.url = f"http://{address}"

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            if "listening on http://" in line:
                self._listening.set()
        self._listening.set()  # exited: the caller finds no address and reports the output

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def client(self, concurrency: int = 1):
        return tritonclient_http.InferenceServerClient(self.address, concurrency=concurrency, network_timeout=60.0)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    return {
        "mlp": write_mlp(folder / "mlp.onnx"),
        "fixed": write_fixed_shape_model(folder / "fixed.onnx"),
        "broken": write_broken_model(folder / "broken.onnx"),
    }


# The body limit is small so that the test's too-large body is small too.
MAX_BODY_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def server(model_files):
    """mlp (batched, 50 ms window), fixed (two inputs, fixed shapes) and broken (fails to load)."""
    running = ServerProcess(
        [
            model_files["mlp"],
            model_files["fixed"],
            f"broken={model_files['broken']}",
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
