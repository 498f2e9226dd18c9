"""Load test of ``onnxnn serve``: requests per second and p50/p99 latency, as JSON.

Everything runs on 127.0.0.1: a real ``onnxnn serve`` subprocess on a free port, talked to by
tritonclient.http from ``--concurrency`` client threads (each with its own connection), a fixed
count of requests per scenario under a fixed time limit. Scenarios:

- the server with dynamic batching and without, at concurrency 1 and 16, one-row binary requests;
- the batched server at concurrency 16 with 5% malformed requests mixed in (each must get 400; no
  good request may fail);
- the ceiling: the same model in a plain onnxruntime session called in-process, one row per call
  (1 and 16 threads), and 16 rows per call (what batching at best turns 16 requests into).

A good request fails when it errors or when its logits are not those of a plain onnxruntime session
within float32 rounding. The run exits with status 1 if any good request failed.

Run: python benchmarks/bench_serve.py [--requests 2000] [--time-limit 60] [--features 1024 --hidden 4096]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the serving tests' model builders and server process helper

from serve.models import mlp_logits_bound, write_mlp  # noqa: E402
from serve.process import ServerProcess  # noqa: E402

MALFORMED_BODIES = [
    b'{"inputs": [',
    b"[]",
    b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": []}]}',
]


@dataclass
class Outcome:
    """What one scenario measured."""

    latencies: list[float] = field(default_factory=list)  # seconds, good requests that succeeded
    good_failures: list[str] = field(default_factory=list)
    malformed_sent: int = 0
    malformed_answered_400: int = 0
    wall: float = 0.0
    timed_out: bool = False
    mean_batch_rows: float = 0.0  # rows per onnxruntime run, from the server's /metrics

    def summary(self) -> dict:
        latencies = np.array(self.latencies) * 1000
        return {
            "requests": len(self.latencies) + len(self.good_failures) + self.malformed_sent,
            "rps": round((len(self.latencies) + self.malformed_sent) / self.wall, 1) if self.wall else 0.0,
            "p50_ms": round(float(np.percentile(latencies, 50)), 3) if latencies.size else None,
            "p99_ms": round(float(np.percentile(latencies, 99)), 3) if latencies.size else None,
            "failed_good_requests": len(self.good_failures),
            "malformed": self.malformed_sent,
            "malformed_answered_400": self.malformed_answered_400,
            "timed_out": self.timed_out,
            "mean_batch_rows": round(self.mean_batch_rows, 2),
        }


def _pool(features: int, model_path: str, size: int = 64, seed: int = 0):
    """Inputs, their expected logits from a plain session, and the rounding bound of each."""
    x = np.random.default_rng(seed).standard_normal((size, features)).astype(np.float32)
    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    return x, expected, mlp_logits_bound(x, model_path)


def _batch_rows(address: str) -> tuple[float, float]:
    """(runs, rows) so far from the server's onnxnn_batch_size histogram."""
    connection = http.client.HTTPConnection(*address.split(":"), timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    values = {}
    for line in text.splitlines():
        for key in ("onnxnn_batch_size_count", "onnxnn_batch_size_sum"):
            if line.startswith(key + "{"):
                values[key] = float(line.rsplit(" ", 1)[1])
    return values.get("onnxnn_batch_size_count", 0.0), values.get("onnxnn_batch_size_sum", 0.0)


def _post_malformed(address: str, body: bytes) -> int:
    connection = http.client.HTTPConnection(*address.split(":"), timeout=60)
    connection.request("POST", "/v2/models/mlp/infer", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def run_load(
    server: ServerProcess,
    pool,
    requests: int,
    concurrency: int,
    time_limit: float,
    malformed_every: int = 0,
) -> Outcome:
    """Send ``requests`` one-row requests from ``concurrency`` threads; every ``malformed_every``-th is malformed."""
    import tritonclient.http as triton  # the test extra; imported here so that --help works without it

    x, expected, bound = pool
    outcome, lock, counter = Outcome(), threading.Lock(), iter(range(requests))
    deadline = time.perf_counter() + time_limit

    def worker() -> None:
        client = triton.InferenceServerClient(server.address, network_timeout=60.0)
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            if time.perf_counter() > deadline:
                outcome.timed_out = True
                return
            if malformed_every and index % malformed_every == malformed_every - 1:
                status = _post_malformed(server.address, MALFORMED_BODIES[index % len(MALFORMED_BODIES)])
                with lock:
                    outcome.malformed_sent += 1
                    outcome.malformed_answered_400 += status == 400
                continue
            row = index % len(x)
            tensor = triton.InferInput("x", [1, x.shape[1]], "FP32")
            tensor.set_data_from_numpy(x[row : row + 1], binary_data=True)
            started = time.perf_counter()
            try:
                logits = client.infer("mlp", [tensor]).as_numpy("logits")
                elapsed = time.perf_counter() - started
                if logits.shape != (1, expected.shape[1]) or not np.all(
                    np.abs(logits[0].astype(np.float64) - expected[row]) <= bound[row]
                ):
                    raise AssertionError(f"request {index}: logits {logits} differ from {expected[row]}")
            except Exception as error:  # any failure of a good request is counted, not raised
                with lock:
                    outcome.good_failures.append(f"{type(error).__name__}: {error}")
                continue
            with lock:
                outcome.latencies.append(elapsed)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    runs_before, rows_before = _batch_rows(server.address)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcome.wall = time.perf_counter() - started
    runs, rows = _batch_rows(server.address)
    outcome.mean_batch_rows = (rows - rows_before) / (runs - runs_before) if runs > runs_before else 0.0
    return outcome


def ceiling(model_path: str, pool, requests: int, threads: int, rows_per_call: int, intra_op_threads: int) -> dict:
    """A plain onnxruntime session in-process: rps counted in rows (requests), latency per call."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    x = pool[0]
    calls = max(1, requests // rows_per_call)
    latencies, lock, counter = [], threading.Lock(), iter(range(calls))

    def worker() -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            start = (index * rows_per_call) % (len(x) - rows_per_call + 1)
            began = time.perf_counter()
            session.run(None, {"x": x[start : start + rows_per_call]})
            elapsed = time.perf_counter() - began
            with lock:
                latencies.append(elapsed)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    began = time.perf_counter()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    wall = time.perf_counter() - began
    latency_ms = np.array(latencies) * 1000
    return {
        "rows": calls * rows_per_call,
        "rps": round(calls * rows_per_call / wall, 1),
        "p50_ms": round(float(np.percentile(latency_ms, 50)), 3),
        "p99_ms": round(float(np.percentile(latency_ms, 99)), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per scenario")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per scenario at most")
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intra-op-threads", type=int, default=1, help="onnxruntime threads, server and ceiling")
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument(
        "--max-queue-delay-ms", type=float, default=0.0, help="0: a batch takes what queued while the last one ran"
    )
    arguments = parser.parse_args()

    report = {"config": vars(arguments)}
    with tempfile.TemporaryDirectory() as folder:
        model_path = write_mlp(Path(folder) / "mlp.onnx", features=arguments.features, hidden=arguments.hidden)
        pool = _pool(arguments.features, model_path)
        common = [f"mlp={model_path}", "--intra-op-threads", str(arguments.intra_op_threads)]
        servers = {
            "batched": common
            + [
                "--max-batch-size",
                str(arguments.max_batch_size),
                "--max-queue-delay-ms",
                str(arguments.max_queue_delay_ms),
            ],
            "unbatched": common + ["--max-batch-size", "0"],
        }
        failures = 0
        for name, flags in servers.items():
            server = ServerProcess(flags)
            try:
                run_load(server, pool, 32, 4, arguments.time_limit)  # warm-up: connections, first runs
                for concurrency in (1, 16):
                    outcome = run_load(server, pool, arguments.requests, concurrency, arguments.time_limit)
                    report[f"{name}_c{concurrency}"] = outcome.summary()
                    failures += len(outcome.good_failures)
                if name == "batched":
                    outcome = run_load(server, pool, arguments.requests, 16, arguments.time_limit, malformed_every=20)
                    report["batched_c16_5pct_malformed"] = outcome.summary()
                    failures += len(outcome.good_failures) + outcome.malformed_sent - outcome.malformed_answered_400
            finally:
                server.stop()
        for threads, rows in ((1, 1), (16, 1), (1, 16)):
            report[f"ceiling_onnxruntime_threads{threads}_rows{rows}"] = ceiling(
                model_path, pool, arguments.requests, threads, rows, arguments.intra_op_threads
            )
    print(json.dumps(report, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
