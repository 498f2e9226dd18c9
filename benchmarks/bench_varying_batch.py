"""A training loop whose batch size changes every step, against the same loop at a fixed batch size.

Side by side in one process, per executor: an MLP (4 -> 16 -> 1, ReLU, MSE, SGD with momentum)
trained for STEPS steps on batches of random sizes in 1..MAX_BATCH (issue 10's "cache thrash"
loop), then for STEPS steps at the fixed batch size MAX_BATCH // 2. Printed as JSON per executor:
milliseconds per step of each loop, their ratio (target: close to 1), the distinct sizes seen and
the graphs compiled during each loop (onnxruntime sessions plus onnxnn kernel plans). With
``--static`` the loop runs with symbolic sizes turned off (``dynamic_shapes.ENABLED = False``),
as before them.

Run: python benchmarks/bench_varying_batch.py [--steps 2100] [--static]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import kernels, nn
from onnxnn.runtime.fastpath import backward_replay
from onnxnn.runtime.fastpath import dynamic_shapes
from onnxnn.runtime import realization as executor

MAX_BATCH = 700
WARMUP_STEPS = 20


def _compilations() -> int:
    return executor.cache_info()["misses"] + kernels.cache_info()["misses"]


def _loop(steps: int, sizes: list[int]) -> dict:
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(size: int):
        x, y = onnxnn.randn(size, 4), onnxnn.randn(size, 1)
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    for size in sizes[:WARMUP_STEPS]:  # the first steps compile whatever the loop compiles at all
        step(size)
    compiled = _compilations()
    start = time.perf_counter()
    for size in sizes[WARMUP_STEPS : WARMUP_STEPS + steps]:
        loss = step(size)
    loss.item()
    elapsed = time.perf_counter() - start
    return {
        "ms_per_step": elapsed / steps * 1e3,
        "compilations": _compilations() - compiled,
        "compilations_in_warmup": compiled,
    }


def bench(executor_name: str, steps: int) -> dict:
    rng = np.random.default_rng(0)
    varying = [int(size) for size in rng.integers(1, MAX_BATCH + 1, steps + WARMUP_STEPS)]
    fixed = [MAX_BATCH // 2] * (steps + WARMUP_STEPS)
    results = {}
    with onnxnn.set_executor(executor_name):
        for name, sizes in (("varying", varying), ("fixed", fixed)):
            executor.clear_cache()
            kernels.clear_cache()
            backward_replay.clear_templates()
            results[name] = _loop(steps, sizes)
    return {
        "varying_ms_per_step": round(results["varying"]["ms_per_step"], 3),
        "fixed_ms_per_step": round(results["fixed"]["ms_per_step"], 3),
        "ratio": round(results["varying"]["ms_per_step"] / results["fixed"]["ms_per_step"], 2),
        "distinct_batch_sizes": len(set(varying)),
        "compilations_varying": results["varying"]["compilations_in_warmup"] + results["varying"]["compilations"],
        "compilations_fixed": results["fixed"]["compilations_in_warmup"] + results["fixed"]["compilations"],
        "compilations_varying_after_warmup": results["varying"]["compilations"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2100)
    parser.add_argument("--static", action="store_true", help="symbolic sizes off (one graph per size)")
    arguments = parser.parse_args()
    dynamic_shapes.ENABLED = not arguments.static
    report = {"steps": arguments.steps, "symbolic_sizes": dynamic_shapes.ENABLED}
    for executor_name in ("auto", "onnxruntime", "kernels"):
        report[executor_name] = bench(executor_name, arguments.steps)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
