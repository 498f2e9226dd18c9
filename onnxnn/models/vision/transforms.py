"""ImageNet preprocessing as torchvision's weights apply it, on numpy arrays (no PIL needed)."""

from __future__ import annotations

import numpy as np

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "resize", "center_crop", "normalize", "imagenet_preprocess"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _check_image(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim != 3:
        raise ValueError(f"expected an image of shape (height, width, channels), got shape {image.shape}")
    return image


def _resampling_weights(new: int, old: int) -> np.ndarray:
    """The (new, old) matrix of antialiased bilinear resampling along one axis.

    A triangle filter widened by the scale when shrinking (so every source pixel contributes, as
    PIL and torchvision's ``antialias=True`` do), centred on half-pixel positions; each row is
    normalized to sum to one, which also handles the edges.
    """
    scale = old / new
    support = max(scale, 1.0)
    centers = (np.arange(new) + 0.5) * scale
    positions = np.arange(old) + 0.5
    weights = np.maximum(0.0, 1.0 - np.abs(positions[None, :] - centers[:, None]) / support)
    return (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)


def resize(image: np.ndarray, size: int) -> np.ndarray:
    """Resizes so the shorter side is ``size``, keeping the aspect ratio (antialiased bilinear).

    Matches torchvision's ``Resize(size, antialias=True)`` on float images. ``image`` is
    (height, width, channels), uint8 or float; the result is float32 in the input's range.
    """
    image = _check_image(image).astype(np.float32)
    height, width = image.shape[:2]
    if height <= width:
        new_h, new_w = size, max(1, int(size * width / height))
    else:
        new_h, new_w = max(1, int(size * height / width)), size
    rows = _resampling_weights(new_h, height)
    columns = _resampling_weights(new_w, width)
    return np.einsum("ih,hwc,jw->ijc", rows, image, columns, optimize=True).astype(np.float32)


def center_crop(image: np.ndarray, size: int) -> np.ndarray:
    """The central ``size`` x ``size`` window of a (height, width, channels) image."""
    image = _check_image(image)
    height, width = image.shape[:2]
    if height < size or width < size:
        raise ValueError(f"cannot crop {size}x{size} from an image of {height}x{width}")
    top = int(round((height - size) / 2.0))
    left = int(round((width - size) / 2.0))
    return image[top : top + size, left : left + size]


def normalize(image: np.ndarray, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> np.ndarray:
    """(height, width, channels) in [0, 1] -> (channels, height, width) float32 with per-channel mean/std removed."""
    image = _check_image(image).astype(np.float32)
    mean = np.asarray(mean, dtype=np.float32)
    std = np.asarray(std, dtype=np.float32)
    return ((image - mean) / std).transpose(2, 0, 1)


def imagenet_preprocess(image: np.ndarray, resize_size: int = 256, crop_size: int = 224) -> np.ndarray:
    """torchvision's ``ImageClassification`` preset: resize, center crop, scale to [0, 1], normalize.

    Args:
        image: (height, width, 3) uint8 RGB (or float in [0, 255]).

    Returns:
        A float32 (3, crop_size, crop_size) array; stack several for a batch.
    """
    image = center_crop(resize(image, resize_size), crop_size)
    return normalize(image / 255.0)
