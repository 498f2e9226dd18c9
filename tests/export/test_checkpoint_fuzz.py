"""A seeded mutation fuzzer over every checkpoint format onnxnn.load reads.

Seeds are valid files written by ``onnxnn.save`` in the test (PyTorch zip for ``.pt``, safetensors
state_dicts, onnxnn's nested format) plus a few hostile seeds (a billion-laughs pickle, zero-stride
tensor views). Each case applies one to three mutations: byte flips, truncations, insertions,
deletions and duplications anywhere; field-level mutations of the pickle's opcodes (arguments set to
extreme ints, opcodes swapped, dropped or repeated, memo references redirected, a size or stride
tuple made a 0 beside huge dims, repacked with valid CRCs so they reach the unpickler), of zip header
fields (method, sizes, CRC, offsets), of the safetensors JSON header (dtypes, shapes, offsets,
entries duplicated or dropped, a tensor emptied by a 0 beside huge dims with the offsets still tiling
the data) and of the onnxnn document (any value replaced by a hostile one).

Every case must end in ``onnxnn.CheckpointError`` or a successful load:

- no other exception type;
- no hang: each case runs under a ``PER_CASE_SECONDS`` alarm (cases take milliseconds);
- no allocation beyond ``ALLOCATION_PER_BYTE`` times the file's size plus ``ALLOCATION_SLACK``
  (tracemalloc peak, which includes numpy's buffers): a load never allocates what the file merely
  declares.

The suite runs for ``ONNXNN_FUZZ_SECONDS`` seconds in all (default 15, split across the formats);
``ONNXNN_FUZZ_SEED`` (default 0) picks the sequence of cases. A failure names its seed and case index,
and the mutations applied, so ``ONNXNN_FUZZ_SEED=<seed>`` replays it. Run with ``-s`` to see case counts.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import pickletools
import random
import struct
import time
import traceback
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import onnxnn
from onnxnn import CheckpointError
from onnxnn.export import load, save

from .hostile_files import Hang, billion_laughs, bounded, peak_allocation, tensor_pickle, torch_zip

FUZZ_SECONDS = float(os.environ.get("ONNXNN_FUZZ_SECONDS", "15"))
FUZZ_SEED = int(os.environ.get("ONNXNN_FUZZ_SEED", "0"))
PER_CASE_SECONDS = 20
# Python objects per pickle byte (an EMPTY_SET opcode is one byte and a 216-byte set), plus the
# tensors' copies (at most the file's size) and a constant for onnxnn's own per-load objects.
ALLOCATION_PER_BYTE = 256
ALLOCATION_SLACK = 8 << 20
FORMATS = ["torch zip", "safetensors state_dict", "nested format"]

INTERESTING_INTS = [
    0,
    1,
    -1,
    2,
    255,
    256,
    2**15,
    2**16 - 1,
    2**31 - 1,
    -(2**31),
    2**32 - 1,
    2**40,
    2**62,
    2**63 - 1,
    -(2**63),
    2**64,
]
# Dims whose product no index can address, for a tensor that a 0 beside them makes empty: its
# byte count (0) passes every size check, so only the shape itself can refuse it.
HUGE_DIMS = [2**31, 2**40, 2**62, 2**63 - 1]
HOSTILE_JSON = [
    None,
    True,
    -1,
    0,
    2**64,
    1e400,
    -1e400,
    2.5,
    "",
    "x",
    "F32",
    [],
    {},
    [1],
    [-1],
    [2**40],
    [1e400],
    {"device": [1]},
    {"tensor": "nope"},
    {"Size": [1e400]},
    {"set": [[1]]},
    {"dict": [[[1], 2]]},
    {"float": "zzz"},
    {"bytes": "!!"},
    {"dtype": "float99"},
    {"tuple": {"a": 1}},
    {"OrderedDict": 5},
    [[[[[[[[[[[]]]]]]]]]]],
]


# ------------------------------------------------------------------------------------------------ seeds
def _tensor(shape, dtype=np.float32):
    return onnxnn.tensor(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def _checkpoint():
    model = onnxnn.nn.Sequential(onnxnn.nn.Linear(3, 2), onnxnn.nn.BatchNorm1d(2))
    ids = _tensor((3,), np.int64)
    return {
        "model": model.state_dict(),
        "epoch": 3,
        "lr": 1e-3,
        "betas": (0.9, 0.999),
        "tags": {"a"},
        "blob": b"\x00\xff",
        "ids": ids,
        "again": ids,
        "half": _tensor((2, 2), np.float16),
        "flags": onnxnn.tensor(np.array([True, False])),
        "scalar": _tensor(()),
        "nested": [{1: [None, 2.5]}],
    }


def _seeds(fmt: str, directory) -> list[bytes]:
    if fmt == "torch zip":
        save(_checkpoint(), directory / "seed.pt")
        view = torch_zip(tensor_pickle(4, (2**20, 2), (0, 1)), {"data/0": np.arange(4, dtype=np.float32).tobytes()})
        return [(directory / "seed.pt").read_bytes(), torch_zip(billion_laughs(6)), view]
    if fmt == "safetensors state_dict":
        state = OrderedDict((f"layer{index}.weight", _tensor((2, index + 1))) for index in range(4))
        state["count"] = _tensor((), np.int64)
        state["mask"] = onnxnn.tensor(np.array([True, False, True]))
        save(state, directory / "seed.safetensors")
        return [(directory / "seed.safetensors").read_bytes()]
    buffer = io.BytesIO()
    save(_checkpoint(), buffer)
    return [buffer.getvalue()]


# -------------------------------------------------------------------------------------------- mutations
def _bytes_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    data = bytearray(data)
    choice = rng.randrange(6)
    at = rng.randrange(len(data) + 1)
    if choice == 0 and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data), "flip bits"
    if choice == 1 and data:
        index = rng.randrange(len(data))
        data[index] = rng.choice([0, 0x7F, 0x80, 0xFF])
        return bytes(data), f"byte {index} set"
    if choice == 2:
        return bytes(data[:at]), f"truncate at {at}"
    if choice == 3:
        return bytes(data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]), "insert"
    if choice == 4:
        return bytes(data[:at] + data[at + rng.randint(1, 64) :]), f"delete at {at}"
    chunk = data[at : at + rng.randint(1, 256)]
    return bytes(data[:at] + chunk * rng.randint(2, 20) + data[at:]), f"repeat chunk at {at}"


def _repack(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def _pickle_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    name = next(name for name in members if name.endswith("data.pkl"))
    pickled = members[name]
    operations = list(pickletools.genops(pickled))
    positions = [position for _, _, position in operations] + [len(pickled)]
    index = rng.randrange(len(operations))
    begin, end = positions[index], positions[index + 1]
    opcode, argument, _ = operations[index]
    choice = rng.randrange(5)
    if choice == 0 and isinstance(argument, int) and end - begin > 1:  # an extreme value of the same width
        width = end - begin - 1
        value = rng.choice(INTERESTING_INTS) % (1 << (8 * width))
        mutated = pickled[: begin + 1] + value.to_bytes(width, "little") + pickled[end:]
        description = f"{opcode.name} argument -> {value}"
    elif choice == 1:
        replacement = rng.choice(b"()]}NtRbeusaq0h12\x85\x86\x87\x88\x89\x8f\x90\x91\x93\x94QKJM")
        mutated = pickled[:begin] + bytes([replacement]) + pickled[begin + 1 :]
        description = f"{opcode.name} -> opcode {replacement:#x}"
    elif choice == 2:
        mutated = pickled[:begin] + pickled[end:]
        description = f"drop {opcode.name}"
    elif choice == 3:
        span = pickled[begin : positions[min(index + rng.randint(1, 8), len(operations))]]
        mutated = pickled[:begin] + span * rng.randint(2, 50) + pickled[begin:]
        description = f"repeat from {opcode.name}"
    else:
        reference = b"h" + bytes([rng.randrange(256)])
        mutated = pickled[:begin] + reference + pickled[begin:]
        description = "insert BINGET"
    members[name] = mutated
    return _repack(members), f"pickle at byte {begin}: {description}"


def _zero_beside_huge_dims(count: int, rng: random.Random) -> list[int]:
    dims = [rng.choice(HUGE_DIMS) for _ in range(count)]
    dims[rng.randrange(count)] = 0
    return dims


_INT_OPCODES = {"INT", "LONG", "BININT", "BININT1", "BININT2", "LONG1", "LONG4"}
_TUPLE_SIZES = {"TUPLE2": 2, "TUPLE3": 3}


def _pickle_dims_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A tuple of two or three ints (a tensor's size or stride) becomes a 0 beside huge dims."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    name = next(name for name in members if name.endswith("data.pkl"))
    pickled = members[name]
    operations = list(pickletools.genops(pickled))
    tuples = [
        (index - _TUPLE_SIZES[opcode.name], index)
        for index, (opcode, _, _) in enumerate(operations)
        if opcode.name in _TUPLE_SIZES
        and index >= _TUPLE_SIZES[opcode.name]
        and all(item.name in _INT_OPCODES for item, _, _ in operations[index - _TUPLE_SIZES[opcode.name] : index])
    ]
    if not tuples:
        return _pickle_mutation(data, rng)
    first, end = rng.choice(tuples)
    dims = _zero_beside_huge_dims(end - first, rng)
    pushes = b"".join(pickle.dumps(size, protocol=2)[2:-1] for size in dims)  # without PROTO and STOP
    members[name] = pickled[: operations[first][2]] + pushes + pickled[operations[end][2] :]
    return _repack(members), f"pickle at byte {operations[first][2]}: int tuple -> {dims}"


def _zip_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    offsets = [index for index in range(len(data) - 4) if data[index : index + 4] in (b"PK\x01\x02", b"PK\x03\x04")]
    if not offsets:
        return _bytes_mutation(data, rng)
    record = rng.choice(offsets)
    central = data[record : record + 4] == b"PK\x01\x02"
    fields = (
        {
            "method": (10, "<H"),
            "crc": (16, "<I"),
            "compressed": (20, "<I"),
            "size": (24, "<I"),
            "name length": (28, "<H"),
            "extra length": (30, "<H"),
            "offset": (42, "<I"),
        }
        if central
        else {
            "method": (8, "<H"),
            "crc": (14, "<I"),
            "compressed": (18, "<I"),
            "size": (22, "<I"),
            "name length": (26, "<H"),
            "extra length": (28, "<H"),
        }
    )
    field = rng.choice(list(fields))
    where, form = fields[field]
    value = rng.choice([0, 1, 8, 9, 12, 14, 99, 0xFFFF, 0xFFFFFFFF, 2**31, len(data), len(data) * 2000])
    value %= 1 << (8 * struct.calcsize(form))
    patched = bytearray(data)
    if record + where + struct.calcsize(form) <= len(patched):
        struct.pack_into(form, patched, record + where, value)
    return bytes(patched), f"zip {'central' if central else 'local'} {field} at {record} -> {value}"


def _split_safetensors(data: bytes):
    size = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + size]), data[8 + size :]


def _join_safetensors(header, rest: bytes, rng: random.Random) -> bytes:
    encoded = json.dumps(header).encode()
    size = len(encoded) if rng.random() < 0.9 else rng.choice([0, len(encoded) + 1, 2**40])
    return size.to_bytes(8, "little") + encoded + rest


def _header_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    header, rest = _split_safetensors(data)
    names = [name for name in header if name != "__metadata__"]
    name = rng.choice(names)
    choice = rng.randrange(5)
    if choice == 0:
        field = rng.choice(["dtype", "shape", "data_offsets"])
        header[name][field] = rng.choice(HOSTILE_JSON + ["U32", "BF16", "I8", [0, 0], [0, 2**40], [2, 1]])
        description = f"{name}.{field} = {str(header[name][field])[:40]}"
    elif choice == 1 and len(names) > 1:
        other = rng.choice(names)
        header[name]["data_offsets"], header[other]["data_offsets"] = (
            header[other]["data_offsets"],
            header[name]["data_offsets"],
        )
        description = f"swap offsets of {name} and {other}"
    elif choice == 2:
        header[name + "#copy"] = dict(header[name])
        description = f"duplicate {name}"
    elif choice == 3:
        del header[name]
        description = f"drop {name}"
    else:
        header[name]["shape"] = [rng.choice(INTERESTING_INTS) for _ in range(rng.randint(0, 4))]
        description = f"{name}.shape = {header[name]['shape']}"
    return _join_safetensors(header, rest, rng), f"header: {description}"


def _empty_tensor_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One tensor gets a 0 beside huge dims and loses its bytes; the other tensors' offsets move
    down, so the header still tiles the data section and only the shape can be refused."""
    header, rest = _split_safetensors(data)
    name = rng.choice([name for name in header if name != "__metadata__"])
    begin, end = header[name]["data_offsets"]
    for other, entry in header.items():
        if other != "__metadata__" and entry["data_offsets"][0] >= end:
            entry["data_offsets"] = [offset - (end - begin) for offset in entry["data_offsets"]]
    header[name]["shape"] = _zero_beside_huge_dims(rng.randint(2, 4), rng)
    header[name]["data_offsets"] = [begin, begin]
    return _join_safetensors(
        header, rest[:begin] + rest[end:], rng
    ), f"header: {name} empty, shape {header[name]['shape']}"


def _document_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    header, rest = _split_safetensors(data)
    document = json.loads(header["__metadata__"]["onnxnn"])
    containers = []  # (container, key) pairs reachable in the document

    def walk(value):
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            containers.append((value, key))
            walk(item)

    walk(document)
    container, key = rng.choice(containers)
    container[key] = rng.choice(HOSTILE_JSON)
    header["__metadata__"]["onnxnn"] = json.dumps(document)
    return _join_safetensors(header, rest, rng), f"document[{key!r}] = {str(container[key])[:40]}"


def _mutate(fmt: str, data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    structured = {
        "torch zip": [_pickle_mutation, _pickle_dims_mutation, _zip_mutation],
        "safetensors state_dict": [_header_mutation, _empty_tensor_mutation],
        "nested format": [_header_mutation, _empty_tensor_mutation, _document_mutation],
    }[fmt]
    steps = []
    for _ in range(rng.randint(1, 3)):
        mutator = rng.choice(structured + [_bytes_mutation])
        try:
            data, description = mutator(data, rng)
        except Exception:  # an earlier mutation left no structure to mutate: mutate bytes instead
            data, description = _bytes_mutation(data, rng)
        steps.append(description)
    return data, steps


# ------------------------------------------------------------------------------------------------- runs
def _run_case(data: bytes) -> str:
    """'loaded' or 'refused'; raises AssertionError for any other outcome."""
    with peak_allocation() as peak:
        try:
            with bounded(PER_CASE_SECONDS):
                load(io.BytesIO(data))
            outcome = "loaded"
        except CheckpointError:
            outcome = "refused"
        except Hang:
            raise AssertionError(f"no result after {PER_CASE_SECONDS} s") from None
        except Exception as error:
            raise AssertionError(f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-4)}") from None
    bound = ALLOCATION_PER_BYTE * len(data) + ALLOCATION_SLACK
    assert peak[0] <= bound, f"allocated {peak[0]} bytes for a file of {len(data)} (bound {bound})"
    return outcome


@pytest.mark.parametrize("fmt", FORMATS)
def test_mutated_checkpoints_load_or_raise_checkpoint_error(tmp_path, fmt):
    seeds = _seeds(fmt, tmp_path)
    for seed_data in seeds:
        assert _run_case(seed_data) == "loaded"
    deadline = time.monotonic() + FUZZ_SECONDS / len(FORMATS)
    counts = {"loaded": 0, "refused": 0}
    index = 0
    while time.monotonic() < deadline:
        rng = random.Random(f"{FUZZ_SEED}:{fmt}:{index}")
        data, steps = _mutate(fmt, rng.choice(seeds), rng)
        try:
            counts[_run_case(data)] += 1
        except AssertionError as failure:
            pytest.fail(f"{fmt} case {index} (ONNXNN_FUZZ_SEED={FUZZ_SEED}), mutations {steps}: {failure}")
        index += 1
    print(f"\nfuzz {fmt}: {index} cases, {counts['loaded']} loaded, {counts['refused']} refused")
    assert index > 0
