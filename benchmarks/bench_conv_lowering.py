"""A Conv with a fed weight in onnxnn's sessions: one GEMM for the batch against onnxruntime's Conv.

``runtime/ops/conv_lowering.py`` writes a Conv as one GEMM over the windows of every image when
its output has at most ``LOWERED_CONV_MAX_POSITIONS`` positions per image and its weight at least
``LOWERED_CONV_MIN_WEIGHT_ELEMENTS`` elements. This builds both graphs of each layer shape from one
recorded ``conv2d`` (``build_model(lower=True)`` and the plain one), runs them in onnxruntime
sessions with one intra-op thread, alternating blocks in one process, and prints one JSON line per
shape: medians and the ratio lowered / Conv (below 1: the GEMM is faster), and whether onnxnn
lowers that shape.

What it showed (2026-11-29, 2 shared CPU cores): 0.37-0.41 for resnet18's last stage at 64x64
images (512 channels at 2x2, 4 positions), 0.54 for its 1x1 downsampling there, 0.78 at 3x3
positions, 1.26 at 4x4 and 1.45 for 64 channels at 16x16 (hence at most 9 positions), 1.8 for a
16-channel layer at 2x2 (hence the weight's bound).

Run: python benchmarks/bench_conv_lowering.py [--blocks N] [--block-seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time

import numpy as np
import onnxruntime

import onnxnn
from onnxnn.ir.plan import build_model, plan
from onnxnn.runtime.ops import conv_lowering

# (name, input shape, output channels, kernel, stride, padding)
SHAPES = [
    ("resnet18_64px_512ch_2x2_b8", (8, 512, 2, 2), 512, 3, 1, 1),
    ("resnet18_64px_256to512_stride2_b8", (8, 256, 4, 4), 512, 3, 2, 1),
    ("resnet18_64px_downsample_1x1_b8", (8, 256, 4, 4), 512, 1, 2, 0),
    ("512ch_3x3_b8", (8, 512, 3, 3), 512, 3, 1, 1),
    ("512ch_2x2_b64", (64, 512, 2, 2), 512, 3, 1, 1),
    ("256ch_4x4_b8", (8, 256, 4, 4), 256, 3, 1, 1),
    ("64ch_16x16_b8", (8, 64, 16, 16), 64, 3, 1, 1),
    ("16ch_2x2_b8", (8, 16, 2, 2), 16, 3, 1, 1),
]


def _graph(input_shape, out_channels: int, kernel: int, stride: int, padding: int):
    """The plan of one recorded conv2d."""
    rng = np.random.default_rng(0)
    x = onnxnn.from_numpy(rng.standard_normal(input_shape).astype(np.float32))
    weight_shape = (out_channels, input_shape[1], kernel, kernel)
    w = onnxnn.from_numpy(rng.standard_normal(weight_shape).astype(np.float32))
    return plan([onnxnn.nn.functional.conv2d(x, w, stride=stride, padding=padding)._value], include_shared=False)


def _lowered(graph) -> bool:
    return "Conv" not in {node.op_type for node in build_model(graph, lower=True).graph.node}


@contextlib.contextmanager
def _every_conv_lowered():
    """Lifts the lowering's size bounds, so that both forms are built for every shape."""
    bounds = conv_lowering.LOWERED_CONV_MAX_POSITIONS, conv_lowering.LOWERED_CONV_MIN_WEIGHT_ELEMENTS
    conv_lowering.LOWERED_CONV_MAX_POSITIONS, conv_lowering.LOWERED_CONV_MIN_WEIGHT_ELEMENTS = 1 << 62, 0
    try:
        yield
    finally:
        conv_lowering.LOWERED_CONV_MAX_POSITIONS, conv_lowering.LOWERED_CONV_MIN_WEIGHT_ELEMENTS = bounds


def _sessions(graph) -> list:
    """The plain and the lowered session of ``graph``, one intra-op thread each."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return [
        onnxruntime.InferenceSession(
            build_model(graph, lower=lower).SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        for lower in (False, True)
    ]


def _timed_block(session, feeds: dict, seconds: float) -> float:
    session.run(None, feeds)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        session.run(None, feeds)
        calls += 1
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5, help="alternating blocks per form")
    parser.add_argument("--block-seconds", type=float, default=0.3)
    arguments = parser.parse_args()
    for name, *shape in SHAPES:
        graph = _graph(*shape)
        chosen = _lowered(graph)  # onnxnn's choice, reported beside both forms
        with _every_conv_lowered():
            plain, lowered = _sessions(graph)
        feeds = {f"input_{position}": value.data for position, value in enumerate(graph.inputs)}
        plain_ms, lowered_ms = [], []
        for _ in range(arguments.blocks):
            plain_ms.append(_timed_block(plain, feeds, arguments.block_seconds))
            lowered_ms.append(_timed_block(lowered, feeds, arguments.block_seconds))
        ratios = [a / b for a, b in zip(lowered_ms, plain_ms)]
        report = {
            "shape": name,
            "lowered_ms": statistics.median(lowered_ms),
            "conv_ms": statistics.median(plain_ms),
            "ratio_lowered_to_conv": statistics.median(ratios),
            "ratio_spread": [min(ratios), max(ratios)],
            "onnxnn_lowers": chosen,
        }
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
