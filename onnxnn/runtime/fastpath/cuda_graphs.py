"""CUDA graph replay of compiled calls: a compiled module's call on a GPU launches one captured graph
instead of each of its kernels.

onnxruntime's CUDA provider (``enable_cuda_graph``) captures a session's kernels at a run and replays
them after, reading and writing the very buffers bound at capture. So a captured call binds the
module's state (its weights: fixed while they are the values the call was traced with) where it
lies, copies each argument into a buffer of its own before the replay, and copies each result out
of the output buffers after it (the next replay overwrites them; onnxnn's values never change). A
graph with nodes on the CPU provider cannot be captured: its calls keep the plain session.

Raw onnxruntime on an H200, one process: an MLP 784-512-512-10 at batch 64 0.085 -> 0.043 ms a
run, resnet50 at batch 8 4.37 -> 4.15 ms (benchmarks/bench_gpu.py measures onnxnn's calls).
"""

from __future__ import annotations

import threading

import numpy as np

from ...ir.cuda_libraries import cuda_runtime
from ...ir.device_arrays import ONNXRUNTIME_PLACEMENT, execution_provider, to_ortvalue
from ..sessions import DeviceSession, create_session

__all__ = ["CapturedCall", "captured_call"]

_DEVICE_TO_DEVICE = 3  # cudaMemcpyDeviceToDevice
# A call replays from its second run on: a one-off call never pays for a second session and a capture.
CAPTURE_AFTER_RUNS = 1


def captured_call(runner, fixed: list, inputs: list, outputs: list):
    """``runner`` (a compiled call's session) replayed as a CUDA graph where it can be, else ``runner``.

    Args:
        fixed: per input, whether it is the module's state or a constant of the trace (bound once)
            rather than an argument of the call (copied in at each call).
        inputs, outputs: the plan's input and output values (shapes and dtypes).
    """
    if not isinstance(runner, DeviceSession) or runner.copy_inputs or runner.bfloat16_io is not None:
        return runner
    provider, _ = ONNXRUNTIME_PLACEMENT[runner.device.type]
    if provider != "CUDAExecutionProvider":
        return runner
    return CapturedCall(runner, fixed, inputs, outputs)


class CapturedCall:
    """A compiled call's session and, from its second run, the CUDA graph that stands in for it."""

    __slots__ = ("runner", "fixed", "input_specs", "output_specs", "runs", "replay", "retired", "reason", "lock")

    def __init__(self, runner: DeviceSession, fixed: list, inputs: list, outputs: list):
        self.runner = runner
        self.fixed = fixed
        self.input_specs = [(value.shape, value.dtype.numpy_dtype) for value in inputs]
        self.output_specs = [(value.shape, value.dtype.numpy_dtype) for value in outputs]
        self.runs = 0
        self.replay: _Replay | None = None
        self.retired = False  # the graph could not be captured, or its state changed: plain runs
        self.reason: str | None = None  # why, once retired
        self.lock = threading.Lock()  # one replay at a time uses the buffers; others run plainly

    def __call__(self, arrays: list) -> list:
        self.runs += 1
        if self.retired or self.runs <= CAPTURE_AFTER_RUNS or not self.lock.acquire(blocking=False):
            return self.runner(arrays)
        try:
            replay = self.replay
            if replay is None:
                try:
                    replay = self.replay = _Replay(self, arrays)
                except Exception as error:  # nodes on the CPU provider, or a provider without graphs
                    self.retired, self.reason = True, f"not captured: {error}"
                    return self.runner(arrays)
            elif not replay.holds(arrays):
                self.retired, self.replay = True, None  # new weights: the captured buffers are stale
                self.reason = "the module's state changed since the capture"
                return self.runner(arrays)
            return replay(arrays)
        finally:
            self.lock.release()


class _Replay:
    """The captured session, its fixed bindings and the buffers of the call's arguments and results."""

    __slots__ = ("session", "binding", "bound", "buffers", "results", "output_specs", "device", "where")

    def __init__(self, call: CapturedCall, arrays: list):
        runner = call.runner
        self.device = runner.device
        _, self.where = ONNXRUNTIME_PLACEMENT[self.device.type]
        index = self.device.index or 0
        provider, options = execution_provider(self.device)[0]
        providers = [(provider, {**options, "enable_cuda_graph": "1"})]  # no CPU fallback: every node captured
        self.session = create_session(runner.model, providers, runner.threads)
        self.binding = self.session.io_binding()
        self.bound: list = []  # per input: the fixed array it was bound with (None for arguments)
        self.buffers: list = []  # per input: the OrtValue bound (an argument's buffer, or the state itself)
        for name, data, fixed, (shape, dtype) in zip(runner.input_names, arrays, call.fixed, call.input_specs):
            if fixed:
                value = to_ortvalue(data, self.device)
                self.bound.append(data)
            else:
                value = _allocate(shape, dtype, self.where, index)
                self.bound.append(None)
            self.buffers.append(value)
            self.binding.bind_ortvalue_input(name, value)
        self.output_specs = call.output_specs
        self.results = [_allocate(shape, dtype, self.where, index) for shape, dtype in call.output_specs]
        for name, value in zip(runner.output_names, self.results):
            self.binding.bind_ortvalue_output(name, value)

    def holds(self, arrays: list) -> bool:
        """Whether every fixed input is still the very array the graph was captured with."""
        return all(bound is None or bound is data for bound, data in zip(self.bound, arrays))

    def __call__(self, arrays: list) -> list:
        runtime = cuda_runtime()
        for bound, buffer, data in zip(self.bound, self.buffers, arrays):
            if bound is None:
                _copy_into(runtime, buffer, data)
        runtime.cudaDeviceSynchronize()  # the copies, on CUDA's default stream, before the replay's stream
        self.session.run_with_iobinding(self.binding)
        runtime.cudaDeviceSynchronize()
        index = self.device.index or 0
        copies = []
        for result, (shape, dtype) in zip(self.results, self.output_specs):
            copy = _allocate(shape, dtype, self.where, index)
            _check(
                runtime.cudaMemcpy(copy.data_ptr(), result.data_ptr(), result.tensor_size_in_bytes(), _DEVICE_TO_DEVICE)
            )
            copies.append(copy)
        runtime.cudaDeviceSynchronize()  # the next replay overwrites the buffers these copies read
        return copies


def _allocate(shape, dtype, where: str, index: int):
    import onnxruntime  # deferred: loaded by the sessions already

    return onnxruntime.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, where, index)


def _copy_into(runtime, buffer, data) -> None:
    """Copies an argument's array (an OrtValue or a CuPy array on the device, or a numpy array) into ``buffer``."""
    if type(data) is np.ndarray:
        buffer.update_inplace(np.asarray(data, order="C"))
        return
    if hasattr(data, "data_ptr"):  # an OrtValue
        source, size = data.data_ptr(), data.tensor_size_in_bytes()
    else:  # a CuPy array
        source, size = data.data.ptr, data.nbytes
    _check(runtime.cudaMemcpy(buffer.data_ptr(), source, size, _DEVICE_TO_DEVICE))


def _check(status: int) -> None:
    if status != 0:
        raise RuntimeError(f"CUDA's runtime failed to copy a captured call's array (cudaError {status})")
