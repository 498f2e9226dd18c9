"""Quantized element types and quantization schemes, under PyTorch's names.

``onnxnn.qint8`` and ``onnxnn.quint8`` name what a quantized tensor stores (ONNX's INT8 and UINT8
with a scale and zero point); ``qint32`` is what a quantized bias accumulates in. They are not
element types of onnxnn's Tensors: quantized values live in ONNX graphs as ``int8``/``uint8``
tensors between QuantizeLinear and DequantizeLinear nodes. Every public entry point accepts them,
their names as strings ("qint8", "quint8"), or the storage dtypes ``onnxnn.int8``/``onnxnn.uint8``.
"""

from __future__ import annotations

from ..ir import dtypes

__all__ = [
    "QuantizedDType",
    "qint8",
    "quint8",
    "qint32",
    "per_tensor_affine",
    "per_tensor_symmetric",
    "per_channel_affine",
    "per_channel_symmetric",
    "quantized_dtype",
]


class QuantizedDType:
    """A quantized element type (PyTorch's ``torch.qint8``): its storage dtype and full integer range."""

    __slots__ = ("name", "storage", "quant_min", "quant_max")

    def __init__(self, name: str, storage: dtypes.dtype, quant_min: int, quant_max: int):
        self.name = name
        self.storage = storage
        self.quant_min = quant_min
        self.quant_max = quant_max

    def __repr__(self) -> str:
        return f"onnxnn.{self.name}"

    def __reduce__(self) -> str:  # singletons survive copy and pickle
        return self.name


qint8 = QuantizedDType("qint8", dtypes.int8, -128, 127)
quint8 = QuantizedDType("quint8", dtypes.uint8, 0, 255)
qint32 = QuantizedDType("qint32", dtypes.int32, -(2**31), 2**31 - 1)

# Quantization schemes (PyTorch's torch.per_tensor_affine and siblings), compared by identity or name.
per_tensor_affine = "per_tensor_affine"
per_tensor_symmetric = "per_tensor_symmetric"
per_channel_affine = "per_channel_affine"
per_channel_symmetric = "per_channel_symmetric"

_BY_NAME = {"qint8": qint8, "quint8": quint8, "qint32": qint32, "int8": qint8, "uint8": quint8}


def quantized_dtype(dtype, allowed: tuple[QuantizedDType, ...] = (qint8, quint8)) -> QuantizedDType:
    """The quantized type ``dtype`` names: a QuantizedDType, its name, or its storage dtype.

    Raises:
        ValueError: ``dtype`` names no quantized type in ``allowed``.
    """
    found = None
    if isinstance(dtype, QuantizedDType):
        found = dtype
    elif isinstance(dtype, dtypes.dtype):
        found = _BY_NAME.get(dtype.name)
    elif isinstance(dtype, str):
        # PyTorch's spelling ("torch.qint8") is accepted, so configurations port unchanged.
        found = _BY_NAME.get(dtype.rsplit(".", 1)[-1])
    if found is None or found not in allowed:
        names = ", ".join(repr(item.name) for item in allowed)
        raise ValueError(f"unsupported quantized dtype {dtype!r}: expected one of {names}")
    return found
