"""Specification of checkpoint files: ``save(obj, f)`` / ``load(f, map_location=None)``.

onnxnn writes safetensors files (state_dicts tensor by tensor, other objects with a JSON description
of their structure) and reads those, plain safetensors files, and PyTorch's ``torch.save`` zip files.

PyTorch is not installed, so the PyTorch files are written here the way ``torch.save`` writes them
(PyTorch >= 1.6, default ``_use_new_zipfile_serialization=True``): a zip archive, entries stored
uncompressed under one folder (``archive/``)::

    archive/data.pkl        the object, pickle protocol 2; a tensor is the call
                            torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
                                                            requires_grad, OrderedDict())
                            and a storage is the persistent id
                            ('storage', torch.FloatStorage, key, location, numel)
    archive/data/<key>      the storage's raw bytes
    archive/byteorder       "little" (or "big")
    archive/version         "3"

``_TorchPickler`` below emits exactly those pickle records from stand-in objects.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import sys
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest
import safetensors.numpy

import onnxnn
from onnxnn.export import checkpoint, load, save
from onnxnn.runtime.tensor import Size, Tensor

BF16 = onnxnn.bfloat16.numpy_dtype


def make(values, dtype=None) -> Tensor:
    """A tensor holding exactly ``values`` (0-d arrays stay 0-d)."""
    array = np.asarray(values) if dtype is None else np.asarray(values, dtype=dtype)
    return Tensor._from_array(array)


def assert_same(actual, expected, path: str = "obj") -> None:
    """Deep equality: same container types, key order, and bit-identical tensors of the same dtype."""
    if isinstance(expected, Tensor):
        assert isinstance(actual, Tensor), f"{path}: expected a Tensor, got {type(actual).__name__}"
        assert actual.dtype is expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert np.asarray(actual).tobytes() == np.asarray(expected).tobytes(), f"{path}: values differ"
        return
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for index, (item, expected_item) in enumerate(zip(actual, expected)):
            assert_same(item, expected_item, f"{path}[{index}]")
    elif isinstance(expected, complex):
        assert_same(actual.real, expected.real, f"{path}.real")
        assert_same(actual.imag, expected.imag, f"{path}.imag")
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), path
    elif isinstance(expected, float):
        assert actual == expected and math.copysign(1, actual) == math.copysign(1, expected), path
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def round_trip(obj, tmp_path, target: str, **load_kwargs):
    if target == "path":
        save(obj, tmp_path / "checkpoint.safetensors")
        return load(tmp_path / "checkpoint.safetensors", **load_kwargs)
    buffer = io.BytesIO()
    save(obj, buffer)
    buffer.seek(0)
    return load(buffer, **load_kwargs)


# --------------------------------------------------------------------------------------------- state_dicts
DTYPE_VALUES = [
    (onnxnn.float32, np.array([[1.5, -2.0, np.inf], [np.nan, -0.0, 3.25e-30]], np.float32)),
    (onnxnn.float64, np.array([1e300, -1e-300, np.nan, -np.inf], np.float64)),
    (onnxnn.float16, np.array([65504.0, -0.5, np.inf, 6e-8], np.float16)),
    (onnxnn.bfloat16, np.array([[1.0, -2.5], [3e38, np.nan]], BF16)),
    (onnxnn.int8, np.array([-128, 0, 127], np.int8)),
    (onnxnn.int16, np.array([-32768, 32767], np.int16)),
    (onnxnn.int32, np.array([[-(2**31), 2**31 - 1]], np.int32)),
    (onnxnn.int64, np.array([-(2**63), 2**63 - 1, 0], np.int64)),
    (onnxnn.uint8, np.array([0, 1, 255], np.uint8)),
    (onnxnn.bool, np.array([[True, False], [False, True]])),
]


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


# ------------------------------------------------------------------------------- PyTorch zip checkpoints
class TorchGlobal:
    """Stands for a torch global (``torch.FloatStorage``, ``torch._utils._rebuild_tensor_v2``) in fixtures."""

    def __init__(self, qualified_name: str):
        self.module, _, self.name = qualified_name.rpartition(".")

    def __call__(self, *args):  # pickle only reduces with callables
        raise AssertionError("stand-ins are never called")


REBUILD_TENSOR_V2 = TorchGlobal("torch._utils._rebuild_tensor_v2")
REBUILD_TENSOR_V3 = TorchGlobal("torch._utils._rebuild_tensor_v3")
REBUILD_PARAMETER = TorchGlobal("torch._utils._rebuild_parameter")
REBUILD_FROM_TYPE_V2 = TorchGlobal("torch._tensor._rebuild_from_type_v2")
STORAGE_TYPES = {
    np.dtype(np.float32): "FloatStorage",
    np.dtype(np.float64): "DoubleStorage",
    np.dtype(np.float16): "HalfStorage",
    np.dtype(BF16): "BFloat16Storage",
    np.dtype(np.int64): "LongStorage",
    np.dtype(np.int32): "IntStorage",
    np.dtype(np.int16): "ShortStorage",
    np.dtype(np.int8): "CharStorage",
    np.dtype(np.uint8): "ByteStorage",
    np.dtype(np.bool_): "BoolStorage",
}


class FakeStorage:
    def __init__(self, elements: np.ndarray, location: str = "cpu", untyped: bool = False):
        self.elements = np.ascontiguousarray(elements).reshape(-1)
        self.location = location
        self.type = TorchGlobal("torch.UntypedStorage" if untyped else f"torch.{STORAGE_TYPES[elements.dtype]}")
        self.numel = self.elements.nbytes if untyped else self.elements.size


class FakeTensor:
    """Pickles like a torch.Tensor: ``_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``."""

    def __init__(
        self,
        storage: FakeStorage,
        size,
        stride=None,
        offset: int = 0,
        requires_grad: bool = False,
        rebuild=REBUILD_TENSOR_V2,
        extra=(),
    ):
        if stride is None:
            stride = tuple(int(np.prod(size[index + 1 :])) for index in range(len(size)))
        self.arguments = (storage, offset, tuple(size), tuple(stride), requires_grad, OrderedDict()) + tuple(extra)
        self.rebuild = rebuild

    def __reduce_ex__(self, protocol):
        return (self.rebuild, self.arguments)


class Reduced:
    """Pickles as ``function(*arguments)``: Parameters, tensor subclasses, torch.Size, torch.device."""

    def __init__(self, function, *arguments):
        self.function, self.arguments = function, arguments

    def __reduce_ex__(self, protocol):
        return (self.function, self.arguments)


class _TorchPickler(pickle._Pickler):
    """Protocol 2 pickler writing torch globals for stand-ins and storage persistent ids, as torch.save."""

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.storages: dict[str, FakeStorage] = {}
        self._keys: dict[int, str] = {}

    def persistent_id(self, obj):
        if not isinstance(obj, FakeStorage):
            return None
        key = self._keys.setdefault(id(obj), str(len(self._keys)))
        self.storages[key] = obj
        return ("storage", obj.type, key, obj.location, obj.numel)

    def reducer_override(self, obj):
        return obj.name if isinstance(obj, TorchGlobal) else NotImplemented  # a str means "save as global"

    def save_global(self, obj, name=None):
        if not isinstance(obj, TorchGlobal):
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)


def torch_save(obj, path, prefix: str = "archive", byteorder: str = "little", pickled: bytes | None = None):
    """Writes ``obj`` (or the raw ``pickled`` bytes) as torch.save's zip archive."""
    pickler = None
    if pickled is None:
        buffer = io.BytesIO()
        pickler = _TorchPickler(buffer)
        pickler.dump(obj)
        pickled = buffer.getvalue()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{prefix}/data.pkl", pickled)
        archive.writestr(f"{prefix}/byteorder", byteorder)
        for key, storage in pickler.storages.items() if pickler else ():
            elements = storage.elements if byteorder == sys.byteorder else storage.elements.byteswap()
            archive.writestr(f"{prefix}/data/{key}", elements.tobytes())
        archive.writestr(f"{prefix}/version", "3\n")
        archive.writestr(f"{prefix}/.data/serialization_id", "1234567890")


def storage_of(values, dtype=None, location="cpu") -> FakeStorage:
    return FakeStorage(np.asarray(values, dtype=dtype), location)


SHARED = storage_of(np.arange(12.0), np.float32)
TORCH_CASES = {
    # name: (object pickled as torch.save would, the object onnxnn.load must return)
    **{
        f"{dtype.name} tensor": (
            OrderedDict(weight=FakeTensor(storage_of(values), values.shape)),
            OrderedDict(weight=make(values)),
        )
        for dtype, values in DTYPE_VALUES
    },
    "0-d and empty tensors": (
        {"scalar": FakeTensor(storage_of([7], np.int64), ()), "empty": FakeTensor(storage_of([], np.float32), (0, 4))},
        {"scalar": make(np.array(7, np.int64)), "empty": make(np.zeros((0, 4), np.float32))},
    ),
    "non-contiguous strides": (
        {"t": FakeTensor(SHARED, (4, 3), stride=(1, 4))},
        {"t": make(np.arange(12.0, dtype=np.float32).reshape(3, 4).T)},
    ),
    "storage offset": (
        {"row": FakeTensor(SHARED, (2, 2), stride=(4, 1), offset=5)},
        {"row": make(np.array([[5.0, 6.0], [9.0, 10.0]], np.float32))},
    ),
    "tensors sharing a storage": (
        OrderedDict(whole=FakeTensor(SHARED, (12,)), view=FakeTensor(SHARED, (2, 3), stride=(6, 2), offset=1)),
        OrderedDict(
            whole=make(np.arange(12.0, dtype=np.float32)),
            view=make(np.array([[1.0, 3.0, 5.0], [7.0, 9.0, 11.0]], np.float32)),
        ),
    ),
    "optimizer state": (
        {
            "state": {
                0: {
                    "step": FakeTensor(storage_of([3.0], np.float32), ()),
                    "exp_avg": FakeTensor(storage_of([0.5, -0.5], np.float32), (2,)),
                }
            },
            "param_groups": [
                {
                    "lr": 0.01,
                    "betas": (0.9, 0.999),
                    "params": [0],
                    "foreach": None,
                    "amsgrad": False,
                    "tags": {"a", "b"},
                    "blob": b"\x00\x01",
                    "empty": b"",
                }
            ],
        },
        {
            "state": {0: {"step": make(np.array(3.0, np.float32)), "exp_avg": make(np.array([0.5, -0.5], np.float32))}},
            "param_groups": [
                {
                    "lr": 0.01,
                    "betas": (0.9, 0.999),
                    "params": [0],
                    "foreach": None,
                    "amsgrad": False,
                    "tags": {"a", "b"},
                    "blob": b"\x00\x01",
                    "empty": b"",
                }
            ],
        },
    ),
    "untyped storage with _rebuild_tensor_v3": (
        {
            "t": FakeTensor(
                FakeStorage(np.array([1.0, 2.0], np.float64), untyped=True),
                (2,),
                rebuild=REBUILD_TENSOR_V3,
                extra=(TorchGlobal("torch.float64"),),
            )
        },
        {"t": make(np.array([1.0, 2.0]))},
    ),
    # torch.load(weights_only=True) answers collections.Counter, builtins.bytearray and builtins.complex.
    "Counter, bytearray and complex": (
        {"milestones": Counter({2: 1, 4: 1}), "empty": Counter(), "blob": bytearray(b"\x00\xff"), "z": 1.5 - 2j},
        {"milestones": Counter({2: 1, 4: 1}), "empty": Counter(), "blob": bytearray(b"\x00\xff"), "z": 1.5 - 2j},
    ),
    "torch.Size, torch.device and dtypes": (
        {
            "size": Reduced(TorchGlobal("torch.Size"), (2, 3)),
            "device": Reduced(TorchGlobal("torch.device"), "cpu"),
            "dtype": TorchGlobal("torch.bfloat16"),
        },
        {"size": Size([2, 3]), "device": onnxnn.device("cpu"), "dtype": onnxnn.bfloat16},
    ),
}


@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_pytorch_zip_checkpoint_loads_and_saves_again(tmp_path, name):
    saved, expected = TORCH_CASES[name]
    torch_save(saved, tmp_path / "model.pth")
    loaded = load(tmp_path / "model.pth")
    assert_same(loaded, expected)
    assert_same(round_trip(loaded, tmp_path, "path"), expected)


@pytest.mark.parametrize(
    "prefix,byteorder", [("archive", "little"), ("resnet18-f37072fd", "little"), ("archive", "big")]
)
def test_pytorch_archive_folder_and_byte_order(tmp_path, prefix, byteorder):
    values = np.array([[1.5, -2.0], [3.0, 4.25]], np.float32)
    state = OrderedDict(b=FakeTensor(storage_of(values), (2, 2)), a=FakeTensor(storage_of([1, -2], np.int64), (2,)))
    torch_save(state, tmp_path / "model.pt", prefix=prefix, byteorder=byteorder)
    assert_same(load(tmp_path / "model.pt"), OrderedDict(b=make(values), a=make(np.array([1, -2]))))


def test_pytorch_parameters_and_state_dict_metadata(tmp_path):
    state = OrderedDict(
        weight=Reduced(REBUILD_PARAMETER, FakeTensor(storage_of([1.0, 2.0], np.float32), (2,)), True, OrderedDict()),
        subclass=Reduced(
            REBUILD_FROM_TYPE_V2,
            REBUILD_TENSOR_V2,
            TorchGlobal("torch.nn.parameter.Parameter"),
            FakeTensor(storage_of([3.0], np.float32), (1,)).arguments,
            {},
        ),
        running_mean=FakeTensor(storage_of([0.0], np.float32), (1,), requires_grad=False),
    )
    state._metadata = OrderedDict([("", {"version": 1})])
    torch_save(state, tmp_path / "model.pt")
    loaded = load(tmp_path / "model.pt")
    assert list(loaded) == ["weight", "subclass", "running_mean"]
    assert loaded["weight"].requires_grad and not loaded["running_mean"].requires_grad
    assert_same(loaded["subclass"].detach(), make(np.array([3.0], np.float32)))
    assert loaded._metadata == OrderedDict([("", {"version": 1})])


class device:  # noqa: N801  # stands for torch.device, which map_location may be
    def __init__(self, name: str):
        self.type, self._name = name.split(":")[0], name

    def __str__(self) -> str:
        return self._name


@pytest.mark.parametrize(
    "map_location",
    [
        "cpu",
        onnxnn.device("cpu"),
        {"cuda:0": "cpu"},
        device("cpu"),
        # PyTorch's callable forms: the storage as it is (deserialized on the CPU), or moved.
        lambda storage, location: storage,
        lambda storage, location: storage.cpu(),
        lambda storage, location: storage.to("cpu"),
    ],
    ids=["string", "device", "dict", "torch.device", "callable", "callable cpu()", "callable to()"],
)
def test_map_location_moves_tensors_saved_on_cuda(tmp_path, map_location):
    torch_save({"w": FakeTensor(storage_of([1.0], np.float32, location="cuda:0"), (1,))}, tmp_path / "gpu.pt")
    loaded = load(tmp_path / "gpu.pt", map_location=map_location)
    assert loaded["w"].device == onnxnn.device("cpu")
    assert_same(loaded["w"], make(np.array([1.0], np.float32)))


def test_a_cuda_index_in_a_map_location_dict_names_that_gpu(tmp_path):
    torch_save({"w": FakeTensor(storage_of([1.0], np.float32), (1,))}, tmp_path / "x.pt")
    if onnxnn.cuda.is_available():
        assert load(tmp_path / "x.pt", map_location={"cpu": 0})["w"].device == onnxnn.device("cuda", 0)
    else:
        with pytest.raises(RuntimeError, match="onnxnn.cuda.is_available"):
            load(tmp_path / "x.pt", map_location={"cpu": 0})


def test_tensor_saved_on_cuda_without_map_location(tmp_path):
    torch_save({"w": FakeTensor(storage_of([1.0], np.float32, location="cuda:0"), (1,))}, tmp_path / "gpu.pt")
    if onnxnn.cuda.is_available():
        assert load(tmp_path / "gpu.pt")["w"].device == onnxnn.device("cuda", 0)
    else:
        with pytest.raises(RuntimeError, match="map_location='cpu'"):
            load(tmp_path / "gpu.pt")


@pytest.mark.parametrize(
    "location,map_location,error,message",
    [
        ("mps", None, RuntimeError, "don't know how to restore data location 'mps'"),
        ("cpu", lambda storage, location: 3, TypeError, "map_location returned a int"),
        ("cpu", 3.5, TypeError, "map_location should be"),
    ],
)
def test_unusable_locations_are_reported(tmp_path, location, map_location, error, message):
    torch_save({"w": FakeTensor(storage_of([1.0], np.float32, location=location), (1,))}, tmp_path / "x.pt")
    with pytest.raises(error, match=message):
        load(tmp_path / "x.pt", map_location=map_location)


# ------------------------------------------------------------------------------------ refusing code
class ReducesTo:
    """An object whose pickle calls ``function(*arguments)`` on load: how malicious pickles run code."""

    def __init__(self, function, *arguments):
        self.function, self.arguments = function, arguments

    def __reduce__(self):
        return (self.function, self.arguments)


def evil_pickles(sentinel: str) -> dict:
    import subprocess

    command = f"touch {sentinel}"
    return {  # raw pickle bytes, or an object to save with torch_save
        "os.system": b"cos\nsystem\n(V" + command.encode() + b"\ntR.",
        "builtins.eval": b"cbuiltins\neval\n(V__import__('os').system('" + command.encode() + b"')\ntR.",
        "subprocess.Popen": pickle.dumps(ReducesTo(subprocess.Popen, ["touch", sentinel]), protocol=2),
        f"{os.system.__module__}.system": pickle.dumps(ReducesTo(os.system, command), protocol=4),
        "builtins.getattr": pickle.dumps(ReducesTo(getattr, "text", "upper"), protocol=2),
        "torch.nn.modules.linear.Linear": b"\x80\x02ctorch.nn.modules.linear\nLinear\n)\x81.",
        "numpy.core.multiarray._reconstruct": b"\x80\x02cnumpy.core.multiarray\n_reconstruct\n)R.",
        f"{os.system.__module__}.system in a state_dict": OrderedDict(
            w=FakeTensor(storage_of([1.0], np.float32), (1,)), hook=ReducesTo(os.system, command)
        ),
    }


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("refused", list(evil_pickles("x")))
def test_pickles_that_run_code_are_refused_naming_the_global(tmp_path, refused, weights_only):
    sentinel = tmp_path / "pwned"
    payload = evil_pickles(str(sentinel))[refused]
    if isinstance(payload, bytes):
        torch_save(None, tmp_path / "evil.pt", pickled=payload)
    else:
        torch_save(payload, tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError) as raised:
        load(tmp_path / "evil.pt", weights_only=weights_only)
    assert f"refused to unpickle '{refused.split(' ')[0]}'" in str(raised.value)
    assert "evil.pt" in str(raised.value)
    assert not sentinel.exists()


def test_bare_pickle_file_is_not_unpickled(tmp_path):
    sentinel = tmp_path / "pwned"
    (tmp_path / "evil.pkl").write_bytes(evil_pickles(str(sentinel))["os.system"])
    with pytest.raises(RuntimeError, match="not an onnxnn, safetensors or PyTorch checkpoint"):
        load(tmp_path / "evil.pkl")
    assert not sentinel.exists()


@pytest.mark.parametrize(
    "pickled,message",
    [
        # BUILD on an allowed global would overwrite attributes of onnxnn's own rebuild function.
        (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nN}X\x0c\x00\x00\x00__defaults__)s\x86b.", "set attributes"),
        # Calling a storage type (only valid inside a persistent id).
        (b"\x80\x02ctorch\nFloatStorage\n)R.", "only accepts as a type marker"),
        # bytearray(n) allocates n bytes the file does not hold; PyTorch's pickles never ask for it.
        (b"\x80\x02c__builtin__\nbytearray\nJ\xff\xff\xff\x7f\x85R.", "malformed builtins.bytearray record"),
        # A Counter gets no attributes (Python pickles it without a state), nor counts an int.
        (b"\x80\x02ccollections\nCounter\n)R}X\x08\x00\x00\x00elementsNsb.", "set attributes"),
        (b"\x80\x02ccollections\nCounter\nK\x03\x85R.", "collections.Counter of 3"),
        (b"\x80\x02c__builtin__\ncomplex\n]\x85R.", "malformed builtins.complex record"),
    ],
)
def test_misuse_of_allowed_globals_is_refused(tmp_path, pickled, message):
    torch_save(None, tmp_path / "odd.pt", pickled=pickled)
    with pytest.raises(pickle.UnpicklingError, match=message):
        load(tmp_path / "odd.pt")


@pytest.mark.parametrize(
    "tensor,message",
    [
        (FakeTensor(storage_of([1.0, 2.0], np.float32), (100,)), "reaches past the end of its storage of 2 elements"),
        (FakeTensor(storage_of([1.0, 2.0], np.float32), (2,), offset=1), "reaches past the end"),
        (FakeTensor(storage_of([1.0, 2.0], np.float32), (2,), stride=(-1,)), "non-negative"),
        (FakeTensor(storage_of([1.0, 2.0], np.float32), (2, 1), stride=(1,)), "differ in length"),
    ],
)
def test_tensor_records_outside_their_storage_are_refused(tmp_path, tensor, message):
    torch_save({"w": tensor}, tmp_path / "bad.pt")
    with pytest.raises(pickle.UnpicklingError, match=message):
        load(tmp_path / "bad.pt")


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
