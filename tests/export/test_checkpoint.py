"""Specification of checkpoint files: ``save(obj, f)`` / ``load(f, map_location=None)``.

onnxnn writes safetensors files (state_dicts tensor by tensor, other objects with a JSON description
of their structure) and reads those, plain safetensors files, and PyTorch's ``torch.save`` zip files
(``test_checkpoint_torch_zip.py``). Here: safetensors round trips, what cannot be saved, and damaged files.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest
import safetensors.numpy

import onnxnn
from onnxnn.export import checkpoint, load, save
from onnxnn.runtime.tensor import Size

from .checkpoint_files import (
    BF16,
    DTYPE_VALUES,
    FakeTensor,
    assert_same,
    make,
    round_trip,
    storage_of,
    torch_save,
)


# --------------------------------------------------------------------------------------------- state_dicts


@pytest.mark.parametrize("target", ["path", "file object"])
@pytest.mark.parametrize("dtype,values", DTYPE_VALUES, ids=[d.name for d, _ in DTYPE_VALUES])
def test_state_dict_round_trip_keeps_every_dtype(tmp_path, target, dtype, values):
    state_dict = OrderedDict(
        weight=make(values), scalar=make(values.reshape(-1)[0]), empty=make(np.zeros((0, 3), values.dtype))
    )
    loaded = round_trip(state_dict, tmp_path, target)
    assert_same(loaded, state_dict)
    assert loaded["weight"].dtype is dtype and loaded["scalar"].dim() == 0


def mixed_state_dict() -> OrderedDict:
    # Keys deliberately out of alphabetical order: safetensors sorts them, load must restore this order.
    state = OrderedDict()
    for index, (dtype, values) in enumerate(reversed(DTYPE_VALUES)):
        state[f"layer{9 - index}.{dtype.name}"] = make(values)
    state["a.non_contiguous"] = make(np.arange(12.0).reshape(3, 4)).t()
    return state


@pytest.mark.parametrize("container", [OrderedDict, dict])
def test_state_dict_keeps_key_order_container_and_module_metadata(tmp_path, container):
    state = container(mixed_state_dict())
    if container is OrderedDict:
        state._metadata = OrderedDict([("", {"version": 1}), ("bn", {"version": 2})])
    loaded = round_trip(state, tmp_path, "path")
    assert_same(loaded, state)
    assert getattr(loaded, "_metadata", None) == getattr(state, "_metadata", None)


def test_state_dict_file_is_a_plain_safetensors_file(tmp_path):
    state = mixed_state_dict()
    save(state, tmp_path / "model.safetensors")
    arrays = safetensors.numpy.load_file(tmp_path / "model.safetensors")
    assert sorted(arrays) == sorted(state)
    for key, tensor in state.items():
        expected = np.asarray(tensor)
        assert arrays[key].dtype == expected.dtype and arrays[key].shape == expected.shape, key
        assert arrays[key].tobytes() == np.ascontiguousarray(expected).tobytes(), key


def test_plain_safetensors_file_loads_as_dict_sorted_by_name(tmp_path):
    arrays = {"z": np.arange(3, dtype=np.int32), "a": np.ones((2, 2), BF16), "m": np.array(2.5)}
    safetensors.numpy.save_file(arrays, tmp_path / "foreign.safetensors")
    loaded = load(tmp_path / "foreign.safetensors")
    assert_same(loaded, {name: make(arrays[name]) for name in sorted(arrays)})


@pytest.mark.parametrize("container", [OrderedDict, list])
def test_requires_grad_and_shared_tensors_survive(tmp_path, container):
    weight = make(np.arange(4.0, dtype=np.float32)).requires_grad_()
    buffer = make(np.zeros(2, np.int64))
    obj = OrderedDict(w=weight, b=buffer) if container is OrderedDict else [weight, buffer, weight, {"n": 1}]
    loaded = round_trip(obj, tmp_path, "path")
    values = list(loaded.values()) if container is OrderedDict else loaded
    assert values[0].requires_grad and not values[1].requires_grad
    if container is list:
        assert values[2] is values[0]  # one tensor object saved twice loads as one object


# ------------------------------------------------------------------------------------------ nested objects
def optimizer_state() -> dict:
    return {
        "state": {
            0: {
                "step": make(np.array(3.0, np.float32)),
                "exp_avg": make(np.ones((2, 2), np.float32)),
                "exp_avg_sq": make(np.full((2, 2), 0.25, np.float32)),
            },
            1: {"step": make(np.array(3.0, np.float32)), "momentum_buffer": None},
        },
        "param_groups": [
            {
                "lr": 1e-3,
                "betas": (0.9, 0.999),
                "eps": 1e-8,
                "weight_decay": 0.0,
                "amsgrad": False,
                "maximize": False,
                "foreach": None,
                "capturable": False,
                "params": [0, 1],
            }
        ],
    }


NESTED_CASES = {
    "optimizer state_dict": optimizer_state(),
    "training checkpoint": {
        "model": mixed_state_dict(),
        "optimizer": optimizer_state(),
        "epoch": 7,
        "best": float("inf"),
        "history": [0.5, float("nan"), -0.0],
        "layer._extra_state": {"calibrated": True, "scale": 0.125, "name": "ünïcode"},
    },
    "a tensor": make(np.arange(6, dtype=np.int16).reshape(2, 3)),
    "a 0-d tensor": make(np.array(2.0, np.float64)),
    "keys of every kind": {7: "int", 2.5: "float", True: "bool", None: "none", (1, "a"): "tuple", "s": "str"},
    "plain values": [
        None,
        True,
        False,
        0,
        -(2**70),
        1.5,
        float("-inf"),
        "",
        b"\x00\xffbytes",
        b"",
        (),
        [],
        {},
        OrderedDict(),
        ((1,),),
        {"a", 1},
        frozenset({2.5}),
    ],
    "dtypes, devices and sizes": {
        "dtype": onnxnn.bfloat16,
        "device": onnxnn.device("cpu"),
        "size": Size([2, 3]),
        "sizes": [Size([])],
    },
    # MultiStepLR's milestones are a Counter: step(epoch) calls its elements(), which a dict lacks.
    "Counter and complex": {
        "milestones": Counter({2: 1, 4: 1}),
        "empty": Counter(),
        "complex": [1 + 2j, complex(float("inf"), -0.0), complex(float("nan"), 0.5)],
    },
    "dict with a state_dict value": {"model": mixed_state_dict(), "__metadata__": "not a tensor name"},
    "state_dict named __metadata__": OrderedDict(__metadata__=make(np.ones(2, np.float32))),
}


@pytest.mark.parametrize("target", ["path", "file object"])
@pytest.mark.parametrize("name", list(NESTED_CASES))
def test_nested_objects_round_trip(tmp_path, name, target):
    obj = NESTED_CASES[name]
    assert_same(round_trip(obj, tmp_path, target), obj)


@pytest.mark.parametrize("name", ["values.safetensors", "values.pt"])
def test_numpy_scalars_load_as_the_python_values_they_hold(tmp_path, name):
    save({"flag": np.bool_(True), "off": np.False_, "count": np.int32(3), "half": np.float16(0.5)}, tmp_path / name)
    loaded = load(tmp_path / name)
    assert loaded == {"flag": True, "off": False, "count": 3, "half": 0.5}
    assert [type(value) for value in loaded.values()] == [bool, bool, int, float]


def test_object_file_is_a_safetensors_file_with_tensors_named_by_path(tmp_path):
    save({"optimizer": optimizer_state(), "epoch": 1}, tmp_path / "ckpt.safetensors")
    arrays = safetensors.numpy.load_file(tmp_path / "ckpt.safetensors")
    assert sorted(arrays) == [
        "optimizer.state.0.exp_avg",
        "optimizer.state.0.exp_avg_sq",
        "optimizer.state.0.step",
        "optimizer.state.1.step",
    ]
    np.testing.assert_array_equal(arrays["optimizer.state.0.exp_avg_sq"], np.full((2, 2), 0.25, np.float32))


# --------------------------------------------------------------------------------------------- failures
UNSAVABLE = [
    ({"model": {"fn": lambda: None}}, TypeError, "cannot save value of type function at ['model']['fn']"),
    ([1, 2, object()], TypeError, "cannot save value of type object at [2]"),
    ({"z": slice(2)}, TypeError, "cannot save value of type slice at ['z']"),
    (np.zeros(3), TypeError, "cannot save value of type ndarray at the top level"),
    ({"a": {make(np.ones(1)): 1}}, TypeError, "cannot save a dict key of type Tensor at ['a']"),
]


@pytest.mark.parametrize("obj,error,message", UNSAVABLE, ids=[m for _, _, m in UNSAVABLE])
def test_unsavable_value_names_its_path_and_leaves_the_old_file(tmp_path, obj, error, message):
    target = tmp_path / "ckpt.pt"
    save({"w": make(np.ones(2, np.float32))}, target)
    before = target.read_bytes()
    with pytest.raises(error) as raised:
        save(obj, target)
    assert message in str(raised.value)
    assert target.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_self_referencing_object_is_refused(tmp_path):
    looped = {"a": []}
    looped["a"].append(looped)
    with pytest.raises(ValueError, match=r"contains itself at \['a'\]\[0\]"):
        save(looped, tmp_path / "loop.pt")
    assert not (tmp_path / "loop.pt").exists()


@pytest.mark.parametrize("name", ["ckpt.safetensors", "ckpt.pt"])
@pytest.mark.parametrize("failing", ["writer", "rename"])
def test_failure_while_writing_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, failing, name):
    target = tmp_path / name
    save({"w": make(np.ones(2, np.float32))}, target)
    before = target.read_bytes()

    def broken_writer(obj_or_write, write_or_arrays, *rest):
        write = obj_or_write if callable(obj_or_write) else write_or_arrays
        write(b"half a file")
        raise OSError("disk full")

    def broken_rename(source, destination):
        raise OSError("rename failed")

    if failing == "rename":
        monkeypatch.setattr(checkpoint.os, "replace", broken_rename)
    else:
        monkeypatch.setattr(checkpoint, "write_safetensors", broken_writer)
        monkeypatch.setattr(checkpoint, "write_torch_zip", broken_writer)
    with pytest.raises(OSError, match=f"cannot save to .*{name}"):
        save({"w": make(np.zeros(5, np.float32))}, target)
    assert target.read_bytes() == before
    assert os.listdir(tmp_path) == [name]


def test_save_into_missing_directory_raises(tmp_path):
    with pytest.raises(RuntimeError, match="Parent directory .*missing does not exist"):
        save({"w": make(np.ones(1))}, tmp_path / "missing" / "ckpt.pt")


# --------------------------------------------------------------------------------------- damaged files
def write_state_dict(path):
    save(mixed_state_dict(), path)


def write_object(path):
    save({"optimizer": optimizer_state(), "epoch": 3}, path)


def write_torch(path):
    torch_save(OrderedDict(w=FakeTensor(storage_of(np.arange(64.0), np.float32), (8, 8))), path)


@pytest.mark.parametrize("keep", [0.99, 0.5, 0.02])
@pytest.mark.parametrize("writer", [write_state_dict, write_object, write_torch])
def test_truncated_files_are_reported(tmp_path, writer, keep):
    path = tmp_path / "cut.ckpt"
    writer(path)
    data = path.read_bytes()
    path.write_bytes(data[: max(int(len(data) * keep), 12)])
    with pytest.raises(RuntimeError, match=r"cannot load '.*cut\.ckpt'.*truncated"):
        load(path)


def test_storage_missing_from_archive_is_reported(tmp_path):
    write_torch(tmp_path / "full.pt")
    with zipfile.ZipFile(tmp_path / "full.pt") as full, zipfile.ZipFile(tmp_path / "cut.pt", "w") as cut:
        for entry in full.namelist():
            if entry != "archive/data/0":
                cut.writestr(entry, full.read(entry))
    with pytest.raises(pickle.UnpicklingError, match="storage 'archive/data/0' is missing"):
        load(tmp_path / "cut.pt")


def zip_with(entries: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


NOT_CHECKPOINTS = {
    "empty file": (b"", "the file is empty"),
    "random bytes": (
        np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        "not an onnxnn, safetensors or PyTorch checkpoint",
    ),
    "text": (b"hello, world\n" * 10, "not an onnxnn, safetensors or PyTorch checkpoint"),
    "legacy torch.save": (
        b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.",
        "legacy format",
    ),
    "zip of something else": (zip_with({"readme.txt": "hi"}), "no data.pkl record"),
    # torch.jit.save's own layout: a data.pkl beside constants.pkl and code/, all under archive/.
    "TorchScript archive from torch.jit.save": (
        zip_with(
            {
                "archive/data.pkl": b"\x80\x02N.",
                "archive/code/__torch__/m.py": "",
                "archive/constants.pkl": b"\x80\x02).",
            }
        ),
        "TorchScript",
    ),
    "TorchScript archive": (
        zip_with({"model/code/__torch__.py": "", "model/constants.pkl": b"\x80\x02)."}),
        "TorchScript",
    ),
    "corrupt safetensors header": (b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all", "unreadable safetensors"),
}


@pytest.mark.parametrize("name", list(NOT_CHECKPOINTS))
def test_files_that_are_not_checkpoints_are_reported(tmp_path, name):
    data, message = NOT_CHECKPOINTS[name]
    (tmp_path / "file.bin").write_bytes(data)
    with pytest.raises(RuntimeError, match=message) as raised:
        load(tmp_path / "file.bin")
    assert "file.bin" in str(raised.value)


def test_safetensors_with_unsupported_dtype_names_the_tensor(tmp_path):
    header = json.dumps({"counts": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}).encode()
    (tmp_path / "c64.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    with pytest.raises(RuntimeError, match="tensor 'counts' has dtype C64"):
        load(tmp_path / "c64.safetensors")


@pytest.mark.parametrize("numpy_dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_tensors_go_both_ways_through_safetensors(tmp_path, numpy_dtype):
    values = np.array([0, 1, np.iinfo(numpy_dtype).max], numpy_dtype)
    safetensors.numpy.save_file({"counts": values}, tmp_path / "theirs.safetensors")
    loaded = load(tmp_path / "theirs.safetensors")["counts"]
    assert loaded.numpy().dtype == numpy_dtype
    np.testing.assert_array_equal(loaded.numpy(), values)
    onnxnn.save({"counts": onnxnn.tensor(values)}, tmp_path / "ours.safetensors")
    np.testing.assert_array_equal(safetensors.numpy.load_file(tmp_path / "ours.safetensors")["counts"], values)


def test_file_from_a_newer_onnxnn_is_reported(tmp_path):
    metadata = {"onnxnn": '{"version": 99, "kind": "hologram"}'}
    safetensors.numpy.save_file({"w": np.ones(1, np.float32)}, tmp_path / "new.safetensors", metadata)
    with pytest.raises(RuntimeError, match="written by a newer onnxnn"):
        load(tmp_path / "new.safetensors")


def test_torch_loads_other_arguments_are_accepted(tmp_path):
    import pickle

    torch_save({"w": FakeTensor(storage_of([1.0, 2.0], np.float32), (2,))}, tmp_path / "x.pt")
    for loaded in (load(tmp_path / "x.pt", "cpu", pickle), load(tmp_path / "x.pt", mmap=True)):
        assert_same(loaded["w"], make(np.array([1.0, 2.0], np.float32)))
    with pytest.warns(UserWarning, match="pickle_load_args only works if `weights_only=False`"):
        load(tmp_path / "x.pt", encoding="latin1")
