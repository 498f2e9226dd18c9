"""The executors side by side: "auto" against "onnxruntime" only and "kernels" only, as JSON.

Workloads: the modules note's training loop (tiny graphs, many steps), a 1000x1000 matmul, and a
32x64x56x56 convolution (64 -> 64 channels, 3x3, padding 1). Each is timed under each executor in
the same process, interleaved, and auto's time is reported against the faster of the two.

Run: python benchmarks/bench_executors.py [note_steps]   (default 2000)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import onnxnn
import onnxnn.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_modules_note import _note_loop  # noqa: E402

EXECUTORS = ("onnxruntime", "kernels", "auto")


def _timed(function, repeats: int) -> float:
    function()  # compile / warm up
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def _compare(workload, repeats: int, rounds: int = 6) -> dict:
    samples = {name: [] for name in EXECUTORS}
    for round_index in range(rounds):
        # Rotate the order: a run right after numpy's BLAS threads (kernels) starts on a busy CPU.
        order = EXECUTORS[round_index % 3 :] + EXECUTORS[: round_index % 3]
        for name in order:
            with onnxnn.set_executor(name):
                samples[name].append(workload(repeats))
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    fastest = min(seconds["onnxruntime"], seconds["kernels"])
    return {
        **{f"{name}_ms": value * 1e3 for name, value in seconds.items()},
        "auto_over_fastest": seconds["auto"] / fastest,
    }


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    onnxnn.manual_seed(0)
    a, b = onnxnn.randn(1000, 1000).numpy(), onnxnn.randn(1000, 1000).numpy()
    images, kernel = onnxnn.randn(32, 64, 56, 56).numpy(), onnxnn.randn(64, 64, 3, 3).numpy()
    fresh = onnxnn.from_numpy  # new input values per call: unchanged inputs would get specialized sessions

    def matmul():
        (fresh(a) @ fresh(b)).numpy()

    def convolution():
        F.conv2d(fresh(images), fresh(kernel), padding=1).numpy()

    result = {
        "note_training_loop_per_step": _compare(lambda n: _note_loop(onnxnn, n), steps),
        "matmul_1000x1000": _compare(lambda n: _timed(matmul, n), 20),
        "conv_32x64x56x56_3x3": _compare(lambda n: _timed(convolution, n), 3),
        "target": "auto_over_fastest <= 1.0 on each workload (noise of a shared machine aside)",
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
