"""PyTorch's legacy typed tensor classes: ``FloatTensor``, ``LongTensor``, ...

Before dtypes were arguments, ``torch.FloatTensor(2, 3)`` made a float32 tensor of that shape and
``torch.LongTensor([1, 2])`` one of that data; scripts written then still call them, test
``isinstance(x, torch.FloatTensor)`` and convert with ``x.type(torch.DoubleTensor)``. Each class here
does the same for its dtype on the CPU: a call makes a plain ``Tensor``, and ``isinstance`` asks
whether a tensor has that dtype and device.
"""

from __future__ import annotations

from ..ir import dtypes
from .creation import empty, tensor
from .tensor import Size, Tensor

__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
]


class LegacyTensorType(type):
    """The metaclass of the typed tensor classes: ``isinstance`` tests a tensor's dtype and device."""

    dtype: dtypes.dtype

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, Tensor) and instance.dtype is cls.dtype and instance.device.type == "cpu"

    def __repr__(cls) -> str:
        return f"<class 'onnxnn.{cls.__name__}'>"


def _new(cls, *args) -> Tensor:
    """``Cls()``: empty; ``Cls(2, 3)`` or ``Cls(Size)``: that shape, zero-filled (PyTorch leaves it
    uninitialized); ``Cls(data)``: the data in the class's dtype; ``Cls(tensor)``: the tensor itself,
    which must have the class's dtype."""
    dtype = cls.dtype
    if not args:
        return empty(0, dtype=dtype)
    if all(type(size) is int for size in args) or (len(args) == 1 and isinstance(args[0], Size)):
        return empty(*args, dtype=dtype).zero_()
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not dtype or args[0].device.type != "cpu":
            raise TypeError(
                f"expected {cls.__name__} (dtype {dtype.name} on the CPU), got a tensor of dtype "
                f"{args[0].dtype.name} on {args[0].device}"
            )
        return args[0]
    if len(args) == 1:
        return tensor(args[0], dtype=dtype)
    raise TypeError(f"{cls.__name__}(): takes sizes (ints), a Size, data or a tensor; got {args!r}")


def _legacy_type(name: str, dtype: dtypes.dtype) -> LegacyTensorType:
    namespace = {
        "__new__": _new,
        "dtype": dtype,
        "is_cuda": False,
        "__module__": "onnxnn",
        "__doc__": f"PyTorch's legacy ``{name}``: ``{name}(*sizes)`` or ``{name}(data)`` makes a {dtype.name} "
        f"tensor; ``isinstance(x, {name})`` tests for a {dtype.name} tensor on the CPU.",
    }
    return LegacyTensorType(name, (), namespace)


BFloat16Tensor = _legacy_type("BFloat16Tensor", dtypes.bfloat16)
BoolTensor = _legacy_type("BoolTensor", dtypes.bool)
ByteTensor = _legacy_type("ByteTensor", dtypes.uint8)
CharTensor = _legacy_type("CharTensor", dtypes.int8)
DoubleTensor = _legacy_type("DoubleTensor", dtypes.float64)
FloatTensor = _legacy_type("FloatTensor", dtypes.float32)
HalfTensor = _legacy_type("HalfTensor", dtypes.float16)
IntTensor = _legacy_type("IntTensor", dtypes.int32)
LongTensor = _legacy_type("LongTensor", dtypes.int64)
ShortTensor = _legacy_type("ShortTensor", dtypes.int16)
