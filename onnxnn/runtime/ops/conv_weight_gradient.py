"""A convolution's weight gradient as one node: the rules of onnxnn's ``ConvWeightGradient`` op.

``conv_gradients.weight_gradient`` records every Conv's and ConvTranspose's weight gradient as one
(the op and its geometry: ``ir/conv_weight_gradient.py``). Written out as the GEMM per kernel tap
it stands for, a 3x3 kernel's weight gradient is 42 nodes (a Slice, a MatMul and two Reshapes per
tap), about half of what a ResNet's training step records; each costs Python at every step (the
backward's replay, planning). As one node it costs that once; ``build_model`` writes it out for
onnxruntime (``_decomposition``: GEMMs, or one Conv for grouped convolutions and large kernels over
few channels), onnxnn's kernels run the node directly, and where the compiled loops take it
(kernels/compiled_convolutions.py) onnxnn's sessions run it there.

It is linear in ``X`` and in ``G`` (``<dW(X, G), H> = <Conv(X, H), G>``), so its gradients are a
convolution's: ``G`` scattered back through ``H`` for ``X`` and ``Conv(X, H)`` for ``G``.
"""

from __future__ import annotations

import numpy as np

from ...ir.conv_weight_gradient import OP_TYPE, tap_starts, weight_gradient_geometry
from ...ir.domains import ONNXNN_DOMAIN
from ...ir.registry import decompositions, gradient_rules, shape_rules
from . import conv_gradients
from .conv_gradients import gather_windows, needs_input_grad, scatter_windows
from .conv_lowering import emit_window_columns
from .training import int64_initializers, node_emitter
from .windows import WindowGeometry

__all__: list[str] = []


@shape_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _shape(inputs, attrs):
    x, g = inputs
    if x.dtype is not g.dtype or not x.dtype.is_floating_point:
        raise ValueError(f"{OP_TYPE}: X and G must be of one floating dtype, got {x.dtype.name} and {g.dtype.name}")
    geometry = weight_gradient_geometry(x.shape, g.shape, attrs)
    return [((g.shape[1], x.shape[1] // geometry.group, *geometry.kernel), x.dtype)]


@decompositions.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    """``G`` as ``(M, N*L)`` times each tap's strided Slice of the channels-last input, ``(N*L, C)``.

    The taps' ``(M, C)`` products side by side, ``(M, taps * C)``, are ``(M, *kernel, C)``, which one
    Transpose, the last node, writes as ``(M, C, *kernel)``: gathering the taps along a last axis
    instead interleaves every element (resnet18's 512-channel weight gradient: 4.55 -> 3.52 ms,
    one thread). When the windows have fewer rows than ``G`` has channels (a deep layer's small
    images), one MatMul over the windows side by side replaces the MatMul per tap (-> 2.35 ms),
    the windows interleaved so that it writes ``(M, C, *kernel)`` itself: the Transpose of the
    result, ``(512, 512, 9)`` for resnet18's last stage at 64x64 images, took 1.1 ms.

    The sizes the graph computes with come from the attributes and, for the channels and the
    windows' ends, from the inputs' shapes at run time: a graph with symbolic sizes
    (``fastpath.dynamic_shapes`` shares one across batch, image and channel counts) stays exact.
    Only the choices between exact forms (these two, and whether to cut the windows before moving
    the channels last) read the sizes of the graph it is built for.
    """
    x, g = node.inputs
    geometry = weight_gradient_geometry(x.shape, g.shape, node.attrs)
    rank = len(geometry.kernel)
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    if conv_gradients.written_as_one_conv(x.shape[1], geometry.kernel, geometry.group):
        _emit_one_conv_with_batch_and_channels_swapped(emit, constant, geometry, input_names, output_names[0])
        return nodes, initializers
    if x.shape[1] < conv_gradients.TAP_GEMM_MIN_CHANNELS:
        _emit_one_gemm_over_all_windows(emit, constant, geometry, input_names, output_names[0])
        return nodes, initializers

    taps = tap_starts(geometry)
    # The windows want the input channels-last. Transposed whole once, unless the windows together
    # are smaller than the input (a strided 1x1 convolution's): then each window is cut first.
    cut_first = len(taps) * int(np.prod(g.shape[2:])) < int(np.prod(x.shape[2:]))
    channels_last_perm = [0, *range(2, 2 + rank), 1]
    padded = input_names[0] if cut_first else emit("Transpose", input_names[0], perm=channels_last_perm)
    if any(geometry.pads_begin) or any(geometry.pads_end):
        if cut_first:  # (N, C, *in)
            padding = constant([0, 0, *geometry.pads_begin, 0, 0, *geometry.pads_end])
        else:  # (N, *in, C)
            padding = constant([0, *geometry.pads_begin, 0, 0, *geometry.pads_end, 0])
        padded = emit("Pad", padded, padding)
    gradient_rows, span, strides = _gradient_rows_and_window_span(emit, constant, geometry, input_names[1])
    axes = constant(list(range(2, 2 + rank)) if cut_first else list(range(1, 1 + rank)))
    windows = []
    for starts in taps:
        begin = constant(starts)
        window = emit("Slice", padded, begin, emit("Add", span, begin), axes, strides)
        if cut_first:
            window = emit("Transpose", window, perm=channels_last_perm)
        windows.append(emit("Flatten", window, axis=1 + rank))  # (N*L, C)
    if len(windows) > 1 and x.shape[0] * int(np.prod(g.shape[2:])) <= g.shape[1]:
        # Fewer window rows than G has channels: the windows side by side, each tap's column next to
        # its channel's, ``(N*L, C * taps)``, are smaller than the result, so they take the reorder
        # and one MatMul writes the result as it is laid out.
        stacked = emit("Reshape", emit("Concat", *windows, axis=0), constant([len(windows), -1]))  # (taps, N*L*C)
        # (N*L, C * taps), C read at run time: a graph shared across sizes may see other channel counts.
        columns_per_row = emit("Mul", emit("Shape", input_names[0], start=1, end=2), constant([len(windows)]))
        columns = emit(
            "Reshape", emit("Transpose", stacked, perm=[1, 0]), emit("Concat", constant([-1]), columns_per_row, axis=0)
        )
        products = emit("MatMul", gradient_rows, columns)
        emit("Reshape", products, constant([0, -1, *geometry.kernel]), output=output_names[0])
        return nodes, initializers
    if len(windows) == 1:
        products = emit("MatMul", gradient_rows, windows[0])
    else:
        products = emit("Concat", *[emit("MatMul", gradient_rows, window) for window in windows], axis=1)
    by_tap = emit("Reshape", products, constant([0, *geometry.kernel, -1]))  # (M, *kernel, C)
    emit("Transpose", by_tap, perm=[0, 1 + rank, *range(1, 1 + rank)], output=output_names[0])
    return nodes, initializers


def _gradient_rows_and_window_span(emit, constant, geometry, g_name: str) -> tuple:
    """``(G as (M, N*L), each window's extent per spatial axis, the strides)``: what both forms slice and multiply.

    A window spans ``(out - 1) * stride + 1`` elements from its tap's start, ``out`` read from
    G's shape at run time.
    """
    rank = len(geometry.kernel)
    by_channel = emit("Transpose", g_name, perm=[1, 0, *range(2, 2 + rank)])
    gradient_rows = emit("Reshape", by_channel, constant([0, -1]))
    output_spatial = emit("Slice", emit("Shape", g_name), constant([2]), constant([2 + rank]))
    strides = constant(geometry.strides)
    span = emit("Add", emit("Mul", emit("Sub", output_spatial, constant([1])), strides), constant([1]))
    return gradient_rows, span, strides


def _emit_one_gemm_over_all_windows(emit, constant, geometry, input_names: list, output_name: str) -> None:
    """Few input channels: ``(M, N*L) @ (C*taps, N*L)^T``, each tap's window of the channels-first input a row block.

    With few channels each tap's own GEMM is too narrow (``(N*L, 3)`` for an RGB input), and the
    windows, rows ordered as the weight's ``(C, *kernel)``, are a small matrix: one GEMM whose
    result is the weight gradient as it is laid out, no Transpose after it.
    """
    gradient_rows, span, strides = _gradient_rows_and_window_span(emit, constant, geometry, input_names[1])
    columns, _ = emit_window_columns(
        emit, constant, input_names[0], geometry, lambda starts, begin: emit("Add", span, begin), strides
    )  # (C * taps, N*L)
    products = emit("Gemm", gradient_rows, columns, transB=1)  # (M, C * taps)
    emit("Reshape", products, constant([0, -1, *geometry.kernel]), output=output_name)


def _emit_one_conv_with_batch_and_channels_swapped(
    emit, constant, geometry, input_names: list, output_name: str
) -> None:
    """One Conv of X, as ``(C/group, group*N, *in)``, with G, as ``(M, N, *out)``, for its kernel.

    The input channels act as the batch and the batch as channels (per group), G's positions as the
    kernel taps, and stride and dilation trade places: the Conv's ``(C/group, M, *kernel)`` output,
    cut to the kernel where the strides do not divide evenly, is dW with its first two axes swapped.
    Grouped convolutions' weight gradients are this (onnxruntime's Conv keeps the groups apart), and
    so are those of large kernels over few channels, whose windows are too many for one GEMM (a 7x7
    RGB stem's 49). The reshapes read the channels and spatial sizes from X at run time, as the GEMM
    forms do.
    """
    rank = len(geometry.kernel)
    group = geometry.group
    x, g = input_names
    spatial = list(range(2, 2 + rank))
    per_group = emit("Div", emit("Shape", x, start=1, end=2), constant([group]))
    flat = emit(
        "Reshape", x, emit("Concat", constant([0, group]), per_group, constant([-1]), axis=0)
    )  # (N, group, C/group, S)
    by_group = emit("Transpose", flat, perm=[2, 1, 0, 3])  # (C/group, group, N, S)
    input_spatial = emit("Shape", x, start=2)
    x_swapped = emit("Reshape", by_group, emit("Concat", constant([0, -1]), input_spatial, axis=0))
    g_swapped = emit("Transpose", g, perm=[1, 0, *spatial])  # (M, N, *out)
    attrs = {
        "strides": list(geometry.dilations),
        "dilations": list(geometry.strides),
        "pads": list(geometry.pads_begin) + list(geometry.pads_end),
        "group": group,
    }
    swapped = emit("Conv", x_swapped, g_swapped, **attrs)  # (C/group, M, *reach)
    kernel_only = emit("Slice", swapped, constant([0] * rank), constant(geometry.kernel), constant(spatial))
    emit("Transpose", kernel_only, perm=[1, 0, *spatial], output=output_name)


@gradient_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient(ctx, h):
    x, g = ctx.input(0), ctx.input(1)
    geometry = weight_gradient_geometry(x.shape, g.shape, ctx.attrs)
    grad_x = grad_g = None
    if needs_input_grad(ctx, 0):
        windows = WindowGeometry(
            list(g.shape[2:]),
            geometry.kernel,
            geometry.strides,
            geometry.dilations,
            geometry.pads_begin,
            geometry.pads_end,
        )
        grad_x = scatter_windows(g, h, x.shape[2:], windows, geometry.group)
    if needs_input_grad(ctx, 1):
        grad_g = gather_windows(
            x,
            h,
            g.shape[2:],
            geometry.kernel,
            geometry.strides,
            geometry.dilations,
            geometry.pads_begin,
            geometry.group,
        )
    return grad_x, grad_g
