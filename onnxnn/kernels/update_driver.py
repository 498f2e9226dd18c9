"""How an optimizer node's update runs over its tensors: one compiled call, one flat vector, or one by one.

An optimizer records one update node for a group of tensors (training.py's kernels). The update
itself, per tensor, is a numpy formula (training.py's ``_adam_update``, ...) and the same update
as a compiled loop (compiled_updates.py). ``run_update`` picks how to apply it to the group:

- the compiled loop, where the library is built and the group has at least
  ``compiled_updates.COMPILED_MIN_ELEMENTS`` elements: one call for every tensor, writing the new
  parameters and each new state into one flat buffer per kind;
- a small group's numpy formula over the flat concatenation of its tensors (at most
  ``FLAT_UPDATE_MAX_ELEMENTS`` elements): a handful of numpy calls instead of a dozen per tensor;
- otherwise the numpy formula tensor by tensor, a large tensor in cache-sized blocks.

Either flat way returns the new parameters and states as views of new flat vectors. A training
loop feeds exactly those views back on the next step, so the last flat vectors of each update are
remembered, and when all of one kind's arrays are the very views returned, the update reads the
flat vector (or, compiled, its known addresses) instead of concatenating them again (or reading
each array's address). That is sound because a view and its flat vector share memory, so the flat
vector always holds the views' contents in order.

The compiled loop writes a kind's new values over its flat vector itself (in place) when its views
are donated (``ir.donation``: their values are dead, nothing else holds the arrays) and no other
array shares the flat vector's memory. Nothing that can still be read ever changes: the record
refers to the views weakly, so that it is not itself a reader that keeps them from being donated.
"""

from __future__ import annotations

import sys
import weakref
from typing import Callable, NamedTuple, Sequence

import numpy as np

from ..ir.caches import register_cache
from ..ir.donation import donated
from ..ir.mode import MODE
from . import compiled_updates
from .recycled_buffers import RECYCLE_MIN_ELEMENTS, in_pool, recycled_empty

__all__ = ["Update", "Factors", "run_update", "FLAT_UPDATE_MAX_ELEMENTS", "BLOCK_ELEMENTS"]

# Parameters of a small model are updated as one flat vector: a handful of numpy calls instead of
# seven per parameter, which on tiny arrays cost far more than their arithmetic. Without compiled
# loops, large ones are updated one by one, so no step copies a big model's gradients into a buffer.
FLAT_UPDATE_MAX_ELEMENTS = 1 << 16

# A large tensor's numpy update runs block by block, so that each block's inputs, results and two
# scratch blocks stay in the core's cache across the update's ten-odd passes, instead of every
# pass streaming whole tensors through memory (an MLP's Adam step: 1.3 ms instead of 2.1 in
# onnxruntime).
BLOCK_ELEMENTS = 1 << 16

# The last flat update of each update node, found by the id of the first new parameter view. The
# record refers to its views weakly, so once that view is gone its id may name another array: a
# record is taken only when the first parameter is that very view (``run_update``), and each kind's
# flat vector only when the arrays are its very views (``_are``). An update that reads a record
# replaces it with its own; the bound only matters for chains that stop.
_RECENT_LIMIT = 16
_recent: dict = {}
_LAYOUTS_LIMIT = 256
_layouts: dict = {}

# Results for the ufuncs to allocate: every update has at most four (X and three states).
_ALLOCATED_RESULTS = (None, None, None, None)


class Update(NamedTuple):
    """An optimizer's update: the op type naming its compiled loop, and its numpy formula."""

    op_type: str
    # formula(arrays, results, scratch, xp, factors, options) -> results, for any array module:
    # ``arrays`` are one tensor's (X, G, then each state, None where absent), ``results`` the
    # ufuncs' ``out`` for the new X and each present state (None: allocated), ``scratch`` two more.
    formula: Callable


class Factors:
    """An update's scalar factors, cast to the dtype of the tensors it updates once (not per block;
    one node updates tensors of one dtype, so the last cast is kept)."""

    __slots__ = ("values", "last")

    def __init__(self, values: tuple):
        self.values = values
        self.last: tuple | None = None  # (dtype, the factors cast to it)

    def of(self, dtype) -> tuple:
        last = self.last
        if last is not None and last[0] is dtype:
            return last[1]
        cast = tuple([None if value is None else _as_dtype(value, dtype) for value in self.values])
        self.last = (dtype, cast)
        return cast


def _as_dtype(hyperparameter, dtype):
    # astype(copy=False) returns the array itself when the dtype matches; the test is cheaper.
    return hyperparameter if hyperparameter.dtype is dtype else hyperparameter.astype(dtype)


class _FlatUpdate:
    """A flat update's new flat vectors (parameters first, then each present state), weak references
    to the views of them it returned, and, for a compiled one, each view's address (by kind, then
    tensor)."""

    __slots__ = ("layout", "views", "flats", "addresses")

    def __init__(self, layout, views: tuple, flats: tuple, addresses: tuple | None):
        self.layout = layout
        self.views = views  # per kind, a list of weak references
        self.flats = flats
        self.addresses = addresses


class _Layout:
    """Where each array of one list of shapes lies in their flat concatenation."""

    __slots__ = ("parts", "size", "starts", "sizes")

    def __init__(self, shapes: tuple):
        parts, starts, sizes, start = [], [], [], 0
        for shape in shapes:
            size = 1
            for dim in shape:
                size *= dim
            # A one-dimensional part is the slice itself: reshaping it would only cost a call.
            parts.append((slice(start, start + size), None if len(shape) == 1 else shape))
            starts.append(start)
            sizes.append(size)
            start += size
        self.parts = tuple(parts)
        self.starts = tuple(starts)  # each part's first element
        self.sizes = tuple(sizes)
        self.size = start

    def views(self, flat) -> list:
        return [flat[part] if shape is None else flat[part].reshape(shape) for part, shape in self.parts]


def _clear() -> None:
    _recent.clear()
    _layouts.clear()


register_cache("optimizer flat updates", _clear)


def _layout_of(xs) -> _Layout:
    shapes = tuple(x.shape for x in xs)
    layout = _layouts.get(shapes)
    if layout is None:
        if len(_layouts) >= _LAYOUTS_LIMIT:
            _layouts.clear()
        layout = _layouts[shapes] = _Layout(shapes)
    return layout


def _are(arrays, views) -> bool:
    """Whether ``arrays`` are exactly the objects ``views`` (weak references) refer to: identity,
    never a comparison of values."""
    return len(arrays) == len(views) and all([array is view() for array, view in zip(arrays, views)])


def run_update(xp, update: Update, xs: Sequence, gs: Sequence, states: tuple, hyperparameters: tuple) -> list:
    """Applies ``update`` to every tensor of one node and returns the new tensors, then each new
    present state's list (the node's outputs, in order).

    Args:
        xp: the array module (numpy, or cupy on a GPU).
        update: the update's op type and numpy formula.
        xs: the tensors; gs: their gradients.
        states: each state's list of arrays, in the formula's order, or None for a state the
            update does not keep (AMSGrad's maximum without amsgrad, ...).
        hyperparameters: ``(Factors, options)``, shared by every tensor.
    """
    present = [column for column in states if column is not None]
    carried = (xs, *present)
    # Taken off the table even while the fast path is off: a record left there would hold its flat
    # vectors (the parameters of the last fast-path step) for as long as that lasts, and each update
    # would then write fresh, page-faulting buffers instead of reusing them.
    record = _recent.pop(id(xs[0]), None) if xs else None
    # Found by the id of a view that died since, it is another update's: a numpy update's record kept
    # this one from its compiled loop, and each step from then on left one of its own.
    if record is not None and (not MODE.fast_path or record.views[0][0]() is not xs[0]):
        record = None
    # A record without addresses is a numpy flat update's: the compiled loop did not take this
    # node's last step (a small model's), so it would not take this one.
    if xp is np and xs and (record is None or record.addresses is not None):
        results = _compiled(update, carried, gs, states, hyperparameters, record)
        if results is not None:
            return results
    flat = _flat_inputs(xp, carried, record)
    if flat is None:
        count = len(xs)
        columns = (xs, gs, *[[None] * count if column is None else column for column in states])
        return _one_by_one(xp, update, len(carried), columns, hyperparameters)
    layout, flats = flat
    flat_states = iter(flats[1:])
    arrays = (flats[0], xp.concatenate(gs, axis=None), *[None if c is None else next(flat_states) for c in states])
    factors, options = hyperparameters
    new_flats = update.formula(arrays, _ALLOCATED_RESULTS, (None, None), xp, factors.of(flats[0].dtype), options)
    return _flat_results(layout, new_flats, None)


def _compiled(update: Update, carried: tuple, gs: Sequence, states: tuple, hyperparameters: tuple, record):
    """The update as one call of its compiled loop, results in new flat vectors; None where it has
    none. ``record``: None or the node's last compiled update."""
    xs = carried[0]
    dtype = xs[0].dtype
    if record is not None and _are(xs, record.views[0]):
        layout = record.layout
    else:
        layout, record = _layout_of(xs), None
    run = compiled_updates.loop(update.op_type, dtype, layout.size)
    if run is None:
        return None
    # Every input's address, by kind: a kind that is exactly the views of the last update's flat
    # vector has its known addresses; other arrays need their own, C-ordered, of one dtype and of
    # their tensor's size (the loop trusts the sizes: anything else is left to numpy's errors).
    addresses = []
    converted = []  # arrays made C-ordered (or from numpy scalars): alive until the loop has run
    sizes = layout.sizes
    overwritten: list = [None] * len(carried)  # each kind's flat vector where the loop writes over it
    for kind, arrays in enumerate((*carried, gs)):
        if kind < len(carried) and record is not None and _are(arrays, record.views[kind]):
            addresses.append(record.addresses[kind])
            if _overwritable(arrays, record.flats[kind]):
                overwritten[kind] = record.flats[kind]
            continue
        arrays = [np.asarray(array, order="C") for array in arrays]
        if len(arrays) != len(sizes) or any(a.dtype != dtype or a.size != n for a, n in zip(arrays, sizes)):
            return None
        converted.append(arrays)
        addresses.append([compiled_updates.address(array) for array in arrays])
    flats = tuple(recycled_empty((layout.size,), dtype) if flat is None else flat for flat in overwritten)
    itemsize = dtype.itemsize
    new_addresses = tuple(
        [base + start * itemsize for start in layout.starts] for base in map(compiled_updates.address, flats)
    )
    # Per tensor: X, G and each state, then the new X and each new state (None where absent).
    absent = [None] * len(xs)
    states_read = iter(addresses[1 : len(carried)])
    states_written = iter(new_addresses[1:])
    columns = [
        addresses[0],
        addresses[-1],
        *[absent if state is None else next(states_read) for state in states],
        new_addresses[0],
        *[absent if state is None else next(states_written) for state in states],
    ]
    factors, options = hyperparameters
    # The factors as they are: the loop's C array rounds each to the dtype as numpy's cast does.
    in_place = any(flat is not None for flat in overwritten)
    run(sizes, [address for tensor in zip(*columns) for address in tensor], factors.values, states, options, in_place)
    del converted
    return _flat_results(layout, flats, new_addresses)


def _overwritable(views: list, flat) -> bool:
    """Whether the new values of a kind may be written over ``flat``, whose views ``views`` are: each is
    donated, and no other array shares the memory (the pool's buffer that ``flat`` and its views are
    views of has no other view)."""
    arrays = donated()
    if not arrays or not all([id(view) in arrays for view in views]):
        return False
    # The buffer's references: the pool's, ``flat``'s, each view's and getrefcount's argument. (A
    # flat vector of fewer than RECYCLE_MIN_ELEMENTS elements is a plain array, never overwritten.)
    return in_pool(flat) and sys.getrefcount(flat.base) == len(views) + 3


def _flat_inputs(xp, carried: tuple, record):
    """``(layout, flat vectors)`` of the lists of arrays an update carries from step to step (the
    parameters first), or None where the update runs one tensor at a time.

    Reading the last update by identity is a fast-path trick: with the fast path off, every update
    concatenates afresh (same values: the flat vector holds the views' contents).
    """
    xs = carried[0]
    if record is not None and record.layout.size <= FLAT_UPDATE_MAX_ELEMENTS and _are(xs, record.views[0]):
        layout = record.layout
    elif len(xs) > 1 and _flat_update_applies(xs):
        layout = _layout_of(xs)
    else:
        return None
    flats = []
    for kind, arrays in enumerate(carried):
        if record is not None and kind < len(record.views) and _are(arrays, record.views[kind]):
            flats.append(record.flats[kind])
        else:
            flats.append(xp.concatenate(arrays, axis=None))
    return layout, flats


def _flat_results(layout: _Layout, flats: tuple, addresses: tuple | None) -> list:
    """The views of an update's new flat vectors, remembered for the next update (fast path)."""
    views = tuple(layout.views(flat) for flat in flats)
    if MODE.fast_path:
        if len(_recent) >= _RECENT_LIMIT:
            _recent.clear()
        references = tuple([list(map(weakref.ref, kind)) for kind in views])
        _recent[id(views[0][0])] = _FlatUpdate(layout, references, tuple(flats), addresses)
    return [view for kind in views for view in kind]


def _flat_update_applies(xs) -> bool:
    dtype = xs[0].dtype
    return sum(x.size for x in xs) <= FLAT_UPDATE_MAX_ELEMENTS and all(x.dtype == dtype for x in xs)


def _one_by_one(xp, update: Update, result_count: int, tensor_lists: tuple, hyperparameters: tuple) -> list:
    """``update`` of each tensor on its own; its results regrouped by kind (parameters, then each state)."""
    updates = [_apply(xp, update, result_count, arrays, hyperparameters) for arrays in zip(*tensor_lists)]
    return [results[kind] for kind in range(result_count) for results in updates]


def _apply(xp, update: Update, result_count: int, arrays: tuple, hyperparameters: tuple) -> tuple:
    """Runs ``update``'s numpy formula for one tensor and returns its new C-contiguous results.

    ``arrays`` are the tensor and its gradient and states (None for an absent state). ``formula``
    passes each result and scratch entry as its ufuncs' ``out`` and returns the results: where the
    entries are None (a small tensor), the ufuncs allocate them as they go. A tensor of at least
    ``RECYCLE_MIN_ELEMENTS`` elements gets recycled result buffers and runs in blocks of
    ``BLOCK_ELEMENTS``; elementwise arithmetic gives the same values either way.
    """
    # asarray rather than ascontiguousarray, which makes 0-d arrays one-dimensional. One layout for
    # all: a transposed gradient (a weight's, from the backward's Gemm) mixed with C-ordered states
    # would make every pass strided.
    arrays = tuple(None if array is None else xp.asarray(array, order="C") for array in arrays)
    x = arrays[0]
    size, shape, dtype = x.size, x.shape, x.dtype
    factors, options = hyperparameters
    factors = factors.of(dtype)
    if x.ndim == 0:  # numpy's 0-d arithmetic makes scalars: every result and scratch needs an array
        results = tuple(xp.empty((), dtype) for _ in range(result_count))
        return update.formula(arrays, results, (xp.empty((), dtype), xp.empty((), dtype)), xp, factors, options)
    if size < RECYCLE_MIN_ELEMENTS or not isinstance(x, np.ndarray):
        return update.formula(arrays, _ALLOCATED_RESULTS, (None, None), xp, factors, options)
    results = tuple(recycled_empty(shape, dtype) for _ in range(result_count))
    block = min(size, BLOCK_ELEMENTS)
    scratch = (recycled_empty((block,), dtype), recycled_empty((block,), dtype))
    flat_arrays = tuple(None if array is None else array.reshape(-1) for array in arrays)
    flat_results = tuple(result.reshape(-1) for result in results)
    for start in range(0, size, block):
        part = slice(start, start + block)
        length = min(block, size - start)
        update.formula(
            tuple(None if array is None else array[part] for array in flat_arrays),
            tuple(result[part] for result in flat_results),
            (scratch[0][:length], scratch[1][:length]),
            xp,
            factors,
            options,
        )
    return results
