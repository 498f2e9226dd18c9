"""Convolutions with a fed weight, in onnxnn's sessions: the forms onnxruntime runs fastest.

onnxruntime's Conv (and ConvTranspose) runs one GEMM per image over its windows. onnxnn's own
sessions write a 2-d convolution whose weight is fed at run time (training) in one of four other
exact forms where that is faster:

- **Small images: one GEMM for the whole batch.** ``(M, C*k*k) @ (C*k*k, L)`` per image, for ``L``
  output positions, streams the whole weight for a few columns of work where ``L`` is tiny and the
  weight large (a ResNet's last stage on small images: 512 channels at 2x2). Gathering every
  image's windows into one ``(C*k*k, N*L)`` matrix streams it once (one thread,
  ``benchmarks/bench_conv_lowering.py``)::

    8 x 512 x 2x2 -> 512, 3x3: 5.7 ms -> 2.2       8 x 256 x 4x4 -> 512, 3x3 stride 2: 2.8 -> 1.1
    8 x 512 x 3x3 -> 512, 3x3: 5.8 -> 4.6          8 x 256 x 4x4 -> 512, 1x1 stride 2: 0.31 -> 0.17
    8 x 256 x 4x4 -> 256, 3x3 (L = 16): 1.6 -> 2.0 (the per-image GEMMs are wide enough there)

  The nodes read no size but the rank: each tap's window is a Slice whose end counts back from the
  padded input's end, so it holds exactly the Conv's output positions at every input size, and
  the result takes its batch and output sizes from a window's shape.
- **Otherwise, from 256 output columns (batch x positions): onnxruntime's blocked-channel
  kernels** (``conv_nchwc.py``), which convolve directly instead of expanding windows, for both
  the Conv and a stride-1 ConvTranspose (the input gradient of a stride-1 Conv: the same
  convolution with the kernel flipped)::

    32 x 16 x 32x32 -> 16, 3x3: 2.5 ms -> 1.6        its ConvTranspose: 2.3 -> 1.5
    32 x 32 x 16x16 -> 32, 3x3: 2.1 -> 1.4           its ConvTranspose: 2.0 -> 1.4
    8 x 64 x 16x16 -> 64, 3x3: 1.7 -> 1.3            8 x 64 x 56x56 -> 64, 3x3: 20.0 -> 17.6
    8 x 128 x 8x8 -> 128, 3x3: 1.6 -> 1.3            its ConvTranspose: 1.8 -> 1.4
    8 x 256 x 4x4 -> 256, 3x3: 1.6 -> 1.4            8 x 512 x 3x3 -> 512, 3x3: 5.8 -> 4.9 (one GEMM: 4.5)

  (8 x 256 at 4x4 and 8 x 512 at 3x3 are below the bound: see ``BLOCKED_CONV_MIN_COLUMNS``, a training step)

- **A depthwise convolution (groups of one input and one output channel): the blocked kernels at
  every size**, where its channels are a multiple of their block, and so its input gradient (a
  stride-1 ConvTranspose of such groups, the kernel flipped). onnxruntime's own Conv convolves each
  channel as a GEMM of one row; its blocked kernels convolve a block of channels per vector. One
  thread (``bench_conv_lowering.py --only depthwise``), MobileNetV2's layers at 112x112, batch 8::

    96 x 56x56, stride 2: 2.6 ms -> 0.41x       144 x 56x56: 8.1 -> 0.57x     192 x 14x14: 0.18x
    576 x 7x7: 0.09x     960 x 4x4: 0.05x     input gradients: 144 x 56x56 0.59x, 384 x 14x14 0.20x

  and 0.61x for one 4x4 image of 32 channels, 0.75x for a 1x1 kernel; on two threads 0.10-0.59x.
- **A stride-1 ConvTranspose with a 1x1 kernel or groups of one output channel: a plain Conv**
  (the input gradient of a pointwise convolution, or of a depthwise one the blocked kernels do not take),
  with the weight transposed or, per group, flipped: onnxruntime's ConvTranspose runs a GEMM and a
  col2im per image (on one thread where grouped), its Conv a GEMM or its depthwise kernels. One
  thread, batch 8: 24 -> 144 channels at 56x56 2.75 -> 1.24 ms, 96 -> 576 at 14x14 0.71x; depthwise
  3x3, 144 channels at 56x56, 0.85x (on two threads 0.41x).

A constant weight keeps the op: onnxruntime packs it once and moves it to its blocked layout itself
(session_optimizers.disabled_optimizers). Exported graphs always keep the op (``build_model(lower=True)`` is
for onnxnn's own sessions only). Only the choice of a form reads sizes.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...ir.attributes import auto_pad_mode
from ...ir.conv_weight_gradient import tap_starts
from ...ir.registry import session_lowerings
from ..sessions import lowers_for
from ..threads import get_num_threads
from .conv_nchwc import block_size, emit_blocked_conv, emit_blocked_depthwise_conv
from .training import int64_initializers, node_emitter
from .windows import per_axis, window_geometry

__all__ = [
    "LOWERED_CONV_MAX_POSITIONS",
    "LOWERED_CONV_MIN_WEIGHT_ELEMENTS",
    "LOWERED_CONV_MAX_TAPS",
    "BLOCKED_CONV_MIN_COLUMNS",
    "emit_window_columns",
]

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
# The fewest output columns (batch x output positions per image) for which the blocked kernels are
# used, for kernels of more than one tap (a 1x1 convolution is a GEMM already): the weight's
# reorder costs about as much as 50 columns of the convolution, so a lone convolution gains from
# 128 columns on (0.54-0.88 of onnxruntime's Conv, ConvTranspose 0.54-0.89) and loses below 64 (one
# 512-channel 2x2 image: 2.2x slower). A training step reorders each weight twice (the forward's
# and the flipped one of the input gradient), on one thread whatever the intra-op threads: with
# 128 columns, resnet18's 256-channel layers at 4x4 (batch 8) spent 5.4 ms of its two-thread step
# in those Transposes, and the step (imported, 64x64) took 104.3 / 102.4 ms on one thread against
# 100.8 / 98.9 with 256 (two threads 71.8 / 72.1 against 67.7 / 70.8); the small ResNet's layers
# (8,192 columns and more) are unaffected. Where one GEMM for the batch applies, it gains more.
BLOCKED_CONV_MIN_COLUMNS = 256

_END = np.iinfo(np.int64).max


def _plain_2d(node, embedded, any_group: bool = False) -> bool:
    """A float32 2-d convolution with a fed weight and explicit pads, of one group unless ``any_group``:
    what the forms take."""
    x = node.inputs[0]
    # SAME_* pads depend on the input's size, which a shared graph does not fix.
    return (
        len(x.shape) == 4
        and x.dtype is dtypes.float32
        and not embedded(1)
        and (any_group or int(node.attrs.get("group", 1)) == 1)
        and auto_pad_mode(node.attrs) in ("NOTSET", "VALID")
    )


def _one_gemm_pays(node, geometry) -> bool:
    """Whether one GEMM for the batch is worth it for this Conv (see the bounds above)."""
    x, weight = node.inputs[0], node.inputs[1]
    return (
        x.shape[0] >= 2
        and math.prod(weight.shape) >= LOWERED_CONV_MIN_WEIGHT_ELEMENTS
        and math.prod(weight.shape[2:]) <= LOWERED_CONV_MAX_TAPS
        and math.prod(geometry.output) <= LOWERED_CONV_MAX_POSITIONS
    )


def _blocked_block(batch: int, channels: int, out_channels: int, kernel, output_spatial) -> int | None:
    """The blocked kernels' block size when they are worth it for these sizes, else None."""
    if math.prod(kernel) < 2 or batch * math.prod(output_spatial) < BLOCKED_CONV_MIN_COLUMNS:
        return None
    block = block_size()
    if block is None or channels % block or out_channels % block:
        return None
    return block


def blocked_input_gradient(g, weight, input_spatial, strides) -> bool:
    """Whether the input gradient of a Conv with ``weight`` and ``strides``, recorded as a ConvTranspose
    of its output gradient ``g``, runs on the blocked kernels in onnxnn's sessions (then it beats
    ``conv_gradients``' GEMM and Col2Im, which is kept for the other cases)."""
    return (
        lowers_for(g.device)
        and g.dtype is dtypes.float32
        and all(stride == 1 for stride in strides)
        and _blocked_block(g.shape[0], weight.shape[0], weight.shape[1], weight.shape[2:], input_spatial) is not None
    )


def pointwise_input_gradient(g, weight, geometry) -> bool:
    """Whether the input gradient of a 1x1, stride-1, unpadded Conv with ``weight``, recorded as a
    ConvTranspose of its output gradient ``g``, runs as a Conv in onnxnn's sessions (then it beats
    ``conv_gradients``' GEMM and Col2Im: resnet50's 1024 -> 256 channels at 14x14, the whole
    gradient call, 8.9 -> 6.6 ms)."""
    return (
        lowers_for(g.device)
        and g.dtype is dtypes.float32
        and all(k == 1 for k in weight.shape[2:])
        and all(stride == 1 for stride in geometry.strides)
        and not any(geometry.pads_begin)
        and not any(geometry.pads_end)
    )


def _depthwise(weight_shape, group: int) -> bool:
    """Whether a grouped convolution's weight ``(C, 1, kh, kw)`` gives each of its ``group`` groups one
    input and one output channel."""
    return group > 1 and weight_shape[0] == group and weight_shape[1] == 1


@session_lowerings.register("Conv")
def _lowered_conv(node, input_names: list, output_names: list, fresh_name, embedded):
    if not _plain_2d(node, embedded, any_group=True):
        return None
    x, weight = node.inputs[0], node.inputs[1]
    geometry = window_geometry(x.shape[2:], weight.shape[2:], node.attrs)
    group = int(node.attrs.get("group", 1))
    if group > 1:
        if not _depthwise(weight.shape, group):
            return None
        return _blocked_depthwise(node, input_names, output_names, fresh_name, _explicit(geometry), flipped=False)
    if _one_gemm_pays(node, geometry):
        return _conv_as_one_gemm(geometry, input_names, output_names, fresh_name)
    block = _blocked_block(x.shape[0], weight.shape[1], weight.shape[0], geometry.kernel, geometry.output)
    if block is None:
        return None
    return _blocked(node, input_names, output_names, fresh_name, _explicit(geometry), block, transposed_weight=False)


def _explicit(geometry) -> dict:
    """A convolution's geometry as the explicit attributes of the Conv that computes it."""
    return {
        "kernel_shape": list(geometry.kernel),
        "strides": list(geometry.strides),
        "dilations": list(geometry.dilations),
        "pads": list(geometry.pads_begin) + list(geometry.pads_end),
    }


@session_lowerings.register("ConvTranspose")
def _lowered_conv_transpose(node, input_names: list, output_names: list, fresh_name, embedded):
    """A stride-1 ConvTranspose is the Conv with the flipped kernel, each group's input and output
    channels swapped, and pads ``d * (k - 1) - pad``.

    onnxruntime's ConvTranspose runs one GEMM and a col2im per image, on one thread for a grouped
    one; its Conv is faster in three cases (``python benchmarks/bench_conv_lowering.py``):
    the blocked kernels (see the module doc), a 1x1 kernel (a pointwise convolution's input gradient:
    a GEMM with the weight transposed, 8 x 144 -> 24 channels at 56x56 2.8 -> 1.3 ms), and groups of
    one output channel (a depthwise convolution's input gradient, 8 x 144 x 56x56 3x3: 8.6 -> 6.8 ms
    on one thread, 8.3 -> 3.4 on two).
    """
    if not _plain_2d(node, embedded, any_group=True) or "output_shape" in node.attrs:
        return None
    x, weight = node.inputs[0], node.inputs[1]
    kernel = list(weight.shape[2:])
    if per_axis(node.attrs, "strides", 2, 1) != [1, 1] or any(per_axis(node.attrs, "output_padding", 2, 0)):
        return None
    dilations = per_axis(node.attrs, "dilations", 2, 1)
    pads = per_axis(node.attrs, "pads", 4, 0) if auto_pad_mode(node.attrs) == "NOTSET" else [0] * 4
    extents = [d * (k - 1) for k, d in zip(kernel, dilations)]
    conv_pads = [extent - pad for extent, pad in zip(extents + extents, pads)]
    if min(conv_pads) < 0:
        return None
    group = int(node.attrs.get("group", 1))
    attributes = {"kernel_shape": kernel, "strides": [1, 1], "dilations": dilations, "pads": conv_pads}
    output_spatial = [
        size + extent - begin - end for size, extent, begin, end in zip(x.shape[2:], extents, pads[:2], pads[2:])
    ]
    if _depthwise(weight.shape, group):
        blocked = _blocked_depthwise(node, input_names, output_names, fresh_name, attributes, flipped=True)
        if blocked is not None:
            return blocked
    if group > 1:
        return _grouped_as_conv(weight.shape, group, input_names, output_names, fresh_name, attributes)
    block = _blocked_block(x.shape[0], weight.shape[0], weight.shape[1], kernel, output_spatial)
    if block is not None:
        return _blocked(node, input_names, output_names, fresh_name, attributes, block, transposed_weight=True)
    if kernel == [1, 1]:
        return _pointwise_as_conv(input_names, output_names, fresh_name)
    return None


def _pointwise_as_conv(input_names: list, output_names: list, fresh_name):
    """A 1x1 ConvTranspose (weight ``(C_in, C_out, 1, 1)``) as the Conv with the weight transposed."""
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    transposed = emit("Transpose", input_names[1], perm=[1, 0, 2, 3])
    emit("Conv", input_names[0], transposed, *input_names[2:3], output=output_names[0])
    return nodes, []


def _grouped_as_conv(weight_shape, group: int, input_names: list, output_names: list, fresh_name, attributes: dict):
    """A grouped stride-1 ConvTranspose whose groups have one output channel (a depthwise convolution's
    input gradient) as a grouped Conv: the weight ``(C_in, 1, kh, kw)`` read as ``(group, C_in / group,
    kh, kw)`` (each group's input channels become the Conv's, in order) and flipped along both axes.

    Groups of several output channels would need a transpose of each group's channels too; they keep
    the op.
    """
    if weight_shape[1] != 1:
        return None
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    by_group = emit("Reshape", input_names[1], constant([group, weight_shape[0] // group, *weight_shape[2:]]))
    flipped = emit(
        "Slice", by_group, constant([-1, -1]), constant([-_END, -_END]), constant([2, 3]), constant([-1, -1])
    )
    emit("Conv", input_names[0], flipped, *input_names[2:3], output=output_names[0], group=group, **attributes)
    return nodes, initializers


def _blocked_depthwise(node, input_names, output_names, fresh_name, attributes, flipped):
    """A depthwise convolution (``flipped``: the stride-1 ConvTranspose that is one) on the blocked
    kernels where its channels are a multiple of their block; else None (see the module doc)."""
    block = block_size()
    weight_shape = node.inputs[1].shape
    if block is None or weight_shape[0] % block:
        return None
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    bias = input_names[2] if len(input_names) > 2 else ""
    emit_blocked_depthwise_conv(emit, constant, input_names[0], input_names[1], bias, output_names[0], weight_shape,
                                attributes, block, flipped=flipped)  # fmt: skip
    return nodes, initializers


def _blocked(node, input_names, output_names, fresh_name, attributes, block, transposed_weight):
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    bias = input_names[2] if len(input_names) > 2 else ""
    emit_blocked_conv(
        emit,
        constant,
        input_names[0],
        input_names[1],
        bias,
        output_names[0],
        node.inputs[1].shape,
        attributes,
        block,
        transposed_weight=transposed_weight,
        threads=get_num_threads(),
    )
    return nodes, initializers


def emit_window_columns(emit, constant, input_name: str, geometry, window_ends, steps: str) -> tuple[str, str]:
    """Every kernel tap's strided window of the padded input as one ``(C * taps, N * L)`` matrix.

    Rows are ordered as a weight's ``(C, *kernel)``, columns as ``(N, *output)``: the im2col of the
    whole batch, channels first. ``window_ends(starts, begin)`` names the Slice ends of the window
    whose starts are ``starts`` (the constant ``begin``); ``steps`` names the strides. Returns the
    matrix's name and the first window's, ``(C, N, *output)``, whose shape holds the output sizes
    at run time. The Conv's one-GEMM form and the few-channel weight gradient use it.
    """
    spatial = list(range(2, 2 + len(geometry.kernel)))
    padded = emit("Transpose", input_name, perm=[1, 0, *spatial])  # (C, N, *in)
    if any(geometry.pads_begin) or any(geometry.pads_end):
        padded = emit("Pad", padded, constant([0, 0, *geometry.pads_begin, 0, 0, *geometry.pads_end]))
    axes, second_axis = constant(spatial), constant([1])
    windows = []
    for starts in tap_starts(geometry):
        begin = constant(starts)
        windows.append(emit("Slice", padded, begin, window_ends(starts, begin), axes, steps))  # (C, N, *out)
    stacked = emit("Concat", *[emit("Unsqueeze", window, second_axis) for window in windows], axis=1)
    return emit("Flatten", stacked, axis=2), windows[0]


def _conv_as_one_gemm(geometry, input_names: list, output_names: list, fresh_name):
    """``Y = W (M, C*k*k) @ windows (C*k*k, N*L)``, rows ordered as the weight's ``(C, kh, kw)``."""
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)

    extents = [(k - 1) * d for k, d in zip(geometry.kernel, geometry.dilations)]

    def window_ends(starts, begin: str) -> str:
        # The window ends (k - 1) * dilation - start before the padded input's end: then it holds
        # ceil((padded - (k - 1) * dilation) / stride) positions, the Conv's output size.
        return constant([start - extent or _END for start, extent in zip(starts, extents)])

    columns, first_window = emit_window_columns(
        emit, constant, input_names[0], geometry, window_ends, constant(geometry.strides)
    )  # (C * taps, N * Ho * Wo)
    product = emit("MatMul", emit("Flatten", input_names[1], axis=1), columns)  # (M, N * Ho * Wo)
    if len(input_names) > 2 and input_names[2]:
        product = emit("Add", product, emit("Unsqueeze", input_names[2], constant([1])))
    batch_and_positions = emit("Slice", emit("Shape", first_window), constant([1]), constant([4]))
    by_image = emit("Reshape", product, emit("Concat", constant([-1]), batch_and_positions, axis=0))
    emit("Transpose", by_image, perm=[1, 0, 2, 3], output=output_names[0])  # (N, M, Ho, Wo)
    return nodes, initializers
