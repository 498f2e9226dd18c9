"""A convolution with a fed weight in onnxnn's sessions: each of its forms against onnxruntime's op.

``runtime/ops/conv_lowering.py`` writes a 2-d Conv as one GEMM over the windows of every image when
its output has at most ``LOWERED_CONV_MAX_POSITIONS`` positions per image and its weight at least
``LOWERED_CONV_MIN_WEIGHT_ELEMENTS`` elements, and otherwise with onnxruntime's blocked-channel
kernels (``conv_nchwc.py``) when the channels are multiples of the CPU's block and the kernel has
more than one tap; a stride-1 ConvTranspose (a Conv's input gradient) takes the blocked kernels
too. This builds every form of each layer shape from one recorded ``conv2d`` or
``conv_transpose2d`` (``build_model(lower=True)`` with the other form's bounds shut, and the plain
graph), runs them in onnxruntime sessions with one intra-op thread, alternating blocks in one
process, and prints one JSON line per shape: medians, the ratio of each form to the plain op
(below 1: faster), and the form onnxnn chooses.

What it showed (2026-11-29, 2 shared CPU cores): one GEMM 0.35-0.41 for resnet18's last stage at
64x64 images (512 channels at 2x2, 4 positions), 0.52 for its 1x1 downsampling there, 0.77 at 3x3
positions, 1.2 at 4x4 and 1.3 for 64 channels at 16x16 (hence at most 9 positions), 1.8 for a
16-channel layer at 2x2 (hence the weight's bound). The blocked kernels, once the weight's reorder
was cheap: 0.54-0.88 for every 3x3 shape measured, 16 to 256 channels at 2x2 to 56x56 images,
ConvTranspose 0.62-0.79, 5x5 and 7x7 kernels 0.64-0.80; one GEMM stays ahead where it applies at
batch 8 (512 channels at 2x2: 0.35 against 0.52).

Depthwise layers (2026-12-04, ``--only depthwise``): the blocked kernels 0.04-0.59 of onnxruntime's
Conv for MobileNetV2's layers at 112x112 (batch 8) and 64x64 (batch 4), the most where the images
are smallest and the channels most (960 at 4x4: 0.05); their input gradients 0.04-0.59; one 4x4
image of 32 channels 0.61, a 1x1 kernel 0.75. Hence no size bound for them.

Run: python benchmarks/bench_conv_lowering.py [--blocks N] [--block-seconds S] [--only NAME]
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
from onnxnn.ir.plan import plan
from onnxnn.ir.model_building import build_model
from onnxnn.runtime.ops import conv_lowering

# (name, op, input shape, output channels, kernel, stride, padding[, groups])
SHAPES = [
    ("resnet18_64px_512ch_2x2_b8", "conv", (8, 512, 2, 2), 512, 3, 1, 1),
    ("resnet18_64px_256to512_stride2_b8", "conv", (8, 256, 4, 4), 512, 3, 2, 1),
    ("resnet18_64px_downsample_1x1_b8", "conv", (8, 256, 4, 4), 512, 1, 2, 0),
    ("512ch_3x3_b8", "conv", (8, 512, 3, 3), 512, 3, 1, 1),
    ("512ch_2x2_b64", "conv", (64, 512, 2, 2), 512, 3, 1, 1),
    ("256ch_4x4_b8", "conv", (8, 256, 4, 4), 256, 3, 1, 1),
    ("128ch_8x8_b8", "conv", (8, 128, 8, 8), 128, 3, 1, 1),
    ("64ch_16x16_b8", "conv", (8, 64, 16, 16), 64, 3, 1, 1),
    ("64ch_56x56_b8", "conv", (8, 64, 56, 56), 64, 3, 1, 1),
    ("small_resnet_16ch_32x32_b32", "conv", (32, 16, 32, 32), 16, 3, 1, 1),
    ("small_resnet_32ch_16x16_b32", "conv", (32, 32, 16, 16), 32, 3, 1, 1),
    ("small_resnet_16to32_stride2_b32", "conv", (32, 16, 32, 32), 32, 3, 2, 1),
    ("small_resnet_downsample_1x1_b32", "conv", (32, 16, 32, 32), 32, 1, 2, 0),
    ("16ch_2x2_b8", "conv", (8, 16, 2, 2), 16, 3, 1, 1),
    ("input_gradient_16ch_32x32_b32", "conv_transpose", (32, 16, 32, 32), 16, 3, 1, 1),
    ("input_gradient_32ch_16x16_b32", "conv_transpose", (32, 32, 16, 16), 32, 3, 1, 1),
    ("input_gradient_64ch_16x16_b8", "conv_transpose", (8, 64, 16, 16), 64, 3, 1, 1),
    ("input_gradient_128ch_8x8_b8", "conv_transpose", (8, 128, 8, 8), 128, 3, 1, 1),
    ("input_gradient_256ch_4x4_b8", "conv_transpose", (8, 256, 4, 4), 256, 3, 1, 1),
    ("input_gradient_64ch_8x8_b8", "conv_transpose", (8, 64, 8, 8), 64, 3, 1, 1),
    ("64ch_8x8_b8", "conv", (8, 64, 8, 8), 64, 3, 1, 1),
    ("128ch_4x4_b32", "conv", (32, 128, 4, 4), 128, 3, 1, 1),
    ("32ch_8x8_b32", "conv", (32, 32, 8, 8), 32, 3, 1, 1),
    # MobileNetV2's input gradients at 112x112 images: pointwise (1x1) and depthwise layers.
    ("input_gradient_pointwise_24to144_56x56_b8", "conv_transpose", (8, 24, 56, 56), 144, 1, 1, 0),
    ("input_gradient_pointwise_144to24_56x56_b8", "conv_transpose", (8, 144, 56, 56), 24, 1, 1, 0),
    ("input_gradient_pointwise_96to576_14x14_b8", "conv_transpose", (8, 96, 14, 14), 576, 1, 1, 0),
    ("input_gradient_depthwise_144ch_56x56_b8", "conv_transpose", (8, 144, 56, 56), 1, 3, 1, 1, 144),
    ("input_gradient_depthwise_384ch_14x14_b8", "conv_transpose", (8, 384, 14, 14), 1, 3, 1, 1, 384),
    ("input_gradient_depthwise_96ch_7x7_kernel_b8", "conv_transpose", (8, 96, 56, 56), 1, 7, 1, 3, 96),
    # MobileNetV2's depthwise layers, at 112x112 images (batch 8) and at 64x64 (batch 4).
    ("depthwise_96ch_56x56_stride2_b8", "conv", (8, 96, 56, 56), 96, 3, 2, 1, 96),
    ("depthwise_144ch_56x56_b8", "conv", (8, 144, 56, 56), 144, 3, 1, 1, 144),
    ("depthwise_192ch_14x14_b8", "conv", (8, 192, 14, 14), 192, 3, 1, 1, 192),
    ("depthwise_576ch_7x7_b8", "conv", (8, 576, 7, 7), 576, 3, 1, 1, 576),
    ("depthwise_960ch_4x4_b8", "conv", (8, 960, 4, 4), 960, 3, 1, 1, 960),
    ("depthwise_960ch_2x2_b4", "conv", (4, 960, 2, 2), 960, 3, 1, 1, 960),
    ("depthwise_384ch_4x4_b4", "conv", (4, 384, 4, 4), 384, 3, 1, 1, 384),
    ("input_gradient_depthwise_960ch_4x4_b8", "conv_transpose", (8, 960, 4, 4), 1, 3, 1, 1, 960),
    ("input_gradient_depthwise_384ch_4x4_b4", "conv_transpose", (4, 384, 4, 4), 1, 3, 1, 1, 384),
    ("input_gradient_depthwise_960ch_2x2_b4", "conv_transpose", (4, 960, 2, 2), 1, 3, 1, 1, 960),
    ("depthwise_32ch_4x4_b1", "conv", (1, 32, 4, 4), 32, 3, 1, 1, 32),
    ("depthwise_32ch_1x1_b1", "conv", (1, 32, 1, 1), 32, 3, 1, 1, 32),
    ("depthwise_1x1_kernel_64ch_16x16_b8", "conv", (8, 64, 16, 16), 64, 1, 1, 0, 64),
]

# form -> the bounds that build it for every shape and no other form
FORMS = {
    "one_gemm": {
        "LOWERED_CONV_MAX_POSITIONS": 1 << 62,
        "LOWERED_CONV_MIN_WEIGHT_ELEMENTS": 0,
        "BLOCKED_CONV_MIN_COLUMNS": 1 << 62,
    },
    "blocked": {"LOWERED_CONV_MAX_POSITIONS": -1, "BLOCKED_CONV_MIN_COLUMNS": 0},
    # A stride-1 ConvTranspose as a plain Conv (1x1 kernels, depthwise layers' groups of one channel).
    "as_conv": {"BLOCKED_CONV_MIN_COLUMNS": 1 << 62},
}


def _graph(op: str, input_shape, out_channels: int, kernel: int, stride: int, padding: int, groups: int = 1):
    """The plan of one recorded conv2d or conv_transpose2d (``out_channels`` per group for the latter)."""
    rng = np.random.default_rng(0)
    x = onnxnn.from_numpy(rng.standard_normal(input_shape).astype(np.float32))
    if op == "conv":
        weight_shape = (out_channels, input_shape[1] // groups, kernel, kernel)
        function = onnxnn.nn.functional.conv2d
    else:
        weight_shape = (input_shape[1], out_channels, kernel, kernel)
        function = onnxnn.nn.functional.conv_transpose2d
    w = onnxnn.from_numpy(rng.standard_normal(weight_shape).astype(np.float32))
    return plan([function(x, w, stride=stride, padding=padding, groups=groups)._value], include_shared=False)


def _form(model) -> str | None:
    op_types = {node.op_type for node in model.graph.node}
    if "ReorderInput" in op_types:
        return "blocked"
    if "ConvTranspose" in op_types:
        return None
    if "Conv" in op_types:
        return "as_conv" if model.graph.node[-1].op_type == "Conv" and _transposed(model) else None
    return "one_gemm"


def _transposed(model) -> bool:
    """Whether ``model``'s Conv stands for a ConvTranspose (its weight is reshaped, sliced or transposed first)."""
    return any(node.op_type in ("Transpose", "Slice") for node in model.graph.node)


@contextlib.contextmanager
def _bounds(values: dict):
    """The lowering's bounds set to ``values`` inside the block."""
    saved = {name: getattr(conv_lowering, name) for name in values}
    for name, value in values.items():
        setattr(conv_lowering, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(conv_lowering, name, value)


def _session(model):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _sessions(graph) -> dict:
    """The plain session of ``graph`` and one per form that applies to it, one intra-op thread each."""
    sessions = {"plain": _session(build_model(graph))}
    for form, bounds in FORMS.items():
        with _bounds(bounds):
            model = build_model(graph, lower=True)
        if _form(model) == form:
            sessions[form] = _session(model)
    return sessions


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
    parser.add_argument("--only", default="", help="only the shapes whose names contain this")
    arguments = parser.parse_args()
    for name, *shape in SHAPES:
        if arguments.only not in name:
            continue
        graph = _graph(*shape)
        sessions = _sessions(graph)
        feeds = {f"input_{position}": value.data for position, value in enumerate(graph.inputs)}
        times: dict = {form: [] for form in sessions}
        for _ in range(arguments.blocks):
            for form, session in sessions.items():
                times[form].append(_timed_block(session, feeds, arguments.block_seconds))
        report: dict = {"shape": name, "plain_ms": statistics.median(times["plain"])}
        for form in sessions.keys() - {"plain"}:
            ratios = [a / b for a, b in zip(times[form], times["plain"])]
            report[f"{form}_ms"] = statistics.median(times[form])
            report[f"ratio_{form}_to_plain"] = statistics.median(ratios)
            report[f"ratio_{form}_spread"] = [min(ratios), max(ratios)]
        report["onnxnn_chooses"] = _form(build_model(graph, lower=True))
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
