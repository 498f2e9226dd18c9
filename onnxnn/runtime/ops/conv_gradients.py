"""The gradients of sliding windows as ONNX graphs: the building blocks of the convolution rules.

The input gradient of a Conv scatters each output position's gradient back through the weight
(``scatter_windows``): a ``ConvTranspose`` of the output gradient with the same weight, or, for wide
2-d layers, one GEMM and a ``Col2Im``. Its weight gradient correlates the input with the output
gradient (``weight_gradient``), recorded as one node of onnxnn's (``ConvWeightGradient``,
conv_weight_gradient.py) with its own gradient rule, written out when a graph is built as GEMMs
over strided slices of the input or as one ``Conv`` in which batch and channel axes swap roles.
``gather_windows`` is the adjoint of ConvTranspose. Which formulation runs is chosen by shape, from
what onnxruntime runs fastest (benchmarks/bench_conv_gradients.py); all are exact up to float
rounding, standard ONNX once written out, and differentiable again. The pooling and normalization
rules use some of them too.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.conv_weight_gradient import OP_TYPE as WEIGHT_GRADIENT
from ...ir.conv_weight_gradient import end_pads
from ...ir.domains import ONNXNN_DOMAIN
from .columns import im2col
from ._common import Tensor, apply_op, int64_constant
from .conv_lowering import blocked_input_gradient, pointwise_input_gradient
from .windows import WindowGeometry

__all__: list[str] = []


def needs_input_grad(ctx, index: int) -> bool:
    """Whether the gradient for input ``index`` flows anywhere (skips building unused convolutions)."""
    edges = ctx.function._edges
    return index < len(edges) and edges[index] is not None


def crop(tensor: Tensor, sizes, first_axis: int = 2) -> Tensor:
    """``tensor`` cut to ``sizes`` along the axes from ``first_axis`` on (a no-op when it already fits)."""
    axes = [first_axis + i for i, size in enumerate(sizes) if tensor.shape[first_axis + i] != size]
    if not axes:
        return tensor
    ends = [sizes[axis - first_axis] for axis in axes]
    return apply_op(
        "Slice",
        (tensor, int64_constant([0] * len(axes)), int64_constant(ends), int64_constant(axes)),
        None,
        "SliceBackward0",
    )


# The smallest product of input and output channels for which a 2-d convolution's input gradient
# is one GEMM and a Col2Im rather than a ConvTranspose: onnxruntime's ConvTranspose is up to 4x
# slower for wide layers on small images (resnet's last stages), and faster for narrow ones
# (benchmarks/bench_conv_gradients.py). Where the ConvTranspose runs on the blocked kernels
# (conv_lowering.blocked_input_gradient), it is as fast or faster: 256 channels at 4x4 images
# alike (a batch of 8 there is now below the blocked kernels' bound), at 8x8 and 14x14 0.8x the
# GEMM's time; where it runs as a 1x1 Conv
# (conv_lowering.pointwise_input_gradient), 0.74-0.89x the whole gradient call.
COLUMN_GEMM_MIN_CHANNEL_PRODUCT = 256 * 256


def scatter_windows(g: Tensor, weight: Tensor, input_spatial, geometry: WindowGeometry, group: int) -> Tensor:
    """The adjoint of sliding ``weight`` over an input of size ``input_spatial``: a ConvTranspose.

    The explicit end padding and ``output_padding`` are chosen so the result has exactly the input's
    spatial size (rows that no window reached get zeros). Wide ungrouped 2-d convolutions take
    ``_scatter_windows_by_columns`` instead.
    """
    if g._value.device.type != "cpu":
        return _scatter_windows_symmetric(g, weight, input_spatial, geometry, group)
    if (
        group == 1
        and g.dtype is dtypes.float32  # onnxruntime's Col2Im is float32 only
        and len(input_spatial) == 2
        and weight.shape[0] * weight.shape[1] >= COLUMN_GEMM_MIN_CHANNEL_PRODUCT
        and not blocked_input_gradient(g, weight, input_spatial, geometry.strides)
        and not pointwise_input_gradient(g, weight, geometry)
    ):
        return _scatter_windows_by_columns(g, weight, input_spatial, geometry)
    pads_end, output_padding = [], []
    for size, out, k, s, d, b in zip(
        input_spatial, geometry.output, geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin
    ):
        excess = s * (out - 1) + (k - 1) * d + 1 - b - size
        pads_end.append(max(excess, 0))
        output_padding.append(max(-excess, 0))
    attrs = {
        "kernel_shape": list(geometry.kernel),
        "strides": geometry.strides,
        "dilations": geometry.dilations,
        "pads": list(geometry.pads_begin) + pads_end,
        "group": group,
    }
    if any(output_padding):
        attrs["output_padding"] = output_padding
    return apply_op("ConvTranspose", (g, weight), attrs, "ConvolutionBackward0")


def _scatter_windows_symmetric(
    g: Tensor, weight: Tensor, input_spatial, geometry: WindowGeometry, group: int
) -> Tensor:
    """``scatter_windows`` as a ConvTranspose with equal pads at both ends, then a Slice or a Pad of
    the ends: a GPU's provider runs no other form there (onnxruntime's CUDA ConvTranspose sends
    asymmetric pads to the CPU, with copies both ways), and its GEMM-and-Col2Im forms were chosen for
    onnxruntime's CPU kernels.

    Position ``t`` of the unpadded transposed output is input position ``t - begin``; with ``p`` cut
    at both ends (``p`` at most the forward's begin and end pads), input position 0 is at
    ``begin - p``, and positions past the last window get zeros, as ``output_padding`` gives them.
    """
    pads, starts, ends, missing = [], [], [], []
    for size, out, k, s, d, begin in zip(
        input_spatial, geometry.output, geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin
    ):
        full = s * (out - 1) + (k - 1) * d + 1
        cut = min(begin, max(full - begin - size, 0))
        pads.append(cut)
        starts.append(begin - cut)
        reached = full - cut - starts[-1]  # input positions the windows reach, from position 0
        ends.append(starts[-1] + min(size, reached))
        missing.append(max(size - reached, 0))
    attrs = {
        "kernel_shape": list(geometry.kernel),
        "strides": geometry.strides,
        "dilations": geometry.dilations,
        "pads": pads + pads,
        "group": group,
    }
    result = apply_op("ConvTranspose", (g, weight), attrs, "ConvolutionBackward0")
    spatial = len(pads)
    if any(starts) or any(end != length for end, length in zip(ends, result.shape[2:])):
        axes = list(range(2, 2 + spatial))
        bounds = (int64_constant(starts), int64_constant(ends), int64_constant(axes))
        result = apply_op("Slice", (result, *bounds), None, "SliceBackward0")
    if any(missing):
        widths = int64_constant([0] * (2 + spatial) + [0, 0] + missing)
        result = apply_op("Pad", (result, widths), None, "ConstantPadNdBackward0")
    return result


def _scatter_windows_by_columns(g: Tensor, weight: Tensor, input_spatial, geometry: WindowGeometry) -> Tensor:
    """The input gradient of an ungrouped 2-d Conv as ``(N*L, M) @ (M, C*k*k)`` and a Col2Im.

    Each output position's gradient times the flattened weight gives that window's contribution
    to every input element it covers (im2col's columns); Col2Im adds the overlapping windows up.
    The forward's own pads make Col2Im find exactly the forward's ``L`` windows.
    """
    batch, out_channels = g.shape[0], g.shape[1]
    channels = weight.shape[1]
    positions = int(np.prod(geometry.output))
    window_elements = channels * int(np.prod(geometry.kernel))
    rows = g.permute([0, 2, 3, 1]).reshape((batch * positions, out_channels))
    columns = apply_op("MatMul", (rows, weight.reshape((out_channels, window_elements))), None, "ConvolutionBackward0")
    columns = columns.reshape((batch, positions, window_elements)).permute([0, 2, 1])
    attrs = {
        "strides": list(geometry.strides),
        "dilations": list(geometry.dilations),
        "pads": list(geometry.pads_begin) + list(geometry.pads_end),
    }
    sizes = (int64_constant([int(size) for size in input_spatial]), int64_constant(list(geometry.kernel)))
    return apply_op("Col2Im", (columns, *sizes), attrs, "ConvolutionBackward0")


def gather_windows(
    g: Tensor, weight: Tensor, output_spatial, kernel, strides, dilations, pads_begin, group: int
) -> Tensor:
    """The adjoint of ConvTranspose: a Conv of ``g`` producing exactly ``output_spatial`` positions."""
    pads_end = end_pads(g.shape[2:], output_spatial, kernel, strides, dilations, pads_begin)
    result = apply_op(
        "Conv",
        (g, weight),
        {
            # Every gradient node names its kernel: a graph shared across sizes (fastpath.dynamic_shapes)
            # may otherwise serve weights of other kernel sizes with the float64 forms of Conv and
            # ConvTranspose (float64_convolutions), which are written for the first weight's taps.
            "kernel_shape": list(kernel),
            "strides": list(strides),
            "dilations": list(dilations),
            "pads": list(pads_begin) + pads_end,
            "group": group,
        },
        "ConvolutionBackward0",
    )
    return crop(result, output_spatial)


# The fewest input channels for which the weight gradient is computed tap by tap as GEMMs: with
# fewer (an RGB stem), the GEMMs are too narrow, and every tap's window goes into one GEMM instead
# (benchmarks/bench_conv_gradients.py).
TAP_GEMM_MIN_CHANNELS = 16
# The most kernel taps for which a weight gradient of fewer channels is one GEMM over all windows:
# 3x3 and 5x5 kernels gain (an RGB stem's 3x3 over 32x32 images: 1.8 -> 0.9 ms), a 7x7 stride-2
# stem's 49 windows lose to the one large Conv (2.8 -> 3.6 ms).
ALL_WINDOWS_GEMM_MAX_TAPS = 25


def weight_gradient(x: Tensor, g: Tensor, kernel, strides, dilations, pads_begin, group: int) -> Tensor:
    """d<Conv(x, w), g>/dw for ``Conv(x, w)`` with these strides/dilations/begin pads: shape ``(M, C/group, *kernel)``.

    Recorded as one ``ConvWeightGradient`` node (conv_weight_gradient.py), which a graph built for
    onnxruntime writes out as one GEMM per kernel tap over strided slices of the padded,
    channels-last input when it has at least ``TAP_GEMM_MIN_CHANNELS`` channels (onnxruntime runs
    these 2-10x faster than the single Conv whose 32x32 "kernel" is the output gradient, whose im2col
    expands every input element once per output position), as one GEMM over all the taps' windows
    for fewer channels and at most ``ALL_WINDOWS_GEMM_MAX_TAPS`` taps, and otherwise (grouped
    convolutions, large kernels over few channels) as that one Conv, in which the input channels act
    as the batch and the batch as channels (per group). onnxnn's sessions run the node as a compiled
    loop where one takes it (kernels/compiled_convolutions.py).
    """
    if x.shape[0] == 0 or x.shape[1] == 0:
        # An empty batch contributes nothing, and a weight without input channels has no elements
        # (the graphs' and kernels' reshapes cannot infer a size from 0).
        shape = (g.shape[1], x.shape[1] // group, *[int(k) for k in kernel])
        return Tensor._zeros(shape, x.dtype, x.device)
    pads = list(pads_begin) + end_pads(x.shape[2:], g.shape[2:], kernel, strides, dilations, pads_begin)
    if x.dtype is dtypes.float64 and written_as_one_conv(x.shape[1], kernel, group):
        return _weight_gradient_by_columns(x, g, kernel, strides, dilations, pads, group)
    attrs: dict = {"kernel_shape": list(kernel), "strides": list(strides), "dilations": list(dilations), "pads": pads}
    if group != 1:
        attrs["group"] = group
    return apply_op(WEIGHT_GRADIENT, (x, g), attrs, "ConvolutionBackward0", domain=ONNXNN_DOMAIN)


def written_as_one_conv(channels: int, kernel, group: int) -> bool:
    """Whether ``ConvWeightGradient``'s decomposition writes the node as one Conv (its other forms are GEMMs)."""
    return group != 1 or (channels < TAP_GEMM_MIN_CHANNELS and int(np.prod(kernel)) > ALL_WINDOWS_GEMM_MAX_TAPS)


def _weight_gradient_by_columns(x: Tensor, g: Tensor, kernel, strides, dilations, pads, group: int) -> Tensor:
    """A float64 weight gradient as ``G (group, M/group, N*L) @ im2col(X) (group, N*L, C/group * taps)``.

    ``ConvWeightGradient`` writes these cases as one Conv whose kernel is the output gradient,
    which onnxruntime cannot run in float64 and which ``float64_convolutions`` would write as one
    window per output position (thousands of Slices for an image). The columns are unfold's.
    """
    rank = len(kernel)
    batch, channels, out_channels = x.shape[0], x.shape[1], g.shape[1]
    positions = int(np.prod(g.shape[2:]))
    columns = im2col(x, kernel, strides, pads[:rank], pads[rank:], dilations, "ConvolutionBackward0")
    columns = columns.reshape((batch, group, -1, positions)).permute([1, 0, 3, 2])  # (group, N, L, C/group * taps)
    columns = columns.reshape((group, batch * positions, -1))
    rows = g.reshape((batch, group, out_channels // group, positions)).permute([1, 2, 0, 3])
    rows = rows.reshape((group, out_channels // group, batch * positions))
    product = apply_op("MatMul", (rows, columns), None, "ConvolutionBackward0")  # (group, M/group, C/group * taps)
    return product.reshape((out_channels, channels // group, *[int(k) for k in kernel]))


def channel_sum(g: Tensor) -> Tensor:
    """``g`` summed over every axis but the channel axis 1 (the gradient of a per-channel bias)."""
    return g.sum([0] + list(range(2, g.dim())))
