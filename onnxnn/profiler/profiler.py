"""torch.profiler's API over onnxnn: ``profile``, ``schedule``, ``record_function`` and trace export.

A profile records, per ONNX node onnxnn ran, the time onnxruntime's profiler (or onnxnn's kernels'
node loop) measured, attributed to the op type, to the module whose forward recorded the node and
to the ``record_function`` ranges open then; and onnxnn's own phases as ranges: each module's
forward (recording), ``onnxnn::realize`` with its ``onnxnn::plan``, ``onnxnn::compile``
(``onnxnn::build_model`` and ``onnxnn::create_session`` on a cache miss) and ``onnxnn::run``, and
``onnxnn::backward``. While a profile records, graphs run on sessions of its own created with
onnxruntime's profiling on (compiled once per window); the executor choice is the usual one, and
plans it gives onnxnn's kernels are timed node by node by the kernels.
"""

from __future__ import annotations

import enum
import functools
import gzip
import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..cuda import is_available as cuda_is_available
from ..ir.mode import MODE
from ._collector import Collector, Options
from .events import EventList, nest

__all__ = [
    "profile",
    "ProfilerActivity",
    "ProfilerAction",
    "schedule",
    "record_function",
    "tensorboard_trace_handler",
    "supported_activities",
]


class ProfilerActivity(enum.Enum):
    """What a profile records: ``CPU`` (onnxnn's work and CPU kernels), ``CUDA`` (nodes run on a GPU)."""

    CPU = "CPU"
    CUDA = "CUDA"


def supported_activities() -> set:
    """The activities this machine can profile: CPU, and CUDA when onnxnn runs on a CUDA device."""
    activities = {ProfilerActivity.CPU}
    if cuda_is_available():
        activities.add(ProfilerActivity.CUDA)
    return activities


class ProfilerAction(enum.Enum):
    """What a ``schedule`` asks the profiler to do at a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable:
    """A schedule: after ``skip_first`` steps, cycles of ``wait`` idle, ``warmup`` and ``active`` recorded steps.

    Args:
        wait: steps not profiled at the start of each cycle.
        warmup: steps profiled and discarded (onnxnn compiles its profiled sessions there).
        active: steps recorded; the last one of a cycle hands the trace to ``on_trace_ready``.
        repeat: the number of cycles (0: cycles go on until the profile stops).
        skip_first: steps ignored before the first cycle.

    Returns:
        a function of the step number giving its ``ProfilerAction``.

    Example::

        >>> with profile(schedule=schedule(wait=1, warmup=1, active=2), on_trace_ready=handler) as prof:
        ...     for batch in loader:
        ...         train_step(batch)
        ...         prof.step()
    """
    for name, value in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"schedule: {name} must be a non-negative integer, got {value!r}")
    if not isinstance(skip_first, int) or skip_first < 0:
        raise ValueError(f"schedule: skip_first must be a non-negative integer, got {skip_first!r}")
    if active < 1:
        raise ValueError("schedule: active must be at least 1 (nothing would ever be recorded)")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < wait:
            return ProfilerAction.NONE
        if position < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:
    """Profiles what onnxnn records and runs (torch.profiler.profile's arguments and methods).

    Args:
        activities: ``ProfilerActivity`` values (default: ``supported_activities()``). Without
            ``CUDA``, nodes run on a GPU are left out; without ``CPU``, everything else is.
        schedule: a ``schedule(...)`` deciding per ``step()`` what is recorded (default: all).
        on_trace_ready: called as ``on_trace_ready(prof)`` when a recorded cycle ends.
        record_shapes: keep the input shapes of every node (``key_averages(group_by_input_shape=True)``).
        profile_memory: keep the bytes of every node's outputs.
        with_stack: keep the user's source lines that recorded each node.
        with_flops: estimate the floating-point operations of matrix products.
        with_modules: accepted for torch's signature: module paths are always kept (``event.module``).

    Example::

        >>> with onnxnn.profiler.profile(record_shapes=True) as prof:
        ...     loss = model(x).sum()
        ...     loss.backward()
        >>> print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    """

    def __init__(
        self,
        *,
        activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable | None = None,
        on_trace_ready: Callable | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
    ):
        self.activities = set(supported_activities() if activities is None else activities)
        for activity in self.activities:
            if not isinstance(activity, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity values, got {activity!r}")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profile: schedule must be callable (see onnxnn.profiler.schedule), got {schedule!r}")
        self.schedule = schedule if schedule is not None else _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._collector: Collector | None = None
        self._events: EventList | None = None
        self._started = False

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        """Starts profiling at step 0 (as entering the ``with`` block does)."""
        if self._started:
            raise RuntimeError("profile: start() called on a profile that is already running")
        if MODE.profiler is not None:
            raise RuntimeError("profile: another onnxnn profiler is already running (profiles do not nest)")
        self._started = True
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._enter(self.current_action)

    def stop(self) -> None:
        """Stops profiling; a window being recorded is finished and handed to ``on_trace_ready``."""
        if not self._started:
            return
        self._started = False
        if self._collector is not None:
            recorded = self._collector.recording
            self._finish_window()
            if recorded and self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def step(self) -> None:
        """Marks the end of a step: the schedule decides what the next one does."""
        if not self._started:
            return
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        collector = self._collector
        if collector is not None and collector.recording:
            collector.end_range()  # the step's "ProfilerStep#N" range
        if previous in _RECORDING and (
            previous is ProfilerAction.RECORD_AND_SAVE or self.current_action not in _RECORDING
        ):
            self._finish_window()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        elif previous is ProfilerAction.WARMUP and self.current_action not in _RECORDING + (ProfilerAction.WARMUP,):
            self._finish_window()  # warmup that leads nowhere: nothing to keep
        self._enter(self.current_action)

    def _enter(self, action: ProfilerAction) -> None:
        """Opens (or switches to recording) the window the step's action asks for."""
        if action is ProfilerAction.NONE:
            return
        if self._collector is None:
            options = Options(
                self.record_shapes,
                self.profile_memory,
                self.with_stack,
                self.with_flops,
                self.with_modules,
                ProfilerActivity.CUDA in self.activities,
            )
            self._collector = Collector(options)
            self._collector.install()
        if action in _RECORDING:
            self._collector.recording = True
            self._collector.begin_range(f"ProfilerStep#{self.step_num}")

    def _finish_window(self) -> None:
        collector = self._collector
        if collector is None:
            return
        self._collector = None
        try:
            if collector.recording:
                while collector.state.ranges:
                    collector.end_range()  # ranges still open at the window's end close there
        finally:
            collector.uninstall()
            events = collector.finish()
        if not collector.recording:
            return
        if ProfilerActivity.CPU not in self.activities:
            events = [event for event in events if event.device_type != "CPU"]
        if ProfilerActivity.CUDA not in self.activities:
            events = [event for event in events if event.device_type != "CUDA"]
        nest(events)
        events.sort(key=lambda event: (event.start_ns, -event.duration_ns))
        self._events = EventList(events)

    # ------------------------------------------------------------ results

    def _recorded(self, what: str) -> EventList:
        if self._events is None:
            raise RuntimeError(
                f"profile.{what}: no profile has been recorded yet (run code inside the profile, "
                "and with a schedule until its first active cycle ends)"
            )
        return self._events

    def events(self) -> EventList:
        """Every event of the last recorded window, in order of start."""
        return self._recorded("events")

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """The events averaged by name (and input shapes, and the first ``group_by_stack_n`` stack lines).

        Raises:
            RuntimeError: nothing has been recorded yet.
        """
        events = self._recorded("key_averages")
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages: group_by_input_shape needs profile(record_shapes=True)")
        if group_by_stack_n > 0 and not self.with_stack:
            raise RuntimeError("key_averages: group_by_stack_n needs profile(with_stack=True)")
        return events.key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Writes the last window as Chrome trace JSON (Perfetto, chrome://tracing): complete events in microseconds.

        Raises:
            RuntimeError: nothing has been recorded yet.
        """
        events = self._recorded("export_chrome_trace")
        pid = os.getpid()
        trace_events = []
        for event in events:
            args: dict[str, Any] = dict(event.args)
            args["kind"] = event.kind
            if event.scope:
                args["record_function"] = list(event.scope)
            if event.input_shapes:
                args["Input Dims"] = event.input_shapes
            if event.stack:
                args["Call stack"] = ";".join(event.stack)
            if event.self_cpu_memory_usage:
                args["bytes"] = event.self_cpu_memory_usage
            if event.flops:
                args["flops"] = event.flops
            trace_events.append(
                {
                    "name": event.name,
                    "cat": "kernel" if event.kind in ("onnxruntime", "kernels", "fused") else "cpu_op",
                    "ph": "X",
                    "ts": event.start_ns / 1000.0,
                    "dur": event.duration_ns / 1000.0,
                    "pid": pid,
                    "tid": event.thread,
                    "args": args,
                }
            )
        with open(path, "w") as file:
            json.dump({"traceEvents": trace_events, "displayTimeUnit": "ms"}, file)

    def export_stacks(self, path: str | os.PathLike, metric: str = "self_cpu_time_total") -> None:
        """Writes ``frame;frame;... microseconds`` lines (flame graph input) from ``with_stack`` events."""
        if metric not in ("self_cpu_time_total", "self_cuda_time_total", "self_device_time_total"):
            raise ValueError(f"export_stacks: unknown metric {metric!r}")
        events = self._recorded("export_stacks")
        with open(path, "w") as file:
            for event in events:
                if not event.stack:
                    continue
                value = event.self_cpu_time_total if metric == "self_cpu_time_total" else event.self_device_time_total
                frames = ";".join(reversed(event.stack)) + f";{event.name}"
                file.write(f"{frames} {int(value)}\n")


class record_function:
    """A named range in the profile, around a block or (as a decorator) a function.

    Nodes recorded inside carry the range's name (``event.scope``), and the range is an event
    whose interval contains what ran inside it. Without an active profile it does nothing.

    Example::

        >>> with record_function("data_loading"):
        ...     batch = next(iterator)
    """

    def __init__(self, name: str, args: str | None = None):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self.args = args
        self._collector: Collector | None = None

    def __enter__(self) -> record_function:
        collector = MODE.profiler
        if isinstance(collector, Collector):
            self._collector = collector
            collector.begin_range(self.name, "range", {"args": self.args} if self.args is not None else None)
        return self

    def __exit__(self, *exc_info) -> None:
        collector, self._collector = self._collector, None
        if collector is not None and MODE.profiler is collector:
            collector.end_range()

    def __call__(self, function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with record_function(self.name, self.args):
                return function(*args, **kwargs)

        return wrapped


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False) -> Callable:
    """An ``on_trace_ready`` that writes each finished window as ``<worker>.<ms>.pt.trace.json`` into ``dir_name``."""
    if worker_name is None:
        worker_name = f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = f"{worker_name}.{time.time_ns() // 1_000_000}.pt.trace.json"
        path = os.path.join(dir_name, name)
        prof.export_chrome_trace(path)
        if use_gzip:
            with open(path, "rb") as source, gzip.open(path + ".gz", "wb") as target:
                target.write(source.read())
            os.remove(path)

    return handler
