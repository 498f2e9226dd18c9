"""Batches from worker processes through shared memory instead of the result queue's pipe.

A multiprocessing queue pickles a batch and writes it through a pipe in 64 KB pieces, which the
main process reads back: for a batch of images (32x3x64x64 float32, 1.5 MB) that took longer than
the batch's own loading. A worker instead copies every large array of its batch into a shared
memory segment and sends only the segment's name, shape and dtype; the main process copies the
array out and unlinks the segment. (PyTorch moves tensors through shared memory for the same reason.)

Segments are registered with multiprocessing's resource tracker when a worker creates them and
unregistered when the main process unlinks them. Each loader's segments are named with its own
prefix, so that when its workers stop, ``remove_segments`` finds the batches that were made but
never received (prefetched past a ``break``, still in a worker's queue buffer) and removes them;
``release`` unlinks the segments of batches received but dropped.
"""

from __future__ import annotations

import itertools
import os
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from ...ir import dtypes
from ...runtime.internal import constant_tensor
from ...runtime.tensor import Tensor

__all__ = ["SHARE_MIN_BYTES", "segment_prefix", "to_shared_memory", "from_shared_memory", "release", "remove_segments"]

# Smaller arrays go through the pipe with the rest of the batch: a segment costs a few system calls.
SHARE_MIN_BYTES = 1 << 16
# Where POSIX shared memory segments are visible as files (Linux); elsewhere leftovers are removed
# by the resource tracker when the program ends.
_SEGMENT_DIRECTORY = "/dev/shm"
_loaders = itertools.count()
_segments = itertools.count()


def segment_prefix() -> str:
    """A name prefix for one loader's segments (short: macOS allows 30 characters per name)."""
    return f"ox{os.getpid()}l{next(_loaders)}w"


class _SharedArray:
    """Where a worker left one array of a batch: a segment's name, the array's shape and dtype."""

    __slots__ = ("name", "shape", "dtype", "as_tensor")

    def __init__(self, name: str, shape: tuple, dtype: np.dtype, as_tensor: bool):
        self.name, self.shape, self.dtype, self.as_tensor = name, shape, dtype, as_tensor

    def __getstate__(self):
        return (self.name, self.shape, self.dtype, self.as_tensor)

    def __setstate__(self, state) -> None:
        self.name, self.shape, self.dtype, self.as_tensor = state


def _share(array: np.ndarray, as_tensor: bool, prefix: str) -> _SharedArray:
    segment = shared_memory.SharedMemory(name=f"{prefix}n{next(_segments)}", create=True, size=array.nbytes)
    try:
        np.ndarray(array.shape, array.dtype, buffer=segment.buf)[...] = array
        return _SharedArray(segment.name, array.shape, array.dtype, as_tensor)
    finally:
        segment.close()


def _map(batch: Any, leaf) -> Any:
    """``batch`` with ``leaf`` applied to each array-like item, through lists, tuples and dicts."""
    kind = type(batch)
    if kind is list:
        return [_map(item, leaf) for item in batch]
    if kind is tuple:
        return tuple(_map(item, leaf) for item in batch)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple, as default_collate keeps it
        return kind(*(_map(item, leaf) for item in batch))
    if kind is dict:
        return {key: _map(value, leaf) for key, value in batch.items()}
    return leaf(batch)


def to_shared_memory(batch: Any, prefix: str) -> Any:
    """In a worker: ``batch`` with its large CPU tensors and arrays moved into segments named ``prefix...``."""

    def to_shared(item: Any) -> Any:
        if isinstance(item, Tensor) and not item.requires_grad and item.device.type == "cpu":
            array = item.numpy(force=True)
            if array.nbytes >= SHARE_MIN_BYTES:
                return _share(np.asarray(array, order="C"), True, prefix)
        elif type(item) is np.ndarray and item.nbytes >= SHARE_MIN_BYTES and not item.dtype.hasobject:
            return _share(np.asarray(item, order="C"), False, prefix)
        return item

    return _map(batch, to_shared)


def _from_shared(item: Any) -> Any:
    if not isinstance(item, _SharedArray):
        return item
    segment = shared_memory.SharedMemory(name=item.name)
    try:
        array = np.ndarray(item.shape, item.dtype, buffer=segment.buf).copy()
    finally:
        segment.close()
        segment.unlink()
    return constant_tensor(array, dtypes.as_dtype(array.dtype)) if item.as_tensor else array  # a fresh copy


def from_shared_memory(batch: Any) -> Any:
    """In the main process: ``batch`` with each shared array copied out and its segment removed."""
    return _map(batch, _from_shared)


def _unlink(name: str) -> None:
    try:
        segment = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    segment.close()
    segment.unlink()


def release(batch: Any) -> None:
    """Removes the segments of a batch that was received but will not be used."""
    _map(batch, lambda item: _unlink(item.name) if isinstance(item, _SharedArray) else item)


def remove_segments(prefix: str) -> None:
    """Removes every segment still named ``prefix...``: batches made by stopped workers, never received."""
    try:
        names = os.listdir(_SEGMENT_DIRECTORY)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            _unlink(name)
