"""``onnxnn.set_flush_denormal``: subnormal floats flushed to zero, as PyTorch's switch does."""

from __future__ import annotations

from .ir.caches import clear_caches
from .ir.mode import MODE
from .kernels.float_modes import set_thread_flush_denormal

__all__ = ["set_flush_denormal"]


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
