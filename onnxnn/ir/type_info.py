"""``finfo`` and ``iinfo``: the numerical limits of a dtype, as ``torch.finfo``/``torch.iinfo``."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import dtypes

__all__ = ["finfo", "iinfo"]


def _dtype_argument(function: str, value) -> dtypes.dtype:
    if not isinstance(value, dtypes.dtype):
        raise TypeError(f"{function}(): argument 'type' (position 1) must be onnxnn.dtype, not {type(value).__name__}")
    return value


class finfo:
    """The limits of a floating point dtype (the default dtype when none is given).

    Attributes:
        bits: the number of bits the type occupies.
        eps: the difference between 1.0 and the next representable number.
        max, min: the largest and the most negative finite numbers.
        tiny, smallest_normal: the smallest positive normal number.
        resolution: the approximate decimal resolution, ``10**-precision``.
        dtype: the dtype's name (``"float32"``).

    Example::

        >>> onnxnn.finfo(onnxnn.float16).max
        65504.0
        >>> scores.masked_fill(~mask, onnxnn.finfo(scores.dtype).min)
    """

    def __init__(self, type: dtypes.dtype | None = None):
        type = dtypes.get_default_dtype() if type is None else _dtype_argument("finfo", type)
        if not type.is_floating_point:
            raise TypeError("onnxnn.finfo() requires a floating point input type. Use onnxnn.iinfo to handle 'finfo'")
        # ml_dtypes' finfo knows bfloat16 and defers to numpy's for the others.
        limits = ml_dtypes.finfo(type.numpy_dtype)
        self.bits: int = int(limits.bits)
        self.eps: float = float(limits.eps)
        self.max: float = float(limits.max)
        self.min: float = float(limits.min)
        self.tiny: float = float(limits.smallest_normal)
        self.smallest_normal: float = self.tiny
        self.resolution: float = 10.0 ** -int(limits.precision)  # exact, not rounded to the dtype as numpy's
        self.dtype: str = type.name

    def __eq__(self, other) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    __hash__ = None  # type: ignore[assignment]  # as PyTorch's: equal by value, not hashable

    def __repr__(self) -> str:
        fields = ("resolution", "min", "max", "eps", "smallest_normal", "tiny")
        shown = ", ".join(f"{name}={getattr(self, name):g}" for name in fields)
        return f"finfo({shown}, dtype={self.dtype})"


class iinfo:
    """The limits of an integer dtype.

    Attributes:
        bits: the number of bits the type occupies.
        max, min: the largest and the smallest representable numbers.
        dtype: the dtype's name (``"int64"``).

    Example::

        >>> onnxnn.iinfo(onnxnn.uint8).max
        255
    """

    def __init__(self, type: dtypes.dtype):
        type = _dtype_argument("iinfo", type)
        if type is dtypes.bool:
            raise TypeError("onnxnn.bool is not supported by onnxnn.iinfo")
        if type.is_floating_point:
            raise TypeError("onnxnn.iinfo() requires an integer input type. Use onnxnn.finfo to handle 'iinfo'")
        limits = np.iinfo(type.numpy_dtype)
        self.bits: int = int(limits.bits)
        self.max: int = int(limits.max)
        self.min: int = int(limits.min)
        self.dtype: str = type.name

    def __eq__(self, other) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
