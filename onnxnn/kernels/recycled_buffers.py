"""Output arrays for large optimizer updates, reused once nothing but the pool refers to them.

A large update writes megabytes of new parameters and states per step. Fresh numpy arrays of that
size come from the operating system page by page (glibc maps them and unmaps them when they are
freed), and those page faults cost more than the arithmetic: 3x the update of an MLP's 670,000
parameters. onnxruntime avoids them with its arena; this is the kernels' equivalent.

A buffer is handed out again only when CPython's reference count shows that the pool holds the
only reference. Every holder of its memory holds such a reference: a Value whose data it is, a
numpy view (its ``base``), a memoryview, an onnxruntime or PyTorch tensor made from it. So a
buffer that is reused is one nobody can read any more, and values stay immutable for everyone
who can observe them. The counts are only exact while a GIL serializes reference counting; a
free-threaded interpreter gets fresh arrays every time.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

from ..ir.caches import register_cache
from .compiled_updates import address

__all__ = ["recycled_empty", "in_pool", "RECYCLE_MIN_ELEMENTS"]

# Below this size numpy's allocator serves arrays from memory it keeps (no page faults), and a
# scan of the pool would cost more than it saves.
RECYCLE_MIN_ELEMENTS = 1 << 16
# Buffers kept per shape and dtype: a step's outputs (each tensor of that shape and up to three of
# its states) alive, and the previous step's, waiting to be reused. A transformer's many equal
# weight matrices need hundreds; beyond the bound, arrays are plain np.empty ones.
_MOST_PER_KEY = 1024
# Where each buffer of a pool starts within a 4 KiB page: 11 cache lines after the previous one.
# A core matches each load against the earlier stores still in flight by the addresses' low 12
# bits first ("4K aliasing"), and a load whose array starts a few cache lines behind an array being
# written, modulo 4 KiB, waits on such false matches. Buffers wherever the allocator put them
# started 16 bytes apart, and an MLP's compiled Adam update (seven arrays) took 1.45x as long.
_PAGE_BYTES = 4096
_STAGGER_BYTES = 704
# Buffers stay on ordinary pages. They once moved to 2 MiB pages (madvise(MADV_HUGEPAGE)) at their
# second reuse, for fewer page-table walks; measured again, an MLP's Adam update took the same time
# either way (0.75-0.76 ms at batch 64), and resnet18's Momentum update (11.7 million parameters)
# inside its training step took 21-24 ms on huge pages against 13 on ordinary ones (two threads: 24-28
# against 7), the huge pages taking 8-33 page faults every step.
# References to a buffer while ``_Pool.free_buffer`` looks at it: the pool's list, the local
# variable and getrefcount's own argument.
_POOL_ONLY = 3

_FREE_THREADED = not getattr(sys, "_is_gil_enabled", lambda: True)()


class _Pool:
    """The buffers of one shape and dtype, scanned from where the last free one was found: a loop
    frees its buffers in the order it took them, so the next free one is usually the next one."""

    __slots__ = ("buffers", "starts", "cursor")

    def __init__(self):
        self.buffers: list = []  # bytes, each a page longer than an array
        self.starts: list = []  # where each buffer's array starts, in bytes
        self.cursor = 0

    def free_buffer(self) -> int | None:
        """The index of a buffer that nothing else refers to, or None."""
        buffers = self.buffers
        count = len(buffers)
        for offset in range(count):
            index = (self.cursor + offset) % count
            array = buffers[index]
            if sys.getrefcount(array) == _POOL_ONLY:
                self.cursor = index + 1
                return index
        return None


_pools: dict = {}
# Taking a buffer (finding it free, then making the view that refers to it) is one step for every
# thread: compiled nodes run beside onnxruntime's sessions on a thread of their own
# (runtime/split_sessions.py), and two threads could otherwise both find the same buffer free.
_TAKING = threading.Lock()


def recycled_empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array of ``shape`` and ``dtype``: a buffer of the pool that nothing
    else refers to any more, or a new one the pool keeps (for arrays under ``RECYCLE_MIN_ELEMENTS``
    elements, or without a GIL, a plain ``np.empty``).

    The caller must write every element before anyone reads it.
    """
    dtype = np.dtype(dtype)
    elements = math.prod(shape)
    if elements < RECYCLE_MIN_ELEMENTS or _FREE_THREADED:
        return np.empty(shape, dtype)
    # Every array handed out is a view of its buffer (numpy makes the buffer any view's ``base``), so
    # the buffer's reference count is what says whether anyone can still read it.
    size = elements * dtype.itemsize
    with _TAKING:
        pool = _pools.get((shape, dtype))
        if pool is None:
            pool = _pools[(shape, dtype)] = _Pool()
        index = pool.free_buffer()
        if index is None:
            buffer, start = _new_buffer(size, _stagger(len(pool.buffers)))
            if len(pool.buffers) < _MOST_PER_KEY:
                pool.buffers.append(buffer)
                pool.starts.append(start)
        else:
            buffer, start = pool.buffers[index], pool.starts[index]
        return buffer[start : start + size].view(dtype).reshape(shape)


def in_pool(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a buffer the pool keeps (one that ``recycled_empty`` handed out
    and counts the references to, rather than a plain array)."""
    base = array.base
    pool = _pools.get((array.shape, array.dtype)) if base is not None else None
    return pool is not None and any([buffer is base for buffer in pool.buffers])


def _stagger(index: int) -> int:
    """Where the array of a pool's buffer ``index`` starts within a page."""
    return index * _STAGGER_BYTES % _PAGE_BYTES


def _new_buffer(size: int, stagger: int) -> tuple[np.ndarray, int]:
    """A buffer for an array of ``size`` bytes, and the byte where that array starts: ``stagger``
    bytes into a page."""
    buffer = np.empty(size + _PAGE_BYTES, np.uint8)
    return buffer, (stagger - address(buffer)) % _PAGE_BYTES


def _clear() -> None:
    _pools.clear()


register_cache("recycled update buffers", _clear)
