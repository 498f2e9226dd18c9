"""``onnxnn serve MODEL [MODEL...]``: serve ONNX models over the Open Inference Protocol (KServe v2 REST)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from ..export.checkpoint import load
from ..serve.model import load_model, parse_model_argument
from ..serve.server import MISSING_EXTRA, serve
from .common import CommandError, add_input_dtype_argument, export_module, load_factory, parse_shape

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "serve ONNX models over HTTP (Open Inference Protocol / KServe v2), with dynamic batching"

EPILOG = """examples:
  onnxnn serve model.onnx                          # http://127.0.0.1:8000/v2/models/model
  onnxnn serve clf=model.onnx --port 0             # a free port, printed as 'listening on ...'
  onnxnn serve a.onnx b.onnx --max-batch-size 32 --max-queue-delay-ms 2 --intra-op-threads 4
  onnxnn serve clf=models.py:make_classifier --weights clf.safetensors --input-shape 1,4
                                                   # a module built by a factory, exported on start
  curl localhost:8000/v2/models/model               # metadata; /metrics for Prometheus

Stops on SIGTERM or Ctrl-C after answering the requests in flight, then ends by that signal (as
uvicorn does, so supervisors see it). Needs the serve extra: pip install 'onnxnn[serve]'. Exit status:
2 for bad arguments, no loadable model or a missing extra; 1 when the port cannot be bound.
A model file that fails to load is reported as not ready (503) while the others serve."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "models",
        nargs="+",
        metavar="MODEL",
        help="an ONNX file or a Python 'module:factory' path returning a module (exported on start with a "
        "dynamic batch axis); NAME=MODEL chooses its name",
    )
    parser.add_argument(
        "--weights",
        metavar="CHECKPOINT",
        help="a state_dict (.pt/.pth/.bin/.safetensors/onnxnn checkpoint) loaded into every factory model",
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        type=parse_shape,
        default=None,
        metavar="SHAPE",
        help="a factory model's example input shape (axis 0 becomes the dynamic batch axis); once per input",
    )
    add_input_dtype_argument(parser)
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
        named = [_named(argument) for argument in args.models]
    except ValueError as error:
        print(f"onnxnn serve: {error}", file=sys.stderr)
        return 2
    names = [name for name, _ in named]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        print(f"onnxnn serve: model name(s) {duplicates} given twice; use NAME=FILE", file=sys.stderr)
        return 2
    # Sessions hold their models in memory, so the exported files go before serving starts (a server
    # stopped by SIGTERM ends by the signal, with no chance to delete them afterwards).
    with tempfile.TemporaryDirectory(prefix="onnxnn-serve-") as exported:
        models = []
        for name, path in named:
            model = load_model(
                name, _onnx_file(name, path, args, exported), args.intra_op_threads, args.inter_op_threads
            )
            model.path = path  # what the start-up log names: the file, or the factory
            models.append(model)
    if not any(model.ready for model in models):
        failures = "; ".join(f"{m.name}: {m.error}" for m in models)
        print(f"onnxnn serve: no model loaded: {failures}", file=sys.stderr)
        return 2
    return _serve(models, args)


def _named(argument: str) -> tuple[str, str]:
    name, path = parse_model_argument(argument)
    if "=" not in argument and _is_factory(path):
        name = path.rpartition(":")[2]  # 'models.py:make_classifier' serves as 'make_classifier'
    return name, path


def _is_factory(path: str) -> bool:
    return ":" in path and not path.lower().endswith(".onnx") and not os.path.exists(path)


def _onnx_file(name: str, path: str, args: argparse.Namespace, folder: str) -> str:
    """``path`` itself for an ONNX file; for a factory, the module it builds exported into ``folder``."""
    if not _is_factory(path):
        return path
    if not args.input_shape:
        raise CommandError(f"'{path}': a 'module:factory' model needs --input-shape (e.g. --input-shape 1,4)")
    module = load_factory(path)
    if not callable(module) or not hasattr(module, "load_state_dict"):
        raise CommandError(f"'{path}': the factory returned {type(module).__name__}, not a module")
    if args.weights is not None:
        # strict: a checkpoint that does not fit the module is an error at start, not wrong answers later.
        module.load_state_dict(load(args.weights))
    module.eval()
    input_names = [f"input_{index}" for index in range(len(args.input_shape))]
    target = os.path.join(folder, f"{name}.onnx")
    export_module(
        module,
        args.input_shape,
        args.input_dtype,
        target,
        input_names=input_names,
        dynamic_axes={input_name: {0: "batch"} for input_name in input_names},
    )
    return target


def _serve(models: list, args: argparse.Namespace) -> int:
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
