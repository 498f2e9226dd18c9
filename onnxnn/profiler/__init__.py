"""onnxnn.profiler: torch.profiler's API for onnxnn's recording, planning, compilation and runs.

Each ONNX node onnxnn runs is an event timed by onnxruntime's profiler (or by onnxnn's kernels),
named by its op type and attributed to the module whose forward recorded it; onnxnn's phases
(module forwards, realizations with their planning, compilation and run, backward passes) and
``record_function`` ranges are events around them. See ``profile``.
"""

from .events import EventList, FunctionEvent, FunctionEventAvg
from .profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = [
    "profile",
    "record_function",
    "schedule",
    "ProfilerActivity",
    "ProfilerAction",
    "supported_activities",
    "tensorboard_trace_handler",
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
]
