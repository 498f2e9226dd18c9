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

The pickle is run by :class:`~onnxnn.export.restricted_unpickler.RestrictedUnpickler`, which only
knows the handful of globals listed in ``_ALLOWED_GLOBALS``, each answered by onnxnn's own function
(never by importing the named one); any other global is refused naming it, so unpickling cannot run
code. Tensors come back as :class:`PendingTensor` records: a read-only view of their storage, as
PyTorch's tensors are views, so a tensor of size (2**29, 2) and stride (0, 0) over a 16-byte storage
costs 16 bytes, not 4 GiB; every offset such a view can reach is checked to lie inside the storage,
and a view larger than the process may allocate at all (which no op could ever copy) is refused.
:mod:`onnxnn.export.checkpoint` turns them into Tensors on the device ``map_location`` picks.

The archive is checked before anything is inflated: only stored and deflated members are read, a
stored member's size must equal its compressed size, and a deflated one may not claim more than
deflate's largest ratio (1032:1) allows, so the memory a load takes is bounded by the file's size.
"""

from __future__ import annotations

import _compat_pickle
import io
import struct
import sys
import zipfile
import zlib
from typing import Any

import numpy as np

from ..errors import CheckpointError
from ..ir import dtypes
from ..ir.device import device
from ..import_.limits import allocation_limit
from ..runtime.tensor import Size
from .restricted_unpickler import COUNTER, FROZENSET, ORDERED_DICT, SET, RestrictedUnpickler, describe

__all__ = ["PendingTensor", "read_torch_zip", "resolve_marker", "LEGACY_MAGIC", "STORAGE_TYPES"]

# torch.save before 1.6 (or with _use_new_zipfile_serialization=False) starts with this pickled int.
LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"

_REFUSED = "onnxnn.load refused to unpickle {name!r} in {source}: only tensors, containers and plain values are allowed"
# Deflate's best case: 258-byte matches coded in 2 bits each (zlib's technical note gives 1032:1).
_MAX_DEFLATE_RATIO = 1032
_MAX_DIMENSIONS = 64  # numpy's limit


class PendingTensor:
    """A tensor read from a checkpoint, before it is placed on a device.

    ``location`` is the device string it was saved from; ``parameter`` marks an ``nn.Parameter``.
    """

    __slots__ = ("array", "dtype", "location", "requires_grad", "parameter")

    def __init__(
        self,
        array: np.ndarray,
        dtype: dtypes.dtype,
        location: str = "cpu",
        requires_grad: bool = False,
        parameter: bool = False,
    ):
        self.array = array
        self.dtype = dtype
        self.location = location
        self.requires_grad = requires_grad
        self.parameter = parameter


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
        raise CheckpointError(
            f"a checkpoint tried to call {self.qualified_name!r}, which onnxnn.load only accepts as a type marker"
        )


class _Global:
    """An allowed callable global, answered by onnxnn's own function instead of the named one."""

    __slots__ = ("qualified_name", "function")

    def __init__(self, qualified_name: str, function):
        self.qualified_name = qualified_name
        self.function = function

    def __repr__(self) -> str:
        return self.qualified_name

    def __call__(self, *args):
        return self.function(*args)


class _Storage:
    """One ``data/<key>`` record: its elements (read-only, native byte order) and where it was saved."""

    __slots__ = ("key", "raw", "dtype", "location", "numel", "byteorder", "_elements")

    def __init__(self, key: str, raw, dtype: dtypes.dtype, location: str, numel: int, byteorder: str):
        self.key, self.raw, self.dtype, self.location = key, raw, dtype, location
        self.numel, self.byteorder = numel, byteorder
        self._elements: dict = {}

    def elements(self, dtype: dtypes.dtype) -> np.ndarray:
        """The storage's bytes as a 1-D array of ``dtype``, copied once out of the file's bytes."""
        array = self._elements.get(dtype)
        if array is None:
            count = self.numel if dtype is self.dtype else len(self.raw) // dtype.itemsize
            array = np.frombuffer(self.raw, dtype=dtype.numpy_dtype, count=count)
            array = array.byteswap() if self.byteorder != sys.byteorder and dtype.itemsize > 1 else array.copy()
            array.flags.writeable = False
            self._elements[dtype] = array
        return array


_STORAGE_DTYPES = {
    "FloatStorage": dtypes.float32,
    "DoubleStorage": dtypes.float64,
    "HalfStorage": dtypes.float16,
    "BFloat16Storage": dtypes.bfloat16,
    "LongStorage": dtypes.int64,
    "IntStorage": dtypes.int32,
    "ShortStorage": dtypes.int16,
    "CharStorage": dtypes.int8,
    "ByteStorage": dtypes.uint8,
    "BoolStorage": dtypes.bool,
    "UntypedStorage": dtypes.uint8,
}
STORAGE_TYPES = {value: name for name, value in _STORAGE_DTYPES.items() if name != "UntypedStorage"}
"""The typed storage class ``torch.save`` names for each dtype that has one."""


def _malformed(message: str) -> CheckpointError:
    return CheckpointError(f"malformed tensor record: {message}")


def _check_int(value, what: str) -> int:
    if type(value) is not int:
        raise _malformed(f"{what} is {describe(value)}, expected an int")
    return value


def _check_int_tuple(value, what: str) -> tuple:
    if type(value) not in (tuple, list, Size) or len(value) > _MAX_DIMENSIONS:
        raise _malformed(f"{what} is {describe(value)}, expected a tuple of at most {_MAX_DIMENSIONS} ints")
    for item in value:
        if type(item) is not int or item < 0:
            raise _malformed(f"{what} {describe(tuple(value))} must hold non-negative ints (found {describe(item)})")
    return tuple(value)


def _strided_view(elements: np.ndarray, offset, size, stride) -> np.ndarray:
    """The read-only view PyTorch describes, after proving that every offset it reaches is in the storage.

    The values come from the file, so they are checked before ``as_strided`` is allowed to touch memory.
    """
    offset = _check_int(offset, "storage_offset")
    size = _check_int_tuple(size, "size")
    stride = _check_int_tuple(stride, "stride")
    if len(size) != len(stride):
        raise _malformed(f"size {list(size)} and stride {list(stride)} differ in length")
    if offset < 0:
        raise _malformed(f"negative storage_offset {offset}")
    try:
        if 0 in size:
            return np.empty(size, dtype=elements.dtype)
        last = offset + sum((extent - 1) * step for extent, step in zip(size, stride))
        if last >= len(elements):
            raise CheckpointError(
                f"tensor of size {list(size)}, stride {list(stride)} and storage offset {offset} "
                f"reaches past the end of its storage of {len(elements)} elements "
                "(the file is damaged or truncated)"
            )
        count = 1
        contiguous = True
        for extent, step in zip(reversed(size), reversed(stride)):
            contiguous = contiguous and (extent == 1 or step == count)
            count *= extent
        if contiguous:
            return elements[offset : offset + count].reshape(size)
        view = np.lib.stride_tricks.as_strided(
            elements[offset:], shape=size, writeable=False, strides=[step * elements.itemsize for step in stride]
        )
    except ValueError as error:  # numpy: more elements than an index can address
        raise _malformed(f"size {list(size)} cannot be represented ({error})") from None
    _check_view_size(count * elements.itemsize, size, stride, len(elements))
    return view


def _check_view_size(nbytes: int, size: tuple, stride: tuple, storage_elements: int) -> None:
    """Refuses a view larger than this process may allocate (``import_.limits``, the rule imported
    ONNX models follow): a view costs only its storage, but onnxruntime takes contiguous inputs, so
    the first op run there copies it whole (16 bytes of storage with stride 0 become 4 GiB)."""
    limit = allocation_limit()
    if nbytes > limit:
        raise CheckpointError(
            f"tensor of size {list(size)} and stride {list(stride)} views its storage of "
            f"{storage_elements} elements as {nbytes:,} bytes, more than this process may "
            f"allocate ({limit:,} bytes), so it could never be copied for use"
        )


def _rebuild_tensor(storage, storage_offset, size, stride) -> PendingTensor:
    if not isinstance(storage, _Storage):
        raise _malformed(f"expected a storage, got {describe(storage)}")
    array = _strided_view(storage.elements(storage.dtype), storage_offset, size, stride)
    return PendingTensor(array, storage.dtype, storage.location)


def _rebuild_tensor_v2(
    storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None
) -> PendingTensor:
    # backward_hooks is always an empty OrderedDict in files PyTorch writes; hooks are never restored.
    tensor = _rebuild_tensor(storage, storage_offset, size, stride)
    tensor.requires_grad = requires_grad is True
    return tensor


def _rebuild_tensor_v3(
    storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None
) -> PendingTensor:
    # Used for dtypes without a typed storage class: the storage holds raw bytes, the dtype comes separately.
    if not isinstance(storage, _Storage):
        raise _malformed(f"expected a storage, got {describe(storage)}")
    if not isinstance(dtype, _Marker) or dtype.kind != "dtype":
        raise _malformed(f"expected a dtype, got {describe(dtype)}")
    array = _strided_view(storage.elements(dtype.value), storage_offset, size, stride)
    return PendingTensor(array, dtype.value, storage.location, requires_grad is True)


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None) -> PendingTensor:
    if not isinstance(data, PendingTensor):
        raise CheckpointError(f"malformed parameter record: expected a tensor, got {describe(data)}")
    return PendingTensor(data.array, data.dtype, data.location, requires_grad is True, parameter=True)


def _rebuild_from_type_v2(function, new_type, args, state) -> PendingTensor:
    # PyTorch's path for tensors carrying Python attributes; the attributes (state) are not restored.
    if not isinstance(function, _Global) or type(args) is not tuple:
        raise CheckpointError("malformed tensor record in torch._tensor._rebuild_from_type_v2")
    result = function(*args)
    if not isinstance(result, PendingTensor) or not isinstance(new_type, _Marker) or new_type.kind != "type":
        raise CheckpointError("torch._tensor._rebuild_from_type_v2 may only rebuild Tensor or Parameter")
    if new_type.value == "Parameter":
        return PendingTensor(result.array, result.dtype, result.location, result.requires_grad, parameter=True)
    return result


def _bytes(*args) -> bytes:
    # Protocol 2 writes b"" as bytes() (other bytes go through _codecs.encode).
    if args:
        raise CheckpointError("malformed builtins.bytes record")
    return b""


def _size(*args) -> Size:
    if len(args) > 1 or (
        args
        and (
            type(args[0]) not in (tuple, list)
            or len(args[0]) > _MAX_DIMENSIONS
            or not all(type(item) is int for item in args[0])
        )
    ):
        raise CheckpointError("malformed torch.Size record")
    return Size(*args)


def _torch_device(*args) -> device:
    if not 1 <= len(args) <= 2 or type(args[0]) is not str or (len(args) == 2 and type(args[1]) is not int):
        raise CheckpointError(f"malformed torch.device record ({len(args)} arguments)")
    try:
        return device(*args)
    except (RuntimeError, ValueError, TypeError) as error:
        raise CheckpointError(f"unsupported device in checkpoint: {describe(str(error))}") from None


def _encode(text, encoding="utf-8") -> bytes:
    # Protocol 2 writes bytes objects as _codecs.encode(latin-1 text, "latin1").
    if type(text) is not str or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise CheckpointError("malformed bytes record (_codecs.encode)")
    try:
        return text.encode(encoding)
    except UnicodeEncodeError:
        raise CheckpointError("malformed bytes record (_codecs.encode of text outside latin-1)") from None


def _bytearray(*args) -> bytearray:
    # Python writes bytearray(b) as builtins.bytearray(_codecs.encode(text, "latin1")) at protocol 2,
    # and as builtins.bytearray(bytes) at 3 and 4. bytearray(n) would allocate n bytes the file does
    # not hold, so only the forms that copy data from the pickle are answered.
    if len(args) == 1 and type(args[0]) in (bytes, bytearray):
        return bytearray(args[0])
    if not args:
        return bytearray()
    if 2 <= len(args) <= 3 and type(args[0]) is str and all(type(item) is str for item in args[1:]):
        return bytearray(_encode(*args[:2]))
    raise CheckpointError("malformed builtins.bytearray record (only bytes or text are accepted)")


def _complex(*args) -> complex:
    # Python pickles a complex number as builtins.complex(real, imag).
    text = len(args) == 1 and type(args[0]) is str  # complex("1+2j"), which PyTorch's loader also answers
    if len(args) > 2 or not (text or all(type(item) in (int, float, bool) for item in args)):
        raise CheckpointError("malformed builtins.complex record")
    return complex(*args)


def _allowed_globals() -> dict:
    # The globals of PyTorch 2.13's weights_only unpickler (``_get_allowed_globals``) that plain
    # checkpoints use; collections.Counter holds MultiStepLR's milestones.
    table: dict[str, Any] = {
        "collections.OrderedDict": ORDERED_DICT,
        "collections.Counter": COUNTER,
        "builtins.set": SET,
        "builtins.frozenset": FROZENSET,
    }
    for name, function in [
        ("_codecs.encode", _encode),
        ("builtins.bytes", _bytes),
        ("builtins.bytearray", _bytearray),
        ("builtins.complex", _complex),
        ("torch.Size", _size),
        ("torch.device", _torch_device),
        ("torch._utils._rebuild_tensor", _rebuild_tensor),
        ("torch._utils._rebuild_tensor_v2", _rebuild_tensor_v2),
        ("torch._utils._rebuild_tensor_v3", _rebuild_tensor_v3),
        ("torch._utils._rebuild_parameter", _rebuild_parameter),
        ("torch._utils._rebuild_parameter_with_state", _rebuild_parameter),
        ("torch._tensor._rebuild_from_type_v2", _rebuild_from_type_v2),
    ]:
        table[name] = _Global(name, function)
    for storage_name, storage_dtype in _STORAGE_DTYPES.items():
        table[f"torch.{storage_name}"] = _Marker(f"torch.{storage_name}", "storage", storage_dtype)
    table["torch.storage.UntypedStorage"] = _Marker("torch.storage.UntypedStorage", "storage", dtypes.uint8)
    for value in dtypes.ALL_DTYPES:
        table[f"torch.{value.name}"] = _Marker(f"torch.{value.name}", "dtype", value)
    table["torch.Tensor"] = _Marker("torch.Tensor", "type", "Tensor")
    table["torch.nn.parameter.Parameter"] = _Marker("torch.nn.parameter.Parameter", "type", "Parameter")
    return table


_ALLOWED_GLOBALS = _allowed_globals()


def resolve_marker(value):
    """The value a global left in the unpickled object stands for: a dtype for ``torch.float32`` and kin.

    Raises:
        CheckpointError: ``value`` is a global that may only appear inside a tensor record.
    """
    if isinstance(value, _Marker) and value.kind == "dtype":
        return value.value
    name = getattr(value, "qualified_name", type(value).__name__)
    raise CheckpointError(f"the checkpoint holds {name!r} outside a tensor record, which onnxnn.load does not support")


# ------------------------------------------------------------------------------------------ the archive
class _Archive:
    """The members of a zip archive, checked before any is read; members come back without copying."""

    def __init__(self, data: bytes, source: str):
        self._data = data
        self._source = source
        try:
            infos = self._infos(data)
        except CheckpointError:
            # Pythons that check the zip64 end record against where it was found (Ubuntu's 3.12.3,
            # with CPython's later fix backported) refuse two torch.save archives written one after
            # the other into one stream: the second's record does not describe the whole stream.
            first_end = _first_archive_end(data)
            if first_end is None or data[first_end : first_end + 4] != _LOCAL_HEADER:
                raise
            infos = self._infos(data[:first_end])
        if infos and min(info.header_offset for info in infos) > 0:
            # Python's zipfile reads the archive the *last* end record describes and takes the bytes
            # before it as a prefix: for two torch.save archives written one after the other into
            # one stream it would read the second. PyTorch's reader (miniz) takes the offsets as
            # counted from the first byte, so it reads the first; read the archive that starts there.
            first_end = _first_archive_end(data)
            if first_end is not None:
                infos = self._infos(data[:first_end])
        self.members: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.filename in self.members:
                raise self._damaged(f"it holds two members named {info.filename!r}")
            self.members[info.filename] = info

    def _infos(self, data: bytes) -> list[zipfile.ZipInfo]:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                return archive.infolist()
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            EOFError,
            OSError,
            ValueError,
            struct.error,
            NotImplementedError,
            UnicodeDecodeError,
            IndexError,
        ) as error:
            raise self._damaged(f"{type(error).__name__}: {error}") from None

    def _damaged(self, reason: str) -> CheckpointError:
        return CheckpointError(f"cannot load {self._source}: the zip archive is damaged or truncated ({reason})")

    def read(self, name: str):
        """The bytes of member ``name`` (a memoryview of the file for stored members)."""
        info = self.members[name]
        if info.flag_bits & 0x1:
            raise CheckpointError(f"cannot load {self._source}: zip member {name!r} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise CheckpointError(
                f"cannot load {self._source}: zip member {name!r} uses compression method "
                f"{info.compress_type}; only stored and deflated members are supported"
            )
        if info.compress_size > len(self._data):
            raise self._damaged(f"member {name!r} claims {info.compress_size} bytes, more than the file holds")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise self._damaged(f"stored member {name!r} claims {info.file_size} bytes but stores {info.compress_size}")
        if info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 64:
            raise self._damaged(
                f"member {name!r} claims to inflate {info.compress_size} bytes to "
                f"{info.file_size}, beyond deflate's largest ratio"
            )
        begin = self._data_offset(info)
        stored = memoryview(self._data)[begin : begin + info.compress_size]
        if len(stored) != info.compress_size:
            raise self._damaged(f"member {name!r} runs past the end of the file")
        if info.compress_type == zipfile.ZIP_STORED:
            content: bytes | memoryview = stored
        else:
            try:
                inflater = zlib.decompressobj(-15)
                content = inflater.decompress(stored, info.file_size)
            except zlib.error as error:
                raise self._damaged(f"member {name!r}: {error}") from None
            if len(content) != info.file_size or not inflater.eof:
                raise self._damaged(f"member {name!r} does not inflate to its declared {info.file_size} bytes")
        # torch.save after torch.serialization.set_crc32_options(False) writes CRC 0 for every
        # member, and torch.load reads such files; the size checks above still bound the work.
        if info.CRC != 0 and zlib.crc32(content) != info.CRC:
            raise self._damaged(f"member {name!r} fails its CRC check")
        return content

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        header = info.header_offset
        if header < 0 or header + 30 > len(self._data) or self._data[header : header + 4] != b"PK\x03\x04":
            raise self._damaged(f"member {info.filename!r} has no local header at byte {header}")
        name_length, extra_length = struct.unpack_from("<HH", self._data, header + 26)
        return header + 30 + name_length + extra_length


_LOCAL_HEADER = b"PK\x03\x04"  # what a zip archive's first member begins with


def _first_archive_end(data: bytes) -> int | None:
    """Where the zip archive that starts at byte 0 of ``data`` ends, or None if no end record says so.

    An end-of-central-directory record at ``position`` closes that archive when its central
    directory, at the offset it gives counted from byte 0, ends right where the record (or the
    zip64 end record before it) begins.
    """
    position = data.find(b"PK\x05\x06")
    while 0 <= position <= len(data) - 22:
        directory_size, directory_offset, comment_length = struct.unpack_from("<IIH", data, position + 12)
        directory_end = position
        locator = position - 20
        if locator >= 0 and data[locator : locator + 4] == b"PK\x06\x07":
            # zip64 end records (torch.save always writes them) sit between the directory and this one.
            (record,) = struct.unpack_from("<Q", data, locator + 8)
            if 0 <= record <= len(data) - 56 and data[record : record + 4] == b"PK\x06\x06":
                directory_size, directory_offset = struct.unpack_from("<QQ", data, record + 40)
                directory_end = record
        if directory_offset + directory_size == directory_end:
            return position + 22 + comment_length
        position = data.find(b"PK\x05\x06", position + 1)
    return None


def _find_record_prefix(archive: _Archive, source: str) -> str:
    names = archive.members
    # torch.jit.save's archives hold a data.pkl too (archive/data.pkl beside archive/constants.pkl and
    # archive/code/), so they are recognized before the record is looked for.
    if any(name.endswith("constants.pkl") or "/code/" in name for name in names):
        raise CheckpointError(
            f"cannot load {source}: it is a TorchScript archive (torch.jit.save); onnxnn.load "
            "reads checkpoints written by torch.save"
        )
    if "data.pkl" in names:
        return ""
    prefixes = [name[: -len("data.pkl")] for name in names if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(prefixes) == 1:
        return prefixes[0]
    if len(prefixes) > 1:
        raise CheckpointError(f"cannot load {source}: the zip archive holds several data.pkl records")
    raise CheckpointError(
        f"cannot load {source}: the zip archive has no data.pkl record, so it is not a PyTorch checkpoint"
    )


class _TorchUnpickler:
    """Resolves ``data.pkl``'s globals to onnxnn's stand-ins and its storages to the archive's members."""

    def __init__(self, archive: _Archive, prefix: str, byteorder: str, source: str):
        self._archive = archive
        self._prefix = prefix
        self._byteorder = byteorder
        self._source = source
        self._storages: dict = {}

    def find_global(self, module: str, name: str):
        # Protocol 2 pickles written by Python 3 use Python 2 module names (``__builtin__``).
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        qualified_name = f"{module}.{name}"
        allowed = _ALLOWED_GLOBALS.get(qualified_name)
        if allowed is None:
            raise CheckpointError(_REFUSED.format(name=qualified_name, source=self._source))
        return allowed

    def persistent_load(self, persistent_id):
        if type(persistent_id) is not tuple or len(persistent_id) != 5 or persistent_id[0] != "storage":
            raise CheckpointError(f"unsupported persistent id {describe(persistent_id)} in {self._source}")
        _, storage_type, key, location, numel = persistent_id
        if not isinstance(storage_type, _Marker) or storage_type.kind != "storage":
            raise CheckpointError(f"unsupported storage type {describe(storage_type)} in {self._source}")
        if type(key) is not str or type(location) is not str or type(numel) is not int or numel < 0:
            raise CheckpointError(f"malformed storage record for key {describe(key)} in {self._source}")
        storage = self._storages.get(key)
        if storage is None:
            storage = self._storages[key] = self._read_storage(key, storage_type.value, location, numel)
        return storage

    def _read_storage(self, key: str, storage_dtype: dtypes.dtype, location: str, numel: int) -> _Storage:
        entry = f"{self._prefix}data/{key}"
        if entry not in self._archive.members:
            raise CheckpointError(
                f"{self._source} is damaged or truncated: storage {entry!r} is missing from the archive"
            )
        raw = self._archive.read(entry)
        if len(raw) < numel * storage_dtype.itemsize:
            raise CheckpointError(
                f"{self._source} is damaged or truncated: storage {entry!r} holds "
                f"{len(raw)} bytes, expected {numel * storage_dtype.itemsize}"
            )
        return _Storage(key, raw, storage_dtype, location, numel, self._byteorder)


def read_torch_zip(data: bytes, source: str):
    """Reads the object ``torch.save`` wrote into the zip archive ``data``; tensors are PendingTensors.

    Raises:
        CheckpointError: ``data`` is not a readable PyTorch zip checkpoint (damaged, truncated,
            TorchScript), or its pickle names a global outside the allowed set, or is malformed.
    """
    archive = _Archive(data, source)
    prefix = _find_record_prefix(archive, source)
    pickled = archive.read(f"{prefix}data.pkl")
    byteorder = "little"
    if f"{prefix}byteorder" in archive.members:
        byteorder = bytes(archive.read(f"{prefix}byteorder")).decode("ascii", "replace").strip()
    if byteorder not in ("little", "big"):
        raise CheckpointError(f"cannot load {source}: unknown byte order {describe(byteorder)}")
    resolver = _TorchUnpickler(archive, prefix, byteorder, source)
    unpickler = RestrictedUnpickler(pickled, resolver.find_global, resolver.persistent_load, source)
    try:
        return unpickler.load()
    except CheckpointError as error:
        if str(error).startswith("cannot load") or source in str(error):
            raise
        raise CheckpointError(f"cannot load {source}: {error}") from None
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        RecursionError,
        MemoryError,
        UnicodeError,
        OverflowError,
        struct.error,
    ) as error:
        # A call of an allowed global with arguments of the wrong number or kind.
        raise CheckpointError(
            f"cannot load {source}: malformed data.pkl ({type(error).__name__}: {describe(str(error), 200)})"
        ) from None
