"""Specification: ``onnxnn.save`` to ``.pt``/``.pth``/``.bin`` writes PyTorch's own zip checkpoint.

``torch.load(path, weights_only=True)`` must read it (tests marked with the ``torch`` fixture skip only
where PyTorch is not installed; onnxnn itself never imports it), onnxnn.load must read it back, and
onnxnn.load must read what ``torch.save`` writes. The archive layout follows PyTorch's writer:
``archive/data.pkl`` (protocol 2), ``archive/data/<key>`` aligned to 64 bytes, ``archive/version``,
``archive/byteorder``.
"""

from __future__ import annotations

import io
import pickletools
import struct
import warnings
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import load, save
from onnxnn.export import torch_checkpoint_writer
from onnxnn.runtime.tensor import Size

from .hostile_files import patch_zip_member
from .checkpoint_files import BF16, assert_same, make


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def to_numpy(torch_tensor) -> np.ndarray:
    import torch

    if torch_tensor.dtype == torch.bfloat16:
        return torch_tensor.view(torch.int16).numpy().view(BF16)
    return torch_tensor.numpy()


TENSORS = {
    "float32": np.array([[1.5, -2.0, np.inf], [np.nan, -0.0, 3.25e-30]], np.float32),
    "float16": np.array([65504.0, -0.5, np.inf, 6e-8], np.float16),
    "bfloat16": np.array([[1.0, -2.5], [3e38, np.nan]], BF16),
    "float64": np.array([1e300, -1e-300], np.float64),
    "int64": np.array([-(2**63), 2**63 - 1, 0], np.int64),
    "int8": np.array([-128, 127], np.int8),
    "uint8": np.array([0, 255], np.uint8),
    "bool": np.array([[True, False], [False, True]]),
    "0-d": np.array(2.5, np.float32),
    "empty": np.zeros((0, 3), np.float32),
    "uint16 (untyped storage)": np.array([1, 65535], np.uint16),
}


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".bin", ".ckpt"])
@pytest.mark.parametrize("name", list(TENSORS))
def test_torch_load_reads_every_dtype(tmp_path, torch, name, suffix):
    values = TENSORS[name]
    save(OrderedDict(weight=make(values)), tmp_path / f"model{suffix}")
    loaded = torch.load(tmp_path / f"model{suffix}", weights_only=True)
    assert isinstance(loaded, OrderedDict) and list(loaded) == ["weight"]
    array = to_numpy(loaded["weight"])
    assert array.dtype == values.dtype and array.shape == values.shape
    assert array.tobytes() == values.tobytes()


@pytest.mark.parametrize(
    "name,zip_format",
    [("model.pt", True), ("model.PTH", True), ("weights.bin", True), ("epoch=3.ckpt", True)]
    + [("model.safetensors", False), ("model.onnxnn", False), ("ckpt.pt.json", False)],
)
def test_the_file_name_picks_the_format(tmp_path, name, zip_format):
    state = OrderedDict(weight=make(np.arange(6, dtype=np.float32).reshape(2, 3)))
    save(state, tmp_path / name)
    assert zipfile.is_zipfile(tmp_path / name) == zip_format
    if not zip_format:  # safetensors: an 8-byte little-endian header length, then the JSON header
        data = (tmp_path / name).read_bytes()
        assert data[8:9] == b"{" and 8 + struct.unpack("<Q", data[:8])[0] <= len(data)
    assert_same(load(tmp_path / name), state)


def training_checkpoint():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    shared = make(np.arange(3, dtype=np.int64))
    return {
        "model": model.state_dict(),
        "epoch": 3,
        "best": float("inf"),
        "lr": 1e-3,
        "name": "ünï",
        "history": [0.5, -0.0, None, True],
        "betas": (0.9, 0.999),
        "tags": {"a", "b"},
        "blob": b"\x00\xff",
        "empty": b"",
        "size": Size([2, 3]),
        "dtype": onnxnn.bfloat16,
        "device": onnxnn.device("cpu"),
        "big": -(2**70),
        "ids": shared,
        "same_ids": shared,
        "nested": {1: [{"deep": (shared,)}]},
        "many": list(range(2500)),
    }


def test_torch_load_reads_a_nested_training_checkpoint(tmp_path, torch):
    checkpoint = training_checkpoint()
    save(checkpoint, tmp_path / "ckpt.pt")
    loaded = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert list(loaded) == list(checkpoint)
    for key, value in checkpoint["model"].items():
        np.testing.assert_array_equal(to_numpy(loaded["model"][key]), value.numpy(), err_msg=key)
    assert loaded["model"]._metadata == checkpoint["model"]._metadata
    plain = ["epoch", "best", "lr", "name", "history", "betas", "tags", "blob", "empty", "big", "many"]
    assert {key: loaded[key] for key in plain} == {key: checkpoint[key] for key in plain}
    assert loaded["size"] == torch.Size([2, 3]) and loaded["dtype"] is torch.bfloat16
    assert loaded["device"] == torch.device("cpu")
    assert loaded["same_ids"] is loaded["ids"] and loaded["nested"][1][0]["deep"][0] is loaded["ids"]


def test_parameters_and_requires_grad_reach_torch(tmp_path, torch):
    weight = nn.Parameter(make(np.ones(2, np.float32)))
    frozen = nn.Parameter(make(np.zeros(1, np.float32)), requires_grad=False)
    state = {
        "weight": weight,
        "frozen": frozen,
        "grad": make(np.ones(1, np.float32)).requires_grad_(),
        "plain": make(np.ones(1, np.float32)),
    }
    save(state, tmp_path / "p.pt")
    loaded = torch.load(tmp_path / "p.pt", weights_only=True)
    assert isinstance(loaded["weight"], torch.nn.Parameter) and loaded["weight"].requires_grad
    assert isinstance(loaded["frozen"], torch.nn.Parameter) and not loaded["frozen"].requires_grad
    assert loaded["grad"].requires_grad and not loaded["plain"].requires_grad
    again = load(tmp_path / "p.pt")
    assert isinstance(again["weight"], nn.Parameter) and again["weight"].requires_grad
    assert again["grad"].requires_grad and not again["plain"].requires_grad


def test_the_save_docstring_example_is_true(tmp_path, torch, monkeypatch):
    model = nn.Linear(2, 2)
    optimizer = onnxnn.optim.Adam(model.parameters())
    model(onnxnn.randn(3, 2)).sum().backward()
    optimizer.step()
    monkeypatch.chdir(tmp_path)
    onnxnn.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}, "ckpt.pt")
    assert torch.load("ckpt.pt", weights_only=True)["epoch"] == 3


def test_onnxnn_reads_what_torch_save_writes(tmp_path, torch):
    torch_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    optimizer = torch.optim.Adam(torch_model.parameters())
    torch_model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    view = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous: a strided view of its storage
    torch.save(
        {
            "model": torch_model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "view": view,
            "half": torch.ones(2, dtype=torch.float16),
            "size": torch.Size([1, 2]),
            "empty": b"",
        },
        tmp_path / "torch.pt",
    )
    loaded = load(tmp_path / "torch.pt")
    for key, value in torch_model.state_dict().items():
        np.testing.assert_array_equal(loaded["model"][key].numpy(), value.numpy(), err_msg=key)
    state = optimizer.state_dict()
    np.testing.assert_array_equal(loaded["optimizer"]["state"][0]["exp_avg"].numpy(), state["state"][0]["exp_avg"])
    assert loaded["optimizer"]["param_groups"][0]["betas"] == state["param_groups"][0]["betas"]
    np.testing.assert_array_equal(loaded["view"].numpy(), view.numpy())
    assert loaded["half"].dtype is onnxnn.float16 and loaded["size"] == Size([1, 2]) and loaded["empty"] == b""


def test_round_trip_through_onnxnn_keeps_everything(tmp_path):
    checkpoint = training_checkpoint()
    save(checkpoint, tmp_path / "ckpt.pt")
    loaded = load(tmp_path / "ckpt.pt")
    assert_same(loaded, checkpoint)
    assert loaded["same_ids"] is loaded["ids"]


def local_data_offsets(path) -> dict[str, int]:
    data = path.read_bytes()
    offsets = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
            offsets[info.filename] = info.header_offset + 30 + name_length + extra_length
            assert info.compress_type == zipfile.ZIP_STORED
    return offsets


def test_archive_layout_is_pytorchs(tmp_path):
    save(OrderedDict(a=make(np.ones(3, np.float32)), b=make(np.ones((2, 2), np.float16))), tmp_path / "m.pt")
    offsets = local_data_offsets(tmp_path / "m.pt")
    assert list(offsets) == [
        "archive/data.pkl",
        "archive/.format_version",
        "archive/.storage_alignment",
        "archive/byteorder",
        "archive/data/0",
        "archive/data/1",
        "archive/version",
    ]
    assert all(offset % 64 == 0 for offset in offsets.values())
    with zipfile.ZipFile(tmp_path / "m.pt") as archive:
        assert archive.read("archive/version") == b"3\n"
        pickled = archive.read("archive/data.pkl")
    opcodes = [opcode.name for opcode, _, _ in pickletools.genops(pickled)]
    assert opcodes[0] == "PROTO" and "STACK_GLOBAL" not in opcodes and "BINPERSID" in opcodes
    assert pickled[:2] == b"\x80\x02"


def test_zip64_records_are_written_when_sizes_need_them(tmp_path, monkeypatch):
    monkeypatch.setattr(torch_checkpoint_writer, "_ZIP64_THRESHOLD", 100)
    state = OrderedDict(a=make(np.arange(64, dtype=np.float32)), b=make(np.arange(3, dtype=np.int64)))
    save(state, tmp_path / "z.pt")
    with zipfile.ZipFile(tmp_path / "z.pt") as archive:
        assert archive.testzip() is None
        assert archive.getinfo("archive/data/0").file_size == 256
    assert_same(load(tmp_path / "z.pt"), state)


def test_zip64_archive_is_read_by_torch(tmp_path, torch, monkeypatch):
    monkeypatch.setattr(torch_checkpoint_writer, "_ZIP64_THRESHOLD", 100)
    save(OrderedDict(a=make(np.arange(64, dtype=np.float32))), tmp_path / "z.pt")
    np.testing.assert_array_equal(torch.load(tmp_path / "z.pt", weights_only=True)["a"].numpy(), np.arange(64.0))


def test_values_pytorch_would_refuse_are_refused_naming_their_path(tmp_path):
    save({"w": make(np.ones(1, np.float32))}, tmp_path / "ckpt.pt")
    before = (tmp_path / "ckpt.pt").read_bytes()
    with pytest.raises(TypeError, match=r"frozenset at \['groups'\]\[0\] in PyTorch's format"):
        save({"groups": [frozenset({1})]}, tmp_path / "ckpt.pt")
    assert (tmp_path / "ckpt.pt").read_bytes() == before
    save({"groups": [frozenset({1})]}, tmp_path / "ckpt.safetensors")  # the safetensors format keeps them
    assert load(tmp_path / "ckpt.safetensors") == {"groups": [frozenset({1})]}


# ------------------------------------------------------------------------------ torch.save's other files
def saved_bytes(tmp_path, obj, name: str) -> bytes:
    save(obj, tmp_path / name)
    return (tmp_path / name).read_bytes()


@pytest.mark.parametrize("zip64_first", [False, True])
def test_two_archives_in_one_stream_load_the_first(tmp_path, monkeypatch, zip64_first):
    # torch.load counts the zip offsets from the stream's first byte, so it reads the archive that
    # starts there; Python's zipfile takes everything before the last archive as a prefix.
    threshold = torch_checkpoint_writer._ZIP64_THRESHOLD
    if zip64_first:
        monkeypatch.setattr(torch_checkpoint_writer, "_ZIP64_THRESHOLD", 100)
    first = {"first": make(np.arange(64, dtype=np.float32))}
    data = saved_bytes(tmp_path, first, "first.pt")
    monkeypatch.setattr(torch_checkpoint_writer, "_ZIP64_THRESHOLD", threshold)
    data += saved_bytes(tmp_path, {"second": make(np.ones(2, np.float32))}, "second.pt")
    (tmp_path / "both.pt").write_bytes(data)
    assert_same(load(io.BytesIO(data)), first)
    assert_same(load(tmp_path / "both.pt"), first)


def test_two_torch_save_archives_in_one_stream_load_as_torch_loads_them(torch):
    stream = io.BytesIO()
    torch.save({"first": torch.arange(3.0)}, stream)
    torch.save({"second": torch.ones(2)}, stream)
    stream.seek(0)
    expected = torch.load(stream, weights_only=True)
    stream.seek(0)
    loaded = load(stream)
    assert list(loaded) == list(expected) == ["first"]
    np.testing.assert_array_equal(loaded["first"].numpy(), expected["first"].numpy())


def test_archive_without_crcs_loads(tmp_path):
    # torch.save after torch.serialization.set_crc32_options(False) writes CRC 0 for every member.
    state = {"w": make(np.arange(4, dtype=np.float32))}
    data = saved_bytes(tmp_path, state, "crc.pt")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
    for name in names:
        data = patch_zip_member(data, name, crc=0)
    assert_same(load(io.BytesIO(data)), state)


def test_torch_save_without_crcs_loads_as_torch_loads_it(tmp_path, torch):
    torch.serialization.set_crc32_options(False)
    try:
        torch.save({"w": torch.arange(4.0)}, tmp_path / "nocrc.pt")
    finally:
        torch.serialization.set_crc32_options(True)
    expected = torch.load(tmp_path / "nocrc.pt", weights_only=True)
    np.testing.assert_array_equal(load(tmp_path / "nocrc.pt")["w"].numpy(), expected["w"].numpy())


def test_torchscript_file_is_refused_as_torchscript(tmp_path, torch):
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), tmp_path / "jit.pt")
    with pytest.raises(onnxnn.CheckpointError, match=r"TorchScript archive \(torch.jit.save\)"):
        load(tmp_path / "jit.pt")


def test_torch_checkpoint_with_a_multisteplr_loads_as_torch_loads_it(tmp_path, torch):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [2, 4])
    plain = {"blob": bytearray(b"\x00\xff"), "z": 1.5 - 2j, "counts": Counter("abca")}
    torch.save({"scheduler": scheduler.state_dict(), **plain}, tmp_path / "ckpt.pt")
    expected = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert type(expected["scheduler"]["milestones"]) is Counter
    assert_same(load(tmp_path / "ckpt.pt"), expected)


def onnxnn_multisteplr():
    optimizer = onnxnn.optim.SGD([nn.Parameter(make(np.ones(2, np.float32)))], lr=0.1)
    return onnxnn.optim.lr_scheduler.MultiStepLR(optimizer, [2, 4], gamma=0.5)


@pytest.mark.parametrize("name", ["scheduler.pt", "scheduler.safetensors"])
def test_multisteplr_restored_from_a_file_steps_to_an_epoch(tmp_path, name):
    # step(epoch) takes the closed form, which calls milestones.elements(): a Counter's, not a dict's.
    save(onnxnn_multisteplr().state_dict(), tmp_path / name)
    restored = onnxnn_multisteplr()
    restored.load_state_dict(load(tmp_path / name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # step(epoch) is deprecated, in PyTorch too
        restored.step(5)
    assert restored.get_last_lr() == [0.1 * 0.5**2]


def test_torch_restores_a_multisteplr_onnxnn_saved(tmp_path, torch):
    save(onnxnn_multisteplr().state_dict(), tmp_path / "scheduler.pt")
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [2, 4], gamma=0.5)
    scheduler.load_state_dict(torch.load(tmp_path / "scheduler.pt", weights_only=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scheduler.step(5)
    assert scheduler.get_last_lr() == [0.1 * 0.5**2]


def test_complex_bytearray_and_counter_reach_torch(tmp_path, torch):
    values = {"z": complex(float("inf"), -0.0), "blob": bytearray(b"ab"), "counts": Counter({2: 1, 4: 1})}
    save(values, tmp_path / "plain.pt")
    assert_same(torch.load(tmp_path / "plain.pt", weights_only=True), values)
    assert_same(load(tmp_path / "plain.pt"), values)


def storage_members(path) -> dict[str, int]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: info.file_size for info in archive.infolist() if "/data/" in info.filename}


def tied_model():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight
    return model


def test_tied_weights_and_views_are_written_over_one_storage(tmp_path):
    # torch.save writes one storage for tensors sharing one: tied weights' state_dict entries
    # (distinct tensors over the parameter's storage), and views at their offsets and strides.
    save(tied_model().state_dict(), tmp_path / "tied.pt")
    assert storage_members(tmp_path / "tied.pt") == {"archive/data/0": 10 * 4 * 4}
    base = make(np.arange(12, dtype=np.float32)).reshape(3, 4)
    views = {"base": base, "t": base.t(), "row": base[1], "columns": base[:, 1:3], "diagonal": base.diagonal()}
    save(views, tmp_path / "views.pt")
    assert storage_members(tmp_path / "views.pt") == {"archive/data/0": 12 * 4}
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = {
        "base": values,
        "t": values.T,
        "row": values[1],
        "columns": values[:, 1:3],
        "diagonal": values.diagonal(),
    }
    assert_same(load(tmp_path / "views.pt"), {name: make(array.copy()) for name, array in expected.items()})


def test_torch_loads_tied_weights_and_views_over_one_storage(tmp_path, torch):
    model = tied_model()
    save(model.state_dict(), tmp_path / "tied.pt")
    loaded = torch.load(tmp_path / "tied.pt", weights_only=True)
    assert loaded["0.weight"].untyped_storage().data_ptr() == loaded["1.weight"].untyped_storage().data_ptr()
    np.testing.assert_array_equal(loaded["1.weight"].numpy(), model[0].weight.detach().numpy())
    base = make(np.arange(12, dtype=np.float32)).reshape(3, 4)
    save({"base": base, "t": base.t(), "columns": base[:, 1:3]}, tmp_path / "views.pt")
    views = torch.load(tmp_path / "views.pt", weights_only=True)
    reference = torch.arange(12.0).reshape(3, 4)
    for name, expected in {"base": reference, "t": reference.t(), "columns": reference[:, 1:3]}.items():
        assert views[name].stride() == expected.stride() and views[name].storage_offset() == expected.storage_offset()
        assert torch.equal(views[name], expected), name
    views["base"][0, 1] = -1.0  # one storage again, as torch.save's own file gives
    assert views["t"][1, 0] == -1.0 and views["columns"][0, 0] == -1.0
