"""Specification: ``load`` reads PyTorch's ``torch.save`` zip checkpoints, and refuses code in them.

Tensors of every dtype, strides, offsets and shared storages, optimizer states, archive folders and
byte orders, ``map_location``; pickles that would run code (any global outside the few that
``torch.load(weights_only=True)`` answers) are refused by name, whether ``weights_only`` or not. The
files are written as ``torch.save`` writes them (``checkpoint_files.py``).
"""

from __future__ import annotations

import os
import pickle
from collections import Counter, OrderedDict

import numpy as np
import pytest

import onnxnn
from onnxnn.export import load
from onnxnn.runtime.tensor import Size

from .checkpoint_files import (
    DTYPE_VALUES,
    REBUILD_FROM_TYPE_V2,
    REBUILD_PARAMETER,
    REBUILD_TENSOR_V2,
    REBUILD_TENSOR_V3,
    FakeStorage,
    FakeTensor,
    Reduced,
    TorchGlobal,
    assert_same,
    make,
    round_trip,
    storage_of,
    torch_save,
)


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
