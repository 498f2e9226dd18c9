"""How a key indexes a tensor: ``IndexPlan``, the plan ``tensor[key]`` and ``tensor[key] = value`` apply.

A key (ints, slices, None, ``...``, bools, masks, index tensors, or a short list of them, as in
PyTorch) is classified item by item, then planned against the tensor's shape: one Slice with
static bounds, one Reshape (dropping the int dims, adding new axes), then the advanced indices
with one Gather or GatherND. ``indexing.py`` applies the plan for reading and writing.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...ir import dtypes
from ..internal import check_known_data
from ._common import Tensor, apply_op, broadcast_shapes, int64_constant

__all__ = ["IndexPlan", "as_int64", "check_in_bounds", "check_index_dtype", "first_outside", "sequence_as_tuple"]

_INDEX_TYPE_MESSAGE = "tensors used as indices must be long, int, byte or bool tensors"
# PyTorch's index tensor dtypes (uint8 is a deprecated mask): int8, int16 and the wider unsigned are refused.
_INDEX_DTYPES = (dtypes.int64, dtypes.int32, dtypes.uint8, dtypes.bool)


def check_index_dtype(index: Tensor) -> None:
    """Refuses an index tensor of a dtype PyTorch does not index with (IndexError, its words)."""
    if index.dtype not in _INDEX_DTYPES:
        raise IndexError(_INDEX_TYPE_MESSAGE)


def as_int64(indices: Tensor) -> Tensor:
    """``indices`` as int64 (a Cast node only where they are not)."""
    return indices if indices.dtype is dtypes.int64 else indices.to(dtypes.int64)


def first_outside(data: np.ndarray, low: int, high: int) -> int | None:
    """The first of ``data``'s values outside ``[low, high)``, or None."""
    outside = (data < low) | (data >= high)
    return int(data[outside].flat[0]) if outside.any() else None


def check_in_bounds(
    data: np.ndarray,
    size: int,
    dim: int,
    *,
    negative: bool = True,
    error: type[Exception] = IndexError,
    function: str = "",
) -> None:
    """PyTorch's bounds check of index values: each in ``[-size, size)``, or ``[0, size)`` without
    ``negative``. Raises ``error`` naming the first value outside, its message prefixed with
    ``function`` where PyTorch names it."""
    outside = first_outside(data, -size if negative else 0, size)
    if outside is not None:
        prefix = f"{function}(): " if function else ""
        raise error(f"{prefix}index {outside} is out of bounds for dimension {dim} with size {size}")


def sequence_as_tuple(key) -> bool:
    """PyTorch's (and old numpy's) rule: a short list holding slices, None, ... or sequences is a tuple."""
    if not isinstance(key, list) or len(key) >= 32:
        return False
    return any(item is None or item is Ellipsis or isinstance(item, (slice, list, tuple, Tensor)) for item in key)


def _array_item(array: np.ndarray):
    """A numpy index as ("mask", bool array), ("index", int64 array), ("bool", flag) or ("int", value)."""
    if array.dtype == np.bool_ or array.dtype == np.uint8:
        array = array.astype(np.bool_)
        return ("bool", bool(array)) if array.ndim == 0 else ("mask", array)
    if array.dtype.kind not in "iu":
        raise IndexError(_INDEX_TYPE_MESSAGE)
    return ("int", int(array)) if array.ndim == 0 else ("index", array.astype(np.int64))


def _classify(item):
    """One key item in canonical form: (kind, payload)."""
    if item is None:
        return ("new", None)
    if item is Ellipsis:
        return ("ellipsis", None)
    if isinstance(item, (bool, np.bool_)):
        return ("bool", bool(item))
    if isinstance(item, (int, np.integer)):
        return ("int", int(item))
    if isinstance(item, slice):
        return ("slice", item)
    if isinstance(item, (str, bytes)):  # PyTorch makes a tensor of a sequence, and refuses this type
        raise TypeError(f"new(): invalid data type '{type(item).__name__}'")
    if isinstance(item, Tensor):
        check_index_dtype(item)
        category = item.dtype.category
        if item.dim() == 0 or category == 0 or item.dtype is dtypes.uint8:
            # Masks need their data to know the result's shape; 0-d indices select, as PyTorch's item().
            return _array_item(item._realized_data())
        if item._value.data is not None and item.dtype is not dtypes.int64:
            return _array_item(item._realized_data())
        # An int64 index, even one already computed (Swin's relative_position_index buffer), enters
        # the graph as a tensor: a forward replay gathers it where the forward found it, and its data
        # is never copied from a GPU. A computed one is checked as its array would be (``_index``).
        return ("index", as_int64(item))
    if isinstance(item, np.ndarray):
        return _array_item(item)
    if isinstance(item, (list, tuple)):
        array = np.asarray(item)
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype.kind in "US":
            raise TypeError(f"new(): invalid data type '{'str' if array.dtype.kind == 'U' else 'bytes'}'")
        return _array_item(array)
    raise IndexError(
        "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
        f"indices (got {type(item).__name__})"
    )


def _key_items(key) -> list:
    if isinstance(key, tuple):
        items = key
    elif sequence_as_tuple(key):
        items = tuple(key)
    else:
        items = (key,)
    return [_classify(item) for item in items]


class IndexPlan:
    """How a key indexes a tensor of a given shape: Slice bounds, a Reshape, then advanced indices.

    ``advanced`` holds (dimension of the basic result, index) pairs in increasing dimension order;
    an index is an int64 numpy array of non-negative positions or a pending int64 Tensor.
    """

    __slots__ = (
        "shape",
        "starts",
        "ends",
        "steps",
        "basic_shape",
        "advanced",
        "has_select",
        "tensor_indexed",
        "single_mask",
    )

    def __init__(self, shape: tuple, key):
        self.shape = shape
        rank = len(shape)
        self.starts, self.ends, self.steps = [0] * rank, list(shape), [1] * rank
        self.basic_shape: list[int] = []
        self.advanced: list[tuple[int, Any]] = []  # (position, index tensor or integer array)
        self.has_select = False
        items = _key_items(key)
        kinds = [kind for kind, _ in items]
        # Whether the key holds index or mask tensors (a Python bool is no index tensor), and whether
        # one mask is the only one: PyTorch assigns a one-element value through that as masked_fill does.
        self.tensor_indexed = "index" in kinds or "mask" in kinds
        self.single_mask = kinds.count("mask") == 1 and "index" not in kinds
        ellipses = kinds.count("ellipsis")
        if ellipses > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        # Dimensions of the input the key uses: None, bools and the ellipsis use none.
        used = sum(payload.ndim if kind == "mask" else kind in ("int", "slice", "index") for kind, payload in items)
        if used > rank:
            raise IndexError(f"too many indices for tensor of dimension {rank}")
        if not ellipses:
            items.append(("ellipsis", None))
        dim = 0
        for kind, payload in items:
            if kind == "ellipsis":
                for _ in range(rank - used):
                    self.basic_shape.append(shape[dim])
                    dim += 1
            elif kind == "new":
                self.basic_shape.append(1)
            elif kind == "bool":
                # A Python bool adds an axis of size 1 indexed by [0] (True) or by nothing (False).
                self.advanced.append((len(self.basic_shape), np.zeros(int(payload), np.int64)))
                self.basic_shape.append(1)
            elif kind == "int":
                self._select(dim, payload)
                dim += 1
            elif kind == "slice":
                self._slice(dim, payload)
                dim += 1
            elif kind == "mask":
                self._mask(dim, payload)
                dim += payload.ndim
            else:
                self._index(dim, payload)
                dim += 1
        if len(self.advanced) > 1:
            self.index_shape()  # broadcast errors now, before anything is recorded or assigned

    def _select(self, dim: int, index: int) -> None:
        size = self.shape[dim]
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of bounds for dimension {len(self.basic_shape)} with size {size}")
        index %= size
        self.starts[dim], self.ends[dim] = index, index + 1
        self.has_select = True

    def _slice(self, dim: int, item: slice) -> None:
        if item.step is not None and int(item.step) <= 0:
            raise ValueError("step must be greater than zero")
        start, stop, step = item.indices(self.shape[dim])
        count = len(range(start, stop, step))
        self.starts[dim], self.ends[dim], self.steps[dim] = start, max(start, stop), step
        self.basic_shape.append(count)

    def _mask(self, dim: int, mask: np.ndarray) -> None:
        for offset, size in enumerate(mask.shape):
            if size != self.shape[dim + offset]:
                raise IndexError(
                    f"The shape of the mask {list(mask.shape)} at index {offset} does not match the "
                    f"shape of the indexed tensor {list(self.shape)} at index {dim + offset}"
                )
        for offset, positions in enumerate(np.nonzero(mask)):
            self.advanced.append((len(self.basic_shape), positions.astype(np.int64)))
            self.basic_shape.append(self.shape[dim + offset])

    def _index(self, dim: int, index) -> None:
        size = self.shape[dim]
        in_bounds = functools.partial(check_in_bounds, size=size, dim=len(self.basic_shape))
        if isinstance(index, np.ndarray):
            in_bounds(index)
            index = index % max(size, 1)
        elif index._value.data is not None:
            check_known_data(index, in_bounds)  # at each replay of a traced forward too
        self.advanced.append((len(self.basic_shape), index))
        self.basic_shape.append(size)

    @property
    def lazy(self) -> bool:
        """Whether an advanced index is still a pending tensor (its values unknown at record time)."""
        return any(isinstance(index, Tensor) for _, index in self.advanced)

    def index_shape(self) -> tuple:
        """The broadcast shape of the advanced indices (IndexError when they do not broadcast)."""
        shapes = [tuple(index.shape) for _, index in self.advanced]
        try:
            return broadcast_shapes(*shapes)
        except RuntimeError:
            raise IndexError(
                "shape mismatch: indexing tensors could not be broadcast together with shapes "
                + ", ".join(str(list(shape)) for shape in shapes)
            ) from None

    # ------------------------------------------------------------ applying the plan

    def apply_numpy(self, array: np.ndarray) -> np.ndarray:
        """The plan on a numpy array (every advanced index must be known)."""
        basic = array[tuple(slice(start, end, step) for start, end, step in zip(self.starts, self.ends, self.steps))]
        result = basic.reshape(self.basic_shape)
        if not self.advanced:
            return result
        key = [slice(None)] * len(self.basic_shape)
        for position, index in self.advanced:
            key[position] = index
        # Without ints among them, numpy's rule for where advanced dims go is PyTorch's.
        return result[tuple(key)]

    def apply(self, input: Tensor) -> Tensor:
        """The plan as ONNX nodes over ``input``."""
        result = self._apply_basic(input)
        if not self.advanced:
            if result is input:  # `x[...]`, `x[:]`: a new tensor all the same, as PyTorch's alias
                result = apply_op("Identity", (input,), None, "AliasBackward0")
            return result
        if len(self.advanced) == 1:
            position, index = self.advanced[0]
            return apply_op("Gather", (result, self._index_tensor(index, input)), {"axis": position}, "IndexBackward0")
        return self._apply_gather_nd(result, input)

    def _apply_basic(self, input: Tensor) -> Tensor:
        result = input
        axes = [
            dim
            for dim, size in enumerate(self.shape)
            if (self.starts[dim], self.ends[dim], self.steps[dim]) != (0, size, 1)
        ]
        if axes:
            bounds = [int64_constant([values[dim] for dim in axes]) for values in (self.starts, self.ends)]
            steps = int64_constant([self.steps[dim] for dim in axes])
            result = apply_op("Slice", (result, *bounds, int64_constant(axes), steps), None, "SliceBackward0")
        if tuple(self.basic_shape) != result.shape:
            name = "SelectBackward0" if self.has_select else "UnsqueezeBackward0"
            result = apply_op("Reshape", (result, int64_constant(self.basic_shape)), {"allowzero": 1}, name)
        return result

    @staticmethod
    def _index_tensor(index, like: Tensor) -> Tensor:
        if isinstance(index, Tensor):
            return index
        return Tensor._from_array(index, dtypes.int64, like.device)

    def _apply_gather_nd(self, result: Tensor, input: Tensor) -> Tensor:
        shape = self.index_shape()
        if self.lazy:
            columns = [self._index_tensor(index, input).expand(shape).unsqueeze(-1) for _, index in self.advanced]
            stacked = apply_op("Concat", tuple(columns), {"axis": -1})
        else:
            arrays = np.broadcast_arrays(*(index for _, index in self.advanced))
            stacked = Tensor._from_array(np.stack(arrays, axis=-1), dtypes.int64, input.device)
        positions = [position for position, _ in self.advanced]
        others = [dim for dim in range(len(self.basic_shape)) if dim not in positions]
        if positions + others != list(range(len(self.basic_shape))):
            result = apply_op("Transpose", (result,), {"perm": positions + others}, "PermuteBackward0")
        result = apply_op("GatherND", (result, stacked), None, "IndexBackward0")
        first = positions[0]
        if first and positions == list(range(first, first + len(positions))):
            # Adjacent advanced indices keep their place: move the index dims back behind `first` dims.
            count = len(shape)
            perm = list(range(count, count + first)) + list(range(count)) + list(range(count + first, result.dim()))
            result = apply_op("Transpose", (result,), {"perm": perm}, "IndexBackward0")
        return result
