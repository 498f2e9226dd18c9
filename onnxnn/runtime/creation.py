"""Tensor constructors: tensor, as_tensor, from_numpy, zeros, ones, full, arange, linspace, ... and *_like.

The random ones (randn, rand, randint, ...) are in ``random_creation.py``.
"""

from __future__ import annotations

import builtins
import math
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from ..ir import dtypes
from ..ir.device import CPU, as_device, default_device, require_usable
from ..ir.graph import constant
from ..ir.evenly_spaced import fused_multiply_add, linspace_edges
from .view_positions import is_integer_scalar
from . import tensor as _tensor  # circular (Tensor methods build tensors here): read at call time

if TYPE_CHECKING:
    from ..ir.device import device as _Device  # aliased: parameters here are named device
    from .tensor import Tensor

__all__ = [
    "tensor",
    "as_tensor",
    "asarray",
    "empty_permuted",
    "from_numpy",
    "zeros",
    "ones",
    "empty",
    "full",
    "arange",
    "linspace",
    "eye",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "scalar_tensor",
]


def _device(device) -> _Device:
    if device is None:
        return default_device()
    target = as_device(device)
    require_usable(target)
    return target


def _shape(size) -> tuple:
    if len(size) == 1:
        if type(size[0]) is int and size[0] >= 0:
            return size  # randn(4): already a tuple of one non-negative int
        if isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
    elif not size:
        raise TypeError('missing 1 required positional arguments: "size"')  # zeros(): () is zeros(())
    shape = tuple(map(_size_entry, size))
    if shape and min(shape) < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    return shape


def _size_entry(entry) -> int:
    """One entry of a size, as PyTorch takes it: an int (numpy's, or a one-element integer tensor's),
    never a float or a bool (``zeros(2.0)`` raises rather than truncating)."""
    if is_integer_scalar(entry):
        return int(entry)
    if isinstance(entry, _tensor.Tensor) and entry.numel() == 1 and entry.dtype.category == 1:
        return int(entry.item())
    raise TypeError(f"argument 'size' (position 1) must be tuple of ints, not {type(entry).__name__}")


def _make(array: np.ndarray, dtype, device, requires_grad: bool) -> Tensor:
    value_dtype = dtypes.as_dtype(array.dtype) if dtype is None else dtype
    if array.dtype != value_dtype.numpy_dtype or not array.flags.c_contiguous:
        array = np.asarray(array, dtype=value_dtype.numpy_dtype, order="C")
    result = _tensor.Tensor._from_value(constant(array, value_dtype, _device(device)))
    if requires_grad:
        result.requires_grad_(True)
    return result


def _infer_array(data) -> tuple[np.ndarray, dtypes.dtype]:
    """numpy form of Python data plus the dtype PyTorch would give it (floats are the default dtype)."""
    if isinstance(data, _tensor.Tensor):
        return np.array(data._realized_data()), data.dtype
    if isinstance(data, np.ndarray):
        return data, dtypes.as_dtype(data.dtype)
    inferred = _leaves_dtype([data])
    if isinstance(data, (list, tuple)):
        data = [_nested(item) for item in data]
    try:
        array = np.array(data)
    except OverflowError:  # an int past uint64's range
        raise ValueError("Overflow when unpacking long long") from None
    if inferred is dtypes.int64 and (array.dtype in (np.uint64, np.dtype(object)) or array.dtype.kind == "f"):
        # PyTorch reads Python ints as int64; numpy holds ints past its range as uint64, objects, or
        # (int64's and uint64's beside each other) float64, which would wrap when cast back.
        raise ValueError("Overflow when unpacking long long")
    if array.dtype == object:
        raise TypeError(f"could not convert data of type {type(data).__name__} to a tensor (ragged nested sequence?)")
    if inferred is not None:
        return array, inferred
    if array.dtype.kind == "f":  # no leaves (an empty list): the default dtype, as PyTorch's
        return array, dtypes.get_default_dtype()
    return array, dtypes.as_dtype(array.dtype)


def _leaves_dtype(items) -> dtypes.dtype | None:
    """PyTorch's dtype for the leaves of ``items`` (nested lists and tuples), promoted together: a
    Python float is the default dtype, an int int64, a bool bool, and a numpy scalar, numpy array
    or tensor keeps its own dtype (``tensor([np.float64(1), 2.5])`` is float64). None for leaves
    of other kinds (numpy decides)."""
    result = None
    for kind in set(map(type, items)):  # per type, not per item: a long list of floats is one step
        if kind is float:
            found = dtypes.get_default_dtype()
        elif kind is int:
            found = dtypes.int64
        elif kind is bool:
            found = dtypes.bool
        elif kind is list or kind is tuple:
            found = None
            for item in items:
                if type(item) is kind:
                    inner = _leaves_dtype(item)
                    if inner is None:
                        return None
                    found = inner if found is None else dtypes.promote_types(found, inner)
            if found is None:  # only empty sequences
                continue
        elif issubclass(kind, np.generic):
            found = dtypes.as_dtype(np.dtype(kind))
        elif issubclass(kind, (np.ndarray, _tensor.Tensor)):
            found = None
            for item in items:
                if type(item) is kind:
                    own = dtypes.as_dtype(item.dtype)
                    found = own if found is None else dtypes.promote_types(found, own)
        else:
            return None
        if found is not None:
            result = found if result is None else dtypes.promote_types(result, found)
    return result


def _nested(item):
    if isinstance(item, _tensor.Tensor):  # a tensor in a sequence is one number, as PyTorch reads it
        data = item._realized_data()
        if data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return data.reshape(())
    if isinstance(item, (list, tuple)):
        return [_nested(inner) for inner in item]
    return item


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Constructs a tensor by copying ``data`` (a number, nested sequence, numpy array or tensor).

    Example::

        >>> onnxnn.tensor([[1, 2], [3, 4]], dtype=onnxnn.float32)
        tensor([[1., 2.],
                [3., 4.]])
    """
    array, inferred = _infer_array(data)
    target = inferred if dtype is None else dtype_argument(dtype, "tensor")
    if not isinstance(data, (np.ndarray, _tensor.Tensor)):
        check_fits(array, target)
    with np.errstate(over="ignore"):  # past a float dtype's range is inf, as PyTorch's tensor() makes it
        copied = np.array(array, dtype=target.numpy_dtype, copy=True)
    return _make(copied, target, device, requires_grad)


def check_fits(values: np.ndarray, target: dtypes.dtype, floating: bool = False) -> None:
    """Raises PyTorch's overflow error where Python numbers do not fit ``target`` (c10's
    ``checked_convert``): a float outside an integer dtype's range (or not finite), an integer
    outside it, where unsigned dtypes take negatives down to minus their maximum (they wrap:
    ``uint8`` -1 is 255); with ``floating``, a finite number beyond a float dtype's largest (``full``
    checks that; ``tensor`` makes it inf)."""
    if target is dtypes.bool or not values.size or values.dtype.kind not in "fiu":
        return
    if target.is_floating_point:
        if floating:
            largest = float(ml_dtypes.finfo(target.numpy_dtype).max)  # numpy's finfo has no bfloat16
            outside = np.isfinite(values) & (np.abs(values) > largest)
            if outside.any():
                raise RuntimeError(f"value cannot be converted to type {target.name} without overflow")
        return
    limits = np.iinfo(target.numpy_dtype)
    if values.dtype.kind == "f":
        outside = ~np.isfinite(values) | (values < limits.min) | (values > limits.max)
    elif limits.min == 0:
        outside = (values > limits.max) | (values < -int(limits.max))
    else:
        outside = (values < limits.min) | (values > limits.max)
    if outside.any():
        raise RuntimeError(f"value cannot be converted to type {target.name} without overflow")


_FLOAT32_LARGEST = float(np.finfo(np.float32).max)


def check_number_fits(number, target: dtypes.dtype, floating: bool = False) -> None:
    """``check_fits`` for one Python number; ``floating`` checks float dtypes too. The common float32
    and float64 cases return at once (fills, bounds and setitem values are on hot paths)."""
    if target is dtypes.float64 or (target is dtypes.float32 and builtins.abs(number) <= _FLOAT32_LARGEST):
        return
    if not floating and target.is_floating_point:
        return
    check_fits(np.array(number), target, floating=floating)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Converts ``data`` to a tensor, sharing it when it already is one of the right dtype and device."""
    if dtype is not None:
        dtype = dtype_argument(dtype, "as_tensor")
    if isinstance(data, _tensor.Tensor):
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and dtype is None:
        return from_numpy(data).to(_device(device))
    return tensor(data, dtype=dtype, device=device)


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool = False) -> Tensor:
    """Converts ``obj`` (a tensor, numpy array, number or nested sequence) to a tensor.

    A tensor or array of the right dtype and device is shared unless ``copy=True``; ``copy=False``
    refuses a conversion that would have to copy, as PyTorch does. ``requires_grad`` makes the result a
    leaf that requires gradient.
    """
    if isinstance(obj, _tensor.Tensor):
        target = obj.dtype if dtype is None else dtype_argument(dtype, "asarray")
        if copy is False and target != obj.dtype:
            raise ValueError("can't alias tensor from object of type Tensor: a copy is needed to change its dtype")
        result = obj.to(dtype=target, device=device)
        result = result.clone() if copy and result is obj else result
    elif isinstance(obj, np.ndarray) and dtype is None and not copy:
        result = from_numpy(obj).to(_device(device))
    else:
        if copy is False and not isinstance(obj, np.ndarray):
            raise ValueError(f"can't alias tensor from object of type {type(obj).__name__}: it is not a buffer")
        result = tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        result = result.detach().requires_grad_(True)
    return result


def empty_permuted(
    size,
    physical_layout,
    *,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """:func:`empty` of ``size``; ``physical_layout`` (a permutation of the dims) only orders memory in
    PyTorch, and onnxnn values have no memory order, so it is checked and otherwise ignored."""
    size, layout_dims = _shape((size,)), list(physical_layout)
    if len(layout_dims) != len(size):
        raise RuntimeError(
            f"Number of dimensions in size does not match the length of the physical_layout; "
            f"i.e. len(size) = {len(size)} is not equal to len(physical_layout) = {len(layout_dims)}"
        )
    seen = set()
    for axis in layout_dims:
        if not 0 <= axis < len(size):
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-len(size)}, {len(size) - 1}], but got {axis})"
            )
        if axis in seen:
            raise RuntimeError("Duplicate dim not allowed")
        seen.add(axis)
    return empty(size, dtype=dtype, device=device, requires_grad=requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor holding ``array``'s values.

    onnxnn's values are immutable and computed when first read, so a writable array is copied: a
    later write to it must not reach results still pending (``y = t * 2; array[0] = 100`` leaves
    ``y`` as it was, as PyTorch's eager ``y`` is). A read-only array (``array.setflags(write=False)``,
    or one numpy made from bytes) is shared without a copy.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    value_dtype = dtypes.as_dtype(array.dtype)
    data = np.asarray(array, order="C")
    if data.flags.writeable and np.may_share_memory(data, array):  # np.asarray did not copy it already
        data = data.copy()
    return _tensor.Tensor._from_value(constant(data, value_dtype, CPU))


def scalar_tensor(value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return full((), value, dtype=dtype or dtypes.get_default_dtype(), device=device, requires_grad=requires_grad)


def dtype_argument(dtype, function: str) -> dtypes.dtype:
    """A factory's ``dtype=`` as a dtype, refusing a number as PyTorch does (``zeros(2, dtype=5)``).

    ``dtypes.as_dtype`` reads an int as an ONNX element type (5 is int16) where PyTorch's ScalarType
    code 5 is float16: accepting it would silently give a script ported from torch another dtype.
    """
    if isinstance(dtype, (int, np.integer)):  # bools too: dtype=True is no type either
        raise TypeError(f"{function}(): argument 'dtype' must be onnxnn.dtype, not {type(dtype).__name__}")
    return dtypes.as_dtype(dtype)


def _float_dtype(dtype, function: str):
    return dtypes.get_default_dtype() if dtype is None else dtype_argument(dtype, function)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    target = _float_dtype(dtype, "zeros")
    return _make(np.zeros(_shape(size), target.numpy_dtype), target, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    target = _float_dtype(dtype, "ones")
    return _make(np.ones(_shape(size), target.numpy_dtype), target, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    # Values are immutable handles, so "uninitialized" memory is simply zeros.
    if dtype is not None:
        dtype = dtype_argument(dtype, "empty")
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if not isinstance(size, (tuple, list)):  # unlike zeros(*size), full takes one sequence: full(3, 1.0) raises
        raise TypeError(f"full(): argument 'size' (position 1) must be tuple of ints, not {type(size).__name__}")
    if isinstance(fill_value, _tensor.Tensor):  # a one-element tensor fills with its value, as a number
        fill_value = fill_value.item()
    target = dtypes.result_type([], [fill_value]) if dtype is None else dtype_argument(dtype, "full")
    fill = converted_number(fill_value, target)
    return _make(np.full(_shape((size,)), fill, target.numpy_dtype), target, device, requires_grad)


def converted_number(value, target: dtypes.dtype):
    """A Python number as PyTorch converts it to fill a tensor of ``target`` (``full``, ``fill_``):
    checked against the range (``check_fits``), then truncated to an integer dtype, an unsigned
    one wrapping a negative integer (``uint8`` -1 is 255). An int stays a Python int (a zero fill
    keeps ``Tensor._full``'s calloc'd path)."""
    array = np.array(value)
    check_fits(array, target, floating=True)
    if type(value) is int and target.is_floating_point:
        return value
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(target.numpy_dtype)[()]
    return int(converted) if type(value) is int else converted


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; integer arguments give int64."""
    if end is None:
        start, end = 0, start
    numbers = [float(x) if isinstance(x, _tensor.Tensor) and x.is_floating_point() else x for x in (start, end, step)]
    numbers = [x.item() if isinstance(x, _tensor.Tensor) else x for x in numbers]
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(number) for number in numbers[:2]):
        raise RuntimeError(f"unsupported range: {numbers[0]} -> {numbers[1]}")
    if (numbers[1] - numbers[0]) * numbers[2] < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    target = dtype_argument(dtype, "arange") if dtype is not None else dtypes.result_type([], numbers)
    if not target.is_floating_point:
        # PyTorch converts the bounds and step to the integer type first (arange(0, 5, 2.5) in
        # int64 steps by 2: [0, 2, 4]; a step of 0.1 becomes 0).
        start, end, step = (int(x) for x in numbers)
        if step == 0:
            raise RuntimeError("step must be nonzero")
        return _make(np.arange(start, end, step).astype(target.numpy_dtype), target, device, requires_grad)
    count = builtins.max(0, math.ceil((numbers[1] - numbers[0]) / numbers[2]))
    values = numbers[0] + np.arange(count, dtype=np.float64) * numbers[2]
    return _make(values.astype(target.numpy_dtype), target, device, requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` values from ``start`` to ``end``, both included, rounded as PyTorch's CPU kernel rounds them."""
    target = _float_dtype(dtype, "linspace")
    _check_steps(steps)
    if target.is_floating_point:
        values = linspace_edges(float(start), float(end), steps, target.numpy_dtype)
    else:
        values = _evenly_spaced(start, end, steps, target).astype(target.numpy_dtype)
    return _make(values, target, device, requires_grad)


def _evenly_spaced(start, end, steps: int, target: dtypes.dtype) -> np.ndarray:
    """``steps`` float64 values from ``start`` to ``end`` for an integer or bool ``target``. PyTorch computes
    in that dtype: the ends are converted to it first, the values (in double, from the nearer end)
    truncated after."""
    if target is dtypes.bool:
        return np.linspace(start, end, steps, dtype=np.float64)
    start, end = int(start), int(end)
    if steps <= 1:
        return np.full(steps, start, np.float64)
    step = (float(end) - float(start)) / (steps - 1)
    positions = np.arange(steps, dtype=np.float64)
    halfway = steps // 2
    # PyTorch's vectorized build contracts each value to one fused multiply-add: an exact integer
    # position's value may sit an ulp below it, which truncation then keeps one lower.
    return np.concatenate(
        [
            fused_multiply_add(step, positions[:halfway], float(start), np.float64),
            fused_multiply_add(-step, (steps - 1) - positions[halfway:], float(end), np.float64),
        ]
    )


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    target = _float_dtype(dtype, "eye")
    return _make(np.eye(n, m, dtype=target.numpy_dtype), target, device, requires_grad)


def _like(input: Tensor, dtype, device, function: str):
    target = input.dtype if dtype is None else dtype_argument(dtype, function)
    return target, (input.device if device is None else device)


def zeros_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    target, where = _like(input, dtype, device, "zeros_like")
    return zeros(input.shape, dtype=target, device=where, requires_grad=requires_grad)


def ones_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    target, where = _like(input, dtype, device, "ones_like")
    return ones(input.shape, dtype=target, device=where, requires_grad=requires_grad)


def empty_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    if dtype is not None:
        dtype = dtype_argument(dtype, "empty_like")
    return zeros_like(input, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(
    input: Tensor, fill_value, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None
) -> Tensor:
    target, where = _like(input, dtype, device, "full_like")
    return full(input.shape, fill_value, dtype=target, device=where, requires_grad=requires_grad)


def logspace(
    start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """``steps`` values ``base ** e`` for ``e`` evenly spaced from ``start`` to ``end``, rounded as PyTorch's
    CPU kernel rounds them: the ends in the dtype, the exponents and powers in double."""
    target = _float_dtype(dtype, "logspace")
    _check_steps(steps)
    if steps == 1:
        exponents = np.array([float(start)])
    else:
        kind = target.numpy_dtype.type
        first, last = (int(x) if not target.is_floating_point else kind(x) for x in (start, end))
        step = float(last - first) / (steps - 1)
        positions = np.arange(steps, dtype=np.float64)
        halfway = steps // 2
        exponents = np.concatenate(
            [float(first) + step * positions[:halfway], float(last) - step * (steps - 1 - positions[halfway:])]
        )
    powers = _library_powers(float(base), exponents)
    if target in (dtypes.float16, dtypes.bfloat16):
        powers = powers.astype(np.float32)  # PyTorch's half types are built from a float
    with np.errstate(over="ignore", invalid="ignore"):
        return _make(powers.astype(target.numpy_dtype), target, device, requires_grad)


def _check_steps(steps: int) -> None:
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")


def _library_powers(base: float, exponents: np.ndarray) -> np.ndarray:
    """``base ** exponents`` from the C library's ``pow``, as PyTorch's ``std::pow``: numpy's vectorized
    power can be an ulp away from it."""
    with np.errstate(over="ignore", invalid="ignore"):
        powers = np.power(base, exponents)
    finite = np.flatnonzero(np.isfinite(powers) & (powers != 0))
    for index in finite:
        try:
            powers[index] = math.pow(base, exponents[index])
        except OverflowError:
            powers[index] = math.inf
    return powers
