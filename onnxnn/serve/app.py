"""The Starlette application speaking the Open Inference Protocol's REST API (KServe v2).

Routes (``/versions/{version}`` may follow ``/v2/models/{name}`` in the last three)::

    GET  /v2/health/live, /v2/health/ready, /v2
    GET  /v2/models/{name}            metadata: inputs, outputs, datatypes, shapes (-1: dynamic)
    GET  /v2/models/{name}/ready      200, or 503 for a model that failed to load
    POST /v2/models/{name}/infer      JSON tensors or the binary tensor data extension
    GET  /metrics                     Prometheus text format

Every failure is a JSON ``{"error": "..."}`` body: 400 for the client's mistakes (unknown model, wrong
datatype, shape or input count, malformed JSON, a body over the limit), 503 for a model that failed,
500 for a fault of the server itself (logged with its traceback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor

try:  # the serve extra: this module still imports without it (for `onnxnn --help`); `onnxnn serve` checks first
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ImportError:
    pass

from .batching import DynamicBatcher
from .codec import decode_request, encode_response, requested_outputs
from .errors import BadRequest, ModelUnavailable
from .metrics import ServerMetrics
from .model import ServedModel

__all__ = ["create_app"]

_HEADER_LENGTH = "inference-header-content-length"
_LOG = logging.getLogger("onnxnn.serve")


def _is_byte_count(text: str) -> bool:
    # str.isdigit alone also takes "²" and other non-ASCII digits, which int() then refuses.
    return text.isascii() and text.isdigit()


class _Server:
    """What the routes share: the models, their batchers, the metrics and the limits."""

    def __init__(self, models, max_batch_size, max_queue_delay, max_body_bytes, executor, concurrent_batches) -> None:
        self.models: dict[str, ServedModel] = {model.name: model for model in models}
        self.max_body_bytes = max_body_bytes
        self.metrics = ServerMetrics()
        self.executor = executor
        self.batchers: dict[str, DynamicBatcher] = {}
        if max_batch_size > 1:
            for model in models:
                if model.ready and model.batchable:
                    observe = self.metrics.batch_size.labels(model.name).observe
                    self.batchers[model.name] = DynamicBatcher(
                        model, max_batch_size, max_queue_delay, executor, observe, concurrent_batches
                    )

    def model(self, request: Request) -> ServedModel:
        name = request.path_params["name"]
        model = self.models.get(name)
        if model is None:
            raise BadRequest(f"unknown model '{name}'; this server has {sorted(self.models)}")
        version = request.path_params.get("version")
        if version is not None and version != model.version:
            raise BadRequest(f"unknown version '{version}' of model '{name}'; it has version(s) ['{model.version}']")
        return model

    async def read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and _is_byte_count(declared) and int(declared) > self.max_body_bytes:
            raise BadRequest(f"request body of {int(declared)} bytes is over the limit of {self.max_body_bytes} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():  # a chunked body has no content-length to check up front
            size += len(chunk)
            if size > self.max_body_bytes:
                raise BadRequest(f"request body is over the limit of {self.max_body_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def run(self, model: ServedModel, arrays: dict) -> dict:
        batcher = self.batchers.get(model.name)
        if batcher is not None:
            return await batcher.infer(arrays)
        if model.batchable:
            self.metrics.batch_size.labels(model.name).observe(next(iter(arrays.values())).shape[0])
        return await asyncio.get_running_loop().run_in_executor(self.executor, model.run, arrays)


def _state(request: Request) -> _Server:
    return request.app.state.server


async def _live(request: Request) -> Response:
    return JSONResponse({"live": True})


async def _ready(request: Request) -> Response:
    # Ready while at least one model serves: a failing model is reported on its own /ready.
    ready = any(model.ready for model in _state(request).models.values())
    return JSONResponse({"ready": ready}, status_code=200 if ready else 503)


async def _server_metadata(request: Request) -> Response:
    return JSONResponse({"name": "onnxnn", "version": "1", "extensions": ["binary_tensor_data"]})


async def _model_metadata(request: Request) -> Response:
    model = _state(request).model(request)
    if not model.ready:
        raise ModelUnavailable(f"model '{model.name}' is not ready: {model.error}")
    return JSONResponse(model.metadata())


async def _model_ready(request: Request) -> Response:
    model = _state(request).model(request)
    body = {"name": model.name, "ready": model.ready}
    if not model.ready:
        body["error"] = f"model '{model.name}' failed to load: {model.error}"
    return JSONResponse(body, status_code=200 if model.ready else 503)


async def _infer(request: Request) -> Response:
    server = _state(request)
    started = time.perf_counter()
    label = request.path_params["name"] if request.path_params["name"] in server.models else "<unknown>"
    server.metrics.in_flight.inc()
    try:
        response = await _answer_inference(server, request)
    except (BadRequest, ModelUnavailable) as error:
        response = JSONResponse({"error": str(error)}, status_code=error.status_code)
    except Exception as error:  # the server's own fault: still a JSON body, and counted below like the rest
        _LOG.error("onnxnn serve: inference on model %r failed", label, exc_info=error)
        response = _internal_error(error)
    finally:
        server.metrics.in_flight.dec()
    server.metrics.requests.labels(label, str(response.status_code)).inc()
    server.metrics.latency.labels(label).observe(time.perf_counter() - started)
    return response


async def _answer_inference(server: _Server, request: Request) -> Response:
    model = server.model(request)
    if not model.ready:
        raise ModelUnavailable(f"model '{model.name}' is not ready: {model.error}")
    body = await server.read_body(request)
    header_length = request.headers.get(_HEADER_LENGTH)
    if header_length is not None and not _is_byte_count(header_length):
        raise BadRequest(f"Inference-Header-Content-Length must be a byte count, got {header_length!r}")
    arrays, header = decode_request(body, None if header_length is None else int(header_length))
    output_names = model.check_request(arrays, requested_outputs(header))
    outputs = await server.run(model, arrays)
    content, json_length = encode_response(
        model.name, model.version, header, {name: outputs[name] for name in output_names}
    )
    if json_length is None:
        return Response(content, media_type="application/json")
    return Response(
        content, media_type="application/octet-stream", headers={"Inference-Header-Content-Length": str(json_length)}
    )


async def _metrics(request: Request) -> Response:
    return Response(generate_latest(_state(request).metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def _protocol_error(request: Request, error: Exception) -> Response:
    # Registered for BadRequest and ModelUnavailable only, which carry their status code.
    return JSONResponse({"error": str(error)}, status_code=getattr(error, "status_code"))


def _internal_error(error: Exception) -> Response:
    # The exception's type only: its message may hold another request's data or the server's paths.
    return JSONResponse({"error": f"internal server error: {type(error).__name__}"}, status_code=500)


async def _unexpected_error(request: Request, error: Exception) -> Response:
    # Starlette's last resort for the routes other than infer (which answers its own 500s); Starlette
    # re-raises the exception after this response, and uvicorn logs its traceback.
    return _internal_error(error)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)  # registered for HTTPException only
    return JSONResponse({"error": error.detail}, status_code=error.status_code)


def create_app(
    models: list[ServedModel],
    max_batch_size: int = 0,
    max_queue_delay_ms: float = 1.0,
    max_body_bytes: int = 64 * 2**20,
    worker_threads: int = 4,
    concurrent_batches: int = 1,
) -> Starlette:
    """The ASGI application serving ``models``.

    Args:
        models: the models, loaded (a model that failed to load answers 503).
        max_batch_size: rows one batched run may stack; 0 or 1 turns dynamic batching off.
        max_queue_delay_ms: how long a batch's first request waits for others.
        max_body_bytes: larger request bodies are refused with 400.
        worker_threads: threads running onnxruntime sessions off the event loop.
        concurrent_batches: batches of one model that may run at once (at most ``worker_threads``).
    """
    executor = ThreadPoolExecutor(max_workers=worker_threads, thread_name_prefix="onnxnn-serve")
    server = _Server(models, max_batch_size, max_queue_delay_ms / 1000.0, max_body_bytes, executor, concurrent_batches)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        for batcher in server.batchers.values():
            batcher.start()
        yield
        # uvicorn calls this after the in-flight requests were answered (graceful shutdown).
        for batcher in server.batchers.values():
            await batcher.stop()
        executor.shutdown(wait=True)

    model_paths = ["/v2/models/{name}", "/v2/models/{name}/versions/{version}"]
    routes = [
        Route("/v2/health/live", _live),
        Route("/v2/health/ready", _ready),
        Route("/v2", _server_metadata),
        Route("/metrics", _metrics),
    ]
    for base in model_paths:
        routes += [
            Route(base, _model_metadata),
            Route(base + "/ready", _model_ready),
            Route(base + "/infer", _infer, methods=["POST"]),
        ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            BadRequest: _protocol_error,
            ModelUnavailable: _protocol_error,
            HTTPException: _http_error,
            Exception: _unexpected_error,
        },
    )
    app.state.server = server
    return app
