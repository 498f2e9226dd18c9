"""Loading a 5000-tensor PyTorch checkpoint with onnxnn.load, against torch.load(weights_only=True), as JSON.

The checkpoint is a state_dict of 5000 small float32 tensors (the per-tensor overhead dominates, as
for transformer checkpoints with many layers), written by ``torch.save`` where PyTorch is installed
and by ``onnxnn.save`` otherwise. Loads are interleaved in one process; the median of each is
reported, with their ratio when PyTorch is there to compare with.

Run: python benchmarks/bench_checkpoint.py [--tensors 5000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import OrderedDict

import numpy as np

import onnxnn

try:
    import torch
except ImportError:
    torch = None


def _write(path: str, count: int) -> str:
    rng = np.random.default_rng(0)
    arrays = OrderedDict(
        (
            f"layers.{index // 4}.{('weight', 'bias', 'scale', 'shift')[index % 4]}",
            rng.standard_normal((16, 16) if index % 4 == 0 else (16,)).astype(np.float32),
        )
        for index in range(count)
    )
    if torch is not None:
        torch.save(OrderedDict((key, torch.from_numpy(value)) for key, value in arrays.items()), path)
        return "torch.save"
    onnxnn.save(OrderedDict((key, onnxnn.tensor(value)) for key, value in arrays.items()), path)
    return "onnxnn.save"


def _time(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tensors", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "checkpoint.pt")
        writer = _write(path, options.tensors)
        onnxnn_times, torch_times = [], []
        for _ in range(options.repeats):
            onnxnn_times.append(_time(lambda: onnxnn.load(path)))
            if torch is not None:
                torch_times.append(_time(lambda: torch.load(path, weights_only=True)))
        result = {
            "tensors": options.tensors,
            "file_bytes": os.path.getsize(path),
            "written_by": writer,
            "onnxnn_load_s": statistics.median(onnxnn_times),
        }
        if torch_times:
            result["torch_load_s"] = statistics.median(torch_times)
            result["onnxnn_over_torch"] = result["onnxnn_load_s"] / result["torch_load_s"]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
