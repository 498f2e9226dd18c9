"""A Conv with a fed weight over small images, in onnxnn's sessions: one GEMM for the whole batch.

onnxruntime's Conv runs one GEMM per image: ``(M, C*k*k) @ (C*k*k, L)`` for ``L`` output positions.
Where ``L`` is tiny and the weight large (a ResNet's last stage on small images: 512 channels at
2x2), each image's GEMM streams the whole weight for a few columns of work. Gathering every image's
windows into one ``(C*k*k, N*L)`` matrix streams it once (one thread, ``benchmarks/bench_conv_lowering.py``):

    8 x 512 x 2x2 -> 512, 3x3: 5.7 ms -> 2.2       8 x 256 x 4x4 -> 512, 3x3 stride 2: 2.8 -> 1.1
    8 x 512 x 3x3 -> 512, 3x3: 5.8 -> 4.6          8 x 256 x 4x4 -> 512, 1x1 stride 2: 0.31 -> 0.17
    8 x 256 x 4x4 -> 256, 3x3 (L = 16): 1.6 -> 2.0 (the per-image GEMMs are wide enough there)

A constant weight keeps the Conv: onnxruntime packs it once and may move it to its NCHWc layout
(sessions.disabled_optimizers). Exported graphs always keep the Conv (``build_model(lower=True)``
is for onnxnn's own sessions only).

The nodes read no size but the rank: each tap's window is a Slice whose end counts back from the
padded input's end, so it holds exactly the Conv's output positions at every input size, and the
result takes its batch and output sizes from a window's shape. Only the choice reads sizes.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...ir.attributes import auto_pad_mode
from ...ir.conv_weight_gradient import tap_starts
from ...ir.registry import session_lowerings
from .training import int64_initializers, node_emitter
from .windows import window_geometry

__all__ = ["LOWERED_CONV_MAX_POSITIONS", "LOWERED_CONV_MIN_WEIGHT_ELEMENTS", "LOWERED_CONV_MAX_TAPS"]

# Output positions per image up to which the batch's windows make one GEMM (measured: 4 and 9 gain,
# 16 and 25 do not), and the fewest weight elements for it (8 x 64 x 2x2 -> 64, 3x3, 37,000
# elements: 0.92; 8 x 16 x 2x2 -> 16: 1.8x slower).
LOWERED_CONV_MAX_POSITIONS = 9
LOWERED_CONV_MIN_WEIGHT_ELEMENTS = 1 << 16
# The most kernel taps (one Slice each): measured for 1x1 and 3x3 kernels. A weight-gradient Conv
# (conv_gradients.weight_gradient, a 3-channel stem's), whose "kernel" is a 32x32 output gradient
# and whose output is the 3x3 weight, would otherwise become a thousand Slices (a small ResNet's
# step 1.1x slower).
LOWERED_CONV_MAX_TAPS = 9

_END = np.iinfo(np.int64).max


def _geometry_if_lowered(node, embedded):
    """The Conv's window geometry when it is worth one GEMM (see the bounds above), else None."""
    x, weight = node.inputs[0], node.inputs[1]
    if len(x.shape) != 4 or x.dtype is not dtypes.float32 or embedded(1) or x.shape[0] < 2:
        return None
    # SAME_* pads depend on the input's size, which a shared graph does not fix.
    if int(node.attrs.get("group", 1)) != 1 or auto_pad_mode(node.attrs) not in ("NOTSET", "VALID"):
        return None
    if (
        math.prod(weight.shape) < LOWERED_CONV_MIN_WEIGHT_ELEMENTS
        or math.prod(weight.shape[2:]) > LOWERED_CONV_MAX_TAPS
    ):
        return None
    geometry = window_geometry(x.shape[2:], weight.shape[2:], node.attrs)
    return geometry if math.prod(geometry.output) <= LOWERED_CONV_MAX_POSITIONS else None


@session_lowerings.register("Conv")
def _conv_as_one_gemm(node, input_names: list, output_names: list, fresh_name, embedded):
    """``Y = W (M, C*k*k) @ windows (C*k*k, N*L)``, rows ordered as the weight's ``(C, kh, kw)``."""
    geometry = _geometry_if_lowered(node, embedded)
    if geometry is None:
        return None
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)

    channels_first = emit("Transpose", input_names[0], perm=[1, 0, 2, 3])  # (C, N, H, W)
    padded = channels_first
    if any(geometry.pads_begin) or any(geometry.pads_end):
        padded = emit("Pad", channels_first, constant([0, 0, *geometry.pads_begin, 0, 0, *geometry.pads_end]))
    axes, steps = constant([2, 3]), constant(geometry.strides)
    extents = [(k - 1) * d for k, d in zip(geometry.kernel, geometry.dilations)]
    windows = []
    for starts in tap_starts(geometry):
        # The window ends (k - 1) * dilation - start before the padded input's end: then it holds
        # ceil((padded - (k - 1) * dilation) / stride) positions, the Conv's output size.
        ends = [start - extent or _END for start, extent in zip(starts, extents)]
        window = emit("Slice", padded, constant(starts), constant(ends), axes, steps)  # (C, N, Ho, Wo)
        windows.append(window)
    stacked = emit("Concat", *[emit("Unsqueeze", window, constant([1])) for window in windows], axis=1)
    columns = emit("Flatten", stacked, axis=2)  # (C * taps, N * Ho * Wo)
    product = emit("MatMul", emit("Flatten", input_names[1], axis=1), columns)  # (M, N * Ho * Wo)
    if len(input_names) > 2 and input_names[2]:
        product = emit("Add", product, emit("Unsqueeze", input_names[2], constant([1])))
    batch_and_positions = emit("Slice", emit("Shape", windows[0]), constant([1]), constant([4]))
    by_image = emit("Reshape", product, emit("Concat", constant([-1]), batch_and_positions, axis=0))
    emit("Transpose", by_image, perm=[1, 0, 2, 3], output=output_names[0])  # (N, M, Ho, Wo)
    return nodes, initializers
