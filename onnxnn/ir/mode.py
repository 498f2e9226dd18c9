"""The one mode object: what recording, autodiff and realization do right now.

Every switch that changes how onnxnn runs lives here, read by the hot paths as attributes of
``MODE``: whether gradients are recorded, which executor runs plans, whether the fast path may
take over, and the scoped states of a trace being recorded. The public switches
(``onnxnn.no_grad``, ``set_executor``, ``set_fast_path``, ...) are context managers over it.

Grad mode is per thread, as PyTorch's is (``MODE.grad.enabled``; a new thread starts with
gradients enabled); the other modes are per process. ``MODE`` is a plain object because recording
reads it for every op, and a thread-local attribute costs several times a plain one.
"""

from __future__ import annotations

import os
import threading

__all__ = [
    "Mode",
    "GradMode",
    "MODE",
    "EXECUTORS",
    "fast_path_from_environment",
    "switched_on_in_environment",
    "RecordingTrace",
    "trace_data_read",
]

EXECUTORS = ("auto", "onnxruntime", "kernels")


def switched_on_in_environment(variable: str) -> bool:
    """False when the environment variable is set to ``0``, ``false``, ``no`` or ``off`` (case ignored)."""
    return os.environ.get(variable, "1").strip().lower() not in ("0", "false", "no", "off")


def fast_path_from_environment() -> bool:
    """False when ``ONNXNN_FAST_PATH`` is set to ``0``, ``false``, ``no`` or ``off`` (case ignored)."""
    return switched_on_in_environment("ONNXNN_FAST_PATH")


class GradMode(threading.local):
    """Whether operations on tensors that require grad are recorded for backward, per thread; and
    the depth of ``runtime.tensor.outside_autocast`` calls running in the thread, during which
    autocast leaves recorded ops as they are; and whether an ``inference_mode`` block is in force."""

    enabled = True
    autocast_paused = 0
    inference = False


class Mode:
    """The current modes.

    Attributes:
        grad: the per-thread ``GradMode`` (``MODE.grad.enabled``).
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
        observer: a callable ``observer(node, outputs)`` told of every node recorded through
            ``runtime.recording`` (the profiler's and graph tracers' attribution of nodes to the
            module that recorded them), else None. Replayed backwards create their nodes in
            generated code and are not observed.
        profiler: the active ``onnxnn.profiler`` collector, else None. Realization hands it the
            targets to plan, compile and run with timings (``realize(targets)``), and backward
            passes report their span to it (``begin_range(name)``/``end_range()``).
        intra_op_threads: threads of one session's kernels (``set_num_threads``); 0 leaves
            onnxruntime's default (one per core).
        inter_op_threads: threads running independent nodes at once (``set_num_interop_threads``);
            0 leaves onnxruntime's default.
        flush_denormal: the last ``set_flush_denormal`` mode: onnxruntime sessions built from then on
            flush subnormal floats to zero on their threads, as do the compiled updates' threads.
        float32_matmul_precision: ``set_float32_matmul_precision``'s "highest", "high" or "medium":
            CUDA sessions built from then on may use TF32 for float32 products below "highest".
        deterministic: ``use_deterministic_algorithms``' (enabled, warn_only): onnxruntime sessions
            built from then on use its deterministic kernels.
        anomaly: ``autograd.set_detect_anomaly``'s mode: backward nodes keep the stack of the
            forward call that made them, and a backward that fails (or, with ``anomaly_check_nan``,
            gives a NaN gradient) says where that call was.
        anomaly_check_nan: whether anomaly mode checks every backward node's gradients for NaN.
        autocast: a callable ``autocast(op_type, inputs, domain, name) -> inputs`` that
            ``runtime.tensor.apply_op`` hands every op's inputs to before recording it (``onnxnn.amp``'s
            policy, set while some thread has autocast enabled: it reads that thread's state and
            returns the inputs cast as the op's autocast rule says), else None.
    """

    __slots__ = (
        "grad",
        "executor",
        "eager",
        "fast_path",
        "recording_only",
        "unbounded_depth",
        "in_backward",
        "trace",
        "observer",
        "profiler",
        "intra_op_threads",
        "inter_op_threads",
        "flush_denormal",
        "float32_matmul_precision",
        "deterministic",
        "anomaly",
        "anomaly_check_nan",
        "autocast",
    )

    def __init__(self):
        self.grad = GradMode()
        self.executor = "auto"
        self.eager = False
        self.fast_path = fast_path_from_environment()
        self.recording_only = 0
        self.unbounded_depth = 0
        self.in_backward = 0
        self.trace = None
        self.observer = None
        self.profiler = None
        self.intra_op_threads = 0
        self.inter_op_threads = 0
        self.flush_denormal = False
        self.float32_matmul_precision = "highest"
        self.deterministic = (False, False)
        self.anomaly = False
        self.anomaly_check_nan = True
        self.autocast = None


MODE = Mode()


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least one."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def intra_op_thread_count() -> int:
    """The intra-op threads in force: ``set_num_threads``'s count, else one per available core (what
    ``onnxnn.get_num_threads`` returns; here for the kernels, which may not import the runtime)."""
    return MODE.intra_op_threads or available_cores()


class RecordingTrace:
    """What a stretch of recording did, kept in ``MODE.trace`` while a backward is traced for replay.

    ``records`` holds ``(node, outputs)`` for every node recorded, in order (a node's outputs may
    be realized later, which clears their link to it); ``saved_reads`` the ``(function, input
    index)`` of every saved input a gradient rule read; ``together`` the groups of values asked to
    be computed together (``ir.plan.realize_together``), in order; ``read_data`` whether anything
    read or computed data (a random draw too), after which what was recorded may depend on that
    data; ``created``, when the tracer asks for it, the realized values made while tracing
    (``ir.graph.constant``), which a replay may take as they were.
    """

    __slots__ = ("records", "saved_reads", "together", "read_data", "created")

    def __init__(self, keep_created: bool = False):
        self.records: list = []
        self.saved_reads: list = []
        self.together: list = []
        self.read_data = False
        self.created: set | None = set() if keep_created else None


def trace_data_read() -> None:
    """Notes, in the trace being recorded (if any), that data was read or computed."""
    trace = MODE.trace
    if trace is not None:
        trace.read_data = True
