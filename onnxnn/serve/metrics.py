"""The server's Prometheus metrics, in a registry of their own (one per application)."""

from __future__ import annotations

try:  # the serve extra: see onnxnn.serve.server.MISSING_EXTRA
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
except ImportError:
    pass

__all__ = ["ServerMetrics"]

# Row counts are powers of two in practice (clients and batch limits pick them).
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServerMetrics:
    """Request counts by model and HTTP status, request latencies, batch sizes, requests in flight."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "onnxnn_inference_requests",
            "Inference requests by model and HTTP status code.",
            ["model", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "onnxnn_inference_request_duration_seconds",
            "Time from receiving an inference request to sending its response.",
            ["model"],
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "onnxnn_batch_size",
            "Rows per onnxruntime run (with dynamic batching, several requests' rows).",
            ["model"],
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "onnxnn_inference_requests_in_flight",
            "Inference requests received and not yet answered.",
            registry=self.registry,
        )
