"""STFT for imported models, replayed as framing, windowing and a one-node DFT.

Written as ``Gather`` (the frames, by a constant index table) ``* window`` then ``DFT`` over each
frame, so gradients reach the signal and the window through those ops' rules and both executors
run it (the kernels executor has no STFT kernel of its own).
"""

from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.graph import constant, static_constant
from ..runtime.tensor import apply_op
from ..ir.registry import importers
from .importers import NodeCall, array_of

__all__: list[str] = []


def _as_int(tensor) -> int:
    return int(array_of(tensor).reshape(()))


@importers.register("STFT")
def STFT(call: NodeCall, signal, frame_step, window=None, frame_length=None, *, onesided=1):
    step = _as_int(frame_step)
    if frame_length is not None:
        length = _as_int(frame_length)
    elif window is not None:
        length = int(window.shape[0])
    else:
        raise ValueError(f"STFT node '{call.name}': needs a window or a frame_length")
    if window is not None and tuple(window.shape) != (length,):
        raise ValueError(
            f"STFT node '{call.name}': window of shape {list(window.shape)} does not match frame_length {length}"
        )
    size = signal.shape[1]
    if step < 1 or not 1 <= length <= size:
        raise ValueError(
            f"STFT node '{call.name}': frame_step {step} and frame_length {length} do not fit a signal of length {size}"
        )
    count = (size - length) // step + 1
    table = np.arange(count, dtype=np.int64)[:, None] * step + np.arange(length, dtype=np.int64)[None, :]
    frames = apply_op("Gather", (signal, constant(table, dtypes.int64, signal.device)), {"axis": 1})
    if window is not None:
        frames = frames * window.to(signal.dtype).reshape((1, 1, length, 1))
    axis = static_constant(2, dtypes.int64)
    return (apply_op("DFT", (frames, None, axis), {"onesided": int(onesided)}),)
