"""Writes PyTorch's own checkpoint format (what ``torch.save`` writes) without PyTorch.

The file is the zip archive :mod:`onnxnn.export.torch_checkpoint` reads, laid out as PyTorch 2 lays it
out, so ``torch.load(path, weights_only=True)`` opens it::

    archive/data.pkl               the object, a protocol 2 pickle written here opcode by opcode
    archive/.format_version        "1"
    archive/.storage_alignment     "64"
    archive/byteorder              "little" or "big", this machine's
    archive/data/0, data/1, ...    each tensor's elements (C order), 64-byte aligned in the file
    archive/version                "3"

Members are stored uncompressed; each local header carries padding in an extra field (id ``FB``, as
PyTorch's writer does) so that storage bytes start on a 64-byte boundary and can be memory-mapped.
Archives past 4 GiB use zip64 records.

The pickle only names globals that PyTorch's ``weights_only`` unpickler allows: a tensor is
``torch._utils._rebuild_tensor_v2(('storage', torch.FloatStorage, key, location, numel), 0, size,
stride, requires_grad, OrderedDict())`` (``_rebuild_tensor_v3`` with ``torch.storage.UntypedStorage``
for dtypes without a typed storage), a Parameter wraps it in ``torch._utils._rebuild_parameter``,
bytes are ``_codecs.encode(text, "latin1")``, bytearrays ``builtins.bytearray(bytes)``, sets
``builtins.set(list)``, Counters ``collections.Counter(dict)``, complex numbers ``builtins.complex(real,
imag)``, sizes ``torch.Size(tuple)``, devices ``torch.device(...)``, dtypes ``torch.float32`` and kin. One
tensor object saved at two places is one memo entry, so it loads as one tensor, as with ``torch.save``.

Tensors over one storage in onnxnn name one ``data/<key>``, as ``torch.save`` writes them: the members
of an alias group (tied weights, whose ``state_dict()`` entries are distinct detached tensors) and
views of a live base, each at its offset and strides in the base's elements (a view saved alone
writes its whole base, as PyTorch's does). ``torch.load`` then gives them one storage again.
"""

from __future__ import annotations

import math
import struct
import sys
import zlib
from collections import Counter, OrderedDict
from typing import Any, Callable

import numpy as np

from ..ir import dtypes
from ..ir.device import CPU, device
from ..runtime.aliases import ALIAS_GROUPS
from ..runtime.internal import realize_values
from ..runtime.tensor import Size, Tensor
from ..runtime.views import VIEW_LINKS
from .torch_checkpoint import STORAGE_TYPES

__all__ = ["write_torch_zip"]

_ALIGNMENT = 64
_ARCHIVE = "archive"
_ESCAPE = 0xFFFFFFFF  # a 32-bit field holding this means "see the zip64 record"
_ZIP64_THRESHOLD = _ESCAPE  # sizes and offsets from here on need zip64 records (tests lower it)


class _Pickler:
    """Emits protocol 2 opcodes for the values PyTorch's weights_only unpickler accepts."""

    def __init__(self, is_parameter: Callable[[Tensor], bool]):
        self.out = bytearray(b"\x80\x02")
        self.tensors: list[Tensor] = []  # keeps ids unique during the walk
        self.storages: list[Tensor] = []  # storage key = index: the tensor whose elements fill it
        self._storage_keys: dict[int, int] = {}  # id of a storage's owner or alias group -> key
        self._memo: dict = {}  # ("global", name) or ("tensor", id) -> memo index
        self._open: set[int] = set()
        self._is_parameter = is_parameter

    def dump(self, value, path: list) -> bytes:
        self._save(value, path)
        self.out += b"."
        return bytes(self.out)

    # ----------------------------------------------------------------------------------- primitives
    def _put(self, key) -> None:
        index = self._memo[key] = len(self._memo)
        self.out += b"q" + bytes([index]) if index < 256 else b"r" + struct.pack("<I", index)

    def _get(self, key) -> bool:
        index = self._memo.get(key)
        if index is None:
            return False
        self.out += b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)
        return True

    def _global(self, module: str, name: str) -> None:
        if not self._get(("global", module, name)):
            self.out += f"c{module}\n{name}\n".encode("ascii")
            self._put(("global", module, name))

    def _int(self, value: int) -> None:
        if 0 <= value < 256:
            self.out += b"K" + bytes([value])
        elif 0 <= value < 65536:
            self.out += b"M" + struct.pack("<H", value)
        elif -(2**31) <= value < 2**31:
            self.out += b"J" + struct.pack("<i", value)
        else:
            encoded = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
            if len(encoded) > 255:
                raise OverflowError("int too large to save")
            self.out += b"\x8a" + bytes([len(encoded)]) + encoded

    def _str(self, value: str) -> None:
        encoded = value.encode("utf-8", "surrogatepass")
        self.out += b"X" + struct.pack("<I", len(encoded)) + encoded

    def _tuple(self, items, path: list) -> None:
        if not items:
            self.out += b")"
            return
        if len(items) > 3:
            self.out += b"("
        for index, item in enumerate(items):
            self._save(item, path + [index])
        self.out += b"t" if len(items) > 3 else b"\x84\x85\x86\x87"[len(items) : len(items) + 1]

    def _call(self, module: str, name: str, arguments: tuple, path: list) -> None:
        self._global(module, name)
        self._tuple(arguments, path)
        self.out += b"R"

    # ---------------------------------------------------------------------------------------- values
    def _save(self, value, path: list) -> None:
        if value is None:
            self.out += b"N"
        elif value is True or value is False:
            self.out += b"\x88" if value else b"\x89"
        elif isinstance(value, np.generic) and isinstance(value.item(), (bool, int, float)):
            self._save(value.item(), path)
        elif isinstance(value, int):
            self._int(int(value))
        elif isinstance(value, float):
            self.out += b"G" + struct.pack(">d", value)
        elif isinstance(value, complex):
            self._call("builtins", "complex", (float(value.real), float(value.imag)), path)
        elif isinstance(value, str):
            self._str(value)
        elif isinstance(value, Tensor):
            self._tensor(value, path)
        elif isinstance(value, dtypes.dtype):
            self._global("torch", value.name)
        elif isinstance(value, device):
            self._call("torch", "device", (value.type,) if value.index is None else (value.type, value.index), path)
        elif isinstance(value, bytearray):
            # Python's protocol 2 form: builtins.bytearray(bytes), the bytes as below.
            self._call("builtins", "bytearray", (bytes(value),), path)
        elif isinstance(value, bytes):
            self._call("_codecs", "encode", (value.decode("latin1"), "latin1"), path)
        elif isinstance(value, (list, tuple, dict, set)) and not isinstance(value, frozenset):
            if id(value) in self._open:
                raise ValueError(f"cannot save an object that contains itself at {_format_path(path)}")
            self._open.add(id(value))
            try:
                self._container(value, path)
            finally:
                self._open.discard(id(value))
        else:
            hint = (
                " in PyTorch's format, whose weights_only loader refuses it; save to a .safetensors name"
                if isinstance(value, frozenset)
                else ""
            )
            raise TypeError(f"cannot save value of type {type(value).__name__} at {_format_path(path)}{hint}")

    def _container(self, value, path: list) -> None:
        if isinstance(value, Size):
            self._call("torch", "Size", (tuple(int(size) for size in value),), path)
        elif isinstance(value, tuple):
            self._tuple(value, path)
        elif isinstance(value, list):
            self.out += b"]"
            for start in range(0, len(value), 1000):  # batches of 1000, as Python's pickler writes
                self.out += b"("
                for index in range(start, min(start + 1000, len(value))):
                    self._save(value[index], path + [index])
                self.out += b"e"
        elif isinstance(value, set):
            self._call("builtins", "set", (list(value),), path)
        else:
            self._dict(value, path)

    def _dict(self, value: dict, path: list) -> None:
        ordered = isinstance(value, OrderedDict)
        counter = isinstance(value, Counter)
        if ordered:
            self._call("collections", "OrderedDict", (), path)
        else:
            # A Counter is collections.Counter(dict), as Python pickles it: MultiStepLR.step(epoch)
            # calls its elements(), which a plain dict lacks.
            if counter:
                self._global("collections", "Counter")
            self.out += b"}"
        items = list(value.items())
        for start in range(0, len(items), 1000):
            self.out += b"("
            for key, item in items[start : start + 1000]:
                if isinstance(key, (Tensor, list, dict, set)):
                    raise TypeError(f"cannot save a dict key of type {type(key).__name__} at {_format_path(path)}")
                self._save(key, path)
                self._save(item, path + [key])
            self.out += b"u"
        if counter:
            self.out += b"\x85R"
        module_metadata = getattr(value, "_metadata", None) if ordered else None
        if module_metadata is not None:
            # PyTorch's state_dict keeps module versions in the OrderedDict's attribute ``_metadata``.
            self.out += b"}"
            self._str("_metadata")
            self._save(module_metadata, path + ["_metadata"])
            self.out += b"sb"

    def _tensor(self, tensor: Tensor, path: list) -> None:
        if self._get(("tensor", id(tensor))):
            return
        parameter = self._is_parameter(tensor)
        if parameter:
            self._global("torch._utils", "_rebuild_parameter")
        self.tensors.append(tensor)
        shape = tuple(int(size) for size in tensor.shape)
        owner, offset, strides = _placement(tensor, shape)
        group = ALIAS_GROUPS.get(id(owner)) if ALIAS_GROUPS else None
        identity = id(owner if group is None else group)
        index = self._storage_keys.get(identity)
        if index is None:
            index = self._storage_keys[identity] = len(self.storages)
            self.storages.append(owner)
        key = str(index)
        location = "cpu" if tensor.device == CPU else str(tensor.device)
        typed = STORAGE_TYPES.get(tensor.dtype)
        self._global("torch._utils", "_rebuild_tensor_v2" if typed else "_rebuild_tensor_v3")
        self.out += b"(("
        self._str("storage")
        if typed:
            self._global("torch", typed)
        else:
            self._global("torch.storage", "UntypedStorage")
        self._str(key)
        self._str(location)
        numel = math.prod(int(size) for size in owner.shape)
        self._int(numel if typed else numel * tensor.dtype.itemsize)
        self.out += b"tQ"
        self._int(offset)
        self._tuple(shape, path)
        self._tuple(strides, path)
        self.out += b"\x88" if tensor.requires_grad and not parameter else b"\x89"
        self._call("collections", "OrderedDict", (), path)
        if not typed:
            self._global("torch", tensor.dtype.name)
        self.out += b"tR"
        if parameter:
            self.out += b"\x88" if tensor.requires_grad else b"\x89"
            self._call("collections", "OrderedDict", (), path)
            self.out += b"\x87R"
        self._put(("tensor", id(tensor)))


def _format_path(path: list) -> str:
    return "".join(f"[{segment!r}]" for segment in path) or "the top level"


def _placement(tensor: Tensor, shape: tuple) -> tuple[Tensor, int, tuple]:
    """``(owner, offset, strides)``: the tensor whose elements make ``tensor``'s storage, and where
    ``tensor`` lies in them. A view of a live base lies in the base's elements where its numpy twins,
    applied to a byte array of the base's size, put it; a view whose twins had to copy, or that has
    another dtype than its base, gets a storage of its own, as does every other tensor."""
    contiguous = tuple(math.prod(shape[index + 1 :]) for index in range(len(shape)))
    link = VIEW_LINKS.get(id(tensor)) if VIEW_LINKS else None
    if link is None:
        return tensor, 0, contiguous
    base = link.live_base(tensor)
    if base is None or base.dtype is not tensor.dtype or tuple(base.shape) != tuple(link.base.shape):
        return tensor, 0, contiguous
    elements = np.empty(math.prod(link.base.shape), np.uint8)
    layout = link.made_from(elements.reshape(link.base.shape))
    if (
        not isinstance(layout, np.ndarray)
        or layout.shape != shape
        or not np.may_share_memory(layout, elements)
        or any(stride < 0 for stride in layout.strides)
    ):
        return tensor, 0, contiguous
    offset = layout.__array_interface__["data"][0] - elements.__array_interface__["data"][0]
    return base, offset, tuple(int(stride) for stride in layout.strides)


# ---------------------------------------------------------------------------------------------- the zip
class _ZipWriter:
    """Writes stored zip members, data aligned to 64 bytes, with zip64 records where sizes need them."""

    def __init__(self, write: Callable[[bytes], object]):
        self._write = write
        self._position = 0
        self._central: list[bytes] = []

    def _emit(self, chunk) -> None:
        self._write(chunk)
        self._position += len(chunk)

    def add(self, name: str, content) -> None:
        """Adds member ``name`` holding ``content`` (bytes or a C-contiguous uint8 memoryview)."""
        encoded = name.encode("utf-8")
        size = len(content)
        crc = zlib.crc32(content)
        offset = self._position
        zip64 = size >= _ZIP64_THRESHOLD
        zip64_extra = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
        unpadded = offset + 30 + len(encoded) + len(zip64_extra) + 4
        padding = -unpadded % _ALIGNMENT
        extra = zip64_extra + struct.pack("<HH", 0x4246, padding) + b"Z" * padding
        stored_size = _ESCAPE if zip64 else size
        version = 45 if zip64 else 20
        self._emit(
            struct.pack(
                "<4sHHHHHIIIHH",
                b"PK\x03\x04",
                version,
                0x800,
                0,
                0,
                0x21,
                crc,
                stored_size,
                stored_size,
                len(encoded),
                len(extra),
            )
            + encoded
            + extra
        )
        if size:
            self._emit(content)
        central_zip64 = [size, size] if zip64 else []
        if offset >= _ZIP64_THRESHOLD:
            central_zip64.append(offset)
        central_extra = (
            struct.pack(f"<HH{len(central_zip64)}Q", 1, 8 * len(central_zip64), *central_zip64)
            if central_zip64
            else b""
        )
        central_version = 45 if central_extra else 20
        self._central.append(
            struct.pack(
                "<4sHHHHHHIIIHHHHHII",
                b"PK\x01\x02",
                central_version,
                central_version,
                0x800,
                0,
                0,
                0x21,
                crc,
                stored_size,
                stored_size,
                len(encoded),
                len(central_extra),
                0,
                0,
                0,
                0,
                _ESCAPE if offset >= _ZIP64_THRESHOLD else offset,
            )
            + encoded
            + central_extra
        )

    def finish(self) -> None:
        start = self._position
        for record in self._central:
            self._emit(record)
        size, count = self._position - start, len(self._central)
        zip64 = start >= _ZIP64_THRESHOLD or size >= _ZIP64_THRESHOLD or count >= 0xFFFF
        if zip64:
            end64 = self._position
            self._emit(struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, start))
            self._emit(struct.pack("<4sIQI", b"PK\x06\x07", 0, end64, 1))
        entries = 0xFFFF if zip64 else count
        self._emit(
            struct.pack(
                "<4sHHHHIIH",
                b"PK\x05\x06",
                0,
                0,
                entries,
                entries,
                _ESCAPE if zip64 else size,
                _ESCAPE if zip64 else start,
                0,
            )
        )


def _element_bytes(tensor: Tensor) -> memoryview:
    array = np.asarray(tensor.detach().cpu().numpy(), order="C")
    if array.dtype == np.bool_:
        array = array.view(np.uint8)
    return memoryview(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # an ndarray is a buffer; numpy declares __buffer__ for Python >= 3.12 only


def write_torch_zip(obj: Any, write: Callable[[bytes], object], is_parameter: Callable[[Tensor], bool]) -> None:
    """Writes ``obj`` in ``torch.save``'s zip format through ``write``.

    Raises:
        TypeError: ``obj`` holds a value PyTorch's weights_only loader would refuse (the message names
            its path).
        ValueError: ``obj`` contains itself.
    """
    pickler = _Pickler(is_parameter)
    pickled = pickler.dump(obj, [])
    # One realize call computes all pending tensors in one graph run, rather than one run per tensor.
    realize_values(pickler.storages)
    archive = _ZipWriter(write)
    archive.add(f"{_ARCHIVE}/data.pkl", pickled)
    archive.add(f"{_ARCHIVE}/.format_version", b"1")
    archive.add(f"{_ARCHIVE}/.storage_alignment", str(_ALIGNMENT).encode())
    archive.add(f"{_ARCHIVE}/byteorder", sys.byteorder.encode())
    for key, tensor in enumerate(pickler.storages):
        archive.add(f"{_ARCHIVE}/data/{key}", _element_bytes(tensor))
    archive.add(f"{_ARCHIVE}/version", b"3\n")
    archive.finish()
