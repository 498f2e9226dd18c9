"""``make_tensor``: random test tensors with PyTorch's value ranges per dtype (``torch.testing.make_tensor``).

Values are drawn from onnxnn's default generator (``onnxnn.manual_seed`` repeats them): integers
and booleans as ``onnxnn.randint``, floating types uniformly as ``Tensor.uniform_``.
"""

from __future__ import annotations

import collections.abc
import math
import warnings
from typing import Sequence, Union

import ml_dtypes
import numpy as np

from ..ir import dtypes as _dtypes
from ..ir.device import device as _device
from ..ir.memory_formats import memory_format as _memory_format
from ..runtime.creation import empty
from ..runtime.random_creation import randint
from ..runtime.tensor import Tensor

__all__ = ["make_tensor"]

_INTEGRAL = (
    _dtypes.uint8,
    _dtypes.int8,
    _dtypes.int16,
    _dtypes.int32,
    _dtypes.int64,
    _dtypes.uint16,
    _dtypes.uint32,
    _dtypes.uint64,
)
_FLOATING = (_dtypes.float16, _dtypes.bfloat16, _dtypes.float32, _dtypes.float64)


def _finfo(dtype: _dtypes.dtype):
    # numpy's finfo does not know bfloat16; ml_dtypes' knows every float numpy's does, and it.
    return ml_dtypes.finfo(dtype.numpy_dtype)


def _representable(dtype: _dtypes.dtype, low: float, high: float) -> tuple[float, float]:
    """The least value of ``dtype`` at or above ``low`` and the greatest below ``high``.

    Uniform draws are rounded to the dtype (float16 and bfloat16 are drawn as float32), and a draw
    just below ``high`` may round up to it; clamping to these keeps every value in ``[low, high)``.
    """
    numpy_dtype = dtype.numpy_dtype
    least = np.array(low, dtype=numpy_dtype)
    if float(least) < low:
        least = np.nextafter(least, np.array(np.inf, dtype=numpy_dtype))
    greatest = np.array(high, dtype=numpy_dtype)
    if float(greatest) >= high:
        greatest = np.nextafter(greatest, np.array(-np.inf, dtype=numpy_dtype))
    return float(least), float(greatest)


def _bounds(
    dtype: _dtypes.dtype, low, high, lowest: float, highest: float, default_low: float, default_high: float
) -> tuple:
    """``low`` and ``high`` (their defaults where None), checked and clamped to ``[lowest, highest)``."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(value, float) and math.isnan(value) for value in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and dtype in _FLOATING:
        warnings.warn(
            "Passing `low==high` to `onnxnn.testing.make_tensor` for floating types is deprecated "
            "(as since PyTorch 2.1). Use `onnxnn.full(...)` instead.",
            FutureWarning,
            stacklevel=3,
        )
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(
            f"The value interval specified by `low` and `high` is [{low}, {high}), "
            f"but {dtype} only supports [{lowest}, {highest})"
        )
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    if dtype not in _FLOATING:
        # Both bounds rounded up: low so no value falls below it; high because randint excludes it.
        return math.ceil(low), math.ceil(high)
    return low, high


def make_tensor(
    *shape: Union[int, Sequence[int]],
    dtype: _dtypes.dtype,
    device: Union[str, _device],
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: _memory_format | None = None,
) -> Tensor:
    r"""Creates a tensor of ``shape``, ``dtype`` and ``device`` with values drawn uniformly from ``[low, high)``.

    Bounds outside the dtype's finite range are clamped to it. When omitted they depend on the
    dtype, as in PyTorch:

    =======================  =========  ==========
    dtype                    ``low``    ``high``
    =======================  =========  ==========
    bool                     ``0``      ``2``
    unsigned integral types  ``0``      ``10``
    signed integral types    ``-9``     ``10``
    floating types           ``-9``     ``9``
    =======================  =========  ==========

    Values come from onnxnn's default generator, so ``onnxnn.manual_seed`` repeats them.

    Args:
        shape: the sizes, as integers or one sequence of them.
        dtype: the dtype of the tensor.
        device: the device of the tensor.
        low: the inclusive lower bound (see the table when None).
        high: the exclusive upper bound (see the table when None).
        requires_grad: whether the (floating-point) tensor requires grad.
        noncontiguous: draw twice the last dimension and keep every other element, as PyTorch's
            non-contiguous tensor holds. onnxnn tensors are values without strides, so the result
            is contiguous; only its values follow PyTorch's recipe. Ignored for fewer than two elements.
        exclude_zero: replace zeros by one (bool and integral types) or by the dtype's smallest
            positive normal number (floating types).
        memory_format: the memory format of the result (mutually exclusive with ``noncontiguous``).

    Returns:
        The new tensor.

    Raises:
        ValueError: ``requires_grad`` for a bool or integral dtype; ``low >= high``; a NaN bound;
            a range outside the dtype's; both ``noncontiguous`` and ``memory_format``.
        TypeError: ``dtype`` is not supported.

    Example::

        >>> onnxnn.manual_seed(0)
        >>> make_tensor((3,), device="cpu", dtype=onnxnn.float32, low=-1, high=1)
        tensor([0.7012, 0.2739, 0.0223])
        >>> make_tensor(2, 3, device="cpu", dtype=onnxnn.int64)
        tensor([[-4, -4, -9],
                [-8, -9, -6]])
    """
    first = shape[0] if len(shape) == 1 else None
    sizes: tuple = tuple(first) if isinstance(first, collections.abc.Sequence) else tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(
            "The parameters `noncontiguous` and `memory_format` are mutually exclusive, "
            f"but got noncontiguous={noncontiguous} and memory_format={memory_format}"
        )
    if requires_grad and dtype not in _FLOATING:
        raise ValueError(
            f"`requires_grad=True` is not supported for boolean and integral dtypes, but got dtype={dtype}"
        )
    noncontiguous = noncontiguous and math.prod(sizes) > 1
    if noncontiguous:
        sizes = (*sizes[:-1], 2 * sizes[-1])  # every other element is kept below
    if dtype is _dtypes.bool:
        bounds = _bounds(dtype, low, high, 0, 2, 0, 2)
        result = randint(bounds[0], bounds[1], sizes, dtype=dtype, device=device)
    elif dtype in _INTEGRAL:
        info = np.iinfo(dtype.numpy_dtype)
        # randint draws int64s: int64's greatest value itself cannot be reached (PyTorch's limit too).
        highest = int(info.max) + (1 if dtype is not _dtypes.int64 else 0)
        bounds = _bounds(dtype, low, high, int(info.min), highest, -9, 10)
        result = randint(bounds[0], bounds[1], sizes, dtype=dtype, device=device)
    elif dtype in _FLOATING:
        info = _finfo(dtype)
        bounds = _bounds(dtype, low, high, float(info.min), float(info.max), -9, 9)
        result = empty(sizes, dtype=dtype, device=device)
        if bounds[1] - bounds[0] >= float(info.max):
            # The range's width overflows the dtype: draw from the half range and double.
            result = result.uniform_(bounds[0] / 2, bounds[1] / 2) * 2
        else:
            result = result.uniform_(bounds[0], bounds[1])
        if bounds[0] != bounds[1]:
            result = result.clamp(*_representable(dtype, *bounds))
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by onnxnn.testing.make_tensor().")
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        replacement = 1 if dtype not in _FLOATING else float(_finfo(dtype).tiny)
        result = result.masked_fill(result == 0, replacement)
    if dtype in _FLOATING:
        result.requires_grad_(requires_grad)
    return result
