"""Random tensor constructors: randn, rand, randint, randperm, normal and their *_like.

Draws come from onnxnn's seeded generators (``ir/random.py``); shapes, dtypes and devices are read
as the other constructors read them (``creation.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtypes
from ..ir import random as _random
from . import ops as _ops  # circular (the op families build tensors here): read at call time
from . import tensor as _tensor  # circular (Tensor methods build tensors here): read at call time
from .creation import _float_dtype, _like, _make, _shape, dtype_argument

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["randn", "rand", "randint", "randperm", "normal", "randn_like", "rand_like", "randint_like"]


def _random_size(positional: tuple, size, function: str) -> tuple:
    """The shape given to ``randn``/``rand`` as varargs, a sequence, or the keyword ``size`` (not both)."""
    if size is None:
        return _shape(positional)
    if positional:
        raise TypeError(f"{function}() received an invalid combination of arguments: size given twice")
    return _shape((size,))


def randn(*sizes, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Samples of the standard normal distribution, from onnxnn's seeded generator."""
    target = _float_dtype(dtype, "randn")
    shape = _random_size(sizes, size, "randn")
    return _make(_random.normal(shape, target.numpy_dtype, generator=generator), target, device, requires_grad)


def rand(*sizes, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Samples of the uniform distribution on [0, 1)."""
    target = _float_dtype(dtype, "rand")
    shape = _random_size(sizes, size, "rand")
    return _make(_random.uniform(shape, target.numpy_dtype, generator=generator), target, device, requires_grad)


def randint(
    low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Random integers in [low, high); ``randint(high, size)`` starts at 0."""
    if size is None:
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    target = dtypes.int64 if dtype is None else dtype_argument(dtype, "randint")
    return _make(
        _random.integers(low, high, _shape((size,)), target.numpy_dtype, generator), target, device, requires_grad
    )


# The largest n whose permutation a float dtype holds exactly (ATen's check_supported_max_int_with_precision).
_RANDPERM_LIMITS = {
    "float16": (2**11 + 1, "2049 for Half"),
    "float32": (2**24 + 1, "2^24+1 for Float"),
    "float64": (2**53 + 1, "2^53+1 for Double"),
}
# C's names of the integer types in ATen's "value cannot be converted" message.
_C_INTEGER_NAMES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int"}


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1``, with PyTorch's errors for an ``n`` the dtype cannot hold."""
    if isinstance(n, bool) or not hasattr(type(n), "__index__"):
        raise TypeError(f"randperm(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    n = int(n)
    target = dtypes.int64 if dtype is None else dtype_argument(dtype, "randperm")
    _shape((n,))  # a negative n: PyTorch's "negative dimension" error
    if target is dtypes.bool:
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if target.name in _C_INTEGER_NAMES and n - 1 > np.iinfo(target.numpy_dtype).max:
        raise RuntimeError(f"value cannot be converted to type {_C_INTEGER_NAMES[target.name]} without overflow")
    limit, words = _RANDPERM_LIMITS.get(target.name, (n, ""))
    if n > limit:
        raise RuntimeError(f"n cannot be greater than {words} type.")
    return _make(_random.permutation(n, generator).astype(target.numpy_dtype), target, device, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None) -> Tensor:
    """Samples of N(mean, std^2): numbers and a ``size``, or a tensor mean and/or std (broadcast)."""
    if isinstance(mean, _tensor.Tensor) or isinstance(std, _tensor.Tensor):
        return _ops.random_samplers.normal_of_tensors(mean, std, generator)
    _random.check_standard_deviation(std)
    target = _float_dtype(dtype, "normal")
    return _make(_random.normal(_shape((size,)), target.numpy_dtype, mean, std, generator), target, device, False)


def randn_like(
    input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False, memory_format=None
) -> Tensor:
    target, where = _like(input, dtype, device, "randn_like")
    return randn(input.shape, generator=generator, dtype=target, device=where, requires_grad=requires_grad)


def rand_like(
    input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False, memory_format=None
) -> Tensor:
    target, where = _like(input, dtype, device, "rand_like")
    return rand(input.shape, generator=generator, dtype=target, device=where, requires_grad=requires_grad)


def randint_like(
    input: Tensor,
    low=None,
    high=None,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    memory_format=None,
) -> Tensor:
    """``randint`` at ``input``'s shape: ``(input, high)``, ``(input, low, high)`` or ``(input, high=h)``."""
    if high is None:
        if low is None:
            raise TypeError("randint_like() missing required argument 'high'")
        low, high = 0, low
    elif low is None:
        low = 0
    target, where = _like(input, dtype, device, "randint_like")
    return randint(low, high, input.shape, generator=generator, dtype=target, device=where, requires_grad=requires_grad)
