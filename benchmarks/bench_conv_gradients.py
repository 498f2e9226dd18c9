"""A convolution's gradients: the GEMM formulations against the single Conv / ConvTranspose.

``runtime/ops/conv_gradients.py`` chooses by shape:
- the weight gradient ``d<conv(x, w), g>/dw``: on the CPU, kernels/compiled_convolutions.py's
  loop for layers of at most ``COMPILED_MAX_CHANNELS`` channels; otherwise one GEMM per kernel tap
  when the input has at least ``TAP_GEMM_MIN_CHANNELS`` channels, one GEMM over all the taps'
  windows when it has fewer and the kernel at most ``ALL_WINDOWS_GEMM_MAX_TAPS`` taps, otherwise
  one Conv in which the batch and the channels trade places and the output gradient is the kernel;
- the input gradient ``d<conv(x, w), g>/dx`` of a 2-d convolution: one GEMM and a Col2Im when the
  input and output channels multiply to at least ``COLUMN_GEMM_MIN_CHANNEL_PRODUCT`` and the
  ConvTranspose would not run on onnxruntime's blocked kernels (``conv_lowering.py``), otherwise
  a ConvTranspose.

This runs every formulation of each through onnxnn (``w.grad`` or ``x.grad`` of
``(conv2d(x, w) * g).sum()``, one intra-op thread), alternating blocks of calls in one process,
for the layer shapes of a small ResNet (batch 32, 32x32 images), torchvision's resnet18 (batch 8
at 224x224 and 64x64) and an RGB stem, and prints one JSON line per gradient and shape: medians
and the ratio of each GEMM form to the single op (below 1: faster), and the form onnxnn takes.

Depthwise layers' weight gradients (2026-11-30): the depthwise loop against the one grouped Conv
(see the CHANGELOG for the figures).

What it showed (2026-11-29, 2 shared CPU cores, ``--blocks 3 --block-seconds 0.3``): weight
gradients 0.35-0.73 for 16 to 512 channels with 3x3 kernels, 0.13-0.19 for the 1x1 downsampling
convolutions, 1.3x slower for the 3-channel stem (since ``ConvWeightGradient``'s leaner assembly
of the taps, the same day: 0.36-0.61 for 3x3 kernels, 0.13-0.16 for 1x1, the stem 1.27); input
gradients 0.28-0.29 for 256-512 channels at 2x2-4x4, 0.73 for 512 at 7x7, 1.00 for 256 at 14x14,
and 1.1-2.5x slower for 3 to 64 channels. Hence the thresholds. One GEMM over all windows for
fewer channels (later the same day): 0.5 for the 3-channel 3x3 stem, 0.55 for 8 channels (as the
GEMMs per tap), 0.8 for a 1-channel 3x3 kernel, 1.3 for a 7x7 stride-2 stem (hence 25 taps).
Once a stride-1 ConvTranspose ran on the blocked kernels: input gradients by GEMM and Col2Im 1.3
for 256 channels at 14x14, 0.96 for 512 at 7x7, 0.27 for 512 at 2x2 (too few columns for the
blocked kernels), 0.24 stride 2.

MobileNetV2's layers at 112x112, batch 8 (2026-12-04, ``--gradient weight --only mobilenet_``): the
pointwise layers' loop 0.19-0.47 of the single op, the GEMM forms 0.25-0.54 (the loop fastest but
for 576 -> 96 and 96 -> 576 at 7x7, within 0.05 of the GEMMs); the depthwise loop on small planes
(960 channels at 4x4, 384 at 7x7) 0.36 and 0.22.

Run: python benchmarks/bench_conv_gradients.py [--blocks N] [--block-seconds S] [--only NAME] [--gradient weight]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import onnxnn
from onnxnn.kernels import compiled_convolutions
from onnxnn.runtime.ops import conv_gradients as conv_ops
from onnxnn.runtime.realization import recording_only

# (name, input shape, output channels, kernel, stride, padding, groups)
SHAPES = [
    ("small_resnet_16ch_3x3", (32, 16, 32, 32), 16, 3, 1, 1, 1),
    ("small_resnet_32ch_3x3", (32, 32, 16, 16), 32, 3, 1, 1, 1),
    ("small_resnet_16to32_stride2", (32, 16, 32, 32), 32, 3, 2, 1, 1),
    ("small_resnet_downsample_1x1", (32, 16, 32, 32), 32, 1, 2, 0, 1),
    ("resnet18_64ch_3x3_b8", (8, 64, 56, 56), 64, 3, 1, 1, 1),
    ("resnet18_256ch_3x3_b8", (8, 256, 14, 14), 256, 3, 1, 1, 1),
    ("resnet18_512ch_3x3_b8", (8, 512, 7, 7), 512, 3, 1, 1, 1),
    ("resnet18_64px_512ch_3x3_b8", (8, 512, 2, 2), 512, 3, 1, 1, 1),
    ("resnet18_64px_256to512_stride2_b8", (8, 256, 4, 4), 512, 3, 2, 1, 1),
    ("resnet18_downsample_1x1_b8", (8, 64, 56, 56), 128, 1, 2, 0, 1),
    ("rgb_stem_3ch_3x3", (32, 3, 32, 32), 16, 3, 1, 1, 1),
    ("rgb_stem_3ch_7x7_stride2_b8", (8, 3, 64, 64), 64, 7, 2, 3, 1),
    ("gray_1ch_3x3_b64", (64, 1, 28, 28), 32, 3, 1, 1, 1),
    ("8ch_3x3", (32, 8, 32, 32), 16, 3, 1, 1, 1),
    # Depthwise layers (MobileNetV2's at batch 8, ConvNeXt's 7x7): the loop or the one grouped Conv.
    ("mobilenet_depthwise_96ch_3x3_b8", (8, 96, 56, 56), 96, 3, 1, 1, 96),
    ("mobilenet_depthwise_96ch_3x3_stride2_b8", (8, 96, 112, 112), 96, 3, 2, 1, 96),
    ("mobilenet_depthwise_384ch_3x3_b8", (8, 384, 14, 14), 384, 3, 1, 1, 384),
    ("mobilenet_depthwise_960ch_3x3_b8", (8, 960, 7, 7), 960, 3, 1, 1, 960),
    ("convnext_depthwise_96ch_7x7_b8", (8, 96, 56, 56), 96, 7, 1, 3, 96),
    ("two_groups_32ch_3x3", (32, 32, 16, 16), 32, 3, 1, 1, 2),
    # Pointwise layers of many channels (resnet50's bottlenecks, MobileNetV2's last stages).
    ("resnet50_pointwise_1024to256_14x14_b8", (8, 1024, 14, 14), 256, 1, 1, 0, 1),
    ("resnet50_pointwise_256to1024_14x14_b8", (8, 256, 14, 14), 1024, 1, 1, 0, 1),
    ("mobilenet_pointwise_960to160_7x7_b8", (8, 960, 7, 7), 160, 1, 1, 0, 1),
    # MobileNetV2's at 112x112 images, batch 8: pointwise layers, and depthwise ones on small planes.
    ("mobilenet_pointwise_24to144_28x28_b8", (8, 24, 28, 28), 144, 1, 1, 0, 1),
    ("mobilenet_pointwise_144to24_28x28_b8", (8, 144, 28, 28), 24, 1, 1, 0, 1),
    ("mobilenet_pointwise_96to576_7x7_b8", (8, 96, 7, 7), 576, 1, 1, 0, 1),
    ("mobilenet_pointwise_576to96_7x7_b8", (8, 576, 7, 7), 96, 1, 1, 0, 1),
    ("mobilenet_pointwise_192to32_14x14_b8", (8, 192, 14, 14), 32, 1, 1, 0, 1),
    ("mobilenet_pointwise_16to96_56x56_b8", (8, 16, 56, 56), 96, 1, 1, 0, 1),
    ("mobilenet_depthwise_960ch_3x3_4x4_b8", (8, 960, 4, 4), 960, 3, 1, 1, 960),
    ("mobilenet_depthwise_384ch_3x3_7x7_b8", (8, 384, 7, 7), 384, 3, 1, 1, 384),
]

NEVER = 1 << 62
# gradient -> form -> the module constants that make every shape take that form (the last form is
# the single op the others are compared with)
FORMS = {
    "weight": {
        "tap_gemms": {"TAP_GEMM_MIN_CHANNELS": 1, "ENABLED": False},
        "all_windows_gemm": {"TAP_GEMM_MIN_CHANNELS": NEVER, "ALL_WINDOWS_GEMM_MAX_TAPS": NEVER, "ENABLED": False},
        # The node run by kernels/compiled_convolutions.py's loop between two sessions (split_sessions.py).
        "compiled_loop": {"TAP_GEMM_MIN_CHANNELS": 1, "ENABLED": True, "COMPILED_MAX_CHANNELS": NEVER},
        "single_op": {"TAP_GEMM_MIN_CHANNELS": NEVER, "ALL_WINDOWS_GEMM_MAX_TAPS": 0, "ENABLED": False},
    },
    "input": {
        # The GEMM and Col2Im even where the ConvTranspose would run on the blocked kernels or as a 1x1 Conv.
        "column_gemm": {
            "COLUMN_GEMM_MIN_CHANNEL_PRODUCT": 1,
            "blocked_input_gradient": lambda *arguments: False,
            "pointwise_input_gradient": lambda *arguments: False,
        },
        "single_op": {"COLUMN_GEMM_MIN_CHANNEL_PRODUCT": NEVER},
    },
}


def _forms(which: str, groups: int) -> dict:
    """The forms a shape is timed in: grouped convolutions' weight gradients have only the loop (depthwise)
    and the single Conv, and their input gradients only the ConvTranspose."""
    if groups == 1:
        return FORMS[which]
    return {form: FORMS[which][form] for form in ("compiled_loop", "single_op") if form in FORMS[which]}


def _default_form(
    which: str, input_shape, out_channels: int, kernel: int, stride: int, padding: int, groups: int
) -> str:
    """The form onnxnn takes for this shape with its constants as they are (before any block ran)."""
    if which == "input":
        x = onnxnn.zeros(input_shape, requires_grad=True)
        w = onnxnn.zeros((out_channels, input_shape[1] // groups, kernel, kernel))
        with recording_only():
            onnxnn.nn.functional.conv2d(x, w, stride=stride, padding=padding, groups=groups).sum().backward()
            recorded = {value.node.op_type for value in _pending_values(x.grad)}
        return "column_gemm" if "Col2Im" in recorded else "single_op"
    output_shape = (input_shape[0], out_channels, 1, 1)  # eligibility reads the channels
    if compiled_convolutions.eligible(input_shape, output_shape, np.float32, groups):
        return "compiled_loop"
    if groups > 1:
        return "single_op"
    constants = {name: getattr(conv_ops, name) for name in ("TAP_GEMM_MIN_CHANNELS", "ALL_WINDOWS_GEMM_MAX_TAPS")}
    if input_shape[1] >= constants["TAP_GEMM_MIN_CHANNELS"]:
        return "tap_gemms"
    return "all_windows_gemm" if kernel * kernel <= constants["ALL_WINDOWS_GEMM_MAX_TAPS"] else "single_op"


def _pending_values(tensor) -> list:
    """The pending values behind ``tensor``."""
    found, stack, seen = [], [tensor._value], set()
    while stack:
        value = stack.pop()
        if value is None or value.data is not None or id(value) in seen:
            continue
        seen.add(id(value))
        found.append(value)
        stack.extend(value.node.inputs)
    return found


def _gradient_call(which: str, input_shape, out_channels: int, kernel: int, stride: int, padding: int, groups: int):
    rng = np.random.default_rng(0)
    output_size = (input_shape[2] + 2 * padding - kernel) // stride + 1
    weight_shape = (out_channels, input_shape[1] // groups, kernel, kernel)
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
        output = onnxnn.nn.functional.conv2d(x, w, stride=stride, padding=padding, groups=groups)
        product = output * onnxnn.from_numpy(g_array)
        product.sum().backward()
        (w if which == "weight" else x).grad.numpy()

    return call


def _module_of(constant: str):
    return compiled_convolutions if hasattr(compiled_convolutions, constant) else conv_ops


def _timed_block(call, seconds: float, constants: dict) -> float:
    for constant, value in constants.items():
        setattr(_module_of(constant), constant, value)
    onnxnn.clear_caches()  # traced backwards and sessions were built with another form
    call()  # the structure's first call traces its backward and compiles its session
    call()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        calls += 1
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5, help="alternating blocks per form")
    parser.add_argument("--block-seconds", type=float, default=0.5)
    parser.add_argument("--only", default="", help="only the shapes whose names contain this")
    parser.add_argument("--gradient", choices=[*FORMS, "both"], default="both")
    arguments = parser.parse_args()
    onnxnn.set_num_threads(1)
    names = {constant for forms in FORMS.values() for constants in forms.values() for constant in constants}
    defaults = {constant: getattr(_module_of(constant), constant) for constant in names}
    try:
        for which in FORMS if arguments.gradient == "both" else [arguments.gradient]:
            for name, input_shape, out_channels, *geometry in SHAPES:
                if arguments.only not in name:
                    continue
                forms = _forms(which, geometry[-1])
                for constant, value in defaults.items():
                    setattr(_module_of(constant), constant, value)
                onnxnn.clear_caches()  # a traced backward would replay the last block's form
                chosen = _default_form(which, input_shape, out_channels, *geometry)
                call = _gradient_call(which, input_shape, out_channels, *geometry)
                times: dict = {form: [] for form in forms}
                for _ in range(arguments.blocks):
                    for form, constants in forms.items():
                        times[form].append(_timed_block(call, arguments.block_seconds, {**defaults, **constants}))
                report: dict = {"gradient": which, "shape": name, "single_op_ms": statistics.median(times["single_op"])}
                for form in forms.keys() - {"single_op"}:
                    ratios = [a / b for a, b in zip(times[form], times["single_op"])]
                    report[f"{form}_ms"] = statistics.median(times[form])
                    report[f"ratio_{form}_to_single_op"] = statistics.median(ratios)
                    report[f"ratio_{form}_spread"] = [min(ratios), max(ratios)]
                report["default"] = chosen
                print(json.dumps(report), flush=True)
    finally:
        for constant, value in defaults.items():
            setattr(_module_of(constant), constant, value)


if __name__ == "__main__":
    main()
