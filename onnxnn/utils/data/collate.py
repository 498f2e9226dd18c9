"""Merging samples into batches, as ``torch.utils.data.default_collate`` and ``default_convert``.

Batches of tensors and arrays are stacked in numpy and become one tensor: a batch is data read
from a dataset, not part of a recorded computation, so stacking it as N lazy tensors would only
record a Concat for onnxruntime to run. Tensors that require grad are the exception: they are
stacked as a recorded op, so that the batch keeps their gradient's path (as PyTorch's torch.stack).
Mixed dtypes stack in PyTorch's promoted dtype, not numpy's (int32 with float32 is float32).
"""

from __future__ import annotations

import collections.abc
import copy
import functools
from typing import Any

import numpy as np

from ...ir import dtypes
from ...runtime.creation import from_numpy, tensor
from ...runtime.ops.shape import stack
from ...runtime.internal import constant_tensor
from ...runtime.tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_UNSUPPORTED = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def _type_name(value) -> str:
    """``float`` for a builtin, ``numpy.ndarray`` for others: how PyTorch's errors name a type."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _is_text_or_object(array: np.ndarray) -> bool:
    return array.dtype.kind in "OSUV"


def _stack(arrays: list[np.ndarray]) -> Tensor:
    first = arrays[0].shape
    for index, array in enumerate(arrays[1:], start=1):
        if array.shape != first:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                f"and {list(array.shape)} at entry {index}"
            )
    stacked = np.stack(arrays)  # a new array, which nothing else writes: held without a copy
    return constant_tensor(stacked, dtypes.as_dtype(stacked.dtype))


def _array_dtype(item, array: np.ndarray) -> dtypes.dtype:
    """The dtype ``item`` stacks as in a batch of numpy items.

    A Python number among them gets the dtype PyTorch's ``as_tensor`` gives it, not numpy's: a
    float is float32 (the default dtype), so ``[np.float32(1.5), 2.5]`` stacks as float32.
    """
    if not isinstance(item, (np.ndarray, np.generic)):  # np.float64 is a float: numpy's own go below
        if isinstance(item, bool):
            return dtypes.bool
        if isinstance(item, int):
            return dtypes.int64
        if isinstance(item, float):
            return dtypes.float32
    return dtypes.as_dtype(array.dtype)


def _rebuild(template, items):
    """``items`` in ``template``'s container type when it can be built from them, else as given.

    A mutable mapping is a copy of ``template`` updated with them, as PyTorch's: a ``defaultdict``
    keeps its default factory, which a rebuild from the items alone would drop."""
    if isinstance(template, collections.abc.MutableMapping):
        clone = copy.copy(template)
        clone.update(items)
        return clone
    try:
        return type(template)(items)
    except TypeError:
        return items


def default_collate(batch: list | tuple) -> Any:
    """Merges a list of samples into a batch, adding a leading batch dimension.

    Tensors, numpy arrays and numpy scalars are stacked into one tensor; Python floats become a
    float64 tensor, ints an int64 tensor, bools a bool tensor; strings and bytes stay as the batch
    holds them (a list; a tuple for a field of tuple samples); mappings, namedtuples and sequences
    are collated field by field (a tuple gives a list, as in PyTorch).

    Args:
        batch: the samples, as a dataset returns them.

    Returns:
        The batch, in the samples' structure.

    Raises:
        RuntimeError: tensors of different shapes, or sequences of different lengths.
        TypeError: an element of another type.

    Example::

        >>> batch = default_collate([(onnxnn.zeros(3), 0), (onnxnn.ones(3), 1)])
        >>> batch[0].shape, batch[1].dtype
        (onnxnn.Size([2, 3]), onnxnn.int64)
    """
    element = batch[0]
    if isinstance(element, Tensor):
        for index, item in enumerate(batch):
            if not isinstance(item, Tensor):  # PyTorch's torch.stack error, before any dtype is read
                raise TypeError(f"expected Tensor as element {index} in argument 0, but got {_type_name(item)}")
        # One dtype by PyTorch's promotion (int32 and float32 stack as float32, numpy's would be float64).
        target = functools.reduce(dtypes.promote_types, (item.dtype for item in batch))
        if any(item.requires_grad for item in batch):  # a recorded stack, which keeps the gradient's path
            return stack([item.to(target) for item in batch])
        return _stack([np.asarray(item.numpy(force=True)).astype(target.numpy_dtype, copy=False) for item in batch])
    if isinstance(element, (np.ndarray, np.generic)) and not isinstance(element, (np.str_, np.bytes_)):
        arrays = [np.asarray(item) for item in batch]
        if _is_text_or_object(arrays[0]):
            raise TypeError(_UNSUPPORTED.format(arrays[0].dtype))
        target = functools.reduce(dtypes.promote_types, map(_array_dtype, batch, arrays))
        return _stack([array.astype(target.numpy_dtype, copy=False) for array in arrays])
    if isinstance(element, int):  # bools too: PyTorch's tensor(batch) infers the dtype from all of them
        return tensor(batch)
    if isinstance(element, float):
        return tensor(batch, dtype=dtypes.float64)
    if isinstance(element, (str, bytes)):
        return batch
    if isinstance(element, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in element}
        return _rebuild(element, collated)
    # Fields are collated from zip's tuples, as PyTorch's: a field of strings stays a tuple.
    if _is_namedtuple(element):
        return type(element)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(element, collections.abc.Sequence):
        size = len(element)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(samples) for samples in zip(*batch)]
        if isinstance(element, tuple):
            return fields
        return _rebuild(element, fields)
    raise TypeError(_UNSUPPORTED.format(type(element)))


def default_convert(data: Any) -> Any:
    """Turns numpy arrays (and numpy scalars) in ``data`` into tensors, keeping its structure: the
    conversion a ``DataLoader`` without automatic batching (``batch_size=None``) applies."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        array = np.asarray(data)
        return data if _is_text_or_object(array) else from_numpy(np.asarray(array, order="C"))
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return _rebuild(data, {key: default_convert(value) for key, value in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(item) for item in data))
    if isinstance(data, tuple):
        return [default_convert(item) for item in data]
    if isinstance(data, collections.abc.Sequence):
        return _rebuild(data, [default_convert(item) for item in data])
    return data
