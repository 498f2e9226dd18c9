"""DataLoader throughput: samples per second with 0 and 2 worker processes on a CPU-bound dataset.

Each sample costs about a millisecond of numpy work (a 64x64 image blurred and normalized, the
kind of augmentation a vision pipeline runs per sample), so loading, not training, is the
bottleneck and worker processes should approach a speedup of min(workers, cores). The
configurations run in interleaved blocks (0 workers, 2 workers, 0 workers, ...) so that the
shared machine's drift hits both alike; each block is one epoch of a fresh, non-persistent
loader (worker start-up included) and one epoch of a persistent one (steady state).

What it showed (2026-11-29, 2 cores; the per-sample work now measures about 0.3 ms here): 0 workers
~3,250 samples/s; 2 persistent workers 1.12x before batches went through shared memory (the main
process spent a third of the epoch reading 1.5 MB batches from the pipe), 1.29-1.31x after; a fresh
loader's 512-sample epoch pays the workers' start-up and stays near 1.0x.

Run: python benchmarks/bench_dataloader.py [--blocks 5] [--samples 512] [--batch-size 32]
Prints one JSON line per configuration (median samples/s, spread) and the ratios to 0 workers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from onnxnn.utils.data import DataLoader, Dataset


class BlurredImages(Dataset):
    """Deterministic 3x64x64 images, each blurred by a 5x5 box filter and normalized on access."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):
        rng = np.random.default_rng(index)
        image = rng.random((3, 64, 64), dtype=np.float32)
        padded = np.pad(image, ((0, 0), (2, 2), (2, 2)), mode="reflect")
        blurred = sum(padded[:, i : i + 64, j : j + 64] for i in range(5) for j in range(5)) / 25.0
        for _ in range(3):  # a few more passes: about a millisecond per sample in all
            blurred = (blurred - blurred.mean(axis=(1, 2), keepdims=True)) / (
                blurred.std(axis=(1, 2), keepdims=True) + 1e-6
            )
        return blurred.astype(np.float32), index % 10


def _epoch(loader) -> float:
    start = time.perf_counter()
    count = 0
    for images, _ in loader:
        count += images.shape[0]
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    dataset = BlurredImages(args.samples)
    persistent = DataLoader(dataset, batch_size=args.batch_size, num_workers=2, persistent_workers=True)
    _epoch(persistent)  # start the workers (and the forkserver) before measuring
    rates: dict[str, list[float]] = {"0 workers": [], "2 workers (fresh loader)": [], "2 workers (persistent)": []}
    for _ in range(args.blocks):
        rates["0 workers"].append(_epoch(DataLoader(dataset, batch_size=args.batch_size)))
        rates["2 workers (fresh loader)"].append(_epoch(DataLoader(dataset, batch_size=args.batch_size, num_workers=2)))
        rates["2 workers (persistent)"].append(_epoch(persistent))
    baseline = statistics.median(rates["0 workers"])
    for name, values in rates.items():
        median = statistics.median(values)
        print(
            json.dumps(
                {
                    "workload": name,
                    "samples_per_second": round(median, 1),
                    "spread": [round(min(values), 1), round(max(values), 1)],
                    "ratio_to_0_workers": round(median / baseline, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
