"""onnxnn's ``ConvWeightGradient`` op: its geometry, read alike by the shape rule, decomposition and kernel.

    ConvWeightGradient(X, G; kernel_shape, strides, dilations, pads, group) -> dW

For ``Y = Conv(X, W; group)`` with these kernel shape, strides, dilations and begin pads, and ``G``
a gradient of ``Y``, ``dW = d<Y, G>/dW`` of shape ``(M, C / group, *kernel_shape)`` (``X`` is
``(N, C, *in)``, ``G`` ``(N, M, *out)``). The tap at offset ``o`` of the kernel sees, at output
position ``p``, the input element ``o * dilation - pad_begin + p * stride``, so for one group each
tap is one ``(M, N*L) @ (N*L, C)`` product of ``G`` with a strided window of the padded input; with
several, output channel ``m`` sees only its group's input channels. ``pads`` holds the begin pads,
then the end pads that keep every window inside the padded input; ``group`` is 1 when absent.

This module imports nothing of onnxnn's, so the kernels and the runtime's rules may both use it.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple, Protocol

__all__ = ["OP_TYPE", "WeightGradientGeometry", "weight_gradient_geometry", "tap_starts", "end_pads"]

OP_TYPE = "ConvWeightGradient"


class WeightGradientGeometry(NamedTuple):
    """The node's attributes with ONNX's defaults filled in, per spatial axis."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pads_begin: list[int]
    pads_end: list[int]
    group: int = 1


def end_pads(input_spatial, output_spatial, kernel, strides, dilations, pads_begin) -> list[int]:
    """The fewest end pads that keep every tap's window inside the padded input, per axis."""
    return [
        max(0, (out - 1) * s + (k - 1) * d + 1 - size - b)
        for size, out, k, s, d, b in zip(input_spatial, output_spatial, kernel, strides, dilations, pads_begin)
    ]


def weight_gradient_geometry(x_shape: tuple, g_shape: tuple, attrs: dict) -> WeightGradientGeometry:
    """The node's geometry, checked against the shapes of ``X`` and ``G``.

    Raises:
        ValueError: naming what does not fit (ranks, batch sizes, attribute lengths, a group not
            dividing both channel counts, a window reaching past the padded input).
    """
    kernel = [int(k) for k in attrs.get("kernel_shape") or ()]
    rank = len(kernel)
    if rank == 0 or len(x_shape) != rank + 2 or len(g_shape) != rank + 2:
        raise ValueError(
            f"{OP_TYPE}: X {list(x_shape)} and G {list(g_shape)} must both have rank len(kernel_shape) + 2 "
            f"= {rank + 2} (kernel_shape {kernel})"
        )
    if x_shape[0] != g_shape[0]:
        raise ValueError(f"{OP_TYPE}: X {list(x_shape)} and G {list(g_shape)} differ in batch size")
    strides = [int(s) for s in attrs.get("strides") or [1] * rank]
    dilations = [int(d) for d in attrs.get("dilations") or [1] * rank]
    pads = [int(p) for p in attrs.get("pads") or [0] * (2 * rank)]
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ValueError(
            f"{OP_TYPE}: strides {strides} and dilations {dilations} need {rank} entries and pads {pads} "
            f"{2 * rank}, for kernel_shape {kernel}"
        )
    group = int(attrs.get("group", 1))
    if group < 1 or x_shape[1] % group or g_shape[1] % group:
        raise ValueError(
            f"{OP_TYPE}: group {group} must divide X's {x_shape[1]} and G's {g_shape[1]} channels "
            f"(X {list(x_shape)}, G {list(g_shape)})"
        )
    geometry = WeightGradientGeometry(kernel, strides, dilations, pads[:rank], pads[rank:], group)
    needed = end_pads(x_shape[2:], g_shape[2:], kernel, strides, dilations, geometry.pads_begin)
    if any(need > given for need, given in zip(needed, geometry.pads_end)):
        raise ValueError(
            f"{OP_TYPE}: G's {list(g_shape[2:])} positions of kernel {kernel} (strides {strides}, dilations "
            f"{dilations}) reach past X's {list(x_shape[2:])} with pads {pads}"
        )
    return geometry


class TapGeometry(Protocol):
    """What ``tap_starts`` reads of a window geometry (this op's, or a Conv's ``WindowGeometry``)."""

    @property
    def kernel(self) -> list[int]: ...

    @property
    def dilations(self) -> list[int]: ...


def tap_starts(geometry: TapGeometry) -> list[list[int]]:
    """Per kernel tap, in row-major order, where its window starts along each spatial axis of the padded
    input: ``offset * dilation``. The window takes every ``stride``-th element, one per output position."""
    return [
        [offset * d for offset, d in zip(offsets, geometry.dilations)]
        for offsets in itertools.product(*(range(k) for k in geometry.kernel))
    ]
