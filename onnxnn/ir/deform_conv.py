"""ONNX DeformConv's geometry, read alike by its kernel and its gradient rule.

``deform_conv_geometry`` fills the attributes' defaults and checks them against the shapes;
``deform_conv_base`` gives the undeformed tap coordinates, to which ``offset`` adds. The kernel
(onnxnn/kernels/detection.py) samples with numpy, the gradient rule (onnxnn/runtime/ops/detection.py)
records the same sampling as standard ops. Only 2-D DeformConv is supported (as in onnx's reference).

This module imports nothing of onnxnn's, so kernels and gradient rules may both use it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["deform_conv_geometry", "deform_conv_base"]


def deform_conv_geometry(x_shape: tuple, w_shape: tuple, offset_shape: tuple, attrs: dict) -> dict:
    """DeformConv's attributes with ONNX's defaults, checked against the input shapes (2-D only)."""
    if len(x_shape) != 4:
        raise NotImplementedError(f"DeformConv: only 2-D inputs (N, C, H, W) are supported, got shape {x_shape}")
    group, offset_group = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    kernel = [int(k) for k in (attrs.get("kernel_shape") or w_shape[2:])]
    strides = [int(s) for s in attrs.get("strides") or [1, 1]]
    dilations = [int(d) for d in attrs.get("dilations") or [1, 1]]
    pads = [int(p) for p in attrs.get("pads") or [0, 0, 0, 0]]
    if x_shape[1] != w_shape[1] * group or w_shape[0] % group or x_shape[1] % offset_group:
        raise ValueError(
            f"DeformConv: X {x_shape}, W {w_shape}, group {group} and offset_group {offset_group} are inconsistent"
        )
    if offset_shape[1] != offset_group * kernel[0] * kernel[1] * 2:
        raise ValueError(
            f"DeformConv: offset has {offset_shape[1]} channels, expected offset_group * kH * kW * 2 = "
            f"{offset_group * kernel[0] * kernel[1] * 2}"
        )
    return {
        "group": group,
        "offset_group": offset_group,
        "kernel": kernel,
        "strides": strides,
        "dilations": dilations,
        "pads": pads,
        "output": tuple(offset_shape[2:]),
    }


def deform_conv_base(geometry: dict) -> tuple[np.ndarray, np.ndarray]:
    """The undeformed tap coordinates ``(y, x)``, each ``(kH, kW, oH, oW)`` float64."""
    (kh, kw), (oh, ow) = geometry["kernel"], geometry["output"]
    (sh, sw), (dh, dw), pads = geometry["strides"], geometry["dilations"], geometry["pads"]
    y = -pads[0] + sh * np.arange(oh)[None, None, :, None] + dh * np.arange(kh)[:, None, None, None]
    x = -pads[1] + sw * np.arange(ow)[None, None, None, :] + dw * np.arange(kw)[None, :, None, None]
    shape = (kh, kw, oh, ow)
    return np.broadcast_to(y, shape).astype(np.float64), np.broadcast_to(x, shape).astype(np.float64)
