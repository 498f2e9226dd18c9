"""Where ONNX Resize samples: each output position's source coordinate, and nearest's rounding.

One truth for the kernels executor's Resize (``kernels/resize.py``) and its gradient rule
(``runtime/ops/resample.py``), which may not import each other. The formulas are onnxruntime's,
which serves imported models (and agrees with PyTorch, whose exported models they are): the
integer output size is the resized length of ``align_corners``, ``pytorch_half_pixel``,
``half_pixel_symmetric`` and ``tf_crop_and_resize`` (the specification's ``scale * input_size``,
which onnx's reference implementation takes, differs from it where that product is not an integer:
scale 0.6 of 4 is 2.4, and the coordinates of align_corners by up to a pixel). ``nearest`` computes
them in float32, as onnxruntime does: ``3 / float32(0.6)`` is 5.0 there and 4.9999998 in float64, a
whole pixel apart after a floor. The interpolating modes keep float64, within rounding of it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["source_coordinates", "nearest_indices"]


def source_coordinates(
    mode: str,
    output_size: int,
    input_size: int,
    scale: float,
    roi_begin: float = 0.0,
    roi_end: float = 1.0,
    nearest: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The input coordinate (as float64 values, of float32 arithmetic for ``nearest``) each output
    position samples along one axis, and for ``tf_crop_and_resize`` the mask of positions outside
    the input (else None)."""
    _F = np.float32 if nearest else np.float64
    y: np.ndarray = np.arange(output_size, dtype=_F)
    scale_, half = _F(scale), _F(0.5)
    length, original = _F(output_size), _F(input_size)
    outside = None
    if mode == "half_pixel":
        x = (y + half) / scale_ - half
    elif mode == "half_pixel_symmetric":
        adjustment = length / (scale_ * original)
        offset = original / _F(2) * (_F(1) - adjustment)
        x = offset + (y + half) / scale_ - half
    elif mode == "pytorch_half_pixel":
        x = (y + half) / scale_ - half if output_size > 1 else np.zeros(output_size, _F)
    elif mode == "align_corners":
        x = y * (original - _F(1)) / (length - _F(1)) if output_size > 1 else np.zeros(output_size, _F)
    elif mode == "asymmetric":
        x = y / scale_
    elif mode == "tf_crop_and_resize":
        begin, end = _F(roi_begin), _F(roi_end)
        if output_size > 1:
            x = begin * (original - _F(1)) + y * (end - begin) * (original - _F(1)) / (length - _F(1))
        else:
            x = np.full(output_size, half * (begin + end) * (original - _F(1)), _F)
        outside = (x < 0) | (x > original - _F(1))
    else:
        raise ValueError(f"Resize: unknown coordinate_transformation_mode {mode!r}")
    return x.astype(np.float64), outside


def nearest_indices(x: np.ndarray, nearest_mode: str) -> np.ndarray:
    """The input index ``nearest`` reads at each source coordinate (not yet clamped to the input)."""
    floor = np.floor(x)
    fraction = x - floor
    if nearest_mode == "round_prefer_floor":
        index = np.where(fraction <= 0.5, floor, floor + 1)
    elif nearest_mode == "round_prefer_ceil":
        index = np.where(fraction < 0.5, floor, floor + 1)
    elif nearest_mode == "floor":
        index = floor
    elif nearest_mode == "ceil":
        index = np.ceil(x)
    else:
        raise ValueError(f"Resize: unknown nearest_mode {nearest_mode!r}")
    return index.astype(np.int64)
