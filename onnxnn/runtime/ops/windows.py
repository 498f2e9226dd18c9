"""Where sliding windows land: the geometry of convolutions and pooling windows.

``window_geometry`` resolves a Conv's or pooling node's ``auto_pad``/``pads``/``strides``/
``dilations`` to explicit pads and output sizes; ``transpose_geometry`` does the same for
ConvTranspose. The shape rules and the gradient formulations of both families read them.
"""

from __future__ import annotations

from typing import NamedTuple

from ...ir.attributes import auto_pad_mode

__all__: list[str] = []


class WindowGeometry(NamedTuple):
    """Where a sliding window (a convolution or pooling kernel) lands, per spatial axis."""

    output: list[int]
    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pads_begin: list[int]
    pads_end: list[int]


def per_axis(attrs: dict, name: str, rank: int, default: int) -> list[int]:
    values = attrs.get(name)
    return [default] * rank if values is None or len(values) == 0 else [int(v) for v in values]


def pooled_size(
    size: int, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int, ceil_mode: bool = False
) -> int:
    """Output length of a window sliding over ``size`` elements (PyTorch's and ONNX's formula).

    With ``ceil_mode`` a last partial window is kept, unless it would start inside the end padding.
    """
    span = size + pad_begin + pad_end - dilation * (kernel - 1) - 1
    if not ceil_mode:
        return span // stride + 1
    output = -(-span // stride) + 1
    if (output - 1) * stride >= size + pad_begin:
        output -= 1
    return output


def window_geometry(
    input_spatial, kernel, attrs: dict, ceil_mode: bool = False, pooling: bool = False
) -> WindowGeometry:
    """Resolves ``auto_pad``/``pads``/``strides``/``dilations`` of a Conv or pooling node to explicit pads.

    ``SAME_UPPER``/``SAME_LOWER`` aim at ``ceil(size / stride)`` outputs and put the odd padding
    element at the end/beginning, as the ONNX spec says. For pooling nodes onnxruntime sizes that
    padding for the undilated kernel and then slides the dilated one (fewer outputs); it is
    followed here, since it is what runs.
    """
    rank = len(input_spatial)
    kernel = [int(k) for k in kernel]
    strides = per_axis(attrs, "strides", rank, 1)
    dilations = per_axis(attrs, "dilations", rank, 1)
    mode = auto_pad_mode(attrs)
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        output, pads_begin, pads_end = [], [], []
        for size, k, s, d in zip(input_spatial, kernel, strides, dilations):
            target = -(-size // s)
            extent = k if pooling else (k - 1) * d + 1
            total = max(0, (target - 1) * s + extent - size)
            small, large = total // 2, total - total // 2
            begin, end = (small, large) if mode == "SAME_UPPER" else (large, small)
            output.append(pooled_size(size, k, s, d, begin, end))
            pads_begin.append(begin)
            pads_end.append(end)
        return WindowGeometry(output, kernel, strides, dilations, pads_begin, pads_end)
    if mode == "VALID":
        pads = [0] * (2 * rank)
    elif mode == "NOTSET":
        pads = per_axis(attrs, "pads", 2 * rank, 0)
    else:
        raise RuntimeError(f"unknown auto_pad '{mode}': expected NOTSET, SAME_UPPER, SAME_LOWER or VALID")
    pads_begin, pads_end = pads[:rank], pads[rank:]
    output = [
        pooled_size(size, k, s, d, b, e, ceil_mode)
        for size, k, s, d, b, e in zip(input_spatial, kernel, strides, dilations, pads_begin, pads_end)
    ]
    return WindowGeometry(output, kernel, strides, dilations, pads_begin, pads_end)


class TransposeGeometry(NamedTuple):
    """Where ConvTranspose writes: the output is ``full[pads_begin : pads_begin + output]`` per axis,
    ``full`` being the uncropped scatter of length ``stride * (in - 1) + output_padding + (k - 1) * d + 1``
    (zeros past its end)."""

    output: list[int]
    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pads_begin: list[int]
    output_padding: list[int]


def transpose_geometry(input_spatial, kernel, attrs: dict) -> TransposeGeometry:
    """Resolves ConvTranspose's ``output_shape``/``auto_pad``/``pads`` to an output size and a crop.

    With ``output_shape`` (or ``SAME_*``) the total padding ``full - output`` is split as the ONNX spec
    and onnxruntime do: ``SAME_UPPER`` puts ``total // 2`` at the beginning, anything else the rest.
    """
    rank = len(input_spatial)
    kernel = [int(k) for k in kernel]
    strides = per_axis(attrs, "strides", rank, 1)
    dilations = per_axis(attrs, "dilations", rank, 1)
    output_padding = per_axis(attrs, "output_padding", rank, 0)
    full = [
        s * (size - 1) + p + (k - 1) * d + 1
        for size, k, s, d, p in zip(input_spatial, kernel, strides, dilations, output_padding)
    ]
    mode = auto_pad_mode(attrs)
    requested = attrs.get("output_shape")
    if requested is not None and len(requested) > 0:
        if len(requested) != rank:
            raise RuntimeError(
                f"ConvTranspose: output_shape {list(requested)} must give one size per spatial axis ({rank})"
            )
        output = [int(v) for v in requested]
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        # The spec asks for size * stride; onnxruntime never grows the output past ``full``.
        output = [min(size * s, f) for size, s, f in zip(input_spatial, strides, full)]
    else:
        pads = [0] * (2 * rank) if mode == "VALID" else per_axis(attrs, "pads", 2 * rank, 0)
        output = [f - pads[i] - pads[rank + i] for i, f in enumerate(full)]
        return TransposeGeometry(output, kernel, strides, dilations, pads[:rank], output_padding)
    pads_begin = []
    for f, out in zip(full, output):
        total = max(0, f - out)
        pads_begin.append(total // 2 if mode == "SAME_UPPER" else total - total // 2)
    return TransposeGeometry(output, kernel, strides, dilations, pads_begin, output_padding)
