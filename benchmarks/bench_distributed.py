"""Data-parallel training throughput with onnxnn.distributed: world size 1 and 2 on this machine.

The workload is issue 16's MLP 784-512-512-10 (669,706 float32 parameters, 2.7 MB of gradients)
trained with SGD on 64 samples per rank per step (weak scaling: the global batch grows with the
ranks). Each rank runs one intra-op thread, so world size 2 uses the machine's two cores. Printed
as JSON: samples/s (global), the step time, the share of the step the backward spent blocked on
gradient all-reduces (``DistributedDataParallel.communication_wait_seconds``), the time of one
blocking all-reduce of all the gradients (what an unbucketed, unoverlapped reduction would cost),
and the scaling efficiency ``samples/s at 2 / (2 x samples/s at 1)``.

``--model`` prints instead the alpha-beta ring all-reduce cost model of docs/how-to/distributed.md
for 8 to 64 nodes.

Run: python benchmarks/bench_distributed.py [--steps 30] [--rounds 3] [--bucket-cap-mb 25] [--model]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BATCH = 64
WARMUP = 8


def worker(steps: int, rounds: int, executor: str, bucket_cap_mb: float) -> None:
    import onnxnn  # imported here: the launcher process itself needs neither onnxnn nor MPI
    import onnxnn.distributed as dist
    from onnxnn import nn

    onnxnn.set_num_threads(1)
    onnxnn.set_executor(executor)
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    onnxnn.manual_seed(0)
    model = dist.DistributedDataParallel(
        nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)),
        bucket_cap_mb=bucket_cap_mb,
    )
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=1e-3)
    loss_function = nn.CrossEntropyLoss()
    generator = np.random.default_rng(rank)
    inputs = onnxnn.tensor(generator.standard_normal((BATCH, 784)), dtype=onnxnn.float32)
    targets = onnxnn.tensor(generator.integers(0, 10, BATCH))

    def step() -> None:
        optimizer.zero_grad()
        loss_function(model(inputs), targets).backward()
        optimizer.step()
        model.module[0].weight.numpy(force=True)  # the step's values computed, not only recorded

    for _ in range(WARMUP):
        step()
    times, waits = [], []
    for _ in range(rounds):
        dist.barrier()
        model.communication_wait_seconds = 0.0
        started = time.perf_counter()
        for _ in range(steps):
            step()
        elapsed = onnxnn.tensor([time.perf_counter() - started, model.communication_wait_seconds], dtype=onnxnn.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        times.append(elapsed[0].item() / steps)
        waits.append(elapsed[1].item() / steps)
    flat = onnxnn.zeros(sum(p.numel() for p in model.parameters()))
    blocking = []
    for _ in range(10):
        dist.barrier()
        started = time.perf_counter()
        dist.all_reduce(flat)
        blocking.append(time.perf_counter() - started)
    if rank == 0:
        step_seconds = statistics.median(times)
        result = {
            "world_size": world,
            "executor": executor,
            "bucket_cap_mb": bucket_cap_mb,
            "buckets": len(model._buckets),
            "samples_per_s": round(world * BATCH / step_seconds, 1),
            "step_ms": round(1e3 * step_seconds, 2),
            "communication_wait_share": round(statistics.median(waits) / step_seconds, 3),
            "blocking_allreduce_all_grads_ms": round(1e3 * statistics.median(blocking), 3),
        }
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


def ring_allreduce_seconds(nodes: int, nbytes: float, alpha: float, beta: float) -> float:
    """The alpha-beta cost of a ring all-reduce: 2(p-1) messages of n/p bytes each way."""
    if nodes == 1:
        return 0.0
    return 2 * (nodes - 1) * alpha + 2 * (nodes - 1) / nodes * nbytes * beta


def cost_model() -> list[dict]:
    """Exposed all-reduce time per step at 8-64 nodes for two gradient sizes and bucket sizes.

    alpha 5 us (MPI latency over InfiniBand/RoCE including software), beta 1 / 12.5 GB/s (100 Gb/s
    links); the whole reduction exposed (no overlap) and with the last bucket only exposed (overlap
    of every other bucket with the backward, when the backward is longer than the communication).
    """
    alpha, beta = 5e-6, 1 / 12.5e9
    rows = []
    for name, nbytes in (("MLP 2.7 MB", 669_706 * 4), ("ResNet-50 102 MB", 25_557_032 * 4)):
        for bucket_mb in (1, 25):
            buckets = max(1, int(np.ceil(nbytes / (bucket_mb * 2**20))))
            for nodes in (2, 8, 16, 32, 64):
                per_bucket = ring_allreduce_seconds(nodes, nbytes / buckets, alpha, beta)
                rows.append(
                    {
                        "gradients": name,
                        "bucket_mb": bucket_mb,
                        "nodes": nodes,
                        "buckets": buckets,
                        "no_overlap_ms": round(1e3 * buckets * per_bucket, 3),
                        "last_bucket_ms": round(1e3 * per_bucket, 3),
                        "latency_share": round(2 * (nodes - 1) * alpha / per_bucket, 3),
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--executor", default="auto")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DistributedDataParallel's bucket_cap_mb")
    parser.add_argument("--model", action="store_true", help="print the all-reduce cost model instead")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model:
        for row in cost_model():
            print(json.dumps(row))
        return
    if args.worker:
        worker(args.steps, args.rounds, args.executor, args.bucket_cap_mb)
        return
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    results = []
    for world in (1, 2):
        command = [str(mpiexec), "-n", str(world), sys.executable, __file__, "--worker"]
        command += ["--steps", str(args.steps), "--rounds", str(args.rounds), "--executor", args.executor]
        command += ["--bucket-cap-mb", str(args.bucket_cap_mb)]
        output = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
        results.append(json.loads(output.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    efficiency = results[1]["samples_per_s"] / (2 * results[0]["samples_per_s"])
    print(json.dumps({"scaling_efficiency_1_to_2": round(efficiency, 3)}))


if __name__ == "__main__":
    main()
