"""A 2-d max pooling's gradient nodes as compiled loops (pooling_loops.c), called through ctypes.

onnxnn records max pooling's gradient as MaxPool again, with its Indices output, and a ScatterElements
adding the output gradient at those flat indices (runtime/ops/pooling.py). onnxruntime runs MaxPool
with Indices on another path than without it, and its ScatterElements one element at a time through a
general indexer: resnet18's 3x3 stride-2 pooling of 8 x 64 x 112 x 112, one thread, 48 ms for the first
(3.4 without Indices) and 12 ms for the second. The loops compute PyTorch's values in its order, in a
few milliseconds (a window's NaN wins, as in the sessions' form of MaxPool:
runtime/ops/max_pool_nan.py). onnxnn's sessions run the nodes they take between two sessions, through
their entries in ``ir.registry.compiled_forms`` (kernels/pooling.py, kernels/indexing.py), as
runtime/split_sessions.py does for the other compiled nodes.

The library is the layer loops' (setup.py); where it is missing, and while ``ENABLED`` is False
(``ONNXNN_COMPILED_POOLING=0``), onnxruntime runs the nodes, with the same values.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from ..ir.mode import switched_on_in_environment
from .compiled_updates import address
from .loop_libraries import LoopLibrary

__all__ = ["eligible_max_pool", "eligible_scatter_add", "max_pool_with_indices", "scatter_add", "available"]

ENABLED = switched_on_in_environment("ONNXNN_COMPILED_POOLING")

# The fewest elements of X (or of the scattered data) for which a node runs here: below, a session
# boundary (tens of microseconds) costs more than onnxruntime's kernel.
MIN_ELEMENTS = 1 << 16

_VERSION = 2
_FLOAT32 = np.dtype(np.float32)
_INT64 = np.dtype(np.int64)


class _Library(LoopLibrary):
    """pooling_loops.c's functions, loaded on first use, or why they are not used."""

    def __init__(self):
        super().__init__(
            f"{__package__}._layer_loops", "pooling_loops.c", _VERSION, "onnxruntime's kernels run instead"
        )
        self.max_pool = self.scatter_add = None

    def bind(self, library) -> None:
        self.max_pool = library.onnxnn_max_pool_2d_with_indices_float32
        self.max_pool.argtypes = [ctypes.c_void_p] * 4
        self.max_pool.restype = None
        self.scatter_add = library.onnxnn_scatter_add_float32
        self.scatter_add.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2
        self.scatter_add.restype = ctypes.c_int


_LOOPS = _Library()


def eligible_max_pool(x_shape: tuple, dtype, attrs: dict, outputs: int) -> bool:
    """Whether the loop takes a MaxPool node: both outputs, row-major indices, float32 X of two spatial
    axes and at least ``MIN_ELEMENTS`` elements; the library present."""
    return (
        outputs == 2
        and not attrs.get("storage_order", 0)
        and np.dtype(dtype) == _FLOAT32
        and len(x_shape) == 4
        and math.prod(x_shape) >= MIN_ELEMENTS
        and available()
    )


def eligible_scatter_add(data_shape: tuple, dtype, attrs: dict) -> bool:
    """Whether the loop takes a ScatterElements node: adding, over one axis, into float32 data of at least
    ``MIN_ELEMENTS`` elements; the library present."""
    return (
        attrs.get("reduction") == "add"
        and len(data_shape) == 1
        and np.dtype(dtype) == _FLOAT32
        and data_shape[0] >= MIN_ELEMENTS
        and available()
    )


def max_pool_with_indices(x: np.ndarray, kernel, strides, dilations, begins, output_spatial) -> list:
    """``[Y, Indices]`` of ONNX MaxPool over ``x`` (N, C, H, W): windows of ``kernel`` taps spaced by
    ``dilations``, ``strides`` apart, from ``begins`` before the input, ``output_spatial`` of them (the
    node's geometry, with its pads and ``ceil_mode`` resolved: kernels/pooling.py's ``_pool_geometry``)."""
    _LOOPS.get()
    x = np.asarray(x, dtype=_FLOAT32, order="C")
    batch, channels, height, width = x.shape
    y = np.empty((batch, channels, *output_spatial), _FLOAT32)
    indices = np.empty(y.shape, _INT64)
    geometry = np.array(
        [batch * channels, height, width, *output_spatial, *kernel, *strides, *dilations, *begins], np.int64
    )
    _LOOPS.max_pool(address(x), address(y), address(indices), address(geometry))
    return [y, indices]


def scatter_add(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """``data`` (one axis) with each of ``updates`` added at its index, in turn (ScatterElements with
    ``reduction="add"``; negative indices count from the end).

    Raises:
        IndexError: an index outside [-len(data), len(data)).
    """
    _LOOPS.get()
    data = np.asarray(data, dtype=_FLOAT32, order="C")
    indices = np.asarray(indices, dtype=_INT64, order="C").reshape(-1)
    updates = np.asarray(updates, dtype=_FLOAT32, order="C").reshape(-1)
    if indices.size != updates.size:
        raise ValueError(f"ScatterElements: {indices.size} indices for {updates.size} updates")
    out = np.empty_like(data)
    if _LOOPS.scatter_add(address(data), address(indices), address(updates), address(out), data.size, indices.size):
        raise IndexError(f"ScatterElements: an index lies outside [-{data.size}, {data.size}) (the data's length)")
    return out


def available() -> bool:
    """Whether eligible nodes run as the compiled loops in this process."""
    return ENABLED and _LOOPS.get() is not None


def unavailable_reason() -> str | None:
    """Why the compiled loops are not used (the library not built or not loading), or None."""
    _LOOPS.get()
    return _LOOPS.reason
