"""Reads PyTorch checkpoints (``torch.save`` files) without PyTorch and without running code from them.

``torch.save`` (PyTorch 1.6 and later) writes a zip archive whose entries are stored uncompressed
under one top-level folder (``archive/`` in recent versions, the file's stem in older ones)::

    archive/data.pkl          the saved object, pickled with protocol 2
    archive/data/<key>        the raw bytes of storage ``<key>`` ("0", "1", ...)
    archive/byteorder         "little" or "big" (missing in old files, which are little-endian)
    archive/version           the archive format version, e.g. "3"

Inside ``data.pkl`` a tensor is the call ``torch._utils._rebuild_tensor_v2(storage, storage_offset,
size, stride, requires_grad, backward_hooks[, metadata])`` and an ``nn.Parameter`` wraps one in
``torch._utils._rebuild_parameter(tensor, requires_grad, backward_hooks)``. A storage is a persistent
id ``('storage', torch.FloatStorage, key, location, numel)``: its dtype comes from the storage type,
its bytes from ``archive/data/<key>``, ``location`` is the device it was saved from ("cpu",
"cuda:0"). Two tensors viewing one storage name the same key.

The pickle is read by a ``pickle.Unpickler`` whose ``find_class`` only knows the handful of globals
listed in ``_ALLOWED_GLOBALS``, each answered by onnxnn's own function (never by importing the named
one); any other global is refused with ``pickle.UnpicklingError`` naming it, so unpickling cannot run
code. Tensors come back as :class:`PendingTensor` records (a numpy array plus where it was saved);
:mod:`onnxnn.export.checkpoint` turns them into Tensors on the device ``map_location`` picks.
"""
from __future__ import annotations

import _compat_pickle
import io
import pickle
import sys
import zipfile
from collections import OrderedDict

import numpy as np

from ..runtime import dtypes
from ..runtime.device import device
from ..runtime.tensor import Size

__all__ = ["PendingTensor", "read_torch_zip", "resolve_marker", "LEGACY_MAGIC"]

# torch.save before 1.6 (or with _use_new_zipfile_serialization=False) starts with this pickled int.
LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"

_REFUSED = "onnxnn.load refused to unpickle {name!r} in {source}: only tensors, containers and plain values are allowed"


class PendingTensor:
    """A tensor read from a checkpoint, before it is placed on a device.

    ``location`` is the device string it was saved from; ``parameter`` marks an ``nn.Parameter``.
    """

    __slots__ = ("array", "dtype", "location", "requires_grad", "parameter")

    def __init__(self, array: np.ndarray, dtype: dtypes.dtype, location: str = "cpu",
                 requires_grad: bool = False, parameter: bool = False):
        self.array = array
        self.dtype = dtype
        self.location = location
        self.requires_grad = requires_grad
        self.parameter = parameter

    def __setstate__(self, state):
        raise pickle.UnpicklingError("a checkpoint tried to set attributes on a tensor (pickle BUILD)")


class _Marker:
    """A global that the pickle may name but not call: a storage type, a dtype or a tensor class.

    ``kind`` is "storage", "dtype" or "type"; ``value`` is the dtype (or the class name for "type").
    """

    __slots__ = ("qualified_name", "kind", "value")

    def __init__(self, qualified_name: str, kind: str, value):
        self.qualified_name = qualified_name
        self.kind = kind
        self.value = value

    def __repr__(self) -> str:
        return self.qualified_name

    def __call__(self, *args):
        raise pickle.UnpicklingError(f"a checkpoint tried to call {self.qualified_name!r}, which onnxnn.load "
                                     "only accepts as a type marker")

    def __setstate__(self, state):
        raise pickle.UnpicklingError(f"a checkpoint tried to set attributes on {self.qualified_name!r}")


class _Global:
    """An allowed callable global, answered by onnxnn's own function instead of the named one."""

    __slots__ = ("qualified_name", "function")

    def __init__(self, qualified_name: str, function):
        self.qualified_name = qualified_name
        self.function = function

    def __call__(self, *args):
        return self.function(*args)

    def __setstate__(self, state):
        raise pickle.UnpicklingError(f"a checkpoint tried to set attributes on {self.qualified_name!r}")


class _Storage:
    """One ``data/<key>`` record: its raw bytes and the dtype its storage type declares."""

    __slots__ = ("key", "raw", "dtype", "location", "numel", "byteorder", "_elements")

    def __init__(self, key: str, raw: bytes, dtype: dtypes.dtype, location: str, numel: int, byteorder: str):
        self.key, self.raw, self.dtype, self.location = key, raw, dtype, location
        self.numel, self.byteorder = numel, byteorder
        self._elements = {}

    def elements(self, dtype: dtypes.dtype) -> np.ndarray:
        """The storage's bytes as a 1-D array of ``dtype`` (read-only, native byte order)."""
        array = self._elements.get(dtype)
        if array is None:
            count = self.numel if dtype is self.dtype else len(self.raw) // dtype.itemsize
            array = np.frombuffer(self.raw, dtype=dtype.numpy_dtype, count=count)
            if self.byteorder != sys.byteorder and dtype.itemsize > 1:
                array = array.byteswap()
                array.flags.writeable = False
            self._elements[dtype] = array
        return array

    def __setstate__(self, state):
        raise pickle.UnpicklingError("a checkpoint tried to set attributes on a storage (pickle BUILD)")


_STORAGE_DTYPES = {
    "FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64, "HalfStorage": dtypes.float16,
    "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32,
    "ShortStorage": dtypes.int16, "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8,
    "BoolStorage": dtypes.bool, "UntypedStorage": dtypes.uint8,
}


def _check_int(value, what: str) -> int:
    if type(value) is not int:
        raise pickle.UnpicklingError(f"malformed tensor record: {what} is {value!r}, expected an int")
    return value


def _check_int_tuple(value, what: str) -> tuple:
    if not isinstance(value, (tuple, list)):
        raise pickle.UnpicklingError(f"malformed tensor record: {what} is {value!r}, expected a tuple of ints")
    for item in value:
        if type(item) is not int or item < 0:
            raise pickle.UnpicklingError(f"malformed tensor record: {what} {tuple(value)} must hold "
                                         "non-negative ints")
    return tuple(value)


def _strided_copy(elements: np.ndarray, offset, size, stride) -> np.ndarray:
    """Copies the strided view PyTorch describes, after proving it stays inside the storage.

    The values come from the file, so they are checked before ``as_strided`` is allowed to touch memory.
    """
    offset = _check_int(offset, "storage_offset")
    size = _check_int_tuple(size, "size")
    stride = _check_int_tuple(stride, "stride")
    if len(size) != len(stride):
        raise pickle.UnpicklingError(f"malformed tensor record: size {size} and stride {stride} differ in length")
    if offset < 0:
        raise pickle.UnpicklingError(f"malformed tensor record: negative storage_offset {offset}")
    if 0 in size:
        return np.empty(size, dtype=elements.dtype)
    last = offset + sum((extent - 1) * step for extent, step in zip(size, stride))
    if last >= len(elements):
        raise pickle.UnpicklingError(f"tensor of size {list(size)}, stride {list(stride)} and storage offset "
                                     f"{offset} reaches past the end of its storage of {len(elements)} elements "
                                     "(the file is damaged or truncated)")
    view = np.lib.stride_tricks.as_strided(elements[offset:], shape=size,
                                           strides=[step * elements.itemsize for step in stride], writeable=False)
    return np.array(view, order="C")


def _rebuild_tensor(storage, storage_offset, size, stride) -> PendingTensor:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError(f"malformed tensor record: expected a storage, got {type(storage).__name__}")
    array = _strided_copy(storage.elements(storage.dtype), storage_offset, size, stride)
    return PendingTensor(array, storage.dtype, storage.location)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None) -> PendingTensor:
    # backward_hooks is always an empty OrderedDict in files PyTorch writes; hooks are never restored.
    tensor = _rebuild_tensor(storage, storage_offset, size, stride)
    tensor.requires_grad = requires_grad is True
    return tensor


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                       metadata=None) -> PendingTensor:
    # Used for dtypes without a typed storage class: the storage holds raw bytes, the dtype comes separately.
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError(f"malformed tensor record: expected a storage, got {type(storage).__name__}")
    if not isinstance(dtype, _Marker) or dtype.kind != "dtype":
        raise pickle.UnpicklingError(f"malformed tensor record: expected a dtype, got {dtype!r}")
    array = _strided_copy(storage.elements(dtype.value), storage_offset, size, stride)
    return PendingTensor(array, dtype.value, storage.location, requires_grad is True)


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None) -> PendingTensor:
    if not isinstance(data, PendingTensor):
        raise pickle.UnpicklingError(f"malformed parameter record: expected a tensor, got {type(data).__name__}")
    return PendingTensor(data.array, data.dtype, data.location, requires_grad is True, parameter=True)


def _rebuild_from_type_v2(function, new_type, args, state) -> PendingTensor:
    # PyTorch's path for tensors carrying Python attributes; the attributes (state) are not restored.
    if not isinstance(function, _Global) or not isinstance(args, tuple):
        raise pickle.UnpicklingError("malformed tensor record in torch._tensor._rebuild_from_type_v2")
    result = function(*args)
    if not isinstance(result, PendingTensor) or not isinstance(new_type, _Marker) or new_type.kind != "type":
        raise pickle.UnpicklingError("torch._tensor._rebuild_from_type_v2 may only rebuild Tensor or Parameter")
    if new_type.value == "Parameter":
        return PendingTensor(result.array, result.dtype, result.location, result.requires_grad, parameter=True)
    return result


def _ordered_dict(*args) -> OrderedDict:
    if len(args) > 1:
        raise pickle.UnpicklingError("malformed collections.OrderedDict record")
    return OrderedDict(*args)


def _set(*args) -> set:
    return set(*args)


def _frozenset(*args) -> frozenset:
    return frozenset(*args)


def _bytes(*args) -> bytes:
    # Protocol 2 writes b"" as bytes() (other bytes go through _codecs.encode).
    if args:
        raise pickle.UnpicklingError("malformed builtins.bytes record")
    return b""


def _size(*args) -> Size:
    if len(args) > 1 or (args and not all(type(item) is int for item in args[0])):
        raise pickle.UnpicklingError("malformed torch.Size record")
    return Size(*args)


def _torch_device(*args) -> device:
    if not 1 <= len(args) <= 2 or not isinstance(args[0], str) or (len(args) == 2 and type(args[1]) is not int):
        raise pickle.UnpicklingError(f"malformed torch.device record {args!r}")
    try:
        return device(*args)
    except RuntimeError as error:
        raise pickle.UnpicklingError(f"unsupported device in checkpoint: {error}") from None


def _encode(text, encoding="utf-8") -> bytes:
    # Protocol 2 writes bytes objects as _codecs.encode(latin-1 text, "latin1").
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise pickle.UnpicklingError("malformed bytes record (_codecs.encode)")
    return text.encode(encoding)


def _allowed_globals() -> dict:
    table = {}
    for name, function in [
        ("collections.OrderedDict", _ordered_dict), ("builtins.set", _set), ("builtins.frozenset", _frozenset),
        ("_codecs.encode", _encode), ("builtins.bytes", _bytes), ("torch.Size", _size), ("torch.device", _torch_device),
        ("torch._utils._rebuild_tensor", _rebuild_tensor), ("torch._utils._rebuild_tensor_v2", _rebuild_tensor_v2),
        ("torch._utils._rebuild_tensor_v3", _rebuild_tensor_v3),
        ("torch._utils._rebuild_parameter", _rebuild_parameter),
        ("torch._utils._rebuild_parameter_with_state", _rebuild_parameter),
        ("torch._tensor._rebuild_from_type_v2", _rebuild_from_type_v2),
    ]:
        table[name] = _Global(name, function)
    for storage_name, storage_dtype in _STORAGE_DTYPES.items():
        table[f"torch.{storage_name}"] = _Marker(f"torch.{storage_name}", "storage", storage_dtype)
    for value in dtypes.ALL_DTYPES:
        table[f"torch.{value.name}"] = _Marker(f"torch.{value.name}", "dtype", value)
    table["torch.Tensor"] = _Marker("torch.Tensor", "type", "Tensor")
    table["torch.nn.parameter.Parameter"] = _Marker("torch.nn.parameter.Parameter", "type", "Parameter")
    return table


_ALLOWED_GLOBALS = _allowed_globals()


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickles ``data.pkl``, resolving storages from the archive and only the allowed globals."""

    def __init__(self, file, archive: zipfile.ZipFile, prefix: str, byteorder: str, source: str):
        super().__init__(file, encoding="utf-8")
        self._archive = archive
        self._prefix = prefix
        self._byteorder = byteorder
        self._source = source
        self._storages: dict = {}

    def find_class(self, module: str, name: str):
        # Protocol 2 pickles written by Python 3 use Python 2 module names (``__builtin__``).
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        qualified_name = f"{module}.{name}"
        allowed = _ALLOWED_GLOBALS.get(qualified_name)
        if allowed is None:
            raise pickle.UnpicklingError(_REFUSED.format(name=qualified_name, source=self._source))
        return allowed

    def persistent_load(self, persistent_id):
        if (not isinstance(persistent_id, tuple) or len(persistent_id) != 5 or persistent_id[0] != "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {persistent_id!r} in {self._source}")
        _, storage_type, key, location, numel = persistent_id
        if not isinstance(storage_type, _Marker) or storage_type.kind != "storage":
            raise pickle.UnpicklingError(f"unsupported storage type {storage_type!r} in {self._source}")
        if not isinstance(key, str) or not isinstance(location, str) or type(numel) is not int or numel < 0:
            raise pickle.UnpicklingError(f"malformed storage record {persistent_id!r} in {self._source}")
        storage = self._storages.get(key)
        if storage is None:
            storage = self._storages[key] = self._read_storage(key, storage_type.value, location, numel)
        return storage

    def _read_storage(self, key: str, storage_dtype: dtypes.dtype, location: str, numel: int) -> _Storage:
        entry = f"{self._prefix}data/{key}"
        try:
            raw = self._archive.read(entry)
        except KeyError:
            raise pickle.UnpicklingError(f"{self._source} is damaged or truncated: storage {entry!r} is missing "
                                         "from the archive") from None
        if len(raw) < numel * storage_dtype.itemsize:
            raise pickle.UnpicklingError(f"{self._source} is damaged or truncated: storage {entry!r} holds "
                                         f"{len(raw)} bytes, expected {numel * storage_dtype.itemsize}")
        return _Storage(key, raw, storage_dtype, location, numel, self._byteorder)


def _find_record_prefix(archive: zipfile.ZipFile, source: str) -> str:
    names = archive.namelist()
    if "data.pkl" in names:
        return ""
    prefixes = [name[: -len("data.pkl")] for name in names
                if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(prefixes) == 1:
        return prefixes[0]
    if any(name.endswith("constants.pkl") or "/code/" in name for name in names):
        raise RuntimeError(f"cannot load {source}: it is a TorchScript archive (torch.jit.save); onnxnn.load reads "
                           "checkpoints written by torch.save")
    if len(prefixes) > 1:
        raise RuntimeError(f"cannot load {source}: the zip archive holds several data.pkl records")
    raise RuntimeError(f"cannot load {source}: the zip archive has no data.pkl record, so it is not a PyTorch "
                       "checkpoint")


def resolve_marker(value):
    """The value a global left in the unpickled object stands for: a dtype for ``torch.float32`` and kin.

    Raises:
        pickle.UnpicklingError: ``value`` is a global that may only appear inside a tensor record.
    """
    if isinstance(value, _Marker) and value.kind == "dtype":
        return value.value
    name = getattr(value, "qualified_name", type(value).__name__)
    raise pickle.UnpicklingError(f"the checkpoint holds {name!r} outside a tensor record, which onnxnn.load does "
                                 "not support")


def read_torch_zip(data: bytes, source: str):
    """Reads the object ``torch.save`` wrote into the zip archive ``data``; tensors are PendingTensors.

    Raises:
        RuntimeError: ``data`` is not a readable PyTorch zip checkpoint (damaged, truncated, TorchScript).
        pickle.UnpicklingError: the pickle names a global outside the allowed set, or is malformed.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        prefix = _find_record_prefix(archive, source)
        pickled = archive.read(f"{prefix}data.pkl")
        byteorder = "little"
        if f"{prefix}byteorder" in archive.namelist():
            byteorder = archive.read(f"{prefix}byteorder").decode("ascii", "replace").strip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as error:
        raise RuntimeError(f"cannot load {source}: the zip archive is damaged or truncated ({error})") from None
    if byteorder not in ("little", "big"):
        raise RuntimeError(f"cannot load {source}: unknown byte order {byteorder!r}")
    unpickler = _RestrictedUnpickler(io.BytesIO(pickled), archive, prefix, byteorder, source)
    try:
        return unpickler.load()
    except pickle.UnpicklingError:
        raise
    except zipfile.BadZipFile as error:
        raise RuntimeError(f"cannot load {source}: the zip archive is damaged or truncated ({error})") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError,
            MemoryError, UnicodeDecodeError, OverflowError) as error:
        raise pickle.UnpicklingError(f"cannot load {source}: malformed data.pkl ({type(error).__name__}: "
                                     f"{error})") from None
