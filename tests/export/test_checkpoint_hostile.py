"""Specification: hostile and malformed checkpoints load in bounded time and memory, or are refused.

Every refusal is an ``onnxnn.CheckpointError`` (a RuntimeError and a pickle.UnpicklingError, as
torch.load raises) whose message names the file and what is wrong; no other exception type leaks.
Bounds: ``bounded(seconds)`` turns a hang into a failure (it is a guard, not a timing assertion:
the cases finish in milliseconds), ``peak_allocation`` measures with tracemalloc, which numpy reports
its buffers to. The allocation bounds are a small multiple of the file's size plus a constant for
Python's own objects, never the sizes the file declares.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile

import numpy as np
import pytest

import onnxnn
from onnxnn import CheckpointError
from onnxnn.export import load, save
from onnxnn.import_ import limits

from .hostile_files import (
    EMPTY_DICT,
    NONE,
    PROTO2,
    REDUCE,
    SETITEM,
    STOP,
    TUPLE2,
    billion_laughs,
    bounded,
    global_,
    patch_zip_member,
    peak_allocation,
    safetensors_bytes,
    shared_tuple_key,
    tensor_pickle,
    torch_zip,
    unicode,
)

_MIB = 1 << 20


def load_bytes(data: bytes, name: str = "hostile.pt", tmp_path=None):
    if tmp_path is None:
        return load(io.BytesIO(data))
    (tmp_path / name).write_bytes(data)
    return load(tmp_path / name)


def refused(data: bytes, tmp_path, match: str, name: str = "hostile.pt") -> CheckpointError:
    with bounded(30), pytest.raises(CheckpointError, match=match) as raised:
        load_bytes(data, name, tmp_path)
    assert name in str(raised.value)
    assert len(str(raised.value)) < 1000  # no repr of a value the file built
    return raised.value


LONG1_2_70 = b"\x8a\x09" + (2**70).to_bytes(9, "little")  # LONG1 pushing 2**70


# ----------------------------------------------------------------------------- pickle denial of service
@pytest.mark.parametrize("depth", [5, 8, 12])
def test_billion_laughs_pickle_loads_sharing_its_lists(depth):
    data = torch_zip(billion_laughs(depth))
    with bounded(30), peak_allocation() as peak:
        loaded = load_bytes(data)
    assert len(loaded) == 10 and all(item is loaded[0] for item in loaded)  # one list, shared as in the file
    innermost = loaded
    for _ in range(depth - 1):
        innermost = innermost[0]
    assert innermost == [["lol"]] * 10
    assert peak[0] < 64 * len(data) + _MIB


def test_dict_key_that_shares_a_tuple_exponentially_is_refused(tmp_path):
    # Hashing t_64 = (t_63, t_63) visits 2**64 tuples: Python does not cache tuple hashes.
    refused(torch_zip(shared_tuple_key(64)), tmp_path, "expands to more than 100000 elements")


def test_huge_memo_index_allocates_nothing(tmp_path):
    # LONG_BINPUT 0x00ffffff: pickle's C unpickler grows its memo array to twice that index.
    pickled = PROTO2 + NONE + b"r" + struct.pack("<I", 0x00FFFFFF) + STOP
    data = torch_zip(pickled)
    with peak_allocation() as peak:
        assert load_bytes(data) is None
    assert peak[0] < _MIB


def test_error_message_does_not_print_what_a_hostile_pickle_built(tmp_path):
    # A billion-laughs list where a tensor's storage_offset belongs: its repr would never end.
    laughs = billion_laughs(9)[2:-1]  # the list-building opcodes, without PROTO and STOP
    pickled = (
        PROTO2
        + EMPTY_DICT
        + unicode("w")
        + global_("torch._utils", "_rebuild_tensor_v2")
        + b"("
        + laughs
        + b"tR"
        + SETITEM
        + STOP
    )
    refused(torch_zip(pickled), tmp_path, "malformed|expected")


@pytest.mark.parametrize(
    "pickled,message",
    [
        (PROTO2 + b"X\xff\xff\xff\x7f", "runs past the end"),
        (PROTO2 + b"X\x02\x00\x00\x00\xff\xfe.", "not valid UTF-8"),
        (PROTO2 + b"h\x05.", "never set"),
        (PROTO2 + b"N", "truncated"),
        (PROTO2 + b"\x8b\x00\x00\x01\x00" + b"\x01" * 65536 + b".", "an int of 65536 bytes"),
        (PROTO2 + b"(N\x81.", "NEWOBJ"),
        (PROTO2 + b"\xff.", "unknown opcode 0xff"),
        (PROTO2 + b"NN.", "exactly one value"),
        (PROTO2 + b"NNs.", "SETITEM"),
        (PROTO2 + global_("torch._utils", "_rebuild_tensor_v2") + b")R.", "malformed data.pkl"),
        (PROTO2 + global_("torch", "Size") + b"(N\x85tR.", "malformed torch.Size"),
        (PROTO2 + global_("torch", "device") + b"X\x07\x00\x00\x00quantum\x85R.", "unsupported device"),
        (PROTO2 + global_("collections", "OrderedDict") + b")R}X\x01\x00\x00\x00xNsb.", "only _metadata"),
        (PROTO2 + b"}(]Nu.", "unhashable"),
        # Allowed globals left bare, outside a tensor record (torch.load returns them as they are).
        (PROTO2 + global_("torch", "FloatStorage") + STOP, "'torch.FloatStorage' outside a tensor record"),
        (PROTO2 + global_("torch._utils", "_rebuild_tensor_v2") + STOP, "'torch._utils._rebuild_tensor_v2' outside"),
        # PyTorch 2.13 reads a device index as an int64 (an int32 in "cuda:N") and refuses negative ones.
        (PROTO2 + global_("torch", "device") + unicode("cuda") + LONG1_2_70 + TUPLE2 + REDUCE + STOP, "Overflow"),
        (
            PROTO2 + global_("torch", "device") + unicode("cuda") + b"J\xff\xff\xff\xff" + TUPLE2 + REDUCE + STOP,
            "negative",
        ),
        (PROTO2 + global_("torch", "device") + unicode("cuda:2147483648") + b"\x85" + REDUCE + STOP, "Could not parse"),
    ],
)
def test_malformed_pickles_are_refused_naming_the_file(tmp_path, pickled, message):
    refused(torch_zip(pickled), tmp_path, message)


# ----------------------------------------------------------------------------------- tensor records
def storage_bytes(count: int) -> bytes:
    return np.arange(count, dtype=np.float32).tobytes()


@pytest.mark.parametrize("size", [(2**20, 2), (2**29, 2)])
def test_zero_stride_tensor_stays_a_view_of_its_small_storage(monkeypatch, size):
    # Within what the process may allocate (fixed here, whatever the machine), a view stays a view.
    monkeypatch.setattr(limits, "_LIMIT", [2**40])
    data = torch_zip(tensor_pickle(4, size, (0, 0), offset=2), {"data/0": storage_bytes(4)})
    with peak_allocation() as peak:
        loaded = load_bytes(data)["w"]
    assert peak[0] < 16 * len(data) + _MIB
    array = loaded.numpy()
    assert loaded.shape == size and loaded.dtype is onnxnn.float32
    assert not array.flags.writeable  # a view of the storage, as PyTorch's tensors are
    np.testing.assert_array_equal(array[size[0] // 3], [2.0, 2.0])


@pytest.mark.parametrize(
    "size,stride,limit",
    [((2**28, 4), (0, 1), 2**30), ((2**20, 2), (0, 0), 2**23 - 1), ((4, 2**30), (1, 0), 2**20)],
)
def test_view_larger_than_the_process_may_allocate_is_refused(tmp_path, monkeypatch, size, stride, limit):
    # Using the view copies it whole (onnxruntime takes contiguous inputs): it is refused by the
    # rule imported ONNX models follow, with the limit patched low so nothing large is allocated.
    monkeypatch.setattr(limits, "_LIMIT", [limit])
    data = torch_zip(tensor_pickle(4, size, stride), {"data/0": storage_bytes(4)})
    nbytes = size[0] * size[1] * 4
    error = refused(data, tmp_path, "more than this process may allocate")
    for part in (f"size {list(size)}", f"stride {list(stride)}", f"{nbytes:,} bytes", f"({limit:,} bytes)"):
        assert part in str(error)


@pytest.mark.parametrize(
    "size,stride,offset,message",
    [
        ((2**29, 2), (1, 0), 0, "reaches past the end of its storage of 4 elements"),
        ((3,), (2,), 0, "reaches past the end"),
        ((2,), (1,), 3, "reaches past the end"),
        ((2**62, 2**62), (0, 0), 0, "cannot be represented"),
        ((2,), (-1,), 1, "non-negative"),
        ((-2,), (1,), 0, "non-negative"),
        ((2,), (1,), -1, "negative storage_offset"),
        ((1,) * 65, (0,) * 65, 0, "at most 64"),
    ],
)
def test_tensor_records_that_reach_outside_their_storage_are_refused(tmp_path, size, stride, offset, message):
    data = torch_zip(tensor_pickle(4, size, stride, offset), {"data/0": storage_bytes(4)})
    refused(data, tmp_path, message)


# ------------------------------------------------------------------------------------------- zip records
def small_torch_file(tmp_path) -> bytes:
    save({"w": onnxnn.tensor(np.arange(6, dtype=np.float32))}, tmp_path / "seed.pt")
    return (tmp_path / "seed.pt").read_bytes()


@pytest.mark.parametrize(
    "method,message", [(9, "compression method 9"), (14, "compression method 14"), (99, "compression method 99")]
)
def test_zip_members_with_other_compression_methods_are_refused(tmp_path, method, message):
    data = patch_zip_member(small_torch_file(tmp_path), "archive/data.pkl", compress_type=method)
    refused(data, tmp_path, message)


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"file_size": 0xFFFFFFF0}, "claims 4294967280 bytes but stores"),
        ({"compress_size": 0xFFFFFFF0, "file_size": 0xFFFFFFF0}, "more than the file holds"),
        ({"crc": 1}, "CRC"),  # 0 means "not computed" (set_crc32_options(False)), as for torch.load
    ],
)
def test_zip_members_whose_sizes_disagree_with_the_file_are_refused(tmp_path, fields, message):
    data = patch_zip_member(small_torch_file(tmp_path), "archive/data/0", **fields)
    refused(data, tmp_path, message)


def deflated_archive(pickled: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", pickled)
    return buffer.getvalue()


def test_deflated_member_claiming_more_than_deflate_can_produce_is_refused_before_inflating(tmp_path):
    data = patch_zip_member(deflated_archive(PROTO2 + NONE + STOP), "archive/data.pkl", file_size=0xFFFFFFF0)
    with peak_allocation() as peak:
        refused(data, tmp_path, "beyond deflate's largest ratio")
    assert peak[0] < _MIB


def test_deflated_member_that_inflates_to_more_than_it_claims_is_refused(tmp_path):
    pickled = PROTO2 + unicode("x" * 100_000) + STOP
    data = patch_zip_member(deflated_archive(pickled), "archive/data.pkl", file_size=1000)
    with peak_allocation() as peak:
        refused(data, tmp_path, "does not inflate to its declared 1000 bytes")
    assert peak[0] < _MIB


def test_deflated_members_are_read_and_checked():
    assert load_bytes(deflated_archive(PROTO2 + unicode("deflated") + STOP)) == "deflated"


def test_zip_with_two_members_of_one_name_is_refused(tmp_path):
    buffer = io.BytesIO()
    with pytest.warns(UserWarning), zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", PROTO2 + NONE + STOP)
        archive.writestr("archive/data.pkl", PROTO2 + unicode("other") + STOP)
    refused(buffer.getvalue(), tmp_path, "two members named 'archive/data.pkl'")


# ------------------------------------------------------------------------------------------- safetensors
F32x2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
SAFETENSORS_CASES = {
    # name: (file bytes, message)
    "overlapping ranges": (
        safetensors_bytes({"a": F32x2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
        "overlap",
    ),
    "repeated range": (safetensors_bytes({"a": F32x2, "b": F32x2}, bytes(8)), "overlap"),
    "gap between ranges": (
        safetensors_bytes({"a": F32x2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}}, bytes(20)),
        "belong to no tensor",
    ),
    "bytes left over": (safetensors_bytes({"a": F32x2}, bytes(12)), "holds 12 bytes but its tensors cover 8"),
    "range shorter than shape": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8)),
        "expected 12 bytes",
    ),
    "range past the data": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
        "truncated",
    ),
    "float shape": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, bytes(8)),
        "non-negative ints",
    ),
    "shape 1e400": (
        safetensors_bytes(
            None, bytes(8), raw_header=b'{"a": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 8]}}'
        ),
        "non-negative ints",
    ),
    "bool shape": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [True, 2], "data_offsets": [0, 8]}}, bytes(8)),
        "non-negative ints",
    ),
    "negative shape": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8)),
        "non-negative ints",
    ),
    "shape of a huge int": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [10**30, 0], "data_offsets": [0, 0]}}),
        "below 2\\*\\*63",
    ),
    "zero-size tensor of huge dims": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [0, 2**62, 2**62], "data_offsets": [0, 0]}}),
        "tensor 'a' of shape \\[0, 4611686018427387904, 4611686018427387904\\] cannot be represented",
    ),
    "unknown dtype": (
        safetensors_bytes({"a": {"dtype": "F128", "shape": [2], "data_offsets": [0, 8]}}, bytes(8)),
        "unknown dtype 'F128'",
    ),
    "dtype not a string": (
        safetensors_bytes({"a": {"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}}, bytes(8)),
        "unknown dtype",
    ),
    "extra field": (safetensors_bytes({"a": dict(F32x2, device="cuda")}, bytes(8)), "malformed safetensors entry"),
    "offsets not a pair": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}}, bytes(8)),
        "data_offsets",
    ),
    "offsets reversed": (
        safetensors_bytes({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}}, bytes(8)),
        "spans bytes",
    ),
    "header larger than the file": (struct.pack("<Q", 2**63) + b"{}", "truncated"),
    "header not UTF-8": (safetensors_bytes(None, raw_header=b'{"\xff": 1}'), "not UTF-8"),
    "entry not an object": (safetensors_bytes({"a": [1]}), "malformed safetensors entry"),
    "header a JSON list": (struct.pack("<Q", 3) + b"[1]", "not an onnxnn, safetensors or PyTorch checkpoint"),
    "header nested 100000 deep": (
        safetensors_bytes(None, raw_header=b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}"),
        "nested too deeply",
    ),
    "repeated tensor name": (
        safetensors_bytes(
            None,
            bytes(8),
            raw_header=b'{"a": ' + json.dumps(F32x2).encode() + b', "a": ' + json.dumps(F32x2).encode() + b"}",
        ),
        "appears twice",
    ),
    "NaN in the header": (safetensors_bytes(None, raw_header=b'{"a": NaN}'), "NaN is not JSON"),
    "metadata not a map of strings": (safetensors_bytes({"__metadata__": {"format": 1}}), "map of strings"),
}


@pytest.mark.parametrize("name", list(SAFETENSORS_CASES))
def test_malformed_safetensors_files_are_refused(tmp_path, name):
    data, message = SAFETENSORS_CASES[name]
    refused(data, tmp_path, message, name="bad.safetensors")


def test_safetensors_tensors_that_tile_the_data_in_any_order_load():
    data = np.arange(3, dtype=np.float32).tobytes() + np.array([7], np.int64).tobytes()
    header = {
        "late": {"dtype": "I64", "shape": [], "data_offsets": [12, 20]},
        "empty": {"dtype": "F16", "shape": [0, 5], "data_offsets": [12, 12]},
        "early": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
    }
    loaded = load_bytes(safetensors_bytes(header, data))
    assert list(loaded) == ["early", "empty", "late"]
    np.testing.assert_array_equal(loaded["early"].numpy(), [0.0, 1.0, 2.0])
    assert loaded["late"].item() == 7 and loaded["empty"].shape == (0, 5)


# ------------------------------------------------------------------------------ onnxnn's nested format
def nested_file(document, tensors: dict | None = None) -> bytes:
    """A safetensors file carrying the onnxnn ``document`` (a dict, or raw JSON text) in its metadata."""
    header, data, offset = {}, b"", 0
    for name, array in (tensors or {}).items():
        raw = array.tobytes()
        header[name] = {
            "dtype": {"float32": "F32"}[array.dtype.name],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        data, offset = data + raw, offset + len(raw)
    text = document if isinstance(document, str) else json.dumps(document)
    header["__metadata__"] = {"onnxnn": text}
    return safetensors_bytes(header, data)


def obj(value) -> dict:
    return {"version": 1, "kind": "object", "object": value}


W = {"w": np.ones(2, np.float32)}
NESTED_CASES = {
    "tensor device a list": (obj({"dict": [["w", {"tensor": "w", "device": [1]}]]}), W, "device"),
    "device a list": (obj({"device": [1]}), {}, "device of a value of type list"),
    "unknown device": (obj({"device": "quantum:0"}), {}, "unknown device"),
    "unknown dtype": (obj({"dtype": "float99"}), {}, "unknown dtype"),
    "Size of 1e400": ('{"version": 1, "kind": "object", "object": {"Size": [1e400]}}', {}, "Size of"),
    "Size of floats": (obj({"Size": [2.5]}), {}, "Size of"),
    "float of text": (obj({"float": "lots"}), {}, "float 'lots'"),
    "bytes not base64": (obj({"bytes": "!!"}), {}, "not base64"),
    "bytes of a number": (obj({"bytes": 5}), {}, "expected a string"),
    "set of lists": (obj({"set": [[1]]}), {}, "unhashable"),
    "dict key a tuple of lists": (obj({"dict": [[{"tuple": [[1]]}, 2]]}), {}, "unhashable"),
    "dict items not pairs": (obj({"dict": [[1, 2, 3]]}), {}, "pairs"),
    "reference to a missing tensor": (obj({"tensor": "nope"}), W, "does not hold"),
    "unknown tag": (obj({"pickle": "cos\nsystem\n"}), {}, "unknown entry"),
    "two tags": (obj({"tuple": [], "set": []}), {}, "unknown entry"),
    "nested 250 deep": (
        '{"version": 1, "kind": "object", "object": ' + "[" * 250 + "]" * 250 + "}",
        {},
        "nested more than 200 levels",
    ),
    "nested 100000 deep": (
        '{"version": 1, "kind": "object", "object": ' + "[" * 100000 + "]" * 100000 + "}",
        {},
        "nested too deeply",
    ),
    "version a string": ({"version": "1", "kind": "object", "object": None}, {}, "int version"),
    "unknown kind": ({"version": 1, "kind": "hologram"}, {}, "unknown kind"),
    "state_dict keys not strings": (
        {"version": 1, "kind": "state_dict", "container": "dict", "keys": [1]},
        W,
        "keys is not a list of strings",
    ),
    "state_dict keys repeated": (
        {"version": 1, "kind": "state_dict", "container": "dict", "keys": ["w", "w"]},
        W,
        "differ from the stored tensors",
    ),
    "state_dict devices not strings": (
        {"version": 1, "kind": "state_dict", "container": "dict", "keys": ["w"], "devices": {"w": [1]}},
        W,
        "devices is not a map of strings",
    ),
    "state_dict unknown container": (
        {"version": 1, "kind": "state_dict", "container": "set", "keys": ["w"]},
        W,
        "container",
    ),
    "repeated key in the document": (
        '{"version": 1, "version": 1, "kind": "object", "object": null}',
        {},
        "appears twice",
    ),
}


@pytest.mark.parametrize("name", list(NESTED_CASES))
def test_malformed_onnxnn_documents_are_refused(tmp_path, name):
    document, tensors, message = NESTED_CASES[name]
    refused(nested_file(document, tensors), tmp_path, message, name="nested.safetensors")
