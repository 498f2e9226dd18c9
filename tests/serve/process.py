"""``onnxnn serve`` as a real subprocess on 127.0.0.1, on a port the system picks (``--port 0``).

Shared by tests/serve and benchmarks/bench_serve.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["ServerProcess"]

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
        """A tritonclient.http client of this server (``concurrency``: connections for async_infer)."""
        import tritonclient.http  # deferred: the test extra; ServerProcess itself needs only the stdlib

        return tritonclient.http.InferenceServerClient(self.address, concurrency=concurrency, network_timeout=60.0)
