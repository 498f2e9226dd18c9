"""An MLP 784-512-512-10 training step with Adam (issue 16's workload), printed as JSON.

Per batch size: the median over rounds of the mean time of a full step (zero_grad, forward,
cross-entropy, backward, ``optimizer.step()``) in microseconds, after warm-up steps that trace
and compile everything: wall-clock time (``step_us``) and the CPU time of the process
(``step_cpu_us``), which on a loaded machine counts the work without the waits for a core. One
intra-op thread, so the two agree on an idle machine. Compare two
revisions with ``python benchmarks/ab_against_revision.py REVISION PAIRS $PWD/benchmarks/bench_adam_step.py``
(an absolute path: the script need not exist in the other revision).

Run: python benchmarks/bench_adam_step.py [--executor auto|onnxruntime|kernels] [--optimizer Adam|AdamW]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import onnxnn
from onnxnn import nn

BATCHES = (1, 64)
STEPS = {1: 60, 64: 20}  # steps per round: ~0.1 s each
ROUNDS = 7
WARMUP = 10


def bench(batch: int, executor: str, optimizer_name: str) -> tuple[float, float]:
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = getattr(onnxnn.optim, optimizer_name)(model.parameters(), lr=1e-3)
    loss_function = nn.CrossEntropyLoss()
    generator = np.random.default_rng(0)
    inputs = onnxnn.tensor(generator.standard_normal((batch, 784)), dtype=onnxnn.float32)
    targets = onnxnn.tensor(generator.integers(0, 10, batch))

    def step() -> None:
        optimizer.zero_grad()
        loss_function(model(inputs), targets).backward()
        optimizer.step()

    with onnxnn.set_executor(executor):
        for _ in range(WARMUP):
            step()
        wall, cpu = [], []
        for _ in range(ROUNDS):
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(STEPS[batch]):
                step()
            wall.append((time.perf_counter() - start) / STEPS[batch] * 1e6)
            cpu.append((time.process_time() - start_cpu) / STEPS[batch] * 1e6)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", default="auto")
    parser.add_argument("--optimizer", default="Adam")
    arguments = parser.parse_args()
    onnxnn.set_num_threads(1)
    report = {"workload": f"MLP 784-512-512-10 {arguments.optimizer} step", "executor": arguments.executor}
    for batch in BATCHES:
        wall, cpu = bench(batch, arguments.executor, arguments.optimizer)
        report[f"batch_{batch}_step_us"], report[f"batch_{batch}_step_cpu_us"] = round(wall, 1), round(cpu, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
