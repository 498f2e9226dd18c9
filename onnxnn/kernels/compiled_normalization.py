"""Batch normalization's training passes and the gradients of ReLU and Hardtanh as compiled loops
(normalization_loops.c), called through ctypes.

A training step's batch normalization is a ``BatchNormalizationTraining`` node and, in its backward,
a ``BatchNormalizationTrainingGradient`` node; ReLU's gradient is a ``ReluGradient`` node and
Hardtanh's (ReLU6's) a ``HardtanhGradient`` node (runtime/ops/batch_norm_training.py,
runtime/ops/relu_gradient.py, runtime/ops/hardtanh.py). onnxruntime runs them as the graphs they
decompose into: statistics, centering, squares and the normalization as separate passes over the
activations, and an activation's gradient as comparisons and a Where. The loops read each
channel's planes once from memory and again from the cache (a small ResNet's 16-channel layer, 32
samples at 32x32, one thread: forward 0.80 -> 0.25 ms, ReLU's gradient 0.74 -> 0.27 ms).

onnxnn's CPU sessions run eligible nodes here through their entries in ``ir.registry.compiled_forms``
(runtime/split_sessions.py), on as many threads as the sessions: the calling one and a pool's, kept
between calls (loop_threads.c), each taking the next few channels (ranges of elements for an
activation's gradient) not yet taken, so the results do not depend on their number. A ReLU or a
Hardtanh is folded into the loops on both sides: the forward writes the activation's output where
it alone reads the normalization's (``ir.registry.compiled_readers``), and the gradient masks the
incoming gradient with it. An activation is given as its ``bounds``, ``(low, high)``: ReLU's
``(0.0, None)``, no upper bound. The library is the convolution
loops' (setup.py); where it is missing, and while ``ENABLED`` is False
(``ONNXNN_COMPILED_NORMALIZATION=0``), the nodes run as onnxruntime graphs, to the same values up to
float32 rounding.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from ..ir.mode import switched_on_in_environment
from .compiled_updates import address
from .loop_libraries import LoopLibrary
from .recycled_buffers import recycled_empty

__all__ = [
    "eligible",
    "batch_norm_training",
    "batch_norm_training_gradient",
    "activation_gradient",
    "RELU_BOUNDS",
    "available",
    "unavailable_reason",
]

# A ReLU's bounds: below 0 is 0, no upper bound.
RELU_BOUNDS = (0.0, None)

ENABLED = switched_on_in_environment("ONNXNN_COMPILED_NORMALIZATION")

# The fewest elements for which a node runs here. Running it between two onnxruntime sessions costs a
# session boundary (tens of microseconds), which a pass over fewer elements does not repay.
MIN_ELEMENTS = 1 << 16
# The smallest plane (product of the spatial sizes) batch normalization runs here for: the loops walk a
# channel's planes, so an input without spatial axes, (N, C), would read one element per plane.
MIN_PLANE = 16

_VERSION = 7
# normalization_loops.c's activations.
_NO_ACTIVATION, _RELU, _CLAMP = 0, 1, 2
_FLOAT32 = np.dtype(np.float32)
_POINTER, _SIZE, _FLOAT, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int


class _Library(LoopLibrary):
    """normalization_loops.c's functions, loaded on first use, or why they are not used."""

    def __init__(self):
        super().__init__(
            f"{__package__}._layer_loops", "normalization_loops.c", _VERSION, "onnxruntime's graphs run instead"
        )
        self.forward = self.gradient = self.activation_gradient = None

    def bind(self, library) -> None:
        activation = [_INT, _FLOAT, _FLOAT, _INT]  # the activation, its low and high bounds, the threads
        self.forward = library.onnxnn_batch_norm_training_float32
        self.forward.argtypes = [_POINTER] * 7 + [_SIZE] * 3 + [_FLOAT] + activation
        self.gradient = library.onnxnn_batch_norm_training_gradient_float32
        self.gradient.argtypes = [_POINTER] * 9 + [_SIZE] * 3 + [_FLOAT] + activation
        self.activation_gradient = library.onnxnn_activation_gradient_float32
        self.activation_gradient.argtypes = [_POINTER] * 3 + [_SIZE] + activation
        for function in (self.forward, self.gradient, self.activation_gradient):
            function.restype = _INT


_LOOPS = _Library()


def eligible(shape: tuple, dtype, per_channel: bool = True) -> bool:
    """Whether the loops take a node whose (first) input has this shape and dtype.

    float32, at least ``MIN_ELEMENTS`` elements, and with ``per_channel`` (batch normalization) spatial
    axes of at least ``MIN_PLANE`` elements in all; the library present and ``ENABLED``.
    """
    if np.dtype(dtype) != _FLOAT32 or math.prod(shape) < MIN_ELEMENTS:
        return False
    if per_channel and (len(shape) < 3 or math.prod(shape[2:]) < MIN_PLANE):
        return False
    return available()


def batch_norm_training(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    epsilon: float,
    threads: int = 1,
    bounds: tuple | None = None,
    residual: np.ndarray | None = None,
) -> list:
    """``[Y, mean, variance]``: ``x`` (N, C, ...) normalized with its per-channel batch statistics (the
    biased variance), scaled and shifted per channel; with ``residual`` (``x``'s shape), Y + residual in
    place of Y (rounded once, as onnxruntime's Add); with ``bounds`` (``(low, high)``, ``high`` None for
    none), then that clamped to them in place of it, as onnxruntime's Relu and Clip (below ``low`` is
    ``low``, then above ``high`` is ``high``; NaN and -0 kept). A residual sum takes ``RELU_BOUNDS`` only."""
    _LOOPS.get()
    x, scale, bias = _float32(x), _float32(scale), _float32(bias)
    added = None if residual is None else _float32(residual)
    y, mean, variance = _outputs(x)
    batch, channels, plane = _layout(x)
    activation, low, high = _activation(bounds)
    _check(
        _LOOPS.forward(address(x), address(scale), address(bias), _address_or_null(added), address(y),
                       address(mean), address(variance), batch, channels, plane, epsilon, activation, low, high,
                       threads),
        "BatchNormalizationTraining",
    )  # fmt: skip
    return [y, mean, variance]


def batch_norm_training_gradient(
    g: np.ndarray, x: np.ndarray, scale: np.ndarray, mean: np.ndarray, variance: np.ndarray, epsilon: float,
    threads: int = 1, activation_output: np.ndarray | None = None, bounds: tuple = RELU_BOUNDS,
) -> list:  # fmt: skip
    """``[dX, dscale, dB]`` of ``batch_norm_training(x, scale, B, epsilon)`` for the output gradient ``g``,
    from the forward's ``mean`` and ``variance``; with ``activation_output``, for 0 where it is at most
    ``bounds``' low or at least its high, else ``g`` (``g`` then reaches a ReLU or a Hardtanh of the
    normalization's output: ``activation_output`` is that activation's output)."""
    _LOOPS.get()
    g, x = _float32(g), _float32(x)
    scale, mean, variance = _float32(scale), _float32(mean), _float32(variance)
    mask = None if activation_output is None else _float32(activation_output)
    dx, scale_gradient, bias_gradient = _outputs(x)
    batch, channels, plane = _layout(x)
    activation, low, high = _activation(None if mask is None else bounds)
    _check(
        _LOOPS.gradient(address(g), address(x), address(scale), address(mean), address(variance),
                        _address_or_null(mask), address(dx), address(scale_gradient), address(bias_gradient),
                        batch, channels, plane, epsilon, activation, low, high, threads),
        "BatchNormalizationTrainingGradient",
    )  # fmt: skip
    return [dx, scale_gradient, bias_gradient]


def activation_gradient(g: np.ndarray, output: np.ndarray, bounds: tuple, threads: int = 1) -> np.ndarray:
    """0 where ``output`` is at most ``bounds``' low or at least its high (None: no upper bound), else ``g``,
    NaN passing ``g``: the gradient of a ReLU (``RELU_BOUNDS``) or a Hardtanh from its ``output`` (the
    shapes are equal)."""
    _LOOPS.get()
    g, output = _float32(g), _float32(output)
    dx = recycled_empty(g.shape, _FLOAT32)
    activation, low, high = _activation(bounds)
    status = _LOOPS.activation_gradient(
        address(g), address(output), address(dx), g.size, activation, low, high, threads
    )
    _check(status, "ReluGradient" if activation == _RELU else "HardtanhGradient")
    return dx


def _activation(bounds: tuple | None) -> tuple:
    """normalization_loops.c's activation and its bounds for ``bounds``: none, a ReLU's or a clamp's."""
    if bounds is None:
        return _NO_ACTIVATION, 0.0, 0.0
    low, high = bounds
    if high is None:
        if low != 0:
            raise ValueError(f"the loops take a lower bound alone only at 0 (a ReLU), got {low}")
        return _RELU, 0.0, 0.0
    return _CLAMP, float(low), float(high)


def available() -> bool:
    """Whether eligible nodes run as the compiled loops in this process."""
    return ENABLED and _LOOPS.get() is not None


def unavailable_reason() -> str | None:
    """Why the compiled loops are not used (the library not built or not loading), or None."""
    _LOOPS.get()
    return _LOOPS.reason


def _float32(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, dtype=_FLOAT32, order="C")


def _outputs(x: np.ndarray) -> tuple:
    """A loop's results for ``x`` (N, C, ...): one array of ``x``'s shape (recycled) and two of (C,)."""
    return recycled_empty(x.shape, _FLOAT32), np.empty(x.shape[1], _FLOAT32), np.empty(x.shape[1], _FLOAT32)


def _address_or_null(array: np.ndarray | None) -> int | None:
    """An optional array's address for the loop, None (NULL) where it is absent."""
    return None if array is None else address(array)


def _layout(x: np.ndarray) -> tuple:
    """(N, C, S) for ``x`` of shape (N, C, *spatial)."""
    return x.shape[0], x.shape[1], math.prod(x.shape[2:])


def _check(status: int, op_type: str) -> None:
    if status == -1:
        raise ValueError(f"{op_type}: the compiled loop takes no such activation")
    if status:
        raise RuntimeError(f"{op_type}: the compiled loop could not start its threads")
