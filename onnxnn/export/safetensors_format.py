"""The safetensors file format, read strictly and written without an intermediate copy.

A safetensors file is an 8-byte little-endian header length ``n``, ``n`` bytes of UTF-8 JSON, and a
data section::

    {"__metadata__": {"str": "str", ...},                                      (optional)
     "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}

Offsets count from the start of the data section. The reader refuses what the format's own rules
(https://github.com/huggingface/safetensors, "Format") refuse and what a lenient parser would let
through silently: a header that is not a JSON object or repeats a key, entries with other fields,
dtypes outside the table, shapes that are not lists of non-negative ints (``1e400``, ``2.5``,
``true``), byte ranges that disagree with shape and dtype, and byte ranges that overlap, repeat,
leave gaps or leave bytes over at the end: the entries must tile the data section exactly.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Callable

import numpy as np

from ..errors import CheckpointError
from ..ir import dtypes
from .restricted_unpickler import describe
from .torch_checkpoint import PendingTensor

__all__ = ["read_safetensors", "write_safetensors", "DTYPES", "parse_json"]

DTYPES = {
    "F64": dtypes.float64,
    "F32": dtypes.float32,
    "F16": dtypes.float16,
    "BF16": dtypes.bfloat16,
    "I64": dtypes.int64,
    "I32": dtypes.int32,
    "I16": dtypes.int16,
    "I8": dtypes.int8,
    "U8": dtypes.uint8,
    "U16": dtypes.uint16,
    "U32": dtypes.uint32,
    "U64": dtypes.uint64,
    "BOOL": dtypes.bool,
}
_NAMES = {value: name for name, value in DTYPES.items()}
# Dtypes the format defines that onnxnn has no tensors for; named in the error rather than "unknown".
_KNOWN_UNSUPPORTED = {"F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"}
# The reference implementation's bound; a header this large would describe millions of tensors.
MAX_HEADER_BYTES = 100_000_000
_ENTRY_FIELDS = {"dtype", "shape", "data_offsets"}


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _unique_pairs(pairs: list) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {describe(key)} appears twice in one object")
            seen.add(key)
    return result


def parse_json(text, source: str, what: str):
    """Parses strict JSON (no NaN, no repeated keys); errors name ``source`` and ``what`` was parsed."""
    try:
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("utf-8")
        return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        reason = "it is not UTF-8"
    except RecursionError:
        reason = "it is nested too deeply"
    except ValueError as error:  # JSONDecodeError, repeated keys, NaN, ints of too many digits
        reason = describe(str(error), 200)
    raise CheckpointError(f"cannot load {source}: unreadable {what} ({reason})")


def read_safetensors(data: bytes, source: str) -> tuple[dict[str, PendingTensor], dict[str, str]]:
    """Parses a safetensors file into its tensors (in header order) and its ``__metadata__``.

    Raises:
        CheckpointError: the header or a tensor entry breaks the format (the message names the tensor).
    """
    if len(data) < 8:
        raise CheckpointError(f"cannot load {source}: the file is truncated ({len(data)} bytes)")
    header_size = int.from_bytes(data[:8], "little")
    if header_size > len(data) - 8:
        raise CheckpointError(
            f"cannot load {source}: the file is truncated (its safetensors header needs "
            f"{header_size} bytes, {len(data) - 8} are present)"
        )
    if header_size > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"cannot load {source}: its safetensors header of {header_size} bytes exceeds the "
            f"format's limit of {MAX_HEADER_BYTES}"
        )
    header = parse_json(memoryview(data)[8 : 8 + header_size], source, "safetensors header")
    if type(header) is not dict:
        raise CheckpointError(f"cannot load {source}: unreadable safetensors header (it is not a JSON object)")
    metadata = header.pop("__metadata__", {})
    if type(metadata) is not dict or not all(type(value) is str for value in metadata.values()):
        raise CheckpointError(f"cannot load {source}: the safetensors __metadata__ is not a map of strings")
    buffer = memoryview(data)[8 + header_size :]
    ranges = []
    for name, entry in header.items():
        ranges.append((*_check_entry(name, entry, len(buffer), source), name))
    _check_tiling(ranges, len(buffer), source)
    tensors = {}
    for name, entry in header.items():
        value_dtype = DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        try:
            array = _array(buffer[begin:end], value_dtype, entry["shape"])
        except ValueError as error:  # numpy: a 0 beside dims whose product no index can address
            raise CheckpointError(
                f"cannot load {source}: tensor {describe(name)} of shape {_brief(entry['shape'])} "
                f"cannot be represented ({error})"
            ) from None
        tensors[name] = PendingTensor(array, value_dtype)
    return tensors, metadata


def _check_entry(name: str, entry, available: int, source: str) -> tuple[int, int]:
    prefix = f"cannot load {source}: tensor {describe(name)}"
    if type(entry) is not dict or set(entry) != _ENTRY_FIELDS:
        fields = sorted(entry) if type(entry) is dict else describe(entry)
        raise CheckpointError(
            f"{prefix} has a malformed safetensors entry (fields {fields}, expected {sorted(_ENTRY_FIELDS)})"
        )
    dtype_name, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if type(dtype_name) is str and dtype_name in _KNOWN_UNSUPPORTED:
        raise CheckpointError(
            f"{prefix} has dtype {dtype_name}, which onnxnn does not support (supported: {', '.join(DTYPES)})"
        )
    if type(dtype_name) is not str or dtype_name not in DTYPES:
        raise CheckpointError(f"{prefix} has the unknown dtype {describe(dtype_name)}")
    if (
        type(shape) is not list
        or len(shape) > 64
        or not all(type(size) is int and 0 <= size <= sys.maxsize for size in shape)
    ):
        raise CheckpointError(
            f"{prefix} has shape {describe(shape) if type(shape) is not list else _brief(shape)}; "
            "a shape is a list of at most 64 non-negative ints (below 2**63)"
        )
    if type(offsets) is not list or len(offsets) != 2 or not all(type(offset) is int for offset in offsets):
        raise CheckpointError(f"{prefix} has data_offsets {_brief(offsets)}; expected [begin, end] ints")
    begin, end = offsets
    if end > available:
        raise CheckpointError(
            f"cannot load {source}: the file is truncated (tensor {describe(name)} ends at byte "
            f"{end} of the data section, which holds {available} bytes)"
        )
    expected = math.prod(shape) * DTYPES[dtype_name].itemsize
    if not 0 <= begin <= end or end - begin != expected:
        raise CheckpointError(
            f"{prefix} of shape {_brief(shape)} and dtype {dtype_name} spans bytes "
            f"[{begin}, {end}), expected {expected} bytes"
        )
    return begin, end


def _brief(values) -> str:
    if type(values) is not list:
        return describe(values)
    shown = ", ".join(describe(value, 24) for value in values[:8])
    return f"[{shown}{', ...' if len(values) > 8 else ''}]"


def _check_tiling(ranges: list, available: int, source: str) -> None:
    """The byte ranges must cover the data section exactly once, in some order."""
    position, previous = 0, None
    for begin, end, name in sorted(ranges):
        if begin != position:
            if begin < position:
                raise CheckpointError(
                    f"cannot load {source}: tensors {describe(previous)} and {describe(name)} "
                    f"overlap (bytes [{begin}, {position}) belong to both)"
                )
            raise CheckpointError(
                f"cannot load {source}: bytes [{position}, {begin}) of the data section belong "
                f"to no tensor (a gap before {describe(name)})"
            )
        position, previous = end, name
    if position != available:
        raise CheckpointError(
            f"cannot load {source}: the data section holds {available} bytes but its tensors cover {position}"
        )


def _array(raw: memoryview, value_dtype: dtypes.dtype, shape: list) -> np.ndarray:
    # A copy, so the tensors do not keep the whole file alive.
    if value_dtype is dtypes.bool:
        array = np.frombuffer(raw, dtype=np.uint8) != 0
    else:
        array = np.frombuffer(raw, dtype=value_dtype.numpy_dtype).copy()
        if sys.byteorder == "big":
            array = array.byteswap()
    return array.reshape(shape)


# ---------------------------------------------------------------------------------------------- writing
def write_safetensors(
    write: Callable[[bytes | memoryview], object], arrays: dict[str, np.ndarray], metadata: dict[str, str]
) -> None:
    """Writes ``arrays`` (C-contiguous, onnxnn dtypes) as a safetensors file through ``write``.

    Tensors are stored in the order given; each array's bytes are written straight from its memory.
    """
    header: dict = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, array in arrays.items():
        size = array.nbytes
        header[name] = {
            "dtype": _NAMES[dtypes.as_dtype(array.dtype)],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)  # the reference writer aligns the data section to 8 bytes
    write(len(encoded).to_bytes(8, "little"))
    write(encoded)
    for array in arrays.values():
        if array.size:
            write(_little_endian_bytes(array))


def _little_endian_bytes(array: np.ndarray) -> memoryview:
    if array.dtype == np.bool_:
        array = array.view(np.uint8)
    elif sys.byteorder == "big" and array.dtype.itemsize > 1:
        array = array.byteswap()
    return memoryview(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # an ndarray is a buffer; numpy declares __buffer__ for Python >= 3.12 only
