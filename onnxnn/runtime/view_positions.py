"""Which of a base's elements each element of a view is: the numpy twin of every view op.

``runtime/views.py`` links a view to its base by the op that made it. Each op's twin here, applied
to an array of the base's positions (``arange``), gives the view's positions, so a write through a
view lands on the right elements of its base, and the twin's strides tell whether the view is
contiguous. One entry per view op, by Tensor method name (``VIEW_OPS``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import dtypes

__all__ = ["VIEW_OPS", "is_integer_scalar", "is_integer_scalar_tensor"]


def _reshaped(indices, shape, *args, **kwargs):
    return indices.reshape(shape)


def _permuted(indices, shape, *dims, **named):
    if named:  # permute(dims=...)
        dims = (named["dims"],)
    return np.transpose(indices, tuple(dims[0]) if len(dims) == 1 and not isinstance(dims[0], int) else dims)


def _reversed(indices, shape):
    return indices.T


def _last_two_swapped(indices, shape):
    return np.swapaxes(indices, -2, -1)


def _swapped(indices, shape, *dims, **named_dims):
    # transpose(dim0, dim1), swapaxes(axis0, axis1), swapdims(dim0, dim1), by position or by name:
    # a swap is the same whichever dim comes first.
    dim0, dim1 = list(dims) + list(named_dims.values())
    return np.swapaxes(indices, dim0, dim1)


def _moved(indices, shape, source, destination):
    return np.moveaxis(indices, source, destination)


def _narrowed(indices, shape, dim, start, length):
    start = int(start) % indices.shape[dim] if indices.shape[dim] else 0
    return _along(indices, dim, slice(start, start + int(length)))


def _pieces(positions, shapes, *args, dim=0, **kwargs):
    """Consecutive pieces along ``dim`` (``split``, ``chunk``, ``tensor_split``, ``split_with_sizes``):
    read from the results' sizes. (Not named ``indices``: tensor_split takes an ``indices=`` keyword.)"""
    if len(args) >= 2 and isinstance(args[1], int):
        dim = args[1]
    return _consecutive(positions, shapes, dim)


def _consecutive(indices, shapes, dim: int) -> list:
    bounds = np.cumsum([0] + [shape[dim] for shape in shapes])
    return [_along(indices, dim, slice(start, end)) for start, end in zip(bounds[:-1], bounds[1:])]


def _pieces_along(dim_of_rank: Callable) -> Callable:
    """The twin of ``hsplit``/``vsplit``/``dsplit``, whose dim follows from the tensor's rank."""
    return lambda indices, shapes, *args, **kwargs: _consecutive(indices, shapes, dim_of_rank(indices.ndim))


def _unbound(indices, shapes, dim=0):
    return [_along(indices, dim, position) for position in range(len(shapes))]


def _along(indices: np.ndarray, dim: int, item) -> np.ndarray:
    """``indices`` indexed by ``item`` along ``dim``: a numpy view, as every twin's result is where
    it can be, so that its strides tell the layout (``is_contiguous``)."""
    key: list = [slice(None)] * indices.ndim
    key[dim] = item
    return indices[tuple(key)]


def _basic_key(key) -> bool:
    """Whether indexing by ``key`` makes a view: ints (0-d integer tensors too, as PyTorch's), slices
    of ints, None and Ellipsis only."""
    for item in key if type(key) is tuple else (key,):
        kind = type(item)
        if kind is int or kind is slice and _int_bounds(item) or item is None or item is Ellipsis:
            continue
        if not (kind is not slice and (is_integer_scalar(item) or is_integer_scalar_tensor(item))):
            return False
    return True


def is_integer_scalar_tensor(item) -> bool:
    """A 0-d integer tensor: an index PyTorch reads as an int (basic indexing, a view); numpy reads
    it through ``__index__``."""
    dtype = getattr(item, "dtype", None)
    return (
        getattr(item, "_value", None) is not None
        and item.dim() == 0
        and dtype is not None
        and dtype.category == 1
        and dtype is not dtypes.bool
        and dtype is not dtypes.uint8  # a byte tensor is a mask, as in PyTorch
    )


def _int_bounds(item: slice) -> bool:
    return all(part is None or is_integer_scalar(part) for part in (item.start, item.stop, item.step))


def is_integer_scalar(item) -> bool:
    """A Python or numpy integer, never a bool (PyTorch's int arguments refuse floats and bools)."""
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


# Method name -> (numpy twin: the view's positions from the base's, given the result's shape (a list
# of shapes for an op of several views) and the method's arguments; whether a call makes a view,
# from its arguments, where not every call does). One entry per view op.
VIEW_OPS: dict[str, tuple[Callable, Callable | None]] = {
    "__getitem__": (lambda indices, shape, key: indices[key], _basic_key),
    # x.view(dtype) (also by keyword) is a copy: onnxnn has no storage to reinterpret.
    "view": (
        _reshaped,
        lambda *shape, **named: (
            "dtype" not in named and not (len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)))
        ),
    ),
    "view_as": (_reshaped, None),
    "squeeze": (_reshaped, None),
    "unsqueeze": (_reshaped, None),
    "unflatten": (_reshaped, None),
    "t": (_reversed, None),
    "T": (_reversed, None),
    "mT": (_last_two_swapped, None),
    "mH": (_last_two_swapped, None),  # real tensors: the conjugate is the tensor itself
    "H": (_reversed, None),
    "adjoint": (_last_two_swapped, None),
    "transpose": (_swapped, None),
    "swapaxes": (_swapped, None),
    "swapdims": (_swapped, None),
    "permute": (_permuted, None),
    "movedim": (_moved, None),
    "moveaxis": (_moved, None),
    "narrow": (_narrowed, None),
    "select": (lambda indices, shape, dim, index: _along(indices, dim, index), None),
    "diagonal": (
        lambda indices, shape, offset=0, dim1=0, dim2=1: np.diagonal(indices, offset, dim1, dim2),
        None,
    ),
    "unbind": (_unbound, None),
    "split": (_pieces, None),
    "chunk": (_pieces, None),
    "tensor_split": (_pieces, None),
    "split_with_sizes": (_pieces, None),
    "hsplit": (_pieces_along(lambda rank: 0 if rank == 1 else 1), None),
    "vsplit": (_pieces_along(lambda rank: 0), None),
    "dsplit": (_pieces_along(lambda rank: 2), None),
}
