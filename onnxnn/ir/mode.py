"""The one mode object: what recording, autodiff and realization do right now.

Every switch that changes how onnxnn runs lives here, read by the hot paths as attributes of
``MODE``: whether gradients are recorded, which executor runs plans, whether the fast path may
take over, and the scoped states of a trace being recorded. Each is per thread, as PyTorch's grad
mode is; a new thread starts from the defaults below. The public switches
(``onnxnn.no_grad``, ``set_executor``, ``set_fast_path``, ...) are context managers over it.
"""
from __future__ import annotations

import os
import threading

__all__ = ["Mode", "MODE", "EXECUTORS", "fast_path_from_environment", "RecordingTrace", "trace_data_read"]

EXECUTORS = ("auto", "onnxruntime", "kernels")


def fast_path_from_environment() -> bool:
    """False when ``ONNXNN_FAST_PATH`` is set to ``0``, ``false``, ``no`` or ``off`` (case ignored)."""
    return os.environ.get("ONNXNN_FAST_PATH", "1").strip().lower() not in ("0", "false", "no", "off")


class Mode(threading.local):
    """The current modes. Class attributes are the defaults each thread starts from.

    Attributes:
        grad_enabled: operations on tensors that require grad are recorded for backward.
        executor: what runs plans: one of ``EXECUTORS``.
        eager: every op is realized as it is recorded (a debugging mode).
        fast_path: generated code, replayed backwards and cached specializations may run
            (``runtime.fastpath``); results are bitwise the same either way.
        recording_only: depth of ``recording_only`` blocks: realizations are skipped.
        unbounded_depth: depth of ``unbounded_depth`` blocks: deep histories stay pending.
        in_backward: depth of backward passes running (the general driver or a replay). A
            realization inside one computes exactly its targets: which intermediates are still
            held differs between the driver and a replay, and the plans must not.
        trace: the ``RecordingTrace`` of a backward being traced for replay, else None.
    """

    grad_enabled = True
    executor = "auto"
    eager = False
    fast_path = fast_path_from_environment()
    recording_only = 0
    unbounded_depth = 0
    in_backward = 0
    trace = None


MODE = Mode()


class RecordingTrace:
    """What a stretch of recording did, kept in ``MODE.trace`` while a backward is traced for replay.

    ``records`` holds ``(node, outputs)`` for every node recorded, in order (a node's outputs may
    be realized later, which clears their link to it); ``saved_reads`` the ``(function, input
    index)`` of every saved input a gradient rule read; ``read_data`` whether anything read or
    computed data, after which what was recorded may depend on that data.
    """

    __slots__ = ("records", "saved_reads", "read_data")

    def __init__(self):
        self.records: list = []
        self.saved_reads: list = []
        self.read_data = False


def trace_data_read() -> None:
    """Notes, in the trace being recorded (if any), that data was read or computed."""
    trace = MODE.trace
    if trace is not None:
        trace.read_data = True
