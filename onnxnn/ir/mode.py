"""The one mode object: what recording, autodiff and realization do right now.

Every switch that changes how onnxnn runs lives here, read by the hot paths as attributes of
``MODE``: whether gradients are recorded, which executor runs plans, whether the fast path may
take over, and the scoped states of a trace being recorded. The public switches
(``onnxnn.no_grad``, ``set_executor``, ``set_fast_path``, ...) are context managers over it.

Grad mode is per thread, as PyTorch's is (``MODE.grad.enabled``; a new thread starts with
gradients enabled). So are the executor, eager mode and the fast path inside ``set_executor`` and
``set_fast_path`` blocks (``ModeSwitch``; outside them a thread has the process's), the trace
being recorded (``traced``), the observer of recorded nodes inside ``observing`` blocks (a
checkpoint's; outside them a thread has the process's, a profiler's), and the depths of blocks that
change what recording and realization do (a running backward, an export: ``GradMode``). The other
modes are per process. ``MODE`` is a plain object because recording reads it for every op, and a
thread-local attribute costs several times a plain one: those attributes are plain while no thread
is inside such a block.
"""

from __future__ import annotations

import operator
import os
import threading
from typing import Callable, TypeVar

__all__ = [
    "Mode",
    "GradMode",
    "MODE",
    "ModeSwitch",
    "traced",
    "observing",
    "process_observer",
    "EXECUTORS",
    "fast_path_from_environment",
    "switched_on_in_environment",
    "RecordingTrace",
    "drawn_values",
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
    autocast leaves recorded ops as they are; and whether an ``inference_mode`` block is in force;
    and the depth of backward passes running in the thread (the general driver or a replay: a
    realization inside one computes exactly its targets, since which intermediates are still held
    differs between the driver and a replay, and the plans must not; autocast leaves gradient ops
    as they are); and the depth of recomputations of forward code inside a backward
    (``runtime.recomputation``), whose ops autocast casts as the first call's were; and the depths
    of the thread's ``recording_only`` blocks (its realizations are skipped: a training step being
    exported is recorded, not run) and ``unbounded_depth`` blocks (its deep histories stay pending:
    an export keeps the whole model's)."""

    enabled = True
    autocast_paused = 0
    inference = False
    in_backward = 0
    recomputing = 0
    recording_only = 0
    unbounded_depth = 0


class Mode:
    """The current modes.

    Attributes:
        grad: the per-thread ``GradMode`` (``MODE.grad.enabled``).
        executor: what runs plans: one of ``EXECUTORS``. The calling thread's: its innermost
            ``set_executor`` block's, else the process's (``ModeSwitch``). Assigning it sets the
            process's.
        eager: every op is realized as it is recorded (a debugging mode); per thread, as ``executor``.
        fast_path: generated code, replayed backwards and cached specializations may run
            (``runtime.fastpath``); results are bitwise the same either way. Per thread, as
            ``executor`` (``set_fast_path`` blocks).
        trace: the ``RecordingTrace`` of a forward or backward being traced for replay in the
            calling thread (``traced``), else None.
        observer: a callable ``observer(node, outputs)`` told of every node recorded through
            ``runtime.recording`` (the profiler's and graph tracers' attribution of nodes to the
            module that recorded them), else None. The calling thread's: its innermost
            ``observing`` block's, else the process's. Assigning it sets the process's (the
            profiler's, which watches every thread). Replayed backwards create their nodes in
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


# ---------------------------------------------------------------- per-thread switches


class _ThreadSwitches(threading.local):
    """Per thread, the values the thread's innermost ``ModeSwitch`` block gave ``executor``, ``eager``
    and ``fast_path``, its ``traced`` block's trace and its ``observing`` block's observer; None where
    it is in no such block (the process's value holds: for ``trace``, None)."""

    executor: str | None = None
    eager: bool | None = None
    fast_path: bool | None = None
    trace: RecordingTrace | None = None
    observer: Callable | None = None


_THREAD_SWITCHES = _ThreadSwitches()
_PROCESS_SLOTS = {name: Mode.__dict__[name] for name in ("executor", "eager", "fast_path", "trace", "observer")}


def _per_thread(name: str) -> property:
    """``MODE.<name>`` read as the calling thread's value: its block's, else the process's (the slot)."""
    process = _PROCESS_SLOTS[name]
    own = operator.attrgetter(name)

    def get(mode):
        value = own(_THREAD_SWITCHES)
        return process.__get__(mode, Mode) if value is None else value

    def set_process_value(mode, value) -> None:
        process.__set__(mode, value)

    return property(get, set_process_value)


class _ModeInBlocks(Mode):
    """``MODE``'s class while some thread is inside a ``ModeSwitch``, ``traced`` or ``observing``
    block: its switches, trace and observer are then read per thread. While no thread is, they are
    ``Mode``'s plain attributes (recording reads ``eager``, ``trace`` and ``observer`` for every op,
    and a property with a thread-local lookup costs about 0.1 us)."""

    __slots__ = ()
    executor = _per_thread("executor")  # type: ignore[assignment]
    eager = _per_thread("eager")  # type: ignore[assignment]
    fast_path = _per_thread("fast_path")  # type: ignore[assignment]
    trace = _per_thread("trace")  # type: ignore[assignment]
    observer = _per_thread("observer")  # type: ignore[assignment]


# Guards the blocks' bookkeeping: entering and leaving blocks, and the process's values.
_SWITCHING = threading.Lock()
_open_blocks = [0]  # ModeSwitch, traced and observing blocks entered and not yet left, in every thread


def _block_opened() -> None:
    """Counts a block entered (under ``_SWITCHING``): ``MODE``'s attributes are read per thread now."""
    _open_blocks[0] += 1
    MODE.__class__ = _ModeInBlocks


def _block_closed() -> None:
    """Counts a block left (under ``_SWITCHING``); with none left, ``MODE``'s attributes are plain again."""
    _open_blocks[0] -= 1
    if not _open_blocks[0]:
        MODE.__class__ = Mode


# Per switch (the tuple of its attribute names), the calls that set the process's values and may
# still turn out to open a ``with`` block, oldest first: ``[call, thread, values, replaced]``.
# ``with`` makes the call before it enters the block, so for that instant the call is the process's
# setting; entering takes it back (``_withdraw``). A thread enters a block right after its call, so
# once the thread makes another call, its earlier ones are plain calls for good.
_process_calls: dict = {}

_Switch = TypeVar("_Switch", bound="ModeSwitch")


class ModeSwitch:
    """Sets some of ``MODE``'s switches (``executor``, ``eager``, ``fast_path``): the machinery of
    ``set_executor`` and ``set_fast_path``, which take effect at once and also work as ``with`` blocks.

    Called outside a block of the switch, it sets the process's value, which every thread not in a
    block of its own has. As a ``with`` block, it sets the value for the thread running the block
    (for the instant between the call and the block's start, as the process's), and the thread's
    previous value is back when the block ends. Called inside a block, it changes the thread's value
    until that block ends, as PyTorch's ``set_grad_enabled`` does.

    Args:
        values: the attributes of ``MODE`` to set and their values.
    """

    def __init__(self, values: dict):
        self._values = values
        self._previous = [getattr(_THREAD_SWITCHES, name) for name in values]
        self._sets_process = self._previous[0] is None
        if self._sets_process:
            _set_process_values(self, values)
        else:
            for name, value in values.items():
                setattr(_THREAD_SWITCHES, name, value)

    def __enter__(self: _Switch) -> _Switch:
        with _SWITCHING:
            for name, value in self._values.items():
                setattr(_THREAD_SWITCHES, name, value)
            _block_opened()
            if self._sets_process:
                _withdraw(self)
        return self

    def __exit__(self, *exc_info) -> None:
        with _SWITCHING:
            for name, value in zip(self._values, self._previous):
                setattr(_THREAD_SWITCHES, name, value)
            _block_closed()


def _process_values(names) -> list:
    return [_PROCESS_SLOTS[name].__get__(MODE, Mode) for name in names]


def _set_process_values(call: ModeSwitch, values: dict) -> None:
    with _SWITCHING:
        calls = _process_calls.setdefault(tuple(values), [])
        thread = threading.get_ident()
        for index in range(len(calls) - 1, -1, -1):
            if calls[index][1] == thread:
                del calls[: index + 1]  # that call stays, so nothing older can come back into force
                break
        calls.append([call, thread, list(values.values()), _process_values(values)])
        for name, value in values.items():
            _PROCESS_SLOTS[name].__set__(MODE, value)


def _withdraw(call: ModeSwitch) -> None:
    """Takes back a call's setting of the process's values: its ``with`` block has opened. (Under ``_SWITCHING``.)"""
    calls = _process_calls[tuple(call._values)]
    for index, (made, _, values, replaced) in enumerate(calls):
        if made is call:
            del calls[index]
            if index < len(calls):
                calls[index][3] = replaced  # a later call replaced this one's values: it now replaces the older
            elif _process_values(call._values) == values:  # (else someone assigned MODE's attribute since)
                for name, value in zip(call._values, replaced):
                    _PROCESS_SLOTS[name].__set__(MODE, value)
            return


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least one."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def intra_op_thread_count() -> int:
    """The intra-op threads in force: ``set_num_threads``'s count, else one per available core (what
    ``onnxnn.get_num_threads`` returns; here for the kernels, which may not import the runtime)."""
    return MODE.intra_op_threads or available_cores()


class traced:
    """Within this block the calling thread's recording goes into ``trace`` (``MODE.trace``): a forward
    or a backward traced for replay. Per thread: other threads' ops stay out of it, and their
    replays go on (``nn/modules/_forward_replay.py`` replays only outside a trace).
    """

    __slots__ = ("trace", "_previous")

    def __init__(self, trace: "RecordingTrace"):
        self.trace = trace

    def __enter__(self) -> "RecordingTrace":
        with _SWITCHING:
            self._previous = _THREAD_SWITCHES.trace
            _THREAD_SWITCHES.trace = self.trace
            _block_opened()
        return self.trace

    def __exit__(self, *exc_info) -> None:
        with _SWITCHING:
            _THREAD_SWITCHES.trace = self._previous
            _block_closed()


class observing:
    """Within this block the nodes the calling thread records are told to ``observer`` (``MODE.observer``
    in this thread; a checkpoint's recorder). Per thread: other threads' recording is not, and
    blocks in several threads may open and close in any order. The observer passes each node on
    to ``beneath`` (the observer this block hides), so an enclosing block's observer and the
    process's (a profiler's) still see it.
    """

    __slots__ = ("observer", "_previous")

    def __init__(self, observer: Callable):
        self.observer = observer
        self._previous: Callable | None = None

    def __enter__(self) -> "observing":
        with _SWITCHING:
            self._previous = _THREAD_SWITCHES.observer
            _THREAD_SWITCHES.observer = self.observer
            _block_opened()
        return self

    def __exit__(self, *exc_info) -> None:
        with _SWITCHING:
            _THREAD_SWITCHES.observer = self._previous
            _block_closed()

    def beneath(self, node, outputs) -> None:
        """Tells ``node`` to the observer this block hides: the thread's enclosing block's, else the
        process's as it is now (a profiler window may open or close while the block is open)."""
        observer = self._previous
        if observer is None:
            observer = process_observer()
        if observer is not None:
            observer(node, outputs)


def process_observer() -> Callable | None:
    """The process's observer (``MODE.observer`` as a thread outside ``observing`` blocks reads it)."""
    return _PROCESS_SLOTS["observer"].__get__(MODE, Mode)


class RecordingTrace:
    """What a stretch of recording did, kept in ``MODE.trace`` while a forward or backward is traced.

    ``records`` holds ``(node, outputs)`` for every node recorded, in order (a node's outputs may
    be realized later, which clears their link to it); ``saved_reads`` the ``(function, input
    index)`` of every saved input a gradient rule read; ``together`` the groups of values asked to
    be computed together (``ir.plan.realize_together``), in order; ``read_data`` whether anything
    read or computed data (a random draw too), after which what was recorded may depend on that
    data; ``created``, when the tracer asks for it, the realized values made while tracing
    (``ir.graph.constant``), which a replay may take as they were; ``effects`` what else the
    recording did, in order: ``("write", tensor, value, plain, before)`` for each tensor rebound in
    place from value ``before`` (``plain``: nothing but the rebinding, no history moved onto the
    tensor), ``("alongside", value)`` for each value asked to join a later realization
    (``ir.plan.realize_alongside``), ``("draw", value, draw)`` for each constant drawn from a random
    generator and ``("check", value, check, force)`` for each check of data that can only raise
    (``runtime.internal``).
    """

    __slots__ = ("records", "saved_reads", "together", "read_data", "created", "effects")

    def __init__(self, keep_created: bool = False):
        self.records: list = []
        self.saved_reads: list = []
        self.together: list = []
        self.read_data = False
        self.created: set | None = set() if keep_created else None
        self.effects: list = []


def drawn_values(effects: list) -> set:
    """The values a trace's ``effects`` (or a selection of them) drew from a random generator."""
    return {effect[1] for effect in effects if effect[0] == "draw"}


def trace_data_read() -> None:
    """Notes, in the trace being recorded (if any), that data was read or computed."""
    trace = MODE.trace
    if trace is not None:
        trace.read_data = True
