"""A 2-d convolution's weight gradient as one compiled loop (convolution_loops.c, depthwise_loops.c), called
through ctypes.

onnxnn records a convolution's weight gradient as one ``ConvWeightGradient`` node
(ir/conv_weight_gradient.py); onnxruntime runs it as a GEMM per kernel tap over a copied, shifted
window of the input. With few channels those GEMMs are small (16 x 16 results summing 32,768
products for a 16-channel layer on 32x32 images) and spend most of their time copying: the loop
takes a third of their time there (benchmarks/bench_conv_gradients.py). With many channels the
GEMMs are efficient: the loop runs for layers of at most ``COMPILED_MAX_CHANNELS`` input and
output channels, wider ones only on the AVX-512 build and over planes of at least
``WIDE_MIN_OUTPUT_POSITIONS`` positions, and always of at least ``COMPILED_MIN_CHANNELS`` input
channels. Depthwise convolutions' (as many groups as input channels), which onnxruntime
runs as one grouped Conv whose kernel is the output gradient, take their own loop at any channel
count (depthwise_loops.c: a 96-channel 3x3 layer on 56x56 images, batch 8, 24 ms -> 1 ms).

It is used by onnxnn's kernels (kernels/conv.py, on one thread) and, for onnxruntime's graphs,
through its entry in ``ir.registry.compiled_forms`` by runtime/split_sessions.py, which runs a
graph's eligible weight gradients here between two sessions, on as many threads as the sessions.

The library is built when onnxnn is installed, where a C compiler is present (setup.py); where it
is missing, and while ``ENABLED`` is False (``ONNXNN_COMPILED_CONVOLUTIONS=0``), the weight
gradients run as before, to the same values up to float32 rounding.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from ..ir.conv_weight_gradient import WeightGradientGeometry
from ..ir.mode import switched_on_in_environment
from .loop_libraries import LoopLibrary

__all__ = ["eligible", "weight_gradient", "available", "unavailable_reason", "use_build", "running_build", "BUILDS"]

ENABLED = switched_on_in_environment("ONNXNN_COMPILED_CONVOLUTIONS")

# The most input or output channels for which the loop runs. One thread, the loop's time against
# onnxruntime's GEMMs per tap: 3 -> 16 channels on 32x32 images (batch 32) 0.76, 16 -> 16 0.34,
# 32 -> 32 on 16x16 0.56, 64 -> 64 on 56x56 0.69 (batch 32) and 16x16 0.85 (batch 8); but
# 64 -> 128 (stride 2) 1.07, 128 -> 128 on 8x8 1.08, 256 -> 256 on 14x14 1.08, and on 2x2 images 2.1.
# A whole gradient call (benchmarks/bench_conv_gradients.py, batch 32 at 32x32 unless said): 16 ->
# 16 7.1 -> 3.0 ms, 32 -> 32 on 16x16 3.8 -> 2.5, 16 -> 32 stride 2 3.6 -> 2.1, 8 -> 16 4.6 -> 2.1,
# resnet18's 64 -> 64 at 56x56 (batch 8) 32.7 -> 23.6; 256 -> 256 at 14x14 20.6 against 20.7.
COMPILED_MAX_CHANNELS = 64
# With AVX-512 (three taps' sums at once) the loop beats those GEMMs for wider layers too, unless G's
# planes are tiny. One thread, batch 8, the loop's time against the GEMMs': 128 channels at 8x8
# 0.84, at 28x28 0.69; 256 at 7x7 0.88, at 14x14 0.82; 512 at 7x7 0.90 (batch 32: 0.86); 128 -> 256
# stride 2 0.77, its 1x1 downsampling 0.94; but 512 at 4x4 1.35 and at 2x2 1.9. The AVX2 build takes
# 1.1-1.7x the GEMMs' time for all of them, so it keeps to ``COMPILED_MAX_CHANNELS``.
WIDE_MIN_OUTPUT_POSITIONS = 49
# The fewest input channels for which it runs. A grayscale input's weight gradient is one small
# GEMM over all the taps' windows, where the loop would copy all of G channels-last for one
# channel's products (64 x 1 x 28 x 28 images, 32 output channels: a whole step's gradient call
# 3.2 ms against 4.4); an RGB input's gains (2.0 -> 1.65 ms).
COMPILED_MIN_CHANNELS = 3

# convolution_loops.c's CONVOLUTION_LOOPS_VERSION, which changes with its functions' signatures.
_VERSION = 4
_LIBRARY = f"{__package__}._layer_loops"
_FLOAT32 = np.dtype(np.float32)
# The loop's builds, best first, as convolution_loops.c numbers them.
BUILDS = ("avx512", "avx2", "baseline")


class _Library(LoopLibrary):
    """convolution_loops.c's weight gradient, loaded on first use, or why it is not used."""

    def __init__(self):
        super().__init__(_LIBRARY, "convolution_loops.c", _VERSION, "onnxruntime's GEMMs run instead")
        self.function = None
        self.depthwise = None
        self.use_build = None
        self.chosen_build = None
        self.baseline_only = False

    def bind(self, library) -> None:
        # Each: X, G, dW and the geometry's 15 int64 values, by address; the most threads to use.
        self.function = library.onnxnn_conv_weight_gradient_float32
        self.depthwise = library.onnxnn_depthwise_weight_gradient_float32
        for function in (self.function, self.depthwise):
            function.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
            function.restype = ctypes.c_int
        self.use_build = library.onnxnn_convolution_loops_use_build
        self.use_build.argtypes = [ctypes.c_int]
        self.use_build.restype = ctypes.c_int
        self.chosen_build = library.onnxnn_convolution_loops_chosen_build
        self.chosen_build.restype = ctypes.c_int
        if BUILDS[library.onnxnn_convolution_loops_best_build()] == "baseline":
            # Without AVX2 the loop's 4-wide vectors lose to onnxruntime's GEMMs (16 -> 16 channels:
            # 6.0 ms against 4.5); the tests still check that build's values (use_build).
            self.reason = "this CPU runs only the loop's baseline build, slower than onnxruntime's GEMMs"
            self.baseline_only = True


_LOOP = _Library()


def eligible(x_shape: tuple, g_shape: tuple, dtype, group: int = 1) -> bool:
    """Whether a loop computes the weight gradient of X and G with these shapes, dtype and group count.

    float32, one or two spatial axes, the library present and ``ENABLED``; then either one group and
    at least ``COMPILED_MIN_CHANNELS`` channels in X, with at most ``COMPILED_MAX_CHANNELS`` in X and
    in G or, on the AVX-512 build, G's planes of at least ``WIDE_MIN_OUTPUT_POSITIONS`` positions; or
    a depthwise convolution (as many groups as X has channels).
    """
    if np.dtype(dtype) != _FLOAT32 or len(x_shape) not in (3, 4) or len(g_shape) != len(x_shape):
        return False
    if group == 1:
        shapes_taken = COMPILED_MIN_CHANNELS <= x_shape[1] and (
            (x_shape[1] <= COMPILED_MAX_CHANNELS and g_shape[1] <= COMPILED_MAX_CHANNELS)
            or (math.prod(g_shape[2:]) >= WIDE_MIN_OUTPUT_POSITIONS and running_build() == "avx512")
        )
    else:
        shapes_taken = group == x_shape[1] and g_shape[1] % group == 0
    return shapes_taken and available()


def weight_gradient(x: np.ndarray, g: np.ndarray, geometry: WeightGradientGeometry, threads: int = 1) -> np.ndarray:
    """``dW`` of shape ``(M, C / group, *kernel)`` for X ``(N, C, *in)`` and G ``(N, M, *out)`` (``eligible`` ones).

    ``geometry`` is the node's, checked against the shapes (``weight_gradient_geometry``). Up to
    ``threads`` threads share the work (fewer for small layers: one for at least four million products;
    the threads are a pool's, kept between calls: loop_threads.c). One group: the work is cut into a
    range of samples per thread, each summed on its own, so the last bits depend on how many threads
    were asked for, as a threaded GEMM's do (not on which thread ran which range); depthwise: into
    ranges of output channels. Where the system refuses a thread, fewer run, to the same values.

    Raises:
        MemoryError: the loop's buffers (copies of a group of samples, or of one channel's planes) could
            not be allocated.
    """
    _LOOP.get()
    depthwise = geometry.group > 1
    function = _LOOP.depthwise if depthwise else _LOOP.function
    x = np.asarray(x, dtype=_FLOAT32, order="C")
    g = np.asarray(g, dtype=_FLOAT32, order="C")
    kernel, strides, dilations, pads = geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin
    if x.ndim == 3:  # one spatial axis: a height of one
        x, g = x[:, :, None, :], g[:, :, None, :]
        kernel, strides, dilations, pads = [1, *kernel], [1, *strides], [1, *dilations], [0, *pads]
    result = np.empty((g.shape[1], x.shape[1] // geometry.group, *geometry.kernel), dtype=_FLOAT32)
    sizes = np.array([*x.shape, *g.shape[1:], *kernel, *strides, *dilations, *pads], dtype=np.int64)
    status = function(x.ctypes.data, g.ctypes.data, result.ctypes.data, sizes.ctypes.data, threads)
    if status == 1:
        raise MemoryError(f"ConvWeightGradient: no memory for the compiled loop's buffers (X of shape {list(x.shape)})")
    if status:
        raise RuntimeError(f"ConvWeightGradient: the compiled loop could not start its {threads} threads")
    return result


def use_build(name: str | None) -> bool:
    """Makes the loop run its ``name`` build (one of ``BUILDS``; None: the best this CPU runs).

    For testing each build on one machine. Returns False, changing nothing, where the CPU cannot run it.
    """
    if _LOOP.get() is None:
        return False
    return _LOOP.use_build(-1 if name is None else BUILDS.index(name)) == 0


def running_build() -> str | None:
    """The build the loop runs (one of ``BUILDS``: ``use_build``'s choice, else the best this CPU
    runs), or None without the library."""
    if _LOOP.get() is None:
        return None
    return BUILDS[_LOOP.chosen_build()]


def available() -> bool:
    """Whether eligible weight gradients run as the compiled loop in this process."""
    return ENABLED and _LOOP.get() is not None and not _LOOP.baseline_only


def unavailable_reason() -> str | None:
    """Why the compiled loop is not used (the library not built or not loading, a CPU without AVX2), or None."""
    _LOOP.get()
    return _LOOP.reason
