"""Running a session on a GPU with its inputs and outputs in the device's memory (io_binding).

Inputs already on the device (OrtValues from an earlier run, CuPy arrays from onnxnn's kernels) are
bound where they lie; a numpy input is copied there once per run (``run_plan`` uploads the values
it feeds, so a parameter is copied once, not every step). Outputs are OrtValues that onnxruntime
allocates on the device: the next graph reads them there, and only a read by the host copies.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..ir.device_arrays import ONNXRUNTIME_PLACEMENT, bind_input, to_host, to_ortvalue
from ..ir.dtypes import bfloat16

__all__ = ["DeviceBinder", "run_bound", "upload_inputs", "upload", "weak_reference", "dead_reference"]

_BFLOAT16 = bfloat16.numpy_dtype


def run_bound(session, inputs: list) -> list:
    """Runs ``session`` (a ``CompiledSession`` on a GPU) on ``inputs`` and returns its outputs, on the device."""
    if session.copy_inputs:  # a kernel writes these inputs: it gets copies, never a value's own array
        inputs = [np.array(to_host(data)) for data in inputs]
    if session.bfloat16_io is not None:  # exchanged as float32 (see sessions._widen_bfloat16_io)
        inputs = list(inputs)
        for position in session.bfloat16_io[0]:
            inputs[position] = to_host(inputs[position]).astype(np.float32)
    try:
        results = session.binder.run(session.input_names, session.output_names, inputs)
    except Exception as error:
        raise RuntimeError(f"onnxruntime failed to run the recorded graph on {session.device}: {error}") from None
    if session.bfloat16_io is not None:
        # numpy holds them until their next run uploads them again: onnxruntime's binding has no bfloat16 arrays
        for position in session.bfloat16_io[1]:
            results[position] = to_host(results[position]).astype(_BFLOAT16)
    return results


class DeviceBinder:
    """The io_bindings of one session on a GPU, and the one it keeps between runs.

    A run fed mostly the arrays the run before it was fed (a model's weights: inference, a fine-tuning's
    frozen layers) keeps its binding, and the next such run binds again only the inputs that changed
    (the batch): binding resnet50's 270 weights anew cost ~1 ms a call, a fifth of its run on an H200.
    Any other run (a training step, whose parameters are new arrays each step) binds a binding of its
    own, dropped with the run, so that no binding keeps the last step's parameters alive.
    """

    __slots__ = ("session", "device", "where", "index", "inner", "kept", "sources", "values", "fed", "lock", "graph")

    def __init__(self, session, device, graph=None):
        """``graph``: the session's ``fastpath.cuda_graphs.GraphCapture``, where its runs may be replayed."""
        self.session = session
        self.graph = graph
        self.device = device
        _, self.where = ONNXRUNTIME_PLACEMENT[device.type]
        self.index = device.index or 0
        self.inner = _inner_api(session, self.where, self.index)
        self.kept = None  # the binding kept between runs, or None
        self.sources: list = []  # per input of the kept binding: the array or OrtValue bound
        self.values: list = []  # per input: the OrtValue bound for it (a host array's copy lives here)
        self.fed: list | None = None  # weak references to the last run's inputs
        self.lock = threading.Lock()  # one run at a time uses the kept binding; others bind their own

    def run(self, input_names: list, output_names: list, inputs: list) -> list:
        graph = self.graph
        if graph is None:
            return self._run_plainly(input_names, output_names, inputs)
        results = graph.run(inputs)
        if results is None:
            results = self._run_plainly(input_names, output_names, inputs)
            graph.ran(inputs, results, input_names, output_names)
        return results

    def _run_plainly(self, input_names: list, output_names: list, inputs: list) -> list:
        if self.kept is not None and self.lock.acquire(blocking=False):
            try:
                sources = self.sources
                changed = [position for position, data in enumerate(inputs) if sources[position] is not data]
                if 2 * len(changed) <= len(inputs):
                    binding = self.kept
                    for position in changed:
                        self.values[position] = self._bind(binding, input_names[position], inputs[position])
                        sources[position] = inputs[position]
                    return self._run(binding, output_names)
                self.kept, self.sources, self.values = None, [], []  # other weights: let the old ones go
            finally:
                self.lock.release()
        binding = self.session.io_binding()
        values = [self._bind(binding, name, data) for name, data in zip(input_names, inputs)]
        results = self._run(binding, output_names)
        fed = self.fed
        stable = fed is not None and 2 * sum(reference() is data for reference, data in zip(fed, inputs)) >= len(inputs)
        if stable and self.lock.acquire(blocking=False):
            self.kept, self.sources, self.values = binding, list(inputs), values
            self.lock.release()
        self.fed = [weak_reference(data) for data in inputs]
        return results

    def _bind(self, binding, name: str, data):
        inner = self.inner
        if inner is not None and hasattr(data, "_ortvalue"):  # an OrtValue: bound where it lies
            binding._iobinding.bind_ortvalue_input(name, data._ortvalue)
            return data
        return bind_input(binding, name, data, self.device)

    def _run(self, binding, output_names: list) -> list:
        inner = self.inner
        if inner is not None:  # onnxruntime's Python wrapper checks each call; this path needs none of it
            run, device = inner
            raw = binding._iobinding
            raw.clear_binding_outputs()  # a kept binding's outputs: fresh arrays, never last run's overwritten
            for name in output_names:
                raw.bind_output(name, device)
            run(raw, None)
        else:
            binding.clear_binding_outputs()
            for name in output_names:
                binding.bind_output(name, self.where, self.index)
            self.session.run_with_iobinding(binding)
        return binding.get_outputs()


def _inner_api(session, where: str, index: int):
    """``(run, device)`` of onnxruntime's binding below its Python wrapper, or None where this
    onnxruntime lays it out otherwise (the public calls then run, each checking its arguments)."""
    import onnxruntime  # deferred: already imported by the session

    try:
        probe = session.io_binding()
        device = onnxruntime.OrtDevice.make(where, index)._get_c_device()
        run = session._sess.run_with_iobinding
        if not hasattr(probe, "_iobinding") or not hasattr(probe._iobinding, "bind_ortvalue_input"):
            return None
    except AttributeError:
        return None
    return run, device


def weak_reference(data):
    """A weak reference to ``data`` (an OrtValue, a numpy or CuPy array), or ``dead_reference`` where
    it cannot be weakly referred to: such an array is never taken for the same one next time."""
    try:
        return weakref.ref(data)
    except TypeError:
        return dead_reference


def dead_reference():
    """A weak reference that refers to nothing: the stand-in for an array not seen yet."""
    return None


def upload_inputs(values) -> list:
    """The arrays of realized ``values`` (a plan's inputs on a GPU), each copied to the device the
    first time it is fed and kept there: the value's own array becomes the device's copy."""
    return [upload(value) for value in values]


def upload(value):
    """Copies a realized value's numpy array to its device, once: the value keeps the device's copy.

    A CPU value fed to a GPU's graph (a device copy's input) is bound for that run only; bfloat16
    stays in numpy, which onnxruntime's binding exchanges as float32 (``run_bound``).
    """
    data = value.data
    if type(data) is np.ndarray and value.device.type != "cpu" and value.static is None and data.dtype != _BFLOAT16:
        data = value.data = to_ortvalue(data, value.device)
    return data
