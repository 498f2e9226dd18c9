"""A convolution's weight gradient: one GEMM per kernel tap against the single transposed Conv.

``runtime/ops/conv.py`` computes ``d<conv(x, w), g>/dw`` tap by tap as GEMMs when the input has at
least ``TAP_GEMM_MIN_CHANNELS`` channels, and otherwise as one Conv in which the batch and the
channels trade places and the output gradient is the kernel. This runs both formulations through
onnxnn (``w.grad`` of ``(conv2d(x, w) * g).sum()``, one intra-op thread), alternating blocks of
calls in one process, for the layer shapes of a small ResNet (batch 32, 32x32 images), torchvision's
resnet18 at batch 8, and an RGB stem, and prints one JSON line per shape: the medians and the ratio
tap GEMMs / Conv (below 1: the tap GEMMs are faster).

What it showed (2026-11-29, 2 shared CPU cores): 0.31-0.55 for 16 to 512 channels with 3x3
kernels, 0.10-0.15 for 1x1 downsampling convolutions; 1.3x-4x slower for the 3-channel stems, hence
the threshold.

Run: python benchmarks/bench_conv_weight_gradient.py [--blocks N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import onnxnn
from onnxnn.runtime.ops import conv as conv_ops

# (name, input shape, output channels, kernel, stride, padding)
SHAPES = [
    ("small_resnet_16ch_3x3", (32, 16, 32, 32), 16, 3, 1, 1),
    ("small_resnet_32ch_3x3", (32, 32, 16, 16), 32, 3, 1, 1),
    ("small_resnet_16to32_stride2", (32, 16, 32, 32), 32, 3, 2, 1),
    ("small_resnet_downsample_1x1", (32, 16, 32, 32), 32, 1, 2, 0),
    ("resnet18_64ch_3x3_b8", (8, 64, 56, 56), 64, 3, 1, 1),
    ("resnet18_256ch_3x3_b8", (8, 256, 14, 14), 256, 3, 1, 1),
    ("resnet18_downsample_1x1_b8", (8, 64, 56, 56), 128, 1, 2, 0),
    ("rgb_stem_3ch_3x3", (32, 3, 32, 32), 16, 3, 1, 1),
]


def _weight_gradient_call(input_shape, out_channels: int, kernel: int, stride: int, padding: int):
    rng = np.random.default_rng(0)
    x = onnxnn.from_numpy(rng.standard_normal(input_shape).astype(np.float32))
    w = onnxnn.tensor(
        rng.standard_normal((out_channels, input_shape[1], kernel, kernel)).astype(np.float32), requires_grad=True
    )
    output_size = (input_shape[2] + 2 * padding - kernel) // stride + 1
    g = onnxnn.from_numpy(
        rng.standard_normal((input_shape[0], out_channels, output_size, output_size)).astype(np.float32)
    )

    def call():
        w.grad = None
        (onnxnn.nn.functional.conv2d(x, w, stride=stride, padding=padding) * g).sum().backward()
        w.grad.numpy()

    return call


def _timed_block(call, seconds: float, threshold: int) -> float:
    conv_ops.TAP_GEMM_MIN_CHANNELS = threshold
    call()  # the structure's first call compiles its session
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        calls += 1
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5, help="alternating blocks per formulation")
    parser.add_argument("--block-seconds", type=float, default=0.5)
    arguments = parser.parse_args()
    onnxnn.set_num_threads(1)
    default = conv_ops.TAP_GEMM_MIN_CHANNELS
    never = 1 << 30  # a threshold no input reaches: always the single Conv
    try:
        for name, *shape in SHAPES:
            call = _weight_gradient_call(*shape)
            taps, single = [], []
            for _ in range(arguments.blocks):
                taps.append(_timed_block(call, arguments.block_seconds, 1))
                single.append(_timed_block(call, arguments.block_seconds, never))
            ratios = [a / b for a, b in zip(taps, single)]
            print(
                json.dumps(
                    {
                        "shape": name,
                        "tap_gemms_ms": statistics.median(taps),
                        "single_conv_ms": statistics.median(single),
                        "ratio_tap_gemms_to_single_conv": statistics.median(ratios),
                        "ratio_spread": [min(ratios), max(ratios)],
                        "default_formulation": "tap_gemms" if shape[0][1] >= default else "single_conv",
                    }
                )
            )
    finally:
        conv_ops.TAP_GEMM_MIN_CHANNELS = default


if __name__ == "__main__":
    main()
