"""The questions about types that PyTorch answers without computing: ``result_type``, ``can_cast``, ``typename``."""

from __future__ import annotations

import numpy as np

from ..ir import dtypes
from .tensor import Tensor

__all__ = ["result_type", "can_cast", "typename"]

_NUMBER_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


def result_type(tensor, other) -> dtypes.dtype:
    """The dtype an arithmetic operation on ``tensor`` and ``other`` gives (PyTorch's type promotion).

    Args:
        tensor: a Tensor or a Python number.
        other: a Tensor or a Python number.

    Returns:
        The dtype: dimensioned tensors decide within a category, zero-dimensional tensors and then
        numbers only when they are of a higher category (float above integer above bool).

    Example::

        >>> onnxnn.result_type(onnxnn.tensor([1, 2], dtype=onnxnn.int32), 1.0)
        onnxnn.float32
        >>> onnxnn.result_type(onnxnn.tensor([1], dtype=onnxnn.uint8), onnxnn.tensor(1, dtype=onnxnn.int8))
        onnxnn.uint8
    """
    tensors, numbers = [], []
    for operand in (tensor, other):
        if isinstance(operand, Tensor):
            tensors.append((operand.dtype, operand.dim()))
        elif isinstance(operand, _NUMBER_TYPES):
            numbers.append(operand)
        else:
            raise TypeError(
                f"result_type(): expected a Tensor or a Number for each argument, got "
                f"({type(tensor).__name__}, {type(other).__name__})"
            )
    return dtypes.result_type(tensors, numbers)


def can_cast(from_: dtypes.dtype, to: dtypes.dtype) -> bool:
    """Whether a value of dtype ``from_`` may be cast to ``to`` under PyTorch's casting rules.

    A cast may narrow within a category (float64 to float16) but never lowers it: floating
    values do not cast to integers, nor integers to bool.

    Example::

        >>> onnxnn.can_cast(onnxnn.float64, onnxnn.float16), onnxnn.can_cast(onnxnn.float32, onnxnn.int32)
        (True, False)
    """
    for position, (name, value) in enumerate((("from_", from_), ("to", to)), start=1):
        if not isinstance(value, dtypes.dtype):
            raise TypeError(
                f"can_cast(): argument '{name}' (position {position}) must be onnxnn.dtype, not {type(value).__name__}"
            )
    return from_.category <= to.category


def typename(obj) -> str:
    """The name of ``obj``'s type as PyTorch writes it: a tensor's type (``onnxnn.FloatTensor``),
    else the object's (or, for a class or function, its own) qualified name.

    Example::

        >>> onnxnn.typename(onnxnn.zeros(2)), onnxnn.typename(3.0), onnxnn.typename(onnxnn.nn.Linear)
        ('onnxnn.FloatTensor', 'float', 'onnxnn.nn.modules.linear.Linear')
    """
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):  # a class or function names itself
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = type(obj).__module__ or ""
        qualname = type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"
