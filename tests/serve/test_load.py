"""A bounded run of benchmarks/bench_serve.py's load: concurrent clients with 5% malformed requests lose no good one.

No timing is asserted: the figures are the benchmark's to report.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .models import FEATURES

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_serve.py"


def _bench_serve():
    spec = importlib.util.spec_from_file_location("bench_serve", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_malformed_requests_mixed_into_concurrent_load_lose_no_good_request(server, model_files):
    bench = _bench_serve()
    pool = bench._pool(FEATURES, model_files["mlp"])
    outcome = bench.run_load(server, pool, requests=160, concurrency=8, time_limit=120.0, malformed_every=20)
    assert not outcome.timed_out
    assert outcome.good_failures == []
    assert len(outcome.latencies) == 152
    assert outcome.malformed_sent == 8 and outcome.malformed_answered_400 == 8
