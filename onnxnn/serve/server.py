"""Running the application on uvicorn: the bound address on stdout, graceful shutdown on SIGTERM.

uvicorn handles SIGTERM and SIGINT itself: it stops accepting connections, lets the requests in flight
finish (each waits for its batch), then runs the application's shutdown, which stops the batchers.
"""

from __future__ import annotations

import importlib.util
import sys

try:  # the serve extra: without it this module still imports, and MISSING_EXTRA names what to install
    import uvicorn
except ImportError:
    pass

from .app import create_app
from .model import ServedModel

__all__ = ["MISSING_EXTRA", "serve"]

# The first package of the serve extra (pip install 'onnxnn[serve]') that is not installed, or None.
MISSING_EXTRA: str | None = next(
    (name for name in ("starlette", "uvicorn", "prometheus_client") if importlib.util.find_spec(name) is None), None
)


class _AnnouncingServer(uvicorn.Server if MISSING_EXTRA is None else object):  # type: ignore[misc]  # a base chosen at import
    """Prints ``listening on http://HOST:PORT`` once the socket accepts connections.

    With ``--port 0`` the system picks a free port; the line is how scripts and tests learn which.
    """

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        if self.should_exit:  # the port was taken: uvicorn logged why
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        print(f"onnxnn serve: listening on http://{host}:{port}", flush=True)


def serve(
    models: list[ServedModel],
    host: str = "127.0.0.1",
    port: int = 8000,
    max_batch_size: int = 0,
    max_queue_delay_ms: float = 1.0,
    max_body_bytes: int = 64 * 2**20,
    worker_threads: int = 4,
    concurrent_batches: int = 1,
    log_level: str = "warning",
) -> int:
    """Serve ``models`` until SIGTERM or SIGINT; the exit status (1 when the port could not be bound)."""
    app = create_app(
        models,
        max_batch_size,
        max_queue_delay_ms,
        max_body_bytes,
        worker_threads,
        min(concurrent_batches, worker_threads),
    )
    for model in models:
        state = "ready" if model.ready else f"NOT READY ({model.error})"
        print(f"onnxnn serve: model '{model.name}' version {model.version} from {model.path}: {state}", flush=True)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", access_log=False)
    server = _AnnouncingServer(config)
    server.run()
    sys.stdout.flush()
    return 0 if server.started else 1
