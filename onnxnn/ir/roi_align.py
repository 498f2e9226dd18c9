"""ONNX RoiAlign's sampling written once: which input pixels each output reads, and with what weight.

``roi_align_taps`` turns the regions (``rois``, ``batch_indices``) into a table of bilinear taps,
computed on the host with numpy exactly as ONNX's reference implementation (and onnxruntime) do:
each output bin ``(ph, pw)`` of region ``r`` averages (``mode="avg"``) or takes the maximum
(``mode="max"``) of a ``grid_h x grid_w`` lattice of sample points; each sample reads the 4 pixels
around it with bilinear weights, a sample more than one pixel outside the input reads zero, and
one between the edge and that margin is clamped onto the edge. ``sampling_ratio=0`` picks
``ceil(roi size / output size)`` samples per bin for each region, so regions may have different
lattices: the table pads every region to the largest, marking the padding invalid.

The kernels executor gathers with the table (onnxnn/kernels/detection.py); the gradient rule
records the same gather as standard ops and differentiates it (onnxnn/runtime/ops/detection.py),
so the forward the kernels compute and the one the gradient describes cannot disagree. Max mode
follows the reference: a sample's value is the largest of its 4 weighted taps, not their sum.

This module imports nothing of onnxnn's, so kernels and gradient rules may both use it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["RoiAlignTaps", "roi_align_taps", "roi_align_attributes"]


class RoiAlignTaps(NamedTuple):
    """The sampling table of a RoiAlign node; ``M = output_height * output_width * samples * 4``."""

    positions: np.ndarray  # (R, M) int64: flat ``y * width + x`` index into the region's image
    weights: np.ndarray  # (R, M) float64: bilinear weight of each tap (0 outside or for padding)
    valid: np.ndarray  # (R, output_height, output_width, samples) bool: real (not padding) samples
    counts: np.ndarray  # (R,) float64: the divisor of mode "avg" (at least 1)
    samples: int  # lattice points per bin after padding (at least 1)


def _text(value, default: str) -> str:
    if value is None:
        return default
    return (value.decode() if isinstance(value, bytes) else str(value)).lower()


def roi_align_attributes(attrs: dict) -> dict:
    """The node's attributes with ONNX's defaults (opset 16+: ``half_pixel`` coordinates)."""
    return {
        "mode": _text(attrs.get("mode"), "avg"),
        "half_pixel": _text(attrs.get("coordinate_transformation_mode"), "half_pixel") == "half_pixel",
        "output_height": int(attrs.get("output_height", 1)),
        "output_width": int(attrs.get("output_width", 1)),
        "sampling_ratio": int(attrs.get("sampling_ratio", 0)),
        "spatial_scale": float(attrs.get("spatial_scale", 1.0)),
    }


def _axis_samples(start: float, size: float, bins: int, grid: int) -> np.ndarray:
    """Sample coordinates ``(bins, grid)`` along one axis of a region."""
    bin_size = size / bins
    return start + np.arange(bins)[:, None] * bin_size + (np.arange(grid)[None, :] + 0.5) * bin_size / max(grid, 1)


def _bilinear(y: np.ndarray, x: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, weights), each ``(..., 4)``, of sample points ``y``, ``x`` as the reference reads them."""
    outside = (y < -1.0) | (y > height) | (x < -1.0) | (x > width)
    y, x = np.maximum(y, 0.0), np.maximum(x, 0.0)
    y_low, x_low = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    at_bottom, at_right = y_low >= height - 1, x_low >= width - 1
    y_low = np.where(at_bottom, height - 1, y_low)
    x_low = np.where(at_right, width - 1, x_low)
    y_high = np.where(at_bottom, y_low, y_low + 1)
    x_high = np.where(at_right, x_low, x_low + 1)
    ly = np.where(at_bottom, 0.0, y - y_low)
    lx = np.where(at_right, 0.0, x - x_low)
    hy, hx = 1.0 - ly, 1.0 - lx
    positions = np.stack(
        [y_low * width + x_low, y_low * width + x_high, y_high * width + x_low, y_high * width + x_high], axis=-1
    )
    weights = np.stack([hy * hx, hy * lx, ly * hx, ly * lx], axis=-1)
    positions = np.where(outside[..., None], 0, positions)
    weights = np.where(outside[..., None], 0.0, weights)
    return positions, weights


def roi_align_taps(rois: np.ndarray, height: int, width: int, attrs: dict) -> RoiAlignTaps:
    """The sampling table of RoiAlign over ``(height, width)`` images for ``rois`` ``(R, 4)``.

    Args:
        rois: region corners ``(x1, y1, x2, y2)`` in input coordinates (before ``spatial_scale``).
        height, width: the input's spatial size.
        attrs: the node's attributes (ONNX names; ``roi_align_attributes`` fills the defaults).
    """
    a = roi_align_attributes(attrs)
    out_h, out_w = a["output_height"], a["output_width"]
    boxes = np.asarray(rois, dtype=np.float64).reshape(-1, 4) * a["spatial_scale"] - (0.5 if a["half_pixel"] else 0.0)
    regions = boxes.shape[0]
    lattices, counts = [], np.ones(regions)
    for r in range(regions):
        start_w, start_h, end_w, end_h = boxes[r]
        roi_w, roi_h = end_w - start_w, end_h - start_h
        if not a["half_pixel"]:  # malformed regions are forced to 1 x 1
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        ratio = a["sampling_ratio"]
        grid_h = ratio if ratio > 0 else math.ceil(roi_h / out_h)
        grid_w = ratio if ratio > 0 else math.ceil(roi_w / out_w)
        counts[r] = max(grid_h * grid_w, 1)
        grid_h, grid_w = max(grid_h, 0), max(grid_w, 0)
        lattices.append((_axis_samples(start_h, roi_h, out_h, grid_h), _axis_samples(start_w, roi_w, out_w, grid_w)))
    samples = max([ys.shape[1] * xs.shape[1] for ys, xs in lattices] + [1])
    positions = np.zeros((regions, out_h, out_w, samples, 4), dtype=np.int64)
    weights = np.zeros((regions, out_h, out_w, samples, 4))
    valid = np.zeros((regions, out_h, out_w, samples), dtype=bool)
    for r, (ys, xs) in enumerate(lattices):
        # (out_h, out_w, grid_h, grid_w): bin (ph, pw), then sample (iy, ix), ix fastest as the reference.
        y = np.broadcast_to(ys[:, None, :, None], (out_h, out_w, ys.shape[1], xs.shape[1]))
        x = np.broadcast_to(xs[None, :, None, :], y.shape)
        count = ys.shape[1] * xs.shape[1]
        region_positions, region_weights = _bilinear(y, x, height, width)
        positions[r, :, :, :count] = region_positions.reshape(out_h, out_w, count, 4)
        weights[r, :, :, :count] = region_weights.reshape(out_h, out_w, count, 4)
        valid[r, :, :, :count] = True
    return RoiAlignTaps(positions.reshape(regions, -1), weights.reshape(regions, -1), valid, counts, samples)
