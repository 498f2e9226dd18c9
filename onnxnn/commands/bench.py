"""``onnxnn bench MODEL``: latency percentiles and throughput of a model in a plain onnxruntime session."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from .common import CommandError, add_model_arguments, input_shapes_of, load_model, progress, random_feeds

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "time a model in a plain onnxruntime session: latency percentiles and throughput"
EPILOG = """The model runs as onnxruntime runs it in production: one InferenceSession, random inputs of the
declared shapes (dynamic axes 1 unless --input-shape says otherwise), --warmup untimed runs, then
--iterations timed runs one after another. Throughput is runs per second and samples per second
(axis 0 of the first input is the batch).

examples:
  onnxnn bench model.onnx
  onnxnn bench model.onnx --input-shape 32,3,224,224 --iterations 200 --threads 4
  onnxnn bench mypackage.models:make_model --input-shape 8,4 --json
"""

_PERCENTILES = (50, 90, 95, 99)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command\'s arguments to its parser (the protocol of :mod:`onnxnn.commands`)."""
    add_model_arguments(parser)
    parser.add_argument("--iterations", type=int, default=100, help="timed runs (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs first (default 10)")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (default 0: its choice)")
    parser.add_argument(
        "--provider",
        default="CPUExecutionProvider",
        help="onnxruntime execution provider (default CPUExecutionProvider; e.g. CUDAExecutionProvider)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Runs the command; returns its exit status (failures raise, and :mod:`onnxnn.cli` prints them)."""
    import onnxruntime  # deferred: costs ~0.3 s, which --help and the other commands need not pay

    if args.iterations < 1 or args.warmup < 0:
        raise CommandError("--iterations must be at least 1 and --warmup at least 0")
    model, name = load_model(args.model, args.input_shape, args.input_dtype)
    shapes = input_shapes_of(model, args.input_shape)
    feeds = random_feeds(model, shapes, args.seed)
    if args.provider not in onnxruntime.get_available_providers():
        raise CommandError(
            f"onnxruntime has no {args.provider} here",
            hint="available: " + ", ".join(onnxruntime.get_available_providers()),
        )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=[args.provider])
        for _ in progress(range(args.warmup), desc="warmup", unit="run"):
            session.run(None, feeds)
        latencies = []
        for _ in progress(range(args.iterations), desc="bench", unit="run"):
            start = time.perf_counter()
            session.run(None, feeds)
            latencies.append(time.perf_counter() - start)
    except Exception as error:  # onnxruntime's exception types derive from Exception only
        raise RuntimeError(f"onnxruntime cannot run it: {' '.join(str(error).split())}") from None
    figures = _figures(np.asarray(latencies), shapes, name, args)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        _print(figures)
    return 0


def _figures(latencies: np.ndarray, shapes: dict, name: str, args: argparse.Namespace) -> dict:
    first = next(iter(shapes.values()), ())
    batch = first[0] if first else 1
    milliseconds = latencies * 1e3
    figures = {
        "model": name,
        "provider": args.provider,
        "threads": args.threads,
        "inputs": {input_name: list(shape) for input_name, shape in shapes.items()},
        "batch": batch,
        "iterations": int(latencies.size),
        "warmup": args.warmup,
        "mean_ms": float(milliseconds.mean()),
        "min_ms": float(milliseconds.min()),
        "max_ms": float(milliseconds.max()),
    }
    for percentile in _PERCENTILES:
        figures[f"p{percentile}_ms"] = float(np.percentile(milliseconds, percentile))
    total = float(latencies.sum())
    figures["runs_per_s"] = latencies.size / total if total > 0 else float("inf")
    figures["samples_per_s"] = figures["runs_per_s"] * batch
    return figures


def _print(figures: dict) -> None:
    inputs = ", ".join(f"{name} {shape}" for name, shape in figures["inputs"].items())
    print(f"{figures['model']}  ({figures['provider']}, {figures['iterations']} runs after {figures['warmup']} warmup)")
    print(f"inputs: {inputs}")
    percentiles = "  ".join(f"p{p} {figures[f'p{p}_ms']:.3f}" for p in _PERCENTILES)
    mean, low, high = figures["mean_ms"], figures["min_ms"], figures["max_ms"]
    print(f"latency (ms): mean {mean:.3f}  min {low:.3f}  {percentiles}  max {high:.3f}")
    runs, samples = figures["runs_per_s"], figures["samples_per_s"]
    print(f"throughput: {runs:,.1f} runs/s, {samples:,.1f} samples/s (batch {figures['batch']})")
