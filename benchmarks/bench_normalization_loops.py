"""Batch normalization's and ReLU's training passes: the compiled loops against onnxruntime's graphs.

kernels/compiled_normalization.py runs float32 ``BatchNormalizationTraining``,
``BatchNormalizationTrainingGradient`` and ``ReluGradient`` nodes as C loops between onnxruntime
sessions (``ONNXNN_COMPILED_NORMALIZATION=0``: as the graphs they decompose into). This times, in one
process and one intra-op thread, alternating blocks with the loops on and off (the plan caches cleared
between blocks, a few warm-up calls before each):
- ``layer_*``: the forward and backward of ``relu(batch_norm(x))`` (``x.grad`` and the affine
  parameters' gradients of ``(relu(bn(x)) * c).sum()``) for the layer shapes of a small ResNet
  (batch 32, 32x32 images), resnet18 (batch 8, 56x56) and MobileNetV2 (batch 8, 112x112 and 56x56);
- ``small_resnet_step``: bench_vs_torch.py's small ResNet training step (batch 32, SGD momentum).

One JSON line per row: medians and the ratio of the loops' time to the graphs' (below 1: faster).

What it showed (2026-11-30, 2 shared CPU cores, default arguments): see the CHANGELOG.

Run: python benchmarks/bench_normalization_loops.py [--blocks N] [--block-seconds S] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import onnxnn
import onnxnn.nn.functional as F
from onnxnn.kernels import compiled_normalization
from onnxnn.runtime.realization import clear_cache

from bench_vs_torch import _small_resnet, keep_freed_memory

LAYERS = [
    ("layer_small_resnet_16ch_32x32_b32", (32, 16, 32, 32)),
    ("layer_small_resnet_32ch_16x16_b32", (32, 32, 16, 16)),
    ("layer_resnet18_64ch_56x56_b8", (8, 64, 56, 56)),
    ("layer_mobilenet_v2_32ch_112x112_b8", (8, 32, 112, 112)),
    ("layer_mobilenet_v2_144ch_56x56_b8", (8, 144, 56, 56)),
]


def _layer_call(shape):
    rng = np.random.default_rng(0)
    # Inputs that change from call to call, as a training step's do (constant ones would let
    # onnxruntime fold the whole graph into its session).
    inputs = [onnxnn.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True) for _ in range(2)]
    layer = onnxnn.nn.BatchNorm2d(shape[1])
    cotangent = onnxnn.tensor(rng.standard_normal(shape).astype(np.float32))
    calls = [0]

    def call():
        x = inputs[calls[0] % 2]
        calls[0] += 1
        x.grad = None
        layer.zero_grad()
        (F.relu(layer(x)) * cotangent).sum().backward()
        x.grad.numpy()
        layer.weight.grad.numpy()

    return call


def _small_resnet_step():
    model = _small_resnet(onnxnn)
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    inputs = onnxnn.tensor(rng.standard_normal((32, 3, 32, 32)).astype(np.float32))
    labels = onnxnn.tensor(rng.integers(0, 10, 32))

    def call():
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
        model[0].weight.detach().numpy()

    return call


def _timed_block(call, loops: bool, block_seconds: float) -> float:
    compiled_normalization.ENABLED = loops
    clear_cache()
    for _ in range(4):  # compile, trace the backward, settle the buffers
        call()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < block_seconds:
        call()
        calls += 1
    return (time.perf_counter() - start) / calls * 1e3


def bench(name: str, call, blocks: int, block_seconds: float) -> dict:
    times: dict = {True: [], False: []}
    for _ in range(blocks):
        for loops in (True, False):
            times[loops].append(_timed_block(call, loops, block_seconds))
    ratios = [on / off for on, off in zip(times[True], times[False])]
    return {
        "row": name,
        "loops_ms": statistics.median(times[True]),
        "graphs_ms": statistics.median(times[False]),
        "ratio_loops_to_graphs": statistics.median(ratios),
        "ratio_spread": [min(ratios), max(ratios)],
        "blocks": blocks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--block-seconds", type=float, default=0.5)
    parser.add_argument("--only", help="rows whose name contains this")
    arguments = parser.parse_args()
    keep_freed_memory()  # as bench_vs_torch.py: no framework pays page faults for freed memory
    onnxnn.set_num_threads(1)
    if not compiled_normalization.available():
        raise SystemExit(f"the loops are not available: {compiled_normalization.unavailable_reason()}")
    rows = [(name, lambda shape=shape: _layer_call(shape)) for name, shape in LAYERS]
    rows.append(("small_resnet_step", _small_resnet_step))
    for name, make in rows:
        if arguments.only is None or arguments.only in name:
            print(json.dumps(bench(name, make(), arguments.blocks, arguments.block_seconds)), flush=True)
    compiled_normalization.ENABLED = True


if __name__ == "__main__":
    main()
