"""The calling thread's handling of subnormal floats (float_modes.c): flushed to zero, or kept.

Loaded from the optional library of the optimizer updates (setup.py). Where it is missing (no C
compiler when onnxnn was installed), or the CPU has no such mode, nothing changes and
``set_thread_flush_denormal`` returns False, as PyTorch's ``set_flush_denormal`` does there.
"""

from __future__ import annotations

import ctypes

from .loop_libraries import LoopLibrary

__all__ = ["set_thread_flush_denormal", "thread_flushes_denormal"]

# float_modes.c's FLOAT_MODES_VERSION.
_VERSION = 1


class _Library(LoopLibrary):
    def __init__(self):
        super().__init__(f"{__package__}._update_loops", "float_modes.c", _VERSION, "subnormals are kept")

    def bind(self, library) -> None:
        library.onnxnn_set_flush_denormal.argtypes = [ctypes.c_int]
        library.onnxnn_set_flush_denormal.restype = ctypes.c_int
        library.onnxnn_flushes_denormal.argtypes = []
        library.onnxnn_flushes_denormal.restype = ctypes.c_int


_LIBRARY = _Library()


def set_thread_flush_denormal(mode: bool) -> bool:
    """Flushes subnormal floats to zero on the calling thread (``mode``), or keeps them; returns
    whether the mode could be set (False: no library, or a CPU without the mode)."""
    library = _LIBRARY.get()
    return library is not None and bool(library.onnxnn_set_flush_denormal(int(mode)))


def thread_flushes_denormal() -> bool:
    """Whether the calling thread flushes subnormal floats to zero."""
    library = _LIBRARY.get()
    return library is not None and bool(library.onnxnn_flushes_denormal())
