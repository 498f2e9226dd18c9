"""Checkpoint files: ``onnxnn.save(obj, f)`` and ``onnxnn.load(f)``.

``save`` to a path ending in ``.pt``, ``.pth``, ``.bin`` or ``.ckpt`` writes PyTorch's own zip format (see
:mod:`onnxnn.export.torch_checkpoint_writer`), which ``torch.load(f, weights_only=True)`` reads.
Anywhere else (``.safetensors``, other names, file objects) it writes a
`safetensors <https://github.com/huggingface/safetensors>`_ file, so any safetensors
reader opens it: an 8-byte little-endian header length, a JSON header giving each tensor's dtype, shape
and byte range, then the raw little-endian tensor bytes. That file holds no pickle and nothing executable is
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
    {"Counter": [[<key>, <value>], ...]}    (collections.Counter, as MultiStepLR's milestones)
        (keys are <value>s too, so int, float, bool, None and tuple keys survive, in order)
    {"complex": [<real>, <imag>]}           (each a float <value>)
    {"bytes": "<base64>"}   {"bytearray": "<base64>"}   {"dtype": "float32"}   {"device": "cuda:0"}
    {"tensor": "<name>", "device": "cuda:0", "requires_grad": true, "parameter": true}
        (the last three only when they apply)

One tensor object saved at two places is stored once and loaded as one object; other shared objects
are loaded as copies. numpy scalars are stored as Python numbers.

``load`` tells the formats apart by content: the above, plain safetensors files (a dict sorted by
name), and PyTorch's zip checkpoints (see :mod:`onnxnn.export.torch_checkpoint`). Every way a file
can be wrong ends in :class:`onnxnn.CheckpointError` naming the file (or "the given bytes"/"<file
object>") and what is wrong; loading takes time and memory bounded by the file's size (objects the
file shares are built once and stay shared; tensors viewing one storage are read from it once).
Each loaded tensor is a tensor of its own, though: two that viewed one storage in PyTorch (``x`` and
``x[2:]`` saved together) do not see each other's in-place writes after loading.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import sys
import warnings
from collections import Counter, OrderedDict
from typing import IO, Any, Union

import numpy as np

from ..errors import CheckpointError
from ..ir import dtypes
from ..ir.device import CPU, device
from ..nn.parameter import Parameter
from ..runtime.internal import constant_tensor, realize_values
from ..runtime.tensor import Size, Tensor
from .atomic_write import write_atomically
from .checkpoint_devices import DeviceMap
from .restricted_unpickler import MAX_DEPTH, describe
from .safetensors_format import parse_json, read_safetensors, write_safetensors
from .torch_checkpoint import LEGACY_MAGIC, PendingTensor, read_torch_zip, resolve_marker
from .torch_checkpoint_writer import write_torch_zip

__all__ = ["save", "load", "TORCH_CHECKPOINT_SUFFIXES"]

FileLike = Union[str, os.PathLike, IO[bytes]]

FORMAT_VERSION = 1
_METADATA_KEY = "onnxnn"
# The names PyTorch checkpoints go by (``.ckpt``: PyTorch Lightning's, a torch.save zip too).
TORCH_CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_NOT_A_CHECKPOINT = "it is not an onnxnn, safetensors or PyTorch checkpoint"


def save(obj: Any, f: FileLike) -> None:
    """Saves a state_dict, an optimizer state, a tensor or a nested container of them to a file.

    A path ending in ``.pt``, ``.pth``, ``.bin`` or ``.ckpt`` gets PyTorch's zip format, which
    ``torch.load(f, weights_only=True)`` reads (dicts, OrderedDicts, Counters, lists, tuples, sets,
    numbers (complex too), strings, bools, None, bytes, bytearrays, dtypes, devices, sizes and
    tensors; tensors over one storage share one there too; not frozensets, which PyTorch's
    loader refuses). Other paths and file objects get a safetensors file (see the module docstring
    for the layout): a state_dict is stored tensor by tensor under its keys; other objects also record
    their structure as JSON. Writing to a path is atomic: the data goes to one temporary file in the
    same directory that then replaces ``f``, so a failure never leaves a half-written file behind, and
    temporaries left by saves of ``f`` that were killed are removed.

    Args:
        obj: a Tensor, or dicts, lists, tuples and sets of Tensors, numbers, strings, bools, None,
            bytes, dtypes and devices (and Counters, complex numbers and bytearrays).
        f: a path, or a binary file object to write to.

    Raises:
        TypeError: ``obj`` holds a value that cannot be saved; the message names its path,
            e.g. ``['model']['fn']``.
        OSError: the file cannot be written (full disk, no permission); the message names ``f``,
            and an earlier file at ``f`` is left as it was.

    Example::

        >>> onnxnn.save(model.state_dict(), "model.safetensors")
        >>> onnxnn.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}, "ckpt.pt")
        >>> torch.load("ckpt.pt", weights_only=True)["epoch"]   # where PyTorch is installed
        3
    """
    if isinstance(f, (str, os.PathLike)) and os.fspath(f).lower().endswith(TORCH_CHECKPOINT_SUFFIXES):
        write_atomically(f, lambda handle: write_torch_zip(obj, handle.write, _is_parameter))
        return
    arrays, metadata = _safetensors_contents(obj)
    if isinstance(f, (str, os.PathLike)):
        write_atomically(f, lambda handle: write_safetensors(handle.write, arrays, metadata))
    elif hasattr(f, "write"):
        write_safetensors(f.write, arrays, metadata)
    else:
        raise TypeError(f"save() expected a path or a binary file object for f, got {type(f).__name__}")


def load(
    f: FileLike,
    map_location=None,
    pickle_module=None,
    *,
    weights_only: bool = True,
    mmap: bool | None = None,
    **pickle_load_args: Any,
) -> Any:
    """Loads an object saved by :func:`save`, a safetensors file, or a PyTorch ``torch.save`` checkpoint.

    The format is recognized from the file's content, not its name. PyTorch checkpoints are read
    without PyTorch; their pickle may only rebuild tensors, containers and plain values, so loading
    never runs code from the file (as PyTorch's ``weights_only=True``). Hostile files cannot make it
    take more time or memory than their size justifies: objects a pickle shares are built once,
    tensors are views of their storages, and sizes are checked before anything is inflated.

    Args:
        f: a path, or a binary file object positioned at the start of the checkpoint.
        map_location: where tensors go: ``None`` (the device each was saved from), a device or a
            device string (all tensors; PyTorch's ``torch.device`` too), a dict mapping saved
            locations to devices (``{"cuda:0": "cpu"}``), or a callable ``(storage, location)``
            as PyTorch's, called with a stand-in storage whose ``cpu()``, ``cuda(index)`` and
            ``to(device)`` choose the device (``lambda storage, location: storage`` keeps tensors
            on the CPU).
        pickle_module, weights_only, **pickle_load_args: accepted for PyTorch compatibility:
            onnxnn only ever loads data with its own restricted unpickler, whatever their values
            (PyTorch ignores ``pickle_load_args`` with ``weights_only=True`` too, with a warning).
        mmap: accepted for PyTorch compatibility: the file is read, not mapped.

    Raises:
        CheckpointError: the file is empty, truncated, damaged, malformed or not a checkpoint, or a
            PyTorch checkpoint's pickle names anything other than tensors, containers and plain
            values (the message names the file and the refused global). It is both a
            ``RuntimeError`` and a ``pickle.UnpicklingError``, as ``torch.load`` raises.
        RuntimeError: a tensor's device is unavailable (pass ``map_location``).

    Example::

        >>> model.load_state_dict(onnxnn.load("model.safetensors"))
        >>> state = onnxnn.load("resnet18.pth", map_location="cpu")
    """
    if pickle_load_args:
        warnings.warn("pickle_load_args only works if `weights_only=False`.", stacklevel=2)
    device_map = DeviceMap(map_location)
    data, source = _read_input(f)
    loaded = _parse(data, source)
    try:
        return _materialize(loaded, device_map, {}, 0)
    except _TooDeep:
        raise CheckpointError(f"cannot load {source}: the object is nested more than {MAX_DEPTH} levels deep") from None
    except RecursionError:
        raise CheckpointError(f"cannot load {source}: the object is nested too deeply") from None
    except CheckpointError as error:  # a global left outside a tensor record (resolve_marker)
        raise CheckpointError(f"cannot load {source}: {error}") from None


def _parse(data: bytes, source: str):
    if not data:
        raise CheckpointError(f"cannot load {source}: the file is empty")
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return read_torch_zip(data, source)
    if data.startswith(LEGACY_MAGIC):
        raise CheckpointError(
            f"cannot load {source}: it uses PyTorch's legacy format (PyTorch before 1.6, or "
            "_use_new_zipfile_serialization=False), which onnxnn does not read; re-save it with "
            "a recent torch.save"
        )
    if len(data) >= 9 and data[8:9] == b"{":
        return _read_safetensors(data, source)
    raise CheckpointError(f"cannot load {source}: {_NOT_A_CHECKPOINT}")


# ---------------------------------------------------------------------------------------------- writing
def _safetensors_contents(obj) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    if _is_state_dict(obj):
        arrays, document = _encode_state_dict(obj)
        metadata = {"format": "pt"}
    else:
        encoder = _Encoder()
        document = {"version": FORMAT_VERSION, "kind": "object", "object": encoder.encode(obj, [])}
        arrays, metadata = _tensor_arrays(encoder.tensors), {}
    metadata[_METADATA_KEY] = json.dumps(document, allow_nan=False, separators=(",", ":"))
    return arrays, metadata


def _is_state_dict(obj) -> bool:
    return (
        type(obj) in (dict, OrderedDict)
        and "__metadata__" not in obj
        and all(type(key) is str and isinstance(value, Tensor) for key, value in obj.items())
    )


def _is_parameter(tensor: Tensor) -> bool:
    nn = sys.modules.get("onnxnn.nn")
    parameter_class = getattr(nn, "Parameter", None)
    return parameter_class is not None and isinstance(tensor, parameter_class)


def _tensor_arrays(tensors: dict[str, Tensor]) -> dict[str, np.ndarray]:
    # One realize call computes all pending tensors in one graph run, rather than one run per tensor.
    realize_values(tensors.values())
    arrays = {}
    for name, tensor in tensors.items():
        array = tensor.detach().cpu().numpy()
        # Not np.ascontiguousarray: it turns a 0-d array into a 1-d one.
        arrays[name] = array if array.flags.c_contiguous else np.array(array, order="C")
    return arrays


def _encode_state_dict(state_dict) -> tuple[dict, dict]:
    arrays = _tensor_arrays(state_dict)
    document = {
        "version": FORMAT_VERSION,
        "kind": "state_dict",
        "container": type(state_dict).__name__,
        "keys": list(state_dict),
    }
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
        if isinstance(value, np.generic) and isinstance(value.item(), (bool, int, float)):
            value = value.item()  # before the bool test: np.bool_ is no bool, and its item() is
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else {"float": str(value)}
        if isinstance(value, complex):
            return {"complex": [self.encode(float(value.real), path), self.encode(float(value.imag), path)]}
        if isinstance(value, Tensor):
            return self._tensor(value, path)
        if isinstance(value, dtypes.dtype):
            return {"dtype": value.name}
        if isinstance(value, device):
            return {"device": str(value)}
        if isinstance(value, (bytes, bytearray)):
            tag = "bytearray" if isinstance(value, bytearray) else "bytes"
            return {tag: base64.b64encode(value).decode("ascii")}
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
        if isinstance(value, Counter):
            return {"Counter": items}
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
        reference: dict[str, Any] = {"tensor": name}
        if tensor.device != CPU:
            reference["device"] = str(tensor.device)
        if tensor.requires_grad:
            reference["requires_grad"] = True
        if _is_parameter(tensor):
            reference["parameter"] = True
        return reference


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
        raise TypeError(
            f"load() expected a binary file object (opened with 'rb'), but read() returned {type(data).__name__}"
        )
    name = getattr(f, "name", None)
    return bytes(data), (repr(name) if isinstance(name, str) else "the given file object")


def _read_safetensors(data: bytes, source: str):
    """Parses a safetensors file into its saved object (or a name-sorted dict for foreign files)."""
    tensors, metadata = read_safetensors(data, source)
    if _METADATA_KEY not in metadata:
        return {name: tensors[name] for name in sorted(tensors)}
    document = parse_json(metadata[_METADATA_KEY], source, "onnxnn metadata")
    try:
        if type(document) is not dict or type(document.get("version")) is not int:
            raise ValueError("it is not an object with an int version")
        if document["version"] > FORMAT_VERSION:
            raise CheckpointError(
                f"cannot load {source}: it was written by a newer onnxnn (format version "
                f"{document['version']}, this onnxnn reads up to {FORMAT_VERSION})"
            )
        if document.get("kind") == "state_dict":
            return _decode_state_dict(document, tensors)
        if document.get("kind") == "object":
            return _Decoder(tensors).decode(document["object"], 0)
        raise ValueError(f"unknown kind {describe(document.get('kind'))}")
    except _TooDeep:
        raise CheckpointError(
            f"cannot load {source}: its onnxnn metadata is nested more than {MAX_DEPTH} levels deep"
        ) from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError) as error:
        reason = str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"
        raise CheckpointError(
            f"cannot load {source}: its onnxnn metadata is malformed ({describe(reason, 200)[1:-1]})"
        ) from None


class _TooDeep(Exception):
    """Raised by the walks over loaded objects past MAX_DEPTH levels (caught and reported by load)."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _str_list(value, what: str) -> list:
    _expect(type(value) is list and all(type(item) is str for item in value), f"{what} is not a list of strings")
    return value


def _decode_state_dict(document: dict, tensors: dict):
    keys = _str_list(document["keys"], "keys")
    _expect(len(keys) == len(tensors) and set(keys) == set(tensors), "the recorded keys differ from the stored tensors")
    devices = document.get("devices", {})
    _expect(
        type(devices) is dict and all(type(value) is str for value in devices.values()),
        "devices is not a map of strings",
    )
    requires_grad = set(_str_list(document.get("requires_grad", []), "requires_grad"))
    parameters = set(_str_list(document.get("parameters", []), "parameters"))
    _expect(document.get("container") in ("OrderedDict", "dict"), "container is neither OrderedDict nor dict")
    container = OrderedDict() if document["container"] == "OrderedDict" else {}
    for key in keys:
        tensor = tensors[key]
        tensor.location = devices.get(key, "cpu")
        tensor.requires_grad = key in requires_grad
        tensor.parameter = key in parameters
        container[key] = tensor
    if "metadata" in document:
        _expect(type(container) is OrderedDict, "module metadata on a plain dict")
        container._metadata = _Decoder(tensors).decode(document["metadata"], 0)  # type: ignore[attr-defined]  # as PyTorch's
    return container


class _Decoder:
    """Turns the JSON ``<value>`` of the module docstring back into the object it describes.

    Every shape of entry is checked (a ValueError names what is wrong), so a malformed document
    cannot leak TypeErrors, unhashable keys or values of the wrong type into the loaded object.
    """

    _TAGS = {
        "dict",
        "Counter",
        "tuple",
        "set",
        "frozenset",
        "Size",
        "float",
        "complex",
        "bytes",
        "bytearray",
        "dtype",
        "device",
    }
    _TENSOR_FIELDS = {"tensor", "device", "requires_grad", "parameter"}

    def __init__(self, tensors: dict):
        self._tensors = tensors
        self._references: dict[str, PendingTensor] = {}

    def decode(self, value, depth: int):
        if value is None or type(value) in (bool, int, float, str):
            return value
        if depth >= MAX_DEPTH:
            raise _TooDeep
        depth += 1
        if type(value) is list:
            return [self.decode(item, depth) for item in value]
        _expect(type(value) is dict, f"unexpected entry {describe(value)}")
        if "tensor" in value:
            return self._tensor(value)
        if "OrderedDict" in value:
            _expect(set(value) <= {"OrderedDict", "metadata"}, f"unexpected fields {sorted(value)} in an OrderedDict")
            result = OrderedDict(self._pairs(value["OrderedDict"], depth))
            if "metadata" in value:
                result._metadata = self.decode(value["metadata"], depth)  # type: ignore[attr-defined]  # as PyTorch's
            return result
        _expect(len(value) == 1 and next(iter(value)) in self._TAGS, f"unknown entry with fields {sorted(value)[:8]}")
        ((tag, content),) = value.items()
        if tag in ("dict", "Counter"):
            # Counter(pairs) would count the pairs; items are set one by one, as for a dict.
            result = {"dict": dict, "Counter": Counter}[tag]()
            for key, item in self._pairs(content, depth):
                result[key] = item
            return result
        if tag == "complex":
            parts = [self.decode(item, depth) for item in content] if type(content) is list else []
            _expect(
                len(parts) == 2 and all(type(part) is float for part in parts),
                "complex of something other than two floats",
            )
            return complex(*parts)
        if tag in ("tuple", "set", "frozenset"):
            _expect(type(content) is list, f"{tag} of {describe(content)}, expected a list")
            items = [self.decode(item, depth) for item in content]
            return tuple(items) if tag == "tuple" else {"set": set, "frozenset": frozenset}[tag](map(self._key, items))
        if tag == "Size":
            _expect(
                type(content) is list and all(type(size) is int and size >= 0 for size in content),
                "Size of something other than non-negative ints",
            )
            return Size(content)
        if tag == "float":
            _expect(content in ("inf", "-inf", "nan"), f"float {describe(content)}, expected inf, -inf or nan")
            return float(content)
        _expect(type(content) is str, f"{tag} of {describe(content)}, expected a string")
        if tag in ("bytes", "bytearray"):
            try:
                decoded = base64.b64decode(content, validate=True)
                return bytearray(decoded) if tag == "bytearray" else decoded
            except binascii.Error:
                raise ValueError("bytes that are not base64") from None
        try:
            return dtypes.as_dtype(content) if tag == "dtype" else device(content)
        except (RuntimeError, ValueError, TypeError, KeyError):
            raise ValueError(f"unknown {tag} {describe(content)}") from None

    def _pairs(self, content, depth: int):
        _expect(type(content) is list, f"dict items of {describe(content)}, expected a list")
        for pair in content:
            _expect(type(pair) is list and len(pair) == 2, "dict items that are not [key, value] pairs")
            yield self._key(self.decode(pair[0], depth)), self.decode(pair[1], depth)

    @staticmethod
    def _key(key):
        try:
            hash(key)
        except TypeError:
            raise ValueError(f"a dict key or set member decodes to {describe(key)}, which is unhashable") from None
        return key

    def _tensor(self, reference: dict) -> PendingTensor:
        _expect(set(reference) <= self._TENSOR_FIELDS, f"unexpected fields {sorted(reference)[:8]} in a tensor")
        name, location = reference["tensor"], reference.get("device", "cpu")
        _expect(
            type(name) is str and name in self._tensors,
            f"reference to a tensor {describe(name)} the file does not hold",
        )
        _expect(type(location) is str, f"tensor device {describe(location)}, expected a string")
        pending = self._references.get(name)
        if pending is None:
            pending = self._references[name] = self._tensors[name]
            pending.location = location
            pending.requires_grad = reference.get("requires_grad", False) is True
            pending.parameter = reference.get("parameter", False) is True
        return pending


# --------------------------------------------------------------------------------------- materializing
def _make_tensor(pending: PendingTensor, device_map: DeviceMap) -> Tensor:
    tensor = constant_tensor(pending.array, pending.dtype, device_map(pending.location))
    requires_grad = pending.requires_grad and pending.dtype.is_floating_point
    if pending.parameter:
        return Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)


def _materialize(value, device_map: DeviceMap, memo: dict, depth: int):
    """Replaces PendingTensors by Tensors and checks that only plain data remains.

    ``memo`` maps ``id`` of every container and tensor already done to its result, so an object the
    file shares (a pickle may share one list a billion times over) is built once and stays shared.
    """
    if value is None or type(value) in (bool, int, float, complex, str, bytes, device, dtypes.dtype):
        return value
    done = memo.get(id(value))
    if done is not None:
        return done[1]
    if depth >= MAX_DEPTH:
        raise _TooDeep
    depth += 1
    result: Any  # whatever the checkpoint's structure holds here
    kind = type(value)
    if isinstance(value, PendingTensor):
        result = _make_tensor(value, device_map)
    elif kind is list:
        result = []
        memo[id(value)] = (value, result)  # before the items: a list may contain itself
        result.extend(_materialize(item, device_map, memo, depth) for item in value)
    elif kind in (tuple, Size, set, frozenset):
        result = kind(_materialize(item, device_map, memo, depth) for item in value)
    elif kind in (dict, OrderedDict, Counter):
        result = kind()
        memo[id(value)] = (value, result)
        for key, item in value.items():
            result[_materialize(key, device_map, memo, depth)] = _materialize(item, device_map, memo, depth)
        # PyTorch's state_dict carries module versions in ``_metadata``; load_state_dict reads them.
        module_metadata = getattr(value, "__dict__", {}).get("_metadata")
        if module_metadata is not None and kind is OrderedDict:
            result._metadata = _materialize(module_metadata, device_map, memo, depth)
    elif kind is bytearray:
        result = bytearray(value)  # a copy: what PyTorch's loader returns
    else:
        result = resolve_marker(value)
    memo[id(value)] = (value, result)  # the value is kept so its id is not reused during the walk
    return result
