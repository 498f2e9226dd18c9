"""A convolution's gradients: the GEMM formulations against the single Conv / ConvTranspose.

``runtime/ops/conv_gradients.py`` chooses by shape:
- the weight gradient ``d<conv(x, w), g>/dw``: one GEMM per kernel tap when the input has at least
  ``TAP_GEMM_MIN_CHANNELS`` channels, otherwise one Conv in which the batch and the channels trade
  places and the output gradient is the kernel;
- the input gradient ``d<conv(x, w), g>/dx`` of a 2-d convolution: one GEMM and a Col2Im when the
  input and output channels multiply to at least ``COLUMN_GEMM_MIN_CHANNEL_PRODUCT``, otherwise a
  ConvTranspose.

This runs both formulations of each through onnxnn (``w.grad`` or ``x.grad`` of
``(conv2d(x, w) * g).sum()``, one intra-op thread), alternating blocks of calls in one process,
for the layer shapes of a small ResNet (batch 32, 32x32 images), torchvision's resnet18 (batch 8
at 224x224 and 64x64) and an RGB stem, and prints one JSON line per gradient and shape: medians
and the ratio GEMMs / single op (below 1: the GEMMs are faster).

What it showed (2026-11-29, 2 shared CPU cores, ``--blocks 3 --block-seconds 0.3``): weight
gradients 0.35-0.73 for 16 to 512 channels with 3x3 kernels, 0.13-0.19 for the 1x1 downsampling
convolutions, 1.3x slower for the 3-channel stem (since ``ConvWeightGradient``'s leaner assembly
of the taps, the same day: 0.36-0.61 for 3x3 kernels, 0.13-0.16 for 1x1, the stem 1.27); input
gradients 0.28-0.29 for 256-512 channels at 2x2-4x4, 0.73 for 512 at 7x7, 1.00 for 256 at 14x14,
and 1.1-2.5x slower for 3 to 64 channels. Hence the thresholds.

Run: python benchmarks/bench_conv_gradients.py [--blocks N] [--block-seconds S]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import onnxnn
from onnxnn.runtime.ops import conv_gradients as conv_ops

# (name, input shape, output channels, kernel, stride, padding)
SHAPES = [
    ("small_resnet_16ch_3x3", (32, 16, 32, 32), 16, 3, 1, 1),
    ("small_resnet_32ch_3x3", (32, 32, 16, 16), 32, 3, 1, 1),
    ("small_resnet_16to32_stride2", (32, 16, 32, 32), 32, 3, 2, 1),
    ("small_resnet_downsample_1x1", (32, 16, 32, 32), 32, 1, 2, 0),
    ("resnet18_64ch_3x3_b8", (8, 64, 56, 56), 64, 3, 1, 1),
    ("resnet18_256ch_3x3_b8", (8, 256, 14, 14), 256, 3, 1, 1),
    ("resnet18_512ch_3x3_b8", (8, 512, 7, 7), 512, 3, 1, 1),
    ("resnet18_64px_512ch_3x3_b8", (8, 512, 2, 2), 512, 3, 1, 1),
    ("resnet18_64px_256to512_stride2_b8", (8, 256, 4, 4), 512, 3, 2, 1),
    ("resnet18_downsample_1x1_b8", (8, 64, 56, 56), 128, 1, 2, 0),
    ("rgb_stem_3ch_3x3", (32, 3, 32, 32), 16, 3, 1, 1),
]

# gradient -> (the module constant that chooses, what of a shape it is compared with): a shape
# takes the GEMMs when that measure reaches the constant, so 1 always takes them and 2**62 never.
FORMULATIONS = {
    "weight": ("TAP_GEMM_MIN_CHANNELS", lambda input_shape, out_channels: input_shape[1]),
    "input": ("COLUMN_GEMM_MIN_CHANNEL_PRODUCT", lambda input_shape, out_channels: input_shape[1] * out_channels),
}
ALWAYS, NEVER = 1, 1 << 62


def _gradient_call(which: str, input_shape, out_channels: int, kernel: int, stride: int, padding: int):
    rng = np.random.default_rng(0)
    output_size = (input_shape[2] + 2 * padding - kernel) // stride + 1
    weight_shape = (out_channels, input_shape[1], kernel, kernel)
    output_shape = (input_shape[0], out_channels, output_size, output_size)
    # Two sets of arrays in turn, as a training loop's changing weights and data: inputs that never
    # change would be embedded in a specialized session (weights prepacked, gradients folded).
    arrays = [
        [rng.standard_normal(shape).astype(np.float32) for shape in (input_shape, weight_shape, output_shape)]
        for _ in range(2)
    ]
    calls = [0]

    def call():
        x_array, w_array, g_array = arrays[calls[0] % 2]
        calls[0] += 1
        x = onnxnn.tensor(x_array, requires_grad=which == "input")
        w = onnxnn.tensor(w_array, requires_grad=which == "weight")
        product = onnxnn.nn.functional.conv2d(x, w, stride=stride, padding=padding) * onnxnn.from_numpy(g_array)
        product.sum().backward()
        (w if which == "weight" else x).grad.numpy()

    return call


def _timed_block(call, seconds: float, constant: str, threshold: int) -> float:
    setattr(conv_ops, constant, threshold)
    onnxnn.clear_caches()  # traced backwards and sessions were built with the other formulation
    call()  # the structure's first call traces its backward and compiles its session
    call()
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
    defaults = {constant: getattr(conv_ops, constant) for constant, _ in FORMULATIONS.values()}
    try:
        for which, (constant, measure) in FORMULATIONS.items():
            for name, input_shape, out_channels, *geometry in SHAPES:
                call = _gradient_call(which, input_shape, out_channels, *geometry)
                gemms, single = [], []
                for _ in range(arguments.blocks):
                    gemms.append(_timed_block(call, arguments.block_seconds, constant, ALWAYS))
                    single.append(_timed_block(call, arguments.block_seconds, constant, NEVER))
                ratios = [a / b for a, b in zip(gemms, single)]
                report = {
                    "gradient": which,
                    "shape": name,
                    "gemms_ms": statistics.median(gemms),
                    "single_op_ms": statistics.median(single),
                    "ratio_gemms_to_single_op": statistics.median(ratios),
                    "ratio_spread": [min(ratios), max(ratios)],
                    "default": "gemms" if measure(input_shape, out_channels) >= defaults[constant] else "single_op",
                }
                print(json.dumps(report), flush=True)
    finally:
        for constant, value in defaults.items():
            setattr(conv_ops, constant, value)


if __name__ == "__main__":
    main()
