"""Floating-point modes PyTorch scripts set globally: subnormal flushing and float32 matmul precision."""

from __future__ import annotations

import warnings

from .ir.caches import clear_caches
from .ir.mode import MODE
from .kernels.float_modes import set_thread_flush_denormal

__all__ = ["set_flush_denormal", "set_float32_matmul_precision", "get_float32_matmul_precision"]


def set_flush_denormal(mode: bool) -> bool:
    """Disables denormal floating numbers on the CPU.

    Arithmetic on subnormal numbers (magnitudes below ``torch.finfo(dtype).tiny``) is many times
    slower on most CPUs; with ``mode=True`` such results become zero and such inputs read as zero.
    The mode applies to the calling thread (numpy, onnxnn's kernels, one-threaded sessions), to the
    thread pools of the onnxruntime sessions built from then on (the cached ones are dropped) and
    to the threads sharing the optimizers' updates. Like PyTorch's, it leaves other threads as they
    are.

    Args:
        mode: flush subnormal numbers to zero (True), or keep them (False, the default).

    Returns:
        True where the mode could be set: a CPU with the mode (x86 with SSE, AArch64) and onnxnn's
        compiled library installed; False otherwise, and nothing changed.

    Example::

        >>> onnxnn.set_flush_denormal(True)
        True
        >>> onnxnn.tensor([1e-323], dtype=onnxnn.float64) * 1
        tensor([0.], dtype=onnxnn.float64)
    """
    mode = bool(mode)
    if not set_thread_flush_denormal(mode):
        return False
    if MODE.flush_denormal != mode:
        MODE.flush_denormal = mode
        clear_caches()  # sessions built before keep their thread pools' mode
    return True


_MATMUL_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """Sets the internal precision of float32 matrix products and convolutions.

    ``"highest"`` (the default) computes them in float32. ``"high"`` and ``"medium"`` let a GPU use
    TensorFloat32 (onnxruntime's CUDA provider's ``use_tf32``) in the sessions built from then on
    (the cached ones are dropped). On the CPU they change nothing: onnxruntime's and onnxnn's CPU
    kernels have no reduced-precision float32 products. An unknown name warns and changes nothing,
    as PyTorch's.

    Args:
        precision: "highest", "high" or "medium".

    Example::

        >>> onnxnn.set_float32_matmul_precision("high")
        >>> onnxnn.get_float32_matmul_precision()
        'high'
    """
    if precision not in _MATMUL_PRECISIONS:
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
            "set_float32_matmul_precision call has no effect.",
            UserWarning,
            stacklevel=2,
        )
        return
    if MODE.float32_matmul_precision != precision:
        MODE.float32_matmul_precision = precision
        clear_caches()  # sessions built before keep the precision they were built with


def get_float32_matmul_precision() -> str:
    """The precision ``set_float32_matmul_precision`` set: "highest" (the default), "high" or "medium"."""
    return MODE.float32_matmul_precision
