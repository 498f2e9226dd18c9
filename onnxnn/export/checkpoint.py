"""Checkpoint files: ``onnxnn.save(obj, f)`` and ``onnxnn.load(f)``.

``save`` writes a `safetensors <https://github.com/huggingface/safetensors>`_ file, so any safetensors
reader opens it: an 8-byte little-endian header length, a JSON header giving each tensor's dtype, shape
and byte range, then the raw little-endian tensor bytes. No pickle is written and nothing executable is
stored. onnxnn describes the saved object in the header's ``__metadata__`` (a str -> str map) under the
key ``"onnxnn"``, as a JSON document of one of two kinds.

A state_dict (a ``dict`` or ``OrderedDict`` of str -> Tensor) keeps its keys as the tensor names::

    {"version": 1, "kind": "state_dict", "container": "OrderedDict",
     "keys": ["fc.weight", "fc.bias"],     # safetensors sorts its header; this restores the order
     "devices": {"fc.weight": "cuda:0"},   # only tensors that are not on the CPU
     "requires_grad": [...], "parameters": [...],   # only when some tensor requires grad / is a Parameter
     "metadata": <value>}                  # the OrderedDict's ``_metadata`` (module versions), if set

Its ``__metadata__`` also holds ``"format": "pt"``, which Hugging Face loaders ask of PyTorch weights.

Anything else (an optimizer state_dict, a training checkpoint with epochs and extra state, a tensor)
is ``{"version": 1, "kind": "object", "object": <value>}``; each tensor is stored under a name made of
its path (``"optimizer.state.0.exp_avg"``), and ``<value>`` is JSON::

    null, true, false, ints, finite floats, strings, lists     themselves
    {"float": "inf"}, {"float": "-inf"}, {"float": "nan"}
    {"tuple": [<value>, ...]}   {"set": [...]}   {"frozenset": [...]}   {"Size": [ints]}
    {"dict": [[<key>, <value>], ...]}       {"OrderedDict": [[<key>, <value>], ...], "metadata": <value>}
        (keys are <value>s too, so int, float, bool, None and tuple keys survive, in order)
    {"bytes": "<base64>"}                   {"dtype": "float32"}      {"device": "cuda:0"}
    {"tensor": "<name>", "device": "cuda:0", "requires_grad": true, "parameter": true}
        (the last three only when they apply)

One tensor object saved at two places is stored once and loaded as one object; other shared objects
are loaded as copies. numpy scalars are stored as Python numbers, bytearrays as bytes.

``load`` tells the formats apart by content: the above, plain safetensors files (a dict sorted by
name), and PyTorch's zip checkpoints (see :mod:`onnxnn.export.torch_checkpoint`).
"""
from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import secrets
import stat
import sys
from collections import OrderedDict
from typing import IO, Any, Callable, Union

import numpy as np
import safetensors.numpy

from ..runtime import dtypes
from ..runtime.device import CPU, as_device, cuda_is_available, device
from ..runtime.executor import realize
from ..runtime.tensor import Size, Tensor
from .torch_checkpoint import LEGACY_MAGIC, PendingTensor, read_torch_zip, resolve_marker

__all__ = ["save", "load"]

FileLike = Union[str, os.PathLike, IO[bytes]]

FORMAT_VERSION = 1
_METADATA_KEY = "onnxnn"
_SAFETENSORS_DTYPES = {
    "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
    "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8, "U8": dtypes.uint8,
    "BOOL": dtypes.bool,
}
_NOT_A_CHECKPOINT = "it is not an onnxnn, safetensors or PyTorch checkpoint"


def save(obj: Any, f: FileLike) -> None:
    """Saves a state_dict, an optimizer state, a tensor or a nested container of them to a file.

    The file is a safetensors file (see the module docstring for the layout): a state_dict is stored
    tensor by tensor under its keys; other objects also record their structure as JSON. Writing to a
    path is atomic: the data goes to a temporary file in the same directory that then replaces ``f``,
    so a failure never leaves a half-written file behind.

    Args:
        obj: a Tensor, or dicts, lists, tuples and sets of Tensors, numbers, strings, bools, None,
            bytes, dtypes and devices.
        f: a path, or a binary file object to write to.

    Raises:
        TypeError: ``obj`` holds a value that cannot be saved; the message names its path,
            e.g. ``['model']['fn']``.

    Example::

        >>> onnxnn.save(model.state_dict(), "model.safetensors")
        >>> onnxnn.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}, "ckpt.pt")
    """
    if _is_state_dict(obj):
        arrays, document = _encode_state_dict(obj)
        metadata = {"format": "pt"}
    else:
        encoder = _Encoder()
        document = {"version": FORMAT_VERSION, "kind": "object", "object": encoder.encode(obj, [])}
        arrays, metadata = _tensor_arrays(encoder.tensors), {}
    metadata[_METADATA_KEY] = json.dumps(document, allow_nan=False, separators=(",", ":"))
    if isinstance(f, (str, os.PathLike)):
        _write_atomically(f, lambda temporary: safetensors.numpy.save_file(arrays, temporary, metadata))
    elif hasattr(f, "write"):
        f.write(safetensors.numpy.save(arrays, metadata))
    else:
        raise TypeError(f"save() expected a path or a binary file object for f, got {type(f).__name__}")


def load(f: FileLike, map_location=None, *, weights_only: bool = True) -> Any:
    """Loads an object saved by :func:`save`, a safetensors file, or a PyTorch ``torch.save`` checkpoint.

    The format is recognized from the file's content, not its name. PyTorch checkpoints are read
    without PyTorch; their pickle may only rebuild tensors, containers and plain values, so loading
    never runs code from the file (as PyTorch's ``weights_only=True``).

    Args:
        f: a path, or a binary file object positioned at the start of the checkpoint.
        map_location: where tensors go: ``None`` (the device each was saved from), a device or a
            device string (all tensors), or a dict mapping saved locations to devices
            (``{"cuda:0": "cpu"}``).
        weights_only: accepted for PyTorch compatibility; onnxnn only ever loads data, whatever
            its value.

    Raises:
        RuntimeError: the file is empty, truncated, damaged or not a checkpoint, or a tensor's
            device is unavailable.
        pickle.UnpicklingError: a PyTorch checkpoint's pickle names anything other than tensors,
            containers and plain values (the message names the refused global).

    Example::

        >>> model.load_state_dict(onnxnn.load("model.safetensors"))
        >>> state = onnxnn.load("resnet18.pth", map_location="cpu")
    """
    device_map = _DeviceMap(map_location)
    data, source = _read_input(f)
    if not data:
        raise RuntimeError(f"cannot load {source}: the file is empty")
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        loaded = read_torch_zip(data, source)
    elif data.startswith(LEGACY_MAGIC):
        raise RuntimeError(f"cannot load {source}: it uses PyTorch's legacy format (PyTorch before 1.6, or "
                           "_use_new_zipfile_serialization=False), which onnxnn does not read; re-save it with "
                           "a recent torch.save")
    elif len(data) >= 9 and data[8:9] == b"{":
        loaded = _read_safetensors(data, source)
    else:
        raise RuntimeError(f"cannot load {source}: {_NOT_A_CHECKPOINT}")
    try:
        return _materialize(loaded, device_map, {})
    except RecursionError:
        raise RuntimeError(f"cannot load {source}: the object is nested too deeply") from None


# ---------------------------------------------------------------------------------------------- writing
def _is_state_dict(obj) -> bool:
    return (type(obj) in (dict, OrderedDict) and "__metadata__" not in obj
            and all(type(key) is str and isinstance(value, Tensor) for key, value in obj.items()))


def _is_parameter(tensor: Tensor) -> bool:
    nn = sys.modules.get("onnxnn.nn")
    parameter_class = getattr(nn, "Parameter", None)
    return parameter_class is not None and isinstance(tensor, parameter_class)


def _tensor_arrays(tensors: dict[str, Tensor]) -> dict[str, np.ndarray]:
    # One realize call computes all pending tensors in one graph run, rather than one run per tensor.
    realize([tensor._value for tensor in tensors.values()])
    arrays = {}
    for name, tensor in tensors.items():
        array = tensor.detach().cpu().numpy()
        # Not np.ascontiguousarray: it turns a 0-d array into a 1-d one.
        arrays[name] = array if array.flags.c_contiguous else np.array(array, order="C")
    return arrays


def _encode_state_dict(state_dict) -> tuple[dict, dict]:
    arrays = _tensor_arrays(state_dict)
    document = {"version": FORMAT_VERSION, "kind": "state_dict", "container": type(state_dict).__name__,
                "keys": list(state_dict)}
    devices = {key: str(tensor.device) for key, tensor in state_dict.items() if tensor.device != CPU}
    requires_grad = [key for key, tensor in state_dict.items() if tensor.requires_grad]
    parameters = [key for key, tensor in state_dict.items() if _is_parameter(tensor)]
    for name, entry in (("devices", devices), ("requires_grad", requires_grad), ("parameters", parameters)):
        if entry:
            document[name] = entry
    module_metadata = getattr(state_dict, "_metadata", None)
    if module_metadata is not None:
        document["metadata"] = _Encoder().encode(module_metadata, ["_metadata"])
    return arrays, document


def _format_path(path: list) -> str:
    return "".join(f"[{segment!r}]" for segment in path) or "the top level"


class _Encoder:
    """Turns an object into the JSON ``<value>`` of the module docstring, collecting its tensors by name."""

    def __init__(self):
        self.tensors: dict[str, Tensor] = {}  # also keeps them alive, so their ids stay unique during the walk
        self._names: dict[int, str] = {}  # id(tensor) -> its name, so a tensor saved twice is stored once
        self._open: set[int] = set()  # containers being encoded, to catch self-references

    def encode(self, value, path: list):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, np.generic) and isinstance(value.item(), (bool, int, float)):
            value = value.item()
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else {"float": str(value)}
        if isinstance(value, Tensor):
            return self._tensor(value, path)
        if isinstance(value, dtypes.dtype):
            return {"dtype": value.name}
        if isinstance(value, device):
            return {"device": str(value)}
        if isinstance(value, (bytes, bytearray)):
            return {"bytes": base64.b64encode(value).decode("ascii")}
        if isinstance(value, (list, tuple, dict, set, frozenset)):
            if id(value) in self._open:
                raise ValueError(f"cannot save an object that contains itself at {_format_path(path)}")
            self._open.add(id(value))
            try:
                return self._container(value, path)
            finally:
                self._open.discard(id(value))
        raise TypeError(f"cannot save value of type {type(value).__name__} at {_format_path(path)}")

    def _container(self, value, path: list):
        if isinstance(value, Size):
            return {"Size": [int(size) for size in value]}
        if isinstance(value, list):
            return [self.encode(item, path + [index]) for index, item in enumerate(value)]
        if isinstance(value, (tuple, set, frozenset)):
            tag = "tuple" if isinstance(value, tuple) else "frozenset" if isinstance(value, frozenset) else "set"
            return {tag: [self.encode(item, path + [index]) for index, item in enumerate(value)]}
        items = []
        for key, item in value.items():
            if isinstance(key, (Tensor, list, dict)) or not isinstance(key, (str, int, float, tuple, type(None))):
                raise TypeError(f"cannot save a dict key of type {type(key).__name__} at {_format_path(path)}")
            items.append([self.encode(key, path), self.encode(item, path + [key])])
        if not isinstance(value, OrderedDict):
            return {"dict": items}
        encoded = {"OrderedDict": items}
        module_metadata = getattr(value, "_metadata", None)
        if module_metadata is not None:
            encoded["metadata"] = self.encode(module_metadata, path + ["_metadata"])
        return encoded

    def _tensor(self, tensor: Tensor, path: list) -> dict:
        name = self._names.get(id(tensor))
        if name is None:
            base = ".".join(str(segment) for segment in path) or "tensor"
            name, suffix = base, 1
            while name in self.tensors or name == "__metadata__":
                suffix += 1
                name = f"{base}#{suffix}"
            self.tensors[name] = tensor
            self._names[id(tensor)] = name
        reference = {"tensor": name}
        if tensor.device != CPU:
            reference["device"] = str(tensor.device)
        if tensor.requires_grad:
            reference["requires_grad"] = True
        if _is_parameter(tensor):
            reference["parameter"] = True
        return reference


def _write_atomically(f, write: Callable[[str], None]) -> None:
    """Runs ``write(temporary_path)`` and then moves the temporary file over ``f`` in one step."""
    target = os.path.realpath(os.fspath(f))  # write through symlinks, as open() would
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        raise RuntimeError(f"Parent directory {directory} does not exist.")
    temporary = os.path.join(directory, f".{os.path.basename(target)}.{secrets.token_hex(8)}.tmp")
    # O_EXCL reserves a fresh name; mode 0o666 lets the umask decide permissions, as open() does.
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        if os.path.exists(target):
            os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
        write(temporary)
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


# ---------------------------------------------------------------------------------------------- reading
def _read_input(f) -> tuple[bytes, str]:
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        with open(path, "rb") as handle:
            return handle.read(), repr(path)
    if not hasattr(f, "read"):
        raise TypeError(f"load() expected a path or a binary file object for f, got {type(f).__name__}")
    data = f.read()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("load() expected a binary file object (opened with 'rb'), but read() returned "
                        f"{type(data).__name__}")
    name = getattr(f, "name", None)
    return bytes(data), (repr(name) if isinstance(name, str) else "<file object>")


def _read_safetensors(data: bytes, source: str):
    """Parses a safetensors file into its saved object (or a name-sorted dict for foreign files)."""
    header_size = int.from_bytes(data[:8], "little")
    if 8 + header_size > len(data):
        raise RuntimeError(f"cannot load {source}: the file is truncated (its safetensors header needs "
                           f"{header_size} bytes, {len(data) - 8} are present)")
    try:
        header = json.loads(data[8:8 + header_size])
    except (UnicodeDecodeError, ValueError):
        raise RuntimeError(f"cannot load {source}: {_NOT_A_CHECKPOINT} (unreadable safetensors header)") from None
    if not isinstance(header, dict):
        raise RuntimeError(f"cannot load {source}: {_NOT_A_CHECKPOINT} (unreadable safetensors header)")
    metadata = header.pop("__metadata__", None) or {}
    buffer = memoryview(data)[8 + header_size:]
    tensors = {name: _read_tensor(name, entry, buffer, source) for name, entry in header.items()}
    if not isinstance(metadata, dict) or _METADATA_KEY not in metadata:
        return {name: tensors[name] for name in sorted(tensors)}
    try:
        document = json.loads(metadata[_METADATA_KEY])
        if document["version"] > FORMAT_VERSION:
            raise RuntimeError(f"cannot load {source}: it was written by a newer onnxnn (format version "
                               f"{document['version']}, this onnxnn reads up to {FORMAT_VERSION})")
        if document["kind"] == "state_dict":
            return _decode_state_dict(document, tensors)
        if document["kind"] == "object":
            return _Decoder(tensors).decode(document["object"])
        raise ValueError(f"unknown kind {document['kind']!r}")
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        raise RuntimeError(f"cannot load {source}: its onnxnn metadata is malformed ({error})") from None


def _read_tensor(name: str, entry, buffer: memoryview, source: str) -> PendingTensor:
    try:
        value_dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
        shape = [int(size) for size in entry["shape"]]
        begin, end = (int(offset) for offset in entry["data_offsets"])
    except (KeyError, TypeError, ValueError):
        raise RuntimeError(f"cannot load {source}: malformed safetensors entry for tensor {name!r}") from None
    if value_dtype is None:
        raise RuntimeError(f"cannot load {source}: tensor {name!r} has dtype {entry['dtype']}, which onnxnn does "
                           f"not support (supported: {', '.join(_SAFETENSORS_DTYPES)})")
    if end > len(buffer):
        raise RuntimeError(f"cannot load {source}: the file is truncated (tensor {name!r} ends at byte {end} of "
                           f"the data section, which holds {len(buffer)} bytes)")
    expected = math.prod(shape) * value_dtype.itemsize
    if min(shape, default=0) < 0 or not 0 <= begin <= end or end - begin != expected:
        raise RuntimeError(f"cannot load {source}: tensor {name!r} of shape {shape} and dtype {entry['dtype']} "
                           f"spans bytes [{begin}, {end}), expected {expected} bytes")
    if value_dtype is dtypes.bool:
        array = np.frombuffer(buffer[begin:end], dtype=np.uint8) != 0
    else:
        array = np.frombuffer(buffer[begin:end], dtype=value_dtype.numpy_dtype).copy()
        if sys.byteorder == "big":
            array = array.byteswap()
    return PendingTensor(array.reshape(shape), value_dtype)


def _decode_state_dict(document: dict, tensors: dict):
    keys = document["keys"]
    if sorted(keys) != sorted(tensors):
        raise ValueError("the recorded keys differ from the stored tensors")
    devices = document.get("devices", {})
    requires_grad = set(document.get("requires_grad", ()))
    parameters = set(document.get("parameters", ()))
    container = OrderedDict() if document["container"] == "OrderedDict" else {}
    for key in keys:
        tensor = tensors[key]
        tensor.location = devices.get(key, "cpu")
        tensor.requires_grad = key in requires_grad
        tensor.parameter = key in parameters
        container[key] = tensor
    if "metadata" in document:
        container._metadata = _Decoder(tensors).decode(document["metadata"])
    return container


class _Decoder:
    """Turns the JSON ``<value>`` of the module docstring back into the object it describes."""

    def __init__(self, tensors: dict):
        self._tensors = tensors
        self._references: dict[str, PendingTensor] = {}

    def decode(self, value):
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [self.decode(item) for item in value]
        if not isinstance(value, dict):
            raise ValueError(f"unexpected entry {value!r}")
        if "tensor" in value:
            return self._tensor(value)
        if "OrderedDict" in value:
            result = OrderedDict((self.decode(key), self.decode(item)) for key, item in value["OrderedDict"])
            if "metadata" in value:
                result._metadata = self.decode(value["metadata"])
            return result
        (tag, content), = value.items()
        if tag == "dict":
            return {self._key(self.decode(key)): self.decode(item) for key, item in content}
        if tag in ("tuple", "set", "frozenset"):
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](self.decode(item) for item in content)
        if tag == "Size":
            return Size(int(size) for size in content)
        if tag == "float":
            return float(content)
        if tag == "bytes":
            return base64.b64decode(content, validate=True)
        if tag == "dtype":
            return dtypes.as_dtype(content)
        if tag == "device":
            return device(content)
        raise ValueError(f"unknown entry {tag!r}")

    @staticmethod
    def _key(key):
        if isinstance(key, list):
            raise ValueError("a dict key decodes to a list")
        return key

    def _tensor(self, reference: dict) -> PendingTensor:
        name = reference["tensor"]
        pending = self._references.get(name)
        if pending is None:
            pending = self._references[name] = self._tensors[name]
            pending.location = reference.get("device", "cpu")
            pending.requires_grad = reference.get("requires_grad", False) is True
            pending.parameter = reference.get("parameter", False) is True
        return pending


# --------------------------------------------------------------------------------------- materializing
class _DeviceMap:
    """Resolves the location a tensor was saved from to the device ``map_location`` asks for."""

    def __init__(self, map_location):
        self._target = None
        self._table: dict[str, device] = {}
        if isinstance(map_location, dict):
            self._table = {str(key): as_device(value) for key, value in map_location.items()}
        elif isinstance(map_location, (str, device)):
            self._target = as_device(map_location)
        elif map_location is not None:
            raise TypeError("map_location should be None, a device, a device string or a dict of locations, got "
                            f"{type(map_location).__name__} (onnxnn has no storages to pass to a callable)")
        self._resolved: dict[str, device] = {}

    def __call__(self, location: str) -> device:
        resolved = self._resolved.get(location)
        if resolved is not None:
            return resolved
        if self._target is not None:
            resolved = self._target
        elif location in self._table:
            resolved = self._table[location]
        else:
            try:
                resolved = device(location)
            except RuntimeError:
                raise RuntimeError(f"don't know how to restore data location {location!r}: pass map_location, "
                                   "e.g. map_location='cpu'") from None
        if resolved.type == "cuda" and not cuda_is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but onnxnn.cuda.is_available() "
                               "is False. If you are running on a CPU-only machine, please use onnxnn.load with "
                               "map_location='cpu' to map your tensors to the CPU.")
        self._resolved[location] = resolved
        return resolved


def _make_tensor(pending: PendingTensor, device_map: _DeviceMap) -> Tensor:
    tensor = Tensor._from_array(pending.array, pending.dtype, device_map(pending.location))
    requires_grad = pending.requires_grad and pending.dtype.is_floating_point
    if pending.parameter:
        try:
            from ..nn import Parameter
        except ImportError:
            Parameter = None
        if Parameter is not None:
            return Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)


def _materialize(value, device_map: _DeviceMap, memo: dict):
    """Replaces PendingTensors by Tensors and checks that only plain data remains."""
    if value is None or type(value) in (bool, int, float, str, bytes, device, dtypes.dtype):
        return value
    if isinstance(value, PendingTensor):
        tensor = memo.get(id(value))
        if tensor is None:
            tensor = memo[id(value)] = _make_tensor(value, device_map)
        return tensor
    kind = type(value)
    if kind is list:
        return [_materialize(item, device_map, memo) for item in value]
    if kind in (tuple, Size, set, frozenset):
        return kind(_materialize(item, device_map, memo) for item in value)
    if kind in (dict, OrderedDict):
        result = kind((_materialize(key, device_map, memo), _materialize(item, device_map, memo))
                      for key, item in value.items())
        # PyTorch's state_dict carries module versions in ``_metadata``; load_state_dict reads them.
        module_metadata = getattr(value, "__dict__", {}).get("_metadata")
        if module_metadata is not None and kind is OrderedDict:
            result._metadata = _materialize(module_metadata, device_map, memo)
        return result
    if kind is bytearray:
        return bytes(value)
    return resolve_marker(value)
