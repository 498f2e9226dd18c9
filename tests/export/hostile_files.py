"""Builders of hostile and malformed checkpoint bytes, shared by the regression tests and the fuzzer.

Pickles are written opcode by opcode (the names in comments are pickletools'), zips with
``zipfile`` or patched afterwards, safetensors files from a header dict and a data section.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import struct
import tracemalloc
import zipfile

# Opcodes, protocol 2.
PROTO2 = b"\x80\x02"
STOP, POP, MARK, NONE = b".", b"0", b"(", b"N"
EMPTY_LIST, EMPTY_DICT, EMPTY_TUPLE = b"]", b"}", b")"
APPENDS, SETITEM, TUPLE2, REDUCE = b"e", b"s", b"\x86", b"R"


def binput(index: int) -> bytes:
    return b"q" + bytes([index]) if index < 256 else b"r" + struct.pack("<I", index)


def binget(index: int) -> bytes:
    return b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)


def unicode(text: str) -> bytes:
    encoded = text.encode()
    return b"X" + struct.pack("<I", len(encoded)) + encoded


def global_(module: str, name: str) -> bytes:
    return f"c{module}\n{name}\n".encode()


def billion_laughs(depth: int, copies: int = 10) -> bytes:
    """A list holding ``copies`` references to a list holding ``copies`` references ... ``depth`` levels."""
    body = PROTO2 + EMPTY_LIST + binput(0) + MARK + unicode("lol") + APPENDS + POP
    for level in range(1, depth + 1):
        body += EMPTY_LIST + binput(level) + MARK + binget(level - 1) * copies + APPENDS
        if level < depth:
            body += POP
    return body + STOP


def shared_tuple_key(depth: int) -> bytes:
    """A dict whose key is t_depth, where t_0 = ("a",) and t_k = (t_k-1, t_k-1): 2**depth to hash."""
    body = PROTO2 + EMPTY_DICT + unicode("a") + b"\x85" + binput(0) + POP
    for level in range(1, depth + 1):
        body += binget(level - 1) + binget(level - 1) + TUPLE2 + binput(level) + (POP if level < depth else b"")
    return body + NONE + SETITEM + STOP


def torch_zip(pickled: bytes, members: dict | None = None, prefix: str = "archive") -> bytes:
    """torch.save's archive around the raw ``pickled`` bytes, with extra ``members`` (name -> bytes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{prefix}/data.pkl", pickled)
        archive.writestr(f"{prefix}/byteorder", "little")
        for name, content in (members or {}).items():
            archive.writestr(f"{prefix}/{name}", content)
        archive.writestr(f"{prefix}/version", "3\n")
    return buffer.getvalue()


def tensor_pickle(storage_numel: int, size: tuple, stride: tuple, offset: int = 0) -> bytes:
    """``{"w": _rebuild_tensor_v2(float storage "0" of storage_numel elements, offset, size, stride)}``."""

    def ints(values):
        return (
            MARK
            + b"".join(
                b"J" + struct.pack("<i", v)
                if -(2**31) <= v < 2**31
                else b"\x8a\x09" + v.to_bytes(9, "little", signed=True)
                for v in values
            )
            + b"t"
        )

    return (
        PROTO2
        + EMPTY_DICT
        + unicode("w")
        + global_("torch._utils", "_rebuild_tensor_v2")
        + MARK
        + MARK
        + unicode("storage")
        + global_("torch", "FloatStorage")
        + unicode("0")
        + unicode("cpu")
        + b"J"
        + struct.pack("<i", storage_numel)
        + b"t"
        + b"Q"
        + b"J"
        + struct.pack("<i", offset)
        + ints(size)
        + ints(stride)
        + b"\x89"
        + global_("collections", "OrderedDict")
        + EMPTY_TUPLE
        + REDUCE
        + b"t"
        + REDUCE
        + SETITEM
        + STOP
    )


def safetensors_bytes(header, data: bytes = b"", raw_header: bytes | None = None) -> bytes:
    """A safetensors file from a header (dict, or ``raw_header`` bytes as they are) and a data section."""
    encoded = raw_header if raw_header is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def patch_zip_member(data: bytes, name: str, **fields) -> bytes:
    """Rewrites central-directory and local-header fields of member ``name`` (compress_type,
    compress_size, file_size, crc) in an existing archive, leaving the member's bytes alone."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(name)
    patched = bytearray(data)
    central = data.index(b"PK\x01\x02")
    while True:  # the central records follow one another; find this member's
        name_length = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + name_length].decode() == name:
            break
        central = data.index(b"PK\x01\x02", central + 4)
    layout = {
        "compress_type": ("<H", 8, 10),
        "crc": ("<I", 14, 16),
        "compress_size": ("<I", 18, 20),
        "file_size": ("<I", 22, 24),
    }
    for field, value in fields.items():
        form, local, central_offset = layout[field]
        struct.pack_into(form, patched, info.header_offset + local, value)
        struct.pack_into(form, patched, central + central_offset, value)
    return bytes(patched)


class Hang(Exception):
    """The guarded code ran past its bound: a hang, reported as a failure rather than waited out."""


@contextlib.contextmanager
def bounded(seconds: float):
    """Raises Hang inside the block after ``seconds`` (SIGALRM; main thread, POSIX)."""

    def expire(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def peak_allocation():
    """Yields a list that holds, after the block, the peak bytes allocated inside it (tracemalloc)."""
    result = []
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield result
    finally:
        result.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
