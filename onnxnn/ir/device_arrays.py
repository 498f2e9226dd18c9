"""Where a value's array lives: numpy on the host; onnxruntime OrtValues or CuPy arrays on a GPU.

A realized ``Value.data`` on the CPU is a numpy array. On a CUDA device it is an
``onnxruntime.OrtValue`` in the device's memory (what onnxruntime's sessions produce through
io_binding), a CuPy array (what onnxnn's kernels produce there), or, until the value's first run,
the numpy array it was created from. Runs take device arrays as they are, so values stay on the
device from graph to graph; a read by the host (``item()``, printing, ``cpu()``, a checkpoint)
copies to numpy here, where PyTorch would synchronize and copy.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from .mode import MODE

__all__ = [
    "ONNXRUNTIME_PLACEMENT",
    "execution_provider",
    "on_host",
    "shape_of",
    "to_host",
    "to_ortvalue",
    "to_cupy",
    "bind_input",
]

# Per device type: the execution provider that computes its sessions and the OrtValue device name
# its arrays live on. The CPU is absent: its arrays are numpy's and its sessions run them directly.
# (tests/runtime/test_devices.py maps "cuda" onto the CPU's provider and OrtValues to run this
# whole path on machines without a GPU.)
ONNXRUNTIME_PLACEMENT = {"cuda": ("CUDAExecutionProvider", "cuda")}


def execution_provider(device) -> tuple:
    """The providers of a session on ``device`` (a non-CPU ``onnxnn.device``), falling back to the CPU's
    for the ops the device's provider lacks, as onnxruntime assigns them."""
    provider, _ = ONNXRUNTIME_PLACEMENT[device.type]
    if provider == "CPUExecutionProvider":
        return ("CPUExecutionProvider",)
    # TF32 off unless ``set_float32_matmul_precision`` allowed less than "highest": float32 matrix
    # products and convolutions keep float32's precision, as PyTorch's default computes them.
    use_tf32 = int(MODE.float32_matmul_precision != "highest")
    return ((provider, {"device_id": device.index or 0, "use_tf32": use_tf32}), "CPUExecutionProvider")


def on_host(data) -> bool:
    return type(data) is np.ndarray


def shape_of(data) -> tuple:
    """The shape of ``data``, a numpy or CuPy array or an OrtValue (whose ``shape`` is a method)."""
    shape = data.shape
    return tuple(shape()) if callable(shape) else shape


def to_host(data) -> np.ndarray:
    """``data`` (a numpy array, an OrtValue or a CuPy array) as a numpy array in host memory."""
    if type(data) is np.ndarray:
        return data
    copy = getattr(data, "get", None)  # CuPy's copy to the host
    if copy is not None:
        return copy()
    if hasattr(data, "device_name"):  # an OrtValue: numpy() copies from a device's memory, ...
        array = data.numpy()
        # ... but on the CPU it is a view of the OrtValue's buffer, which is freed with the OrtValue
        return array.copy() if data.device_name().lower() == "cpu" else array
    return np.asarray(data)


def to_ortvalue(data, device):
    """``data`` as an OrtValue in ``device``'s memory (copied there when it is not already)."""
    import onnxruntime  # deferred: importing onnxruntime costs ~0.3 s; a device value has a session anyway

    if isinstance(data, onnxruntime.OrtValue):
        return data
    array = np.asarray(to_host(data), order="C")  # (not ascontiguousarray, which makes a 0-d array 1-d)
    _, where = ONNXRUNTIME_PLACEMENT[device.type]
    return onnxruntime.OrtValue.ortvalue_from_numpy(array, where, device.index or 0)


def bind_input(binding, name: str, data, device) -> object:
    """Binds ``data`` as the input ``name`` of an io_binding, without a copy when it is on ``device``
    already; returns what must stay alive until the run (the OrtValue or array bound)."""
    pointer = getattr(data, "data", None)
    if not on_host(data) and hasattr(pointer, "ptr"):  # a CuPy array: bound where it lies
        _, where = ONNXRUNTIME_PLACEMENT[device.type]
        data = data if data.flags.c_contiguous else data.copy()
        binding.bind_input(name, where, device.index or 0, data.dtype, list(data.shape), data.data.ptr)
        return data
    value = to_ortvalue(data, device)
    binding.bind_ortvalue_input(name, value)
    return value


def to_cupy(data, cupy):
    """``data`` as a CuPy array (``cupy`` is the module): an OrtValue in a GPU's memory is wrapped
    where it lies, without a copy, and kept alive by the array."""
    if isinstance(data, cupy.ndarray):
        return data
    if on_host(data) or data.device_name().lower() != "cuda":
        return cupy.asarray(to_host(data))
    dtype = helper.tensor_dtype_to_np_dtype(data.element_type())
    memory = cupy.cuda.UnownedMemory(data.data_ptr(), data.tensor_size_in_bytes(), data)
    return cupy.ndarray(tuple(data.shape()), dtype, cupy.cuda.MemoryPointer(memory, 0))
