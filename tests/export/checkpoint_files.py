"""What the checkpoint tests write and compare: exact tensors, deep equality, and torch.save's files.

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

``TorchPickler`` below emits exactly those pickle records from stand-in objects.
"""

from __future__ import annotations

import io
import math
import pickle
import sys
import zipfile
from collections import OrderedDict

import numpy as np

import onnxnn
from onnxnn.export import load, save
from onnxnn.runtime.tensor import Tensor

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


class TorchPickler(pickle._Pickler):
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
        pickler = TorchPickler(buffer)
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
