"""Memory of training loops: peak RSS of the MLP loop, and RSS growth over a long seed loop.

The performance issue's memory criteria: the MLP loop (784-512-512-10, Adam, batch 64, 500 steps)
must not peak above what it did (138 MB), and the modules note's seed loop (Net 4-3-1, SGD with
momentum, one sample per step) must not grow over 20,000 steps: nothing recorded may outlive its
step. Each workload runs in a fresh process, so its peak is its own; PyTorch runs the same loops
beside it when installed, for scale.

Each onnxnn row says whether its optimizer ran the compiled update loops (kernels/update_loops.c)
or, where they were not built or ``ONNXNN_COMPILED_UPDATES=0``, the numpy formulas.

Run: python benchmarks/bench_memory.py [--mlp-steps 500] [--seed-steps 20000] [--torch]
Prints one JSON line per workload and framework.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as statm:  # Linux: resident pages are the second field
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _library(name: str):
    if name == "torch":
        import torch

        torch.set_num_threads(1)
        return torch
    import onnxnn

    onnxnn.set_num_threads(1)
    return onnxnn


def _mlp_loop(library, steps: int) -> dict:
    nn = library.nn
    library.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = library.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    inputs = library.from_numpy(rng.standard_normal((64, 784)).astype(np.float32))
    labels = library.from_numpy(rng.integers(0, 10, 64))
    loss_function = nn.CrossEntropyLoss()
    start = _current_rss_mb()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_function(model(inputs), labels)
        loss.backward()
        optimizer.step()
        float(loss.detach())  # a training loop reads its loss; this also bounds what is pending
    return {"rss_before_loop_mb": round(start, 1), "peak_rss_mb": round(_peak_rss_mb(), 1)}


def _seed_loop(library, steps: int) -> dict:
    nn = library.nn
    library.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    optimizer = library.optim.SGD(net.parameters(), lr=1e-4, weight_decay=1e-2, momentum=0.9)
    samples = []
    for step in range(1, steps + 1):
        output = net(library.randn(4))
        loss = library.abs(output)
        net.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 1000 == 0:
            float(net[2].weight.detach().sum())
            samples.append(round(_current_rss_mb(), 2))
    # The first thousand steps warm caches up (sessions, generated code); growth counts after them.
    settled = samples[1:] if len(samples) > 1 else samples
    slope = float(np.polyfit(np.arange(len(settled)), settled, 1)[0]) if len(settled) > 1 else 0.0
    return {
        "rss_mb_every_1000_steps": samples,
        "growth_after_warmup_mb": round(settled[-1] - settled[0], 2),
        "fitted_growth_mb_per_1000_steps": round(slope, 3),
    }


WORKLOADS = {"mlp": _mlp_loop, "seed": _seed_loop}


def _worker(workload: str, library_name: str, steps: int) -> None:
    result = WORKLOADS[workload](_library(library_name), steps)
    if library_name == "onnxnn":
        from onnxnn.kernels import compiled_updates

        result["compiled_updates"] = compiled_updates.available()  # False: the numpy formulas ran
    print(json.dumps(result))


def _run(workload: str, library_name: str, steps: int) -> dict:
    command = [sys.executable, __file__, "--worker", workload, library_name, str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=HERE)
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return {"workload": workload, "framework": library_name, "steps": steps, **row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlp-steps", type=int, default=500)
    parser.add_argument("--seed-steps", type=int, default=20000)
    parser.add_argument("--torch", action="store_true", help="run the same loops with PyTorch beside")
    parser.add_argument("--worker", nargs=3, metavar=("WORKLOAD", "LIBRARY", "STEPS"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        workload, library_name, steps = arguments.worker
        _worker(workload, library_name, int(steps))
        return
    frameworks = ["onnxnn"] + (["torch"] if arguments.torch else [])
    for workload, steps in (("mlp", arguments.mlp_steps), ("seed", arguments.seed_steps)):
        for framework in frameworks:
            print(json.dumps(_run(workload, framework, steps)), flush=True)


if __name__ == "__main__":
    main()
