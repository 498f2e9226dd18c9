"""``onnxnn serve MODEL [MODEL...]``: serve ONNX models over the Open Inference Protocol (KServe v2 REST)."""

from __future__ import annotations

import argparse
import sys

from ..serve.model import load_model, parse_model_argument
from ..serve.server import MISSING_EXTRA, serve

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "serve ONNX models over HTTP (Open Inference Protocol / KServe v2), with dynamic batching"

EPILOG = """examples:
  onnxnn serve model.onnx                          # http://127.0.0.1:8000/v2/models/model
  onnxnn serve clf=model.onnx --port 0             # a free port, printed as 'listening on ...'
  onnxnn serve a.onnx b.onnx --max-batch-size 32 --max-queue-delay-ms 2 --intra-op-threads 4
  curl localhost:8000/v2/models/model               # metadata; /metrics for Prometheus

Stops on SIGTERM or Ctrl-C after answering the requests in flight, then ends by that signal (as
uvicorn does, so supervisors see it). Needs the serve extra: pip install 'onnxnn[serve]'. Exit status:
2 for bad arguments, no loadable model or a missing extra; 1 when the port cannot be bound.
A model file that fails to load is reported as not ready (503) while the others serve."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("models", nargs="+", metavar="MODEL", help="an ONNX file, or NAME=FILE to choose its name")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on; 0 picks a free one (default: 8000)")
    parser.add_argument(
        "--max-batch-size", type=int, default=0, help="rows stacked per run by dynamic batching; 0 turns it off"
    )
    parser.add_argument(
        "--max-queue-delay-ms", type=float, default=1.0, help="how long a batch waits for more requests (default: 1)"
    )
    parser.add_argument(
        "--max-body-bytes", type=int, default=64 * 2**20, help="larger request bodies get 400 (default: 64 MiB)"
    )
    parser.add_argument("--intra-op-threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    parser.add_argument("--inter-op-threads", type=int, default=0, help="onnxruntime inter-op threads (0: its default)")
    parser.add_argument("--worker-threads", type=int, default=4, help="threads running sessions (default: 4)")
    parser.add_argument("--concurrent-batches", type=int, default=1, help="batches of a model run at once (default: 1)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])


def run(args: argparse.Namespace) -> int:
    for flag in ("max_batch_size", "max_queue_delay_ms", "intra_op_threads", "inter_op_threads"):
        if getattr(args, flag) < 0:
            print(f"onnxnn serve: --{flag.replace('_', '-')} must be >= 0", file=sys.stderr)
            return 2
    if args.max_body_bytes <= 0 or args.worker_threads <= 0 or args.concurrent_batches <= 0:
        print("onnxnn serve: --max-body-bytes, --worker-threads and --concurrent-batches must be > 0", file=sys.stderr)
        return 2
    if MISSING_EXTRA is not None:
        print(
            f"onnxnn serve: {MISSING_EXTRA} is missing; install the extra: pip install 'onnxnn[serve]'", file=sys.stderr
        )
        return 2
    try:
        named = [parse_model_argument(argument) for argument in args.models]
    except ValueError as error:
        print(f"onnxnn serve: {error}", file=sys.stderr)
        return 2
    names = [name for name, _ in named]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        print(f"onnxnn serve: model name(s) {duplicates} given twice; use NAME=FILE", file=sys.stderr)
        return 2
    models = [load_model(name, path, args.intra_op_threads, args.inter_op_threads) for name, path in named]
    if not any(model.ready for model in models):
        print(f"onnxnn serve: no model loaded: {'; '.join(f'{m.name}: {m.error}' for m in models)}", file=sys.stderr)
        return 2
    return serve(
        models,
        host=args.host,
        port=args.port,
        max_batch_size=args.max_batch_size,
        max_queue_delay_ms=args.max_queue_delay_ms,
        max_body_bytes=args.max_body_bytes,
        worker_threads=args.worker_threads,
        concurrent_batches=args.concurrent_batches,
        log_level=args.log_level,
    )
