"""Devices: where a tensor's value lives and which onnxruntime execution provider computes it."""

from __future__ import annotations

import functools
import threading

from onnx import TensorProto, helper

from .cuda_libraries import cuda_unavailable_error, driver_loads, preload_cuda_libraries
from .device_arrays import ONNXRUNTIME_PLACEMENT

__all__ = [
    "device",
    "as_device",
    "cuda_is_available",
    "require_usable",
    "default_device",
    "set_default_device",
    "get_default_device",
]


_STRING_INDEX_END = 2**31
_INDEX_END = 2**63


class device:
    """A device such as ``device("cpu")`` or ``device("cuda", 0)`` (also ``device("cuda:0")``)."""

    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __new__(cls, type_or_string, index: int | None = None):
        if isinstance(type_or_string, device):
            return type_or_string
        text = str(type_or_string)
        if ":" in text:
            text, _, index_text = text.partition(":")
            if index is not None or not (index_text.isascii() and index_text.isdigit()):
                raise RuntimeError(f"Invalid device string: '{type_or_string}'")
            index = int(index_text)
            if index >= _STRING_INDEX_END:  # PyTorch parses the index as a C int
                raise RuntimeError(f"Could not parse device index '{index_text}' in device string '{type_or_string}'")
        elif index is not None:
            # PyTorch reads the index as a C++ int64 and refuses negative ones.
            if index < 0:
                raise RuntimeError("Device index must not be negative")
            if index >= _INDEX_END:
                raise ValueError("Overflow when unpacking long long")
        if text not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {type_or_string}")
        if text == "cuda" and index is None:
            index = 0
        key = (text, index)
        cached = _DEVICES.get(key)
        if cached is None:
            cached = object.__new__(cls)
            object.__setattr__(cached, "type", text)
            object.__setattr__(cached, "index", index)
            _DEVICES[key] = cached
        return cached

    def __setattr__(self, name, value):
        raise AttributeError("device is immutable")

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return self is other

    # Devices are interned (one object per type and index), so identity is equality and hashing.
    __hash__ = object.__hash__

    def __reduce__(self):
        return (device, (str(self),))

    def __enter__(self) -> "device":
        """Makes this the default device of the factory functions inside the block (``set_default_device``)."""
        require_usable(self)
        _DEFAULT.entered.append(_DEFAULT.device)
        _DEFAULT.device = self
        return self

    def __exit__(self, *exc_info) -> None:
        _DEFAULT.device = _DEFAULT.entered.pop()


_DEVICES: dict = {}
CPU = device("cpu")


class _DefaultDevice(threading.local):
    """Per thread, as PyTorch's: the factory functions' device where they are given none, and the
    defaults that ``with device(...)`` blocks replaced, innermost last."""

    device = CPU

    def __init__(self):
        self.entered: list = []


_DEFAULT = _DefaultDevice()


def default_device() -> device:
    """The device of tensors created without a ``device=`` argument (the CPU unless set otherwise)."""
    return _DEFAULT.device


def set_default_device(value) -> None:
    """Sets the device of the tensors that factory functions create without a ``device=`` argument.

    Factory functions (``tensor``, ``zeros``, ``randn``, ``arange``, ...) and so the parameters
    of layers constructed afterwards go there; ``from_numpy`` and the ``*_like`` functions keep
    their input's device, as PyTorch's. The setting is per thread. A ``with onnxnn.device(...)``
    block sets it for the code inside.

    Args:
        value: a device, a string such as ``"cuda:0"``, a CUDA index, or None for the CPU.

    Example::

        >>> onnxnn.set_default_device("cpu")
        >>> onnxnn.zeros(2).device
        device(type='cpu')
    """
    if value is None:
        _DEFAULT.device = CPU
        return
    target = as_device(value)
    require_usable(target)
    _DEFAULT.device = target


def get_default_device() -> device:
    """The device ``set_default_device`` (or the innermost ``with device(...)`` block) set; the CPU by default."""
    return _DEFAULT.device


def as_device(value) -> device:
    """Converts a device, a string like "cuda:0", or an int (a CUDA index) to a device."""
    if isinstance(value, device):
        return value
    if isinstance(value, int):
        return device("cuda", value)
    return device(value)


def cuda_is_available() -> bool:
    """True when onnxruntime's CUDA provider really loads (checked once, by creating a session with it)."""
    provider, _ = ONNXRUNTIME_PLACEMENT["cuda"]
    if provider == "CPUExecutionProvider":
        return True  # "cuda" mapped onto the CPU's provider (tests of the device path on any machine)
    return _cuda_provider_loads()


def require_usable(target: device) -> None:
    """Raises a RuntimeError naming what is missing when ``target`` is a CUDA device that cannot run here."""
    if target.type == "cuda" and not cuda_is_available():
        raise cuda_unavailable_error()


@functools.lru_cache(maxsize=None)
def _cuda_provider_loads() -> bool:
    """Whether a session with onnxruntime's CUDA provider can be created and keeps that provider.

    Listing providers is not enough: onnxruntime-gpu lists CUDA even on machines without a GPU or
    without the CUDA libraries, and then silently falls back to the CPU.
    """
    import onnxruntime  # deferred: importing onnxruntime costs ~0.3 s, paid only when CUDA is asked about

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return False
    if not driver_loads():
        return False  # no GPU can be there: skips the session probe and onnxruntime's warnings
    preload_cuda_libraries()
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # the failed CUDA load is the expected answer here, not a warning
    previous = 2
    onnxruntime.set_default_logger_severity(4)  # ... and onnxruntime logs it through the default logger
    try:
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
        )
    except Exception:
        return False
    finally:
        onnxruntime.set_default_logger_severity(previous)
    return "CUDAExecutionProvider" in session.get_providers()
