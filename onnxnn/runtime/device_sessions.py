"""Running a session on a GPU with its inputs and outputs in the device's memory (io_binding).

Inputs already on the device (OrtValues from an earlier run, CuPy arrays from onnxnn's kernels) are
bound where they lie; a numpy input is copied there once per run (``run_plan`` uploads the values
it feeds, so a parameter is copied once, not every step). Outputs are OrtValues that onnxruntime
allocates on the device: the next graph reads them there, and only a read by the host copies.
"""

from __future__ import annotations

import numpy as np

from ..ir.device_arrays import ONNXRUNTIME_PLACEMENT, bind_input, to_host, to_ortvalue
from ..ir.dtypes import bfloat16

__all__ = ["run_bound", "upload_inputs", "upload"]

_BFLOAT16 = bfloat16.numpy_dtype


def run_bound(session, inputs: list) -> list:
    """Runs ``session`` (a ``CompiledSession`` on a GPU) on ``inputs`` and returns its outputs, on the device."""
    device = session.device
    _, where = ONNXRUNTIME_PLACEMENT[device.type]
    index = device.index or 0
    if session.copy_inputs:  # a kernel writes these inputs: it gets copies, never a value's own array
        inputs = [np.array(to_host(data)) for data in inputs]
    if session.bfloat16_io is not None:  # exchanged as float32 (see sessions._widen_bfloat16_io)
        inputs = list(inputs)
        for position in session.bfloat16_io[0]:
            inputs[position] = to_host(inputs[position]).astype(np.float32)
    binding = session.session.io_binding()
    bound = [bind_input(binding, name, data, device) for name, data in zip(session.input_names, inputs)]
    for name in session.output_names:
        binding.bind_output(name, where, index)
    try:
        session.session.run_with_iobinding(binding)
    except Exception as error:
        raise RuntimeError(f"onnxruntime failed to run the recorded graph on {device}: {error}") from None
    del bound
    results = binding.get_outputs()
    if session.bfloat16_io is not None:
        # numpy holds them until their next run uploads them again: onnxruntime's binding has no bfloat16 arrays
        for position in session.bfloat16_io[1]:
            results[position] = to_host(results[position]).astype(_BFLOAT16)
    return results


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
