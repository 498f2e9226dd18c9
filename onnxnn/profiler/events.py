"""The profiler's results: timed events, their averages per name, and torch's summary table.

An event is one timed interval on one thread: a range (``record_function``, a module's forward, a
realization and its planning, compilation and run, a backward pass) or one executed ONNX node.
Intervals on a thread nest, so every event's parent is the innermost event that encloses it, and
its self time is its duration less its children's.
"""

from __future__ import annotations

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "SORT_KEYS"]

# What ``table(sort_by=...)`` accepts, each read from an averaged event (descending order).
SORT_KEYS = (
    "cpu_time",
    "cpu_time_total",
    "self_cpu_time_total",
    "device_time",
    "device_time_total",
    "self_device_time_total",
    "cuda_time",
    "cuda_time_total",
    "self_cuda_time_total",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "count",
)
_SORT_ALIASES = {"cuda_time": "device_time", "cuda_time_total": "device_time_total"}
_SORT_ALIASES["self_cuda_time_total"] = "self_device_time_total"


class FunctionEvent:
    """One timed interval: a range or an executed ONNX node.

    Attributes:
        name: the op type of a node (``"Gemm"``), else the range's name (``"onnxnn::plan"``).
        kind: ``"range"``, ``"module"``, ``"onnxruntime"`` (a node timed by onnxruntime's profiler)
            or ``"kernels"`` (a node run by onnxnn's kernels), or ``"fused"`` (a node onnxruntime
            fused into another node's kernel: its time is that kernel's).
        thread: the id of the Python thread that ran it.
        start_ns, end_ns: its interval, in nanoseconds since the profiling window started.
        module: the path of the module whose forward recorded the node (``"model.0"``), or None.
        scope: the names of the ``record_function`` ranges open when the node was recorded.
        input_shapes: the shapes of the node's inputs (``record_shapes=True``), else ``[]``.
        stack: the user's source lines that recorded the node (``with_stack=True``), else ``[]``.
        cpu_memory_usage: bytes of the node's outputs (``profile_memory=True``); a range's holds
            its children's total.
        device_type: ``"CPU"``, or ``"CUDA"`` for a node onnxruntime ran on its CUDA provider.
        flops: estimated floating-point operations of a matrix product (``with_flops=True``).
        args: further details shown in the Chrome trace (onnxruntime's kernel and provider).
    """

    def __init__(
        self,
        name: str,
        kind: str,
        thread: int,
        start_ns: int,
        end_ns: int,
        *,
        module: str | None = None,
        scope: tuple = (),
        input_shapes: list | None = None,
        stack: list | None = None,
        memory: int = 0,
        device_type: str = "CPU",
        flops: int = 0,
        args: dict | None = None,
    ):
        self.name = name
        self.kind = kind
        self.thread = thread
        self.start_ns = start_ns
        self.end_ns = max(end_ns, start_ns)
        self.module = module
        self.scope = scope
        self.input_shapes = input_shapes or []
        self.stack = stack or []
        self.self_cpu_memory_usage = memory
        self.cpu_memory_usage = memory
        self.device_type = device_type
        self.flops = flops
        self.args = args or {}
        self.parent: FunctionEvent | None = None
        self.children: list[FunctionEvent] = []

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def cpu_time_total(self) -> float:
        """Microseconds from start to end (0 for a node that ran on a CUDA device)."""
        return 0.0 if self.device_type == "CUDA" else self.duration_ns / 1000.0

    @property
    def self_cpu_time_total(self) -> float:
        """``cpu_time_total`` less the children's, in microseconds."""
        return max(self.cpu_time_total - sum(child.cpu_time_total for child in self.children), 0.0)

    @property
    def device_time_total(self) -> float:
        """Microseconds of a node that ran on a CUDA device (0 on the CPU), children included."""
        own = self.duration_ns / 1000.0 if self.device_type == "CUDA" else 0.0
        return own + sum(child.device_time_total for child in self.children)

    @property
    def self_device_time_total(self) -> float:
        return self.duration_ns / 1000.0 if self.device_type == "CUDA" else 0.0

    def __repr__(self) -> str:
        return (
            f"<FunctionEvent name={self.name!r} kind={self.kind} module={self.module!r} "
            f"cpu_time_total={self.cpu_time_total:.3f}us thread={self.thread}>"
        )


def nest(events: list) -> None:
    """Links each event to the innermost event enclosing it on its thread, in place."""
    by_thread: dict = {}
    for event in events:
        by_thread.setdefault(event.thread, []).append(event)
    for thread_events in by_thread.values():
        # Outer intervals first: sorted by start, the longer of two that start together first.
        thread_events.sort(key=lambda event: (event.start_ns, -event.duration_ns))
        open_events: list = []
        for event in thread_events:
            while open_events and event.end_ns > open_events[-1].end_ns:
                open_events.pop()
            if open_events:
                event.parent = open_events[-1]
                event.parent.children.append(event)
            open_events.append(event)
    # A range's memory counts what its nodes allocated, as torch's CPU Mem column does.
    for event in sorted(events, key=lambda event: -_depth(event)):
        if event.parent is not None:
            event.parent.cpu_memory_usage += event.cpu_memory_usage


def _depth(event: FunctionEvent) -> int:
    depth = 0
    while event.parent is not None:
        event, depth = event.parent, depth + 1
    return depth


class FunctionEventAvg:
    """The events of one name (and input shapes or stack, when grouped by them), summed."""

    def __init__(self, key: str, input_shapes: list, stack: list):
        self.key = key
        self.input_shapes = input_shapes
        self.stack = stack
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.flops = 0
        self.modules: set = set()

    def add(self, event: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.device_time_total += event.device_time_total
        self.self_device_time_total += event.self_device_time_total
        self.cpu_memory_usage += event.cpu_memory_usage
        self.self_cpu_memory_usage += event.self_cpu_memory_usage
        self.flops += event.flops
        if event.module is not None:
            self.modules.add(event.module)

    @property
    def cpu_time(self) -> float:
        """Average microseconds per call."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (
            f"<FunctionEventAvg key={self.key!r} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
            f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>"
        )


def _format_time(microseconds: float) -> str:
    if microseconds >= 1e6:
        return f"{microseconds / 1e6:.3f}s"
    if microseconds >= 1e3:
        return f"{microseconds / 1e3:.3f}ms"
    return f"{microseconds:.3f}us"


def _format_memory(nbytes: int) -> str:
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} b"


def _percent(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole > 0 else "0.00%"


class EventList(list):
    """A list of events (``prof.events()``) or of averaged events (``prof.key_averages()``)."""

    _grouped_by_input_shape = False  # set on key_averages(group_by_input_shape=True): the table shows shapes

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """Averages the events by name (and input shapes, and the first ``group_by_stack_n`` stack lines).

        Returns:
            an ``EventList`` of ``FunctionEventAvg``, in order of first appearance.
        """
        averages: dict = {}
        for event in self:
            key: tuple = (event.name,)
            if group_by_input_shape:
                key += (str(event.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(event.stack[:group_by_stack_n])
            average = averages.get(key)
            if average is None:
                stack = event.stack[:group_by_stack_n] if group_by_stack_n > 0 else []
                shapes = event.input_shapes if group_by_input_shape else []
                average = averages[key] = FunctionEventAvg(event.name, shapes, stack)
            average.add(event)
        result = EventList(averages.values())
        result._grouped_by_input_shape = group_by_input_shape
        return result

    def total_average(self) -> FunctionEventAvg:
        """All events summed into one ``FunctionEventAvg`` named ``"Total"``."""
        total = FunctionEventAvg("Total", [], [])
        for event in self:
            if isinstance(event, FunctionEventAvg):
                total.count += event.count
                total.cpu_time_total += event.cpu_time_total
                total.self_cpu_time_total += event.self_cpu_time_total
                total.cpu_memory_usage += event.cpu_memory_usage
                total.self_cpu_memory_usage += event.self_cpu_memory_usage
            else:
                total.add(event)
        return total

    @property
    def self_cpu_time_total(self) -> float:
        """Microseconds of self CPU time of every event together (the table's 100%)."""
        return sum(event.self_cpu_time_total for event in self)

    def table(
        self,
        sort_by: str | None = None,
        row_limit: int = 100,
        max_name_column_width: int = 55,
        header: str | None = None,
        top_level_events_only: bool = False,
    ) -> str:
        """Formats the events as torch's profiler table.

        Args:
            sort_by: one of ``SORT_KEYS`` (descending), or None for the order of first appearance.
            row_limit: the most rows shown (negative: all).
            max_name_column_width: longer names are cut with ``...``.
            header: a line printed above the table.
            top_level_events_only: only events without a parent (plain events only).

        Raises:
            ValueError: ``sort_by`` is not one of ``SORT_KEYS``.
        """
        rows = list(self)
        if top_level_events_only:
            rows = [event for event in rows if getattr(event, "parent", None) is None]
        if sort_by is not None:
            if sort_by not in SORT_KEYS:
                raise ValueError(f"table: unknown sort_by {sort_by!r}; choose one of {', '.join(SORT_KEYS)}")
            attribute = _SORT_ALIASES.get(sort_by, sort_by)
            rows.sort(key=lambda event: getattr(event, attribute), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        return _render(self, rows, max_name_column_width, header)


def _render(all_events: EventList, rows: list, max_width: int, header: str | None) -> str:
    self_total = all_events.self_cpu_time_total
    with_shapes = getattr(all_events, "_grouped_by_input_shape", False) or any(
        getattr(event, "input_shapes", None) for event in rows
    )
    with_memory = any(event.cpu_memory_usage for event in all_events)
    with_device = any(event.device_time_total for event in all_events)
    names = [event.key if isinstance(event, FunctionEventAvg) else event.name for event in rows]
    names = [name if len(name) <= max_width else name[: max_width - 3] + "..." for name in names]
    width = max([len("Name")] + [len(name) for name in names]) + 2
    columns = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if with_device:
        columns += ["Self CUDA", "CUDA total", "CUDA time avg"]
    if with_memory:
        columns += ["CPU Mem", "Self CPU Mem"]
    columns.append("# of Calls")
    lines = []
    cells_of_rows = []
    for event in rows:
        count = getattr(event, "count", 1)
        average = event.cpu_time_total / count if count else 0.0
        cells = [
            _percent(event.self_cpu_time_total, self_total),
            _format_time(event.self_cpu_time_total),
            _percent(event.cpu_time_total, self_total),
            _format_time(event.cpu_time_total),
            _format_time(average),
        ]
        if with_device:
            device_average = event.device_time_total / count if count else 0.0
            cells += [
                _format_time(event.self_device_time_total),
                _format_time(event.device_time_total),
                _format_time(device_average),
            ]
        if with_memory:
            cells += [_format_memory(event.cpu_memory_usage), _format_memory(event.self_cpu_memory_usage)]
        cells.append(str(count))
        cells_of_rows.append(cells)
    widths = [max([len(column)] + [len(cells[i]) for cells in cells_of_rows]) + 2 for i, column in enumerate(columns)]
    shapes = [str(getattr(event, "input_shapes", [])) for event in rows] if with_shapes else []
    shape_width = max([len("Input Shapes")] + [len(text) for text in shapes]) + 2 if with_shapes else 0

    def line(name: str, cells: list, shape: str | None) -> str:
        text = name.ljust(width) + "".join(cell.rjust(w) for cell, w in zip(cells, widths))
        if shape is not None:
            text += "  " + shape.ljust(shape_width)
        return text.rstrip()

    rule_width = width + sum(widths) + (shape_width + 2 if with_shapes else 0)
    rule = "-" * rule_width
    if header is not None:
        lines += [rule, header]
    lines.append(rule)
    lines.append(line("Name", columns, "Input Shapes" if with_shapes else None))
    lines.append(rule)
    for index, (name, cells) in enumerate(zip(names, cells_of_rows)):
        lines.append(line(name, cells, shapes[index] if with_shapes else None))
    lines.append(rule)
    lines.append(f"Self CPU time total: {_format_time(self_total)}")
    if with_device:
        lines.append(f"Self CUDA time total: {_format_time(sum(e.self_device_time_total for e in all_events))}")
    return "\n".join(lines) + "\n"
