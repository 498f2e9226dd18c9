"""Tensor dtypes: PyTorch's names mapped onto ONNX element types and numpy dtypes.

Type promotion follows PyTorch: a Python scalar never widens a tensor of its own category
(``int32_tensor * 2`` stays int32), but lifts it into a higher one at the default dtype
(``int_tensor * 0.5`` is float32); zero-dimensional tensors behave like scalars against
dimensioned tensors of the same category.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import ml_dtypes
import numpy as np
from onnx import TensorProto

__all__ = [
    "dtype",
    "float32",
    "float",
    "float64",
    "double",
    "float16",
    "half",
    "bfloat16",
    "int64",
    "long",
    "int32",
    "int",
    "int16",
    "short",
    "int8",
    "uint8",
    "bool",
    "uint16",
    "uint32",
    "uint64",
    "get_default_dtype",
    "set_default_dtype",
    "promote_types",
    "result_type",
    "as_dtype",
    "scalar_type_name",
]

# Categories order the promotion lattice: bool < integer < floating.
_BOOL, _INTEGER, _FLOATING = 0, 1, 2


class dtype:
    """A tensor element type. Instances are singletons compared by identity, like ``torch.dtype``."""

    __slots__ = ("name", "onnx_type", "numpy_dtype", "category", "itemsize", "_rank", "differentiable")

    def __init__(self, name: str, onnx_type: builtins.int, numpy_dtype, category: builtins.int, rank: builtins.int):
        self.name = name
        self.onnx_type = onnx_type
        self.numpy_dtype = np.dtype(numpy_dtype)
        self.category = category
        self.itemsize = self.numpy_dtype.itemsize
        self._rank = rank
        # Whether gradients flow through values of this type (floating point only, as in PyTorch).
        self.differentiable = category == _FLOATING

    @property
    def is_floating_point(self) -> builtins.bool:
        return self.category == _FLOATING

    @property
    def is_signed(self) -> builtins.bool:
        return self.name not in ("uint8", "uint16", "uint32", "uint64", "bool")

    def __repr__(self) -> str:
        return f"onnxnn.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))


float16 = half = dtype("float16", TensorProto.FLOAT16, np.float16, _FLOATING, 10)
bfloat16 = dtype("bfloat16", TensorProto.BFLOAT16, ml_dtypes.bfloat16, _FLOATING, 11)
float32 = float = dtype("float32", TensorProto.FLOAT, np.float32, _FLOATING, 12)
float64 = double = dtype("float64", TensorProto.DOUBLE, np.float64, _FLOATING, 13)
uint8 = dtype("uint8", TensorProto.UINT8, np.uint8, _INTEGER, 1)
int8 = dtype("int8", TensorProto.INT8, np.int8, _INTEGER, 2)
int16 = short = dtype("int16", TensorProto.INT16, np.int16, _INTEGER, 3)
int32 = int = dtype("int32", TensorProto.INT32, np.int32, _INTEGER, 4)
int64 = long = dtype("int64", TensorProto.INT64, np.int64, _INTEGER, 5)
bool = dtype("bool", TensorProto.BOOL, np.bool_, _BOOL, 0)
# PyTorch's "shell" unsigned types: tensors of them compute with their own kind, but promotion
# with other integer types is refused (as torch.uint16/uint32/uint64 do).
uint16 = dtype("uint16", TensorProto.UINT16, np.uint16, _INTEGER, 6)
uint32 = dtype("uint32", TensorProto.UINT32, np.uint32, _INTEGER, 7)
uint64 = dtype("uint64", TensorProto.UINT64, np.uint64, _INTEGER, 8)
_WIDE_UNSIGNED = (uint16, uint32, uint64)

ALL_DTYPES = (float16, bfloat16, float32, float64, uint8, int8, int16, int32, int64, bool, uint16, uint32, uint64)
_BY_NUMPY = {d.numpy_dtype: d for d in ALL_DTYPES}
_BY_ONNX = {d.onnx_type: d for d in ALL_DTYPES}
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update(float=float32, double=float64, half=float16, long=int64, int=int32, short=int16)

# PyTorch's ScalarType names, which its error messages and ``Tensor.type()`` use.
_SCALAR_TYPE_NAMES = {
    "float32": "Float",
    "float64": "Double",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int64": "Long",
    "int32": "Int",
    "int16": "Short",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
}


def scalar_type_name(value_dtype: dtype) -> str:
    """PyTorch's name of ``value_dtype`` in its messages: ``"Float"`` for float32, ``"Long"`` for int64."""
    return _SCALAR_TYPE_NAMES[value_dtype.name]


_default_float = float32


def get_default_dtype() -> dtype:
    """Returns the dtype that Python floats and float constructors produce (float32 unless changed)."""
    return _default_float


def set_default_dtype(d: dtype) -> None:
    """Sets the default floating point dtype (float32 or float64, as in PyTorch)."""
    global _default_float
    if d not in (float16, bfloat16, float32, float64):
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float = d


def as_dtype(value) -> dtype:
    """Converts an onnxnn dtype, a numpy dtype, a dtype name or an ONNX element type to a dtype.

    Raises:
        TypeError: the value names a type that an ONNX tensor cannot hold (complex, strings, objects).
    """
    if isinstance(value, dtype):
        return value
    if isinstance(value, np.dtype):  # an array's dtype: the common case, found without converting it
        found = _BY_NUMPY.get(value)
    elif isinstance(value, str):
        found = _BY_NAME.get(value.removeprefix("onnxnn.").removeprefix("torch."))
    elif isinstance(value, builtins.int) and not isinstance(value, builtins.bool):
        found = _BY_ONNX.get(value)
    else:
        try:
            found = _BY_NUMPY.get(np.dtype(value))
        except TypeError:
            found = None
    if found is None:
        raise TypeError(
            f"unsupported dtype {value!r}: onnxnn tensors hold one of {', '.join(d.name for d in ALL_DTYPES)}"
        )
    return found


def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype both ``a`` and ``b`` convert to without losing their category (torch.promote_types)."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == _FLOATING and {a, b} == {float16, bfloat16}:
        return float32
    if {a, b} == {uint8, int8}:
        return int16
    if a in _WIDE_UNSIGNED or b in _WIDE_UNSIGNED:
        raise RuntimeError(
            f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote {a.name} and {b.name}"
        )
    return a if a._rank > b._rank else b


def scalar_category(value) -> builtins.int:
    if isinstance(value, builtins.bool) or isinstance(value, np.bool_):
        return _BOOL
    if isinstance(value, (builtins.int, np.integer)):
        return _INTEGER
    return _FLOATING


def default_dtype_for_category(category: builtins.int) -> dtype:
    return (bool, int64, _default_float)[category]


def result_type(tensor_dtypes_dims: list[tuple[dtype, builtins.int]], scalars: Sequence = ()) -> dtype:
    """PyTorch's three-tier promotion over (dtype, ndim) pairs of tensors and Python scalars."""
    dimensioned = zero_dim = None
    for d, ndim in tensor_dtypes_dims:
        if ndim > 0:
            dimensioned = d if dimensioned is None else promote_types(dimensioned, d)
        else:
            zero_dim = d if zero_dim is None else promote_types(zero_dim, d)
    result = dimensioned
    if zero_dim is not None:
        if result is None or zero_dim.category > result.category:
            result = zero_dim if result is None else (zero_dim if zero_dim.category > result.category else result)
    for s in scalars:
        category = scalar_category(s)
        if result is None:
            result = default_dtype_for_category(category)
        elif category > result.category:
            result = default_dtype_for_category(category)
    # Not None: callers always pass at least one tensor or scalar.
    return result  # type: ignore[return-value]
