"""CUDA graph replay of sessions on a GPU: a session that runs again with the same shapes launches
one captured graph instead of each of its kernels.

onnxruntime's CUDA provider (``enable_cuda_graph``) captures a session's kernels at a run and
replays them after, reading and writing the very buffers bound at capture. So once a session on
the CUDA provider has run ``CAPTURE_AFTER_RUNS`` times with the same input and output shapes (a
training step, a compiled call, any loop's repeated graph), a twin session with graph capture on
runs in its place (``GraphCapture``):

- each input is copied into a buffer of its own before the replay, except one that is the very
  array copied there last time: onnxnn's arrays never change once made, so a model's weights are
  copied once, while the parameters an optimizer step replaced are copied at the next step;
- each result is copied out of the output buffers into an array of its own after it (the next
  replay overwrites them).

A graph with nodes the CUDA provider cannot run, symbolic shapes, inputs a kernel writes, bfloat16
inputs or outputs, or more than ``CAPTURE_BYTES`` of inputs and outputs keeps its plain session, as
does any run while the fast path is off (``onnxnn.set_fast_path``). The twin computes with the same
kernels, so results match the plain session's up to cuDNN choosing other algorithms in its search.

Raw onnxruntime on an H200, one process: an MLP 784-512-512-10 at batch 64 0.085 -> 0.043 ms a
run, resnet50 at batch 8 4.37 -> 4.15 ms (benchmarks/bench_gpu.py measures onnxnn's calls).
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np
from onnx import helper

from ...ir.cuda_libraries import cuda_runtime
from ...ir.device_arrays import ONNXRUNTIME_PLACEMENT, execution_provider, shape_of
from ...ir.mode import MODE
from ..device_sessions import dead_reference, weak_reference
from ..static_shapes import has_static_inputs

__all__ = ["GraphCapture", "graph_capture", "CAPTURE_AFTER_RUNS", "CAPTURE_BYTES"]

_DEVICE_TO_DEVICE = 3  # cudaMemcpyDeviceToDevice
# Plain runs with the same shapes before the twin is made: a graph run once or twice (a one-off
# evaluation, a model's first steps) never pays for a second session and a capture.
CAPTURE_AFTER_RUNS = 2
# The twin's buffers hold a copy of every input and output: past this many bytes (a large model's
# parameters and optimizer state) the memory is worth more than the launches saved.
CAPTURE_BYTES = 1 << 30


def graph_capture(model, device, threads: int, make_session: Callable) -> "GraphCapture | None":
    """A ``GraphCapture`` for a session of ``model`` on ``device``, or None where its graph could not
    be replayed: another provider than CUDA's, or input shapes left symbolic.

    Args:
        make_session: ``make_session(model, providers, threads, quiet=True)``, an onnxruntime session
            that logs no error of its own when it cannot be made.
    """
    provider, _ = ONNXRUNTIME_PLACEMENT[device.type]
    if provider != "CUDAExecutionProvider":
        return None
    if not has_static_inputs(model):
        return None
    return GraphCapture(lambda: _twin(model, device, threads, make_session), device)


def _twin(model, device, threads: int, make_session: Callable):
    provider, options = execution_provider(device)[0]
    # No CPU provider: a node the CUDA provider cannot run fails the twin, and the plain session stays
    # (onnxruntime would print that failure in red: ``GraphCapture.reason`` keeps it instead).
    return make_session(model, [(provider, {**options, "enable_cuda_graph": "1"})], threads, quiet=True)


class GraphCapture:
    """One session's plain runs until they repeat, then the captured twin that stands in for them.

    ``reason`` says why there is no twin, once there will never be one.
    """

    __slots__ = ("make_twin", "device", "shapes", "runs", "replay", "reason", "lock")

    def __init__(self, make_twin: Callable, device):
        self.make_twin = make_twin
        self.device = device
        self.shapes: tuple | None = None  # the input and output shapes of the runs counted
        self.runs = 0
        self.replay: _Replay | None = None
        self.reason: str | None = None
        self.lock = threading.Lock()  # one replay at a time uses the buffers; others run plainly

    def run(self, inputs: list) -> list | None:
        """The results of a replay, or None: the plain session runs (and ``ran`` is told)."""
        replay = self.replay
        if replay is None or not MODE.fast_path or not self.lock.acquire(blocking=False):
            return None
        try:
            return replay(inputs)
        except Exception as error:  # the capture failed: an op that reads its data on the host
            self.replay, self.reason = None, f"the capture failed: {error}"
            return None
        finally:
            self.lock.release()

    def ran(self, inputs: list, results: list, input_names: list, output_names: list) -> None:
        """Notes a plain run; makes the twin once ``CAPTURE_AFTER_RUNS`` runs had the same shapes."""
        if self.replay is not None or self.reason is not None or not MODE.fast_path:
            return
        shapes = (tuple(map(shape_of, inputs)), tuple(map(shape_of, results)))
        if shapes != self.shapes:
            self.shapes, self.runs = shapes, 0
        self.runs += 1
        if self.runs < CAPTURE_AFTER_RUNS:
            return
        sizes = [_byte_size(data) for data in inputs] + [_byte_size(data) for data in results]
        if sum(sizes) > CAPTURE_BYTES:
            self.reason = f"its inputs and outputs take {sum(sizes)} bytes (more than {CAPTURE_BYTES})"
            return
        try:
            self.replay = _Replay(self.make_twin(), self.device, inputs, results, input_names, output_names)
        except Exception as error:  # nodes the CUDA provider cannot run
            self.reason = f"not captured: {error}"


class _Replay:
    """The captured twin, its bound buffers, and which array each input buffer holds a copy of."""

    __slots__ = ("session", "binding", "buffers", "copied", "results", "where", "index")

    def __init__(self, session, device, inputs: list, results: list, input_names: list, output_names: list):
        self.session = session
        _, self.where = ONNXRUNTIME_PLACEMENT[device.type]
        self.index = device.index or 0
        self.binding = session.io_binding()
        self.buffers = [self._allocate(shape_of(data), _dtype_of(data)) for data in inputs]
        self.copied: list = [dead_reference] * len(inputs)  # weak references: a copied array may go
        for name, buffer in zip(input_names, self.buffers):
            self.binding.bind_ortvalue_input(name, buffer)
        self.results = []  # per output: its shape, dtype and bound buffer
        for name, data in zip(output_names, results):
            shape, dtype = shape_of(data), _dtype_of(data)
            buffer = self._allocate(shape, dtype)
            self.binding.bind_ortvalue_output(name, buffer)
            self.results.append((shape, dtype, buffer))

    def _allocate(self, shape: tuple, dtype):
        import onnxruntime  # deferred: loaded by the sessions already

        return onnxruntime.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, self.where, self.index)

    def __call__(self, inputs: list) -> list | None:
        runtime = cuda_runtime()
        copied = self.copied
        for position, data in enumerate(inputs):
            if copied[position]() is not data:
                if not _copy_into(runtime, self.buffers[position], data):
                    return None  # another size than captured: the plain session runs
                copied[position] = weak_reference(data)
        runtime.cudaDeviceSynchronize()  # the copies, on CUDA's default stream, before the replay's stream
        self.session.run_with_iobinding(self.binding)
        runtime.cudaDeviceSynchronize()
        outputs = []
        for shape, dtype, result in self.results:
            output = self._allocate(shape, dtype)
            _check(
                runtime.cudaMemcpy(
                    output.data_ptr(), result.data_ptr(), result.tensor_size_in_bytes(), _DEVICE_TO_DEVICE
                )
            )
            outputs.append(output)
        runtime.cudaDeviceSynchronize()  # the next replay overwrites the buffers these copies read
        return outputs


def _dtype_of(data):
    """The numpy dtype of a numpy or CuPy array or an OrtValue."""
    dtype = getattr(data, "dtype", None)
    if dtype is not None:
        return np.dtype(dtype)
    return helper.tensor_dtype_to_np_dtype(data.element_type())


def _byte_size(data) -> int:
    size = getattr(data, "nbytes", None)
    return size if size is not None else data.tensor_size_in_bytes()


def _copy_into(runtime, buffer, data) -> bool:
    """Copies an input (an OrtValue or a CuPy array on the device, or a numpy array) into ``buffer``;
    False where its size is not the buffer's."""
    size = _byte_size(data)
    if size != buffer.tensor_size_in_bytes():
        return False
    if type(data) is np.ndarray:
        buffer.update_inplace(np.asarray(data, order="C"))
        return True
    if hasattr(data, "data_ptr"):  # an OrtValue
        source = data.data_ptr()
    else:  # a CuPy array
        data = data if data.flags.c_contiguous else data.copy()
        source = data.data.ptr
    _check(runtime.cudaMemcpy(buffer.data_ptr(), source, size, _DEVICE_TO_DEVICE))
    return True


def _check(status: int) -> None:
    if status != 0:
        raise RuntimeError(f"CUDA's runtime failed to copy a captured graph's array (cudaError {status})")
