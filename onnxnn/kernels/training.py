"""onnxnn's optimizer kernels (domain ``ai.onnxnn``, ``TRAINING_DOMAIN``): Momentum.

The arithmetic is the decomposition's (``runtime/ops/training.py``) op for op, so both executors
round alike: ``V_new = alpha * V + beta' * (G + norm_coefficient * X)`` and ``X_new = X - R * V_new``
(Nesterov: ``X - R * (G' + alpha * V_new)``), with ``beta' = 1`` on the first update (``T == 0``).

Parameters of a small model are updated as one flat vector, and the new parameters and
velocities are returned as views of the two new flat vectors. A training loop feeds exactly those
views back on the next step, so the kernel remembers the last flat vectors of each update and,
when all of one group's arrays are the very views it returned, reads the flat vector instead of
concatenating them again. That is sound because values are never modified in place: a view and
its flat vector share memory, so the flat vector always holds the views' contents in order.
"""
from __future__ import annotations

from operator import is_

from ..ir.domains import MOMENTUM_TENSORS_START, TRAINING_DOMAIN
from ..ir.caches import register_cache
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.mode import MODE

__all__: list[str] = []

# Parameters of a small model are updated as one flat vector: a handful of numpy calls instead of
# seven per parameter, which on tiny arrays cost far more than their arithmetic. Large ones are
# updated one by one, so no step copies a big model's parameters into a buffer.
FLAT_UPDATE_MAX_ELEMENTS = 1 << 16

# The last flat update of each Momentum node, found by the id of the first new parameter view
# (the record holds that view, so the id cannot be reused while the record is kept). An update
# that reads a record replaces it with its own; the bound only matters for chains that stop.
_RECENT_LIMIT = 16
_recent: dict = {}
_LAYOUTS_LIMIT = 256
_layouts: dict = {}


class _FlatUpdate:
    """A flat update's new flat vectors and the views of them it returned."""

    __slots__ = ("layout", "values", "velocities", "flat_values", "flat_velocities")

    def __init__(self, layout, values, velocities, flat_values, flat_velocities):
        self.layout = layout
        self.values = values
        self.velocities = velocities
        self.flat_values = flat_values
        self.flat_velocities = flat_velocities


class _Layout:
    """Where each array of one list of shapes lies in their flat concatenation."""

    __slots__ = ("parts", "size")

    def __init__(self, shapes: tuple):
        parts, start = [], 0
        for shape in shapes:
            size = 1
            for dim in shape:
                size *= dim
            # A one-dimensional part is the slice itself: reshaping it would only cost a call.
            parts.append((slice(start, start + size), None if len(shape) == 1 else shape))
            start += size
        self.parts = tuple(parts)
        self.size = start

    def views(self, flat) -> list:
        return [flat[part] if shape is None else flat[part].reshape(shape) for part, shape in self.parts]


def _clear() -> None:
    _recent.clear()
    _layouts.clear()


register_cache("momentum flat updates", _clear)


def _layout_of(xs) -> _Layout:
    shapes = tuple(x.shape for x in xs)
    layout = _layouts.get(shapes)
    if layout is None:
        if len(_layouts) >= _LAYOUTS_LIMIT:
            _layouts.clear()
        layout = _layouts[shapes] = _Layout(shapes)
    return layout


def _are(arrays, views) -> bool:
    """Whether ``arrays`` are exactly the objects ``views`` (identity, never a comparison of values)."""
    return len(arrays) == len(views) and all(map(is_, arrays, views))


@kernels.register("Momentum", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True)
def momentum(xp, inputs, attrs):
    learning_rate, update_count, alpha, beta, norm_coefficient = inputs[:MOMENTUM_TENSORS_START]
    if beta is not None and int(update_count) == 0:
        beta = None  # the first update takes the whole gradient
    hyperparameters = (learning_rate, alpha, beta, norm_coefficient, attrs.get("mode", "standard") == "nesterov")
    tensors = inputs[MOMENTUM_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, vs = tensors[:count], tensors[count:2 * count], tensors[2 * count:]
    # Reading the last update by identity is a fast-path trick: with the fast path off, every
    # update concatenates afresh (same values, the flat vector holds the views' contents).
    record = _recent.pop(id(xs[0]), None) if MODE.fast_path else None
    if record is not None and record.layout.size <= FLAT_UPDATE_MAX_ELEMENTS and _are(xs, record.values):
        layout, flat_x = record.layout, record.flat_values
    elif count > 1 and _flat_update_applies(xs):
        layout, flat_x = _layout_of(xs), xp.concatenate(xs, axis=None)
    else:
        return _one_by_one(xp, xs, gs, vs, hyperparameters)
    if record is not None and _are(vs, record.velocities):
        flat_v = record.flat_velocities
    else:
        flat_v = xp.concatenate(vs, axis=None)
    new_x, new_v = _update(flat_x, xp.concatenate(gs, axis=None), flat_v, *hyperparameters)
    new_values, new_velocities = layout.views(new_x), layout.views(new_v)
    if MODE.fast_path:
        if len(_recent) >= _RECENT_LIMIT:
            _recent.clear()
        _recent[id(new_values[0])] = _FlatUpdate(layout, new_values, new_velocities, new_x, new_v)
    return new_values + new_velocities


def _flat_update_applies(xs) -> bool:
    dtype = xs[0].dtype
    return sum(x.size for x in xs) <= FLAT_UPDATE_MAX_ELEMENTS and all(x.dtype == dtype for x in xs)


def _one_by_one(xp, xs, gs, vs, hyperparameters) -> list:
    updates = [_update(x, g, v, *hyperparameters) for x, g, v in zip(xs, gs, vs)]
    # Registered with finished_results: C-contiguous arrays, also for 0-d and strided parameters.
    return [xp.asarray(x, order="C") for x, _ in updates] + [xp.asarray(v, order="C") for _, v in updates]


def _update(x, g, v, learning_rate, alpha, beta, norm_coefficient, nesterov: bool):
    dtype = x.dtype
    alpha = _as_dtype(alpha, dtype)
    if norm_coefficient is None:
        gradient = g
    else:
        # Sums go into the products just computed (never into an input): one array fewer each.
        gradient = x * _as_dtype(norm_coefficient, dtype)
        gradient += g
    scaled = gradient if beta is None else gradient * _as_dtype(beta, dtype)
    velocity = v * alpha
    velocity += scaled
    direction = gradient + velocity * alpha if nesterov else velocity
    return x - _as_dtype(learning_rate, dtype) * direction, velocity


def _as_dtype(hyperparameter, dtype):
    # astype(copy=False) returns the array itself when the dtype matches; the test is cheaper.
    return hyperparameter if hyperparameter.dtype is dtype else hyperparameter.astype(dtype)
