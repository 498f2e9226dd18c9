"""What rounding float16 after every op costs on onnxruntime, measured side by side in one process.

onnxnn computes each float16 op in float32 between explicit Casts (``sessions._round_per_op``),
so every intermediate rounds and overflows as PyTorch's do. Before, onnxruntime removed the Casts
between ops it ran in float32 and the whole chain ran in float32. This prints the per-step time of
a float16 MLP training step (forward, backward, SGD update) with the per-op rounding and without
it (``sessions.ROUND_LOW_PRECISION_PER_OP = False``, main's behaviour), their ratio, and the same
step in float32 for scale. Rounds alternate between the variants so machine load hits all alike.

Run: python benchmarks/bench_float16.py [--batch 128] [--width 512] [--steps 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import onnxnn
from onnxnn import nn
from onnxnn.runtime import realization as executor
from onnxnn.runtime import sessions


def _make_step(dtype, batch: int, width: int):
    onnxnn.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
    ).to(dtype)
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = onnxnn.randn(batch, width).to(dtype)
    target = onnxnn.randn(batch, 10).to(dtype)

    def step():
        loss = ((model(x) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def _time_steps(step, steps: int) -> float:
    """Mean milliseconds per step over ``steps`` steps, the last one read back to the host."""
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()
    return (time.perf_counter() - start) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    variants = {
        "float16_rounded_per_op": (onnxnn.float16, True),
        "float16_unrounded_as_before": (onnxnn.float16, False),
        "float32": (onnxnn.float32, True),
    }
    samples: dict = {name: [] for name in variants}
    with onnxnn.set_executor("onnxruntime"):
        steps = {}
        for name, (dtype, rounded) in variants.items():
            sessions.ROUND_LOW_PRECISION_PER_OP = rounded
            steps[name] = _make_step(dtype, args.batch, args.width)
        for _ in range(args.rounds):
            for name, (dtype, rounded) in variants.items():
                # Sessions are compiled with the setting in force: each variant gets its own.
                sessions.ROUND_LOW_PRECISION_PER_OP = rounded
                executor.clear_cache()
                _time_steps(steps[name], 3)  # compile and warm up
                samples[name].append(_time_steps(steps[name], args.steps))
        sessions.ROUND_LOW_PRECISION_PER_OP = True
    ms = {name: statistics.median(values) for name, values in samples.items()}
    print(
        json.dumps(
            {
                "config": vars(args),
                "ms_per_step": ms,
                "rounded_over_unrounded": ms["float16_rounded_per_op"] / ms["float16_unrounded_as_before"],
                "rounded_float16_over_float32": ms["float16_rounded_per_op"] / ms["float32"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
