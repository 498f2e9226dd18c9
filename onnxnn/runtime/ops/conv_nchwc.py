"""onnxruntime's blocked-channel ("NCHWc") convolution kernels, used for a weight fed at run time.

onnxruntime's Conv expands each image's windows (im2col) and runs one GEMM per image. Its CPU
provider also has direct convolution kernels over channels in blocks of the CPU's vector width
(the ``com.microsoft.nchwc`` ops), which its optimizer uses only for a constant weight: it reorders
that weight once when the session is built. A weight fed at every run (training) can use them too
when the graph reorders it:

    ReorderInput(X) -> nchwc.Conv(., W as (M/B, C/B, kh, kw, B_in, B_out), bias) -> ReorderOutput

The weight's reorder is a few Reshapes and Transposes, each moving one axis past a contiguous
block, which onnxruntime runs fast (a 128x128x3x3 weight: 0.07 ms, against 0.55 ms for the same
reorder as one six-axis Transpose); the blocked input and output are one pass each. Which
Transposes depends on the threads: onnxruntime's Transpose of many small matrices (a batch axis
before the two it swaps) is fast on one thread and 20x slower on more (a 256x256x3x3 weight's
``(M * C/B, B, K) -> (M * C/B, K, B)``: 0.24 ms on one thread, 4.7 ms on two), so on more than one
thread the input-channel block and the taps trade places after the output-channel block has moved
innermost, with whole blocks of B floats moving (0.25 ms on two threads, 0.46 on one).
``conv_lowering.py`` chooses where this is faster.

The block size ``B`` is the CPU's: onnxruntime picks it at run time (16 with AVX-512, 8 with AVX2)
and reports it nowhere, and a weight reordered for another size convolves garbage. So
``block_size()`` asks the kernels themselves, once per process: it runs a small convolution whose
integer values make every result exact, with the weight reordered for each candidate size, and
takes the size whose result is exactly right.
"""

from __future__ import annotations

import functools
import math
import platform

import numpy as np
import onnx
from onnx import helper

from ...ir.plan import IR_VERSION
from ..sessions import create_session
from .training import int64_initializers, node_emitter

__all__ = ["NCHWC_DOMAIN", "block_size", "emit_blocked_conv", "emit_blocked_depthwise_conv"]

NCHWC_DOMAIN = "com.microsoft.nchwc"
_CANDIDATE_BLOCK_SIZES = (16, 8)
# MLAS has these kernels for x86-64 (AVX2 and AVX-512); elsewhere onnxnn keeps the standard Conv.
_MACHINES = ("x86_64", "amd64")
# A Slice's end that reverses an axis through its first element.
_INT64_MIN = np.iinfo(np.int64).min


def emit_blocked_conv(
    emit,
    constant,
    input_name: str,
    weight_name: str,
    bias_name: str,
    output_name: str,
    weight_shape,
    attributes: dict,
    block: int,
    transposed_weight: bool = False,
    threads: int = 1,
) -> None:
    """Appends the nodes computing ``Conv(X, W, bias)`` with the blocked kernels (see the module doc).

    Args:
        emit, constant: ``training.node_emitter`` / ``training.int64_initializers`` of the graph.
        input_name, weight_name, bias_name, output_name: the Conv's tensors (``bias_name`` may be "").
        weight_shape: the weight's shape as fed: ``(M, C, kh, kw)``, or, with ``transposed_weight``,
            a ConvTranspose's ``(C, M, kh, kw)`` whose kernel is flipped: the convolution with it is
            the stride-1 ConvTranspose.
        attributes: the explicit ``kernel_shape``, ``strides``, ``dilations`` and ``pads``.
        block: ``block_size()``; both channel counts must be multiples of it.
        threads: the intra-op threads of the sessions it is built for (the weight's reorder differs,
            see the module doc).
    """
    if transposed_weight:
        channels, out_channels, *kernel = weight_shape
    else:
        out_channels, channels, *kernel = weight_shape
    taps = math.prod(kernel)
    # onnxruntime's Transpose is slow for six axes (a 128x128x3x3 weight: 0.55 ms), fast for moving
    # one axis past a contiguous block, so the reorder is a few such steps (0.07 ms).
    if transposed_weight:
        # (C, M*K) -> (M*K, C) = (M/B, B_out, K, C) -> (M/B, K, C, B_out) = (M/B, K, C/B, B_in, B_out)
        rows = emit("Transpose", emit("Reshape", weight_name, constant([channels, out_channels * taps])), perm=[1, 0])
        split = emit("Reshape", rows, constant([out_channels // block, block, taps * channels]))
        by_tap = emit(
            "Reshape", emit("Transpose", split, perm=[0, 2, 1]), constant([-1, taps, channels // block, block * block])
        )
        # The taps in reverse order are the kernel flipped along both spatial axes: the ConvTranspose's
        # scatter is the Conv's correlation. Reversed while the tap axis is major, whole blocks move.
        flipped = emit("Slice", by_tap, constant([-1]), constant([_INT64_MIN]), constant([1]), constant([-1]))
        blocked = emit("Transpose", flipped, perm=[0, 2, 1, 3])  # (M/B, C/B, K, B_in * B_out)
    elif threads == 1:
        # (M, C/B, B_in, K) -> (M, C/B, K, B_in); (M/B, B_out, C*K) -> (M/B, C*K, B_out)
        split = emit("Reshape", weight_name, constant([out_channels, channels // block, block, taps]))
        inner = emit(
            "Reshape", emit("Transpose", split, perm=[0, 1, 3, 2]), constant([out_channels // block, block, -1])
        )
        blocked = emit("Transpose", inner, perm=[0, 2, 1])
    else:
        # (M/B, B_out, C*K) -> (M/B, C*K, B_out) = (M/B * C/B, B_in, K, B_out) -> (M/B * C/B, K, B_in, B_out)
        rows = emit("Reshape", weight_name, constant([out_channels // block, block, channels * taps]))
        by_input_block = emit("Reshape", emit("Transpose", rows, perm=[0, 2, 1]), constant([-1, block, taps, block]))
        blocked = emit("Transpose", by_input_block, perm=[0, 2, 1, 3])
    # The kernel reads a rank-4 weight of the reordered layout's sizes.
    weight = emit("Reshape", blocked, constant([out_channels, channels, *kernel]))
    _convolve_blocked(emit, input_name, weight, bias_name, output_name, out_channels, attributes)


def emit_blocked_depthwise_conv(
    emit,
    constant,
    input_name: str,
    weight_name: str,
    bias_name: str,
    output_name: str,
    weight_shape,
    attributes: dict,
    block: int,
    flipped: bool = False,
) -> None:
    """Appends the nodes computing a depthwise ``Conv(X, W, bias)`` with the blocked kernels.

    A depthwise convolution (``group`` = its channels, each group one input and one output channel)
    is a weight of ``(C, 1, kh, kw)``, which the kernels read as ``(C/B, kh*kw, B)``: each tap's
    weights of a block of channels side by side. onnxruntime's own Conv convolves each channel as a
    GEMM of one row, 3-12x slower (``benchmarks/bench_conv_lowering.py``).

    Args:
        emit, constant, input_name, weight_name, bias_name, output_name: as ``emit_blocked_conv``.
        weight_shape: the weight's shape as fed, ``(C, 1, kh, kw)``.
        attributes: the explicit ``kernel_shape``, ``strides``, ``dilations`` and ``pads``.
        block: ``block_size()``; the channels must be a multiple of it.
        flipped: the kernel reversed along both spatial axes first (a stride-1 ConvTranspose of
            groups of one channel, a depthwise layer's input gradient, is that convolution).
    """
    channels, _, *kernel = weight_shape
    taps = math.prod(kernel)
    by_channel_block = emit("Reshape", weight_name, constant([channels // block, block, taps]))
    by_tap = emit("Transpose", by_channel_block, perm=[0, 2, 1])  # (C/B, taps, B)
    if flipped:  # the taps in reverse order: whole blocks of B weights move
        by_tap = emit("Slice", by_tap, constant([-1]), constant([_INT64_MIN]), constant([1]), constant([-1]))
    weight = emit("Reshape", by_tap, constant([channels, 1, *kernel]))
    _convolve_blocked(emit, input_name, weight, bias_name, output_name, channels, {**attributes, "group": channels})


def _convolve_blocked(
    emit, input_name: str, weight: str, bias_name: str, output_name: str, out_channels: int, attributes
):
    """The blocked convolution of ``input_name`` with the reordered ``weight``: the input moved to the
    blocked layout, convolved, and moved back."""
    blocked_input = emit("ReorderInput", input_name, domain=NCHWC_DOMAIN)
    inputs = (blocked_input, weight, bias_name) if bias_name else (blocked_input, weight)
    blocked_output = emit("Conv", *inputs, domain=NCHWC_DOMAIN, **attributes)
    emit("ReorderOutput", blocked_output, domain=NCHWC_DOMAIN, channels=out_channels, output=output_name)


@functools.cache
def block_size() -> int | None:
    """The channel block of onnxruntime's NCHWc kernels on this CPU, or None where they cannot be used."""
    if platform.machine().lower() not in _MACHINES:
        return None
    rng = np.random.default_rng(0)
    channels = max(_CANDIDATE_BLOCK_SIZES)
    # Small integers: every product and sum is exact in float32, in any order.
    x = rng.integers(-3, 4, (1, channels, 3, 3)).astype(np.float32)
    w = rng.integers(-3, 4, (channels, channels, 3, 3)).astype(np.float32)
    expected = np.einsum("ncij,mcij->nm", x, w).reshape(1, channels, 1, 1)
    for block in _CANDIDATE_BLOCK_SIZES:
        try:
            result = _run_probe(x, w, block)
        except Exception:  # noqa: BLE001 - a build without the kernels: keep the standard Conv
            return None
        if np.array_equal(result, expected):
            return block
    return None


def _run_probe(x: np.ndarray, w: np.ndarray, block: int) -> np.ndarray:
    nodes: list = []
    initializers: list = []
    counter = iter(range(1 << 30))

    def fresh_name(stem: str) -> str:
        return f"{stem}_{next(counter)}"

    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    attributes = {"kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
    emit_blocked_conv(emit, constant, "x", "w", "", "y", w.shape, attributes, block)
    graph = helper.make_graph(
        nodes,
        "nchwc_probe",
        [
            helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, value.shape)
            for name, value in (("x", x), ("w", w))
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializers,
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid(NCHWC_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)
    return create_session(model, threads=1).run(None, {"x": x, "w": w})[0]
