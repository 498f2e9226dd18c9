"""onnxnn's optimizer kernels (domain ``ai.onnxnn``, ``TRAINING_DOMAIN``): Momentum, Adam, Adagrad, RMSprop.

The arithmetic is the decompositions' (``runtime/ops/training.py``) op for op, so both executors
round alike. Momentum: ``V_new = alpha * V + beta' * (G + norm_coefficient * X)`` and
``X_new = X - R * V_new`` (Nesterov: ``X - R * (G' + alpha * V_new)``), with ``beta' = 1`` on the
first update (``T == 0``). Adam, Adagrad and RMSprop: torch.optim's steps, written out in
runtime/ops/training.py.

Parameters of a small model are updated as one flat vector, and the new parameters and optimizer
states are returned as views of new flat vectors. A training loop feeds exactly those views back
on the next step, so the kernels remember the last flat vectors of each update and, when all of
one group's arrays are the very views they returned, read the flat vector instead of
concatenating them again. That is sound because values are never modified in place: a view and
its flat vector share memory, so the flat vector always holds the views' contents in order.
"""

from __future__ import annotations

from operator import is_
from typing import Callable, NamedTuple

import numpy as np

from ..ir.domains import (
    ADAGRAD_TENSORS_START,
    ADAM_TENSORS_START,
    MOMENTUM_TENSORS_START,
    RMSPROP_TENSORS_START,
    TRAINING_DOMAIN,
)
from ..ir.caches import register_cache
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.mode import MODE
from . import compiled_updates
from .recycled_buffers import RECYCLE_MIN_ELEMENTS, recycled_empty

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
    """A flat update's new flat vectors (parameters first, then each state) and the views of them it returned."""

    __slots__ = ("layout", "views", "flats")

    def __init__(self, layout, views: tuple, flats: tuple):
        self.layout = layout
        self.views = views
        self.flats = flats


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
    """Whether ``arrays`` are exactly the objects ``views`` (identity, never a comparison of values)."""
    return len(arrays) == len(views) and all(map(is_, arrays, views))


@kernels.register("Momentum", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True)
def momentum(xp, inputs, attrs):
    learning_rate, update_count, alpha, beta, norm_coefficient = inputs[:MOMENTUM_TENSORS_START]
    if beta is not None and int(update_count) == 0:
        beta = None  # the first update takes the whole gradient
    hyperparameters = (
        _Factors((learning_rate, alpha, beta, norm_coefficient)),
        attrs.get("mode", "standard") == "nesterov",
    )
    tensors = inputs[MOMENTUM_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, vs = tensors[:count], tensors[count : 2 * count], tensors[2 * count :]
    flat = _flat_inputs(xp, (xs, vs))
    if flat is None:
        return _one_by_one(xp, _MOMENTUM, 2, (xs, gs, vs), hyperparameters)
    layout, (flat_x, flat_v) = flat
    flat_g = xp.concatenate(gs, axis=None)
    return _flat_results(layout, _flat_update(xp, _MOMENTUM, (flat_x, flat_g, flat_v), hyperparameters))


def _flat_inputs(xp, carried: tuple):
    """``(layout, flat vectors)`` of the lists of arrays an update carries from step to step (the
    parameters first), or None where the update runs one tensor at a time.

    Reading the last update by identity is a fast-path trick: with the fast path off, every update
    concatenates afresh (same values: the flat vector holds the views' contents).
    """
    xs = carried[0]
    record = _recent.pop(id(xs[0]), None) if MODE.fast_path else None
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


def _flat_results(layout: _Layout, flats: tuple) -> list:
    """The views of an update's new flat vectors, remembered for the next update (fast path)."""
    views = tuple(layout.views(flat) for flat in flats)
    if MODE.fast_path:
        if len(_recent) >= _RECENT_LIMIT:
            _recent.clear()
        _recent[id(views[0][0])] = _FlatUpdate(layout, views, tuple(flats))
    return [view for kind in views for view in kind]


def _flat_update_applies(xs) -> bool:
    dtype = xs[0].dtype
    return sum(x.size for x in xs) <= FLAT_UPDATE_MAX_ELEMENTS and all(x.dtype == dtype for x in xs)


class _Factors:
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


class _Update(NamedTuple):
    """An optimizer's update: its numpy formulation and the op type naming its compiled loop."""

    op_type: str
    # formula(arrays, results, scratch, xp, factors, options) -> results, for any array module
    formula: Callable


def _one_by_one(xp, update: _Update, result_count: int, tensor_lists: tuple, hyperparameters: tuple) -> list:
    """``update`` of each tensor on its own; its results regrouped by kind (parameters, then each state)."""
    updates = [_apply(xp, update, result_count, arrays, hyperparameters) for arrays in zip(*tensor_lists)]
    return [results[kind] for kind in range(result_count) for results in updates]


# A large update runs block by block, so that each block's inputs, results and two scratch blocks
# stay in the core's cache across the update's ten-odd passes, instead of every pass streaming
# whole tensors through memory (an MLP's Adam step: 1.3 ms instead of 2.1 in onnxruntime).
BLOCK_ELEMENTS = 1 << 16
# Results for the ufuncs to allocate: every update has at most four (X and three states).
_ALLOCATED_RESULTS = (None, None, None, None)


def _apply(xp, update: _Update, result_count: int, arrays: tuple, hyperparameters: tuple) -> tuple:
    """Runs ``update`` for one tensor (or one flat vector) and returns its new C-contiguous results;
    ``hyperparameters`` is ``(_Factors, options)``.

    Its compiled loop runs where there is one (compiled_updates.py). Otherwise its numpy formula:
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
    # Not a fast path: the same bits, so the profiler and ONNXNN_FAST_PATH=0 keep it.
    compiled = compiled_updates.loop(update.op_type, arrays, factors, options) if xp is np else None
    if compiled is not None:
        return compiled(tuple(recycled_empty(shape, dtype) for _ in range(result_count)))
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


def _flat_update(xp, update: _Update, arrays: tuple, hyperparameters: tuple) -> tuple:
    """``update`` of one group's flat vectors: contiguous, one-dimensional and small (at most
    ``FLAT_UPDATE_MAX_ELEMENTS``), so the ufuncs allocate the results as they go."""
    factors, options = hyperparameters
    factors = factors.of(arrays[0].dtype)
    compiled = compiled_updates.loop(update.op_type, arrays, factors, options) if xp is np else None
    if compiled is None:
        return update.formula(arrays, _ALLOCATED_RESULTS, (None, None), xp, factors, options)
    size, dtype = arrays[0].size, arrays[0].dtype
    return compiled(tuple(np.empty(size, dtype) for array in arrays[1:] if array is not None))  # X and each state


def _momentum_update(arrays, results, scratch, xp, factors, nesterov: bool) -> tuple:
    x, g, v = arrays
    learning_rate, alpha, beta, norm_coefficient = factors
    gradient = g
    if norm_coefficient is not None:
        gradient = xp.multiply(x, norm_coefficient, out=scratch[0])
        gradient += g
    scaled = gradient if beta is None else xp.multiply(gradient, beta, out=scratch[1])
    new_v = xp.multiply(v, alpha, out=results[1])
    new_v += scaled
    direction = new_v
    if nesterov:
        direction = xp.multiply(new_v, alpha, out=scratch[1])  # ``scaled`` is no longer needed
        direction += gradient
    new_x = xp.multiply(learning_rate, direction, out=results[0])
    xp.subtract(x, new_x, out=new_x)
    return new_x, new_v


_MOMENTUM = _Update("Momentum", _momentum_update)


def _as_dtype(hyperparameter, dtype):
    # astype(copy=False) returns the array itself when the dtype matches; the test is cheaper.
    return hyperparameter if hyperparameter.dtype is dtype else hyperparameter.astype(dtype)


# ---------------------------------------------------------------------- Adam


# native_low_precision: float16/bfloat16 parameters are updated op by op in their own dtype (numpy
# computes each op in float32 and rounds it), as the unfused update and onnxruntime's decomposition
# round, rather than widened for the whole update and rounded once.
@kernels.register("Adam", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def adam(xp, inputs, attrs):
    learning_rate, step, beta1, beta2, epsilon, weight_decay = inputs[:ADAM_TENSORS_START]
    amsgrad = bool(attrs.get("amsgrad", 0))
    decoupled = bool(attrs.get("decoupled_weight_decay", 0))
    # The factors in the hyperparameters' dtype, as the decomposition computes them (then cast per tensor).
    one = learning_rate.dtype.type(1)
    factors = (
        one - beta1,
        beta2,
        one - beta2,
        epsilon,
        learning_rate / (one - beta1**step),
        xp.sqrt(one - beta2**step),
        None if weight_decay is None else (one - learning_rate * weight_decay) if decoupled else weight_decay,
    )
    hyperparameters = (_Factors(factors), (decoupled, bool(attrs.get("maximize", 0))))
    tensors = inputs[ADAM_TENSORS_START:]
    lists = 5 if amsgrad else 4
    count = len(tensors) // lists
    xs, gs, ms, vs = (tensors[kind * count : (kind + 1) * count] for kind in range(4))
    v_maxes = tensors[4 * count :] if amsgrad else None
    carried = (xs, ms, vs, v_maxes) if amsgrad else (xs, ms, vs)
    flat = _flat_inputs(xp, carried)
    if flat is None:
        columns = (xs, gs, ms, vs, v_maxes if amsgrad else [None] * count)
        return _one_by_one(xp, _ADAM, lists - 1, columns, hyperparameters)
    layout, flats = flat
    flat_v_max = flats[3] if amsgrad else None
    flat_g = xp.concatenate(gs, axis=None)
    arrays = (flats[0], flat_g, flats[1], flats[2], flat_v_max)
    return _flat_results(layout, _flat_update(xp, _ADAM, arrays, hyperparameters))


def _decayed_gradient(xp, x, g, weight_decay, maximize: bool, out) -> tuple:
    """``(G', negated)``: the gradient with L2 weight decay, ``G + X * weight_decay`` (``-G + ...``
    when maximizing) written into ``out``, or G itself, ``negated`` saying that maximize's negation
    is still to apply (negation commutes exactly with every op the updates use)."""
    if weight_decay is None:
        return g, maximize
    gradient = xp.multiply(x, weight_decay, out=out)
    if maximize:
        gradient -= g
    else:
        gradient += g
    return gradient, False


def _adam_update(arrays, results, scratch, xp, factors, options) -> tuple:
    """One tensor's (or one flat vector's, or one block's) Adam update into new X, M, V (and Vmax).

    Each product and sum is the decomposition's, in its order up to commutativity and negation
    (both exact in IEEE arithmetic).
    """
    x, g, m, v, v_max = arrays
    one_minus_beta1, beta2, one_minus_beta2, epsilon, step_size, bias_correction2_sqrt, decay = factors
    decoupled, maximize = options
    gradient, negated = _decayed_gradient(xp, x, g, None if decoupled else decay, maximize, scratch[0])
    if negated:  # (-G) - M == -(G + M) exactly
        new_m = xp.add(gradient, m, out=results[1])
        xp.negative(new_m, out=new_m)
    else:
        new_m = xp.subtract(gradient, m, out=results[1])
    new_m *= one_minus_beta1
    new_m += m
    new_v = xp.multiply(v, beta2, out=results[2])
    square = xp.multiply(gradient, gradient, out=scratch[1])
    square *= one_minus_beta2
    new_v += square
    new_v_max = None if v_max is None else xp.maximum(v_max, new_v, out=results[3])
    denominator = xp.sqrt(new_v if v_max is None else new_v_max, out=square)
    denominator /= bias_correction2_sqrt
    denominator += epsilon
    step = xp.divide(new_m, denominator, out=denominator)
    step *= step_size
    if decay is not None and decoupled:
        new_x = xp.multiply(x, decay, out=results[0])
        new_x -= step
    else:
        new_x = xp.subtract(x, step, out=results[0])
    return (new_x, new_m, new_v) if v_max is None else (new_x, new_m, new_v, new_v_max)


_ADAM = _Update("Adam", _adam_update)


# ---------------------------------------------------------------------- Adagrad


@kernels.register("Adagrad", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def adagrad(xp, inputs, attrs):
    learning_rate, step, lr_decay, epsilon, weight_decay = inputs[:ADAGRAD_TENSORS_START]
    one = learning_rate.dtype.type(1)
    factors = (epsilon, learning_rate / (one + (step - one) * lr_decay), weight_decay)
    hyperparameters = (_Factors(factors), bool(attrs.get("maximize", 0)))
    tensors = inputs[ADAGRAD_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, sums = tensors[:count], tensors[count : 2 * count], tensors[2 * count :]
    flat = _flat_inputs(xp, (xs, sums))
    if flat is None:
        return _one_by_one(xp, _ADAGRAD, 2, (xs, gs, sums), hyperparameters)
    layout, (flat_x, flat_sum) = flat
    flat_g = xp.concatenate(gs, axis=None)
    return _flat_results(layout, _flat_update(xp, _ADAGRAD, (flat_x, flat_g, flat_sum), hyperparameters))


def _adagrad_update(arrays, results, scratch, xp, factors, maximize: bool) -> tuple:
    """One tensor's (or flat vector's, or block's) Adagrad update into new X and S, the
    decomposition's ops (as :func:`_adam_update`)."""
    x, g, state_sum = arrays
    epsilon, decayed_lr, weight_decay = factors
    gradient, negated = _decayed_gradient(xp, x, g, weight_decay, maximize, scratch[0])
    new_sum = xp.multiply(gradient, gradient, out=results[1])
    new_sum += state_sum
    std = xp.sqrt(new_sum, out=scratch[1])
    std += epsilon
    step = xp.divide(gradient, std, out=std)
    step *= decayed_lr
    new_x = xp.add(x, step, out=results[0]) if negated else xp.subtract(x, step, out=results[0])
    return new_x, new_sum


_ADAGRAD = _Update("Adagrad", _adagrad_update)


# ---------------------------------------------------------------------- RMSprop


@kernels.register("RMSprop", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def rmsprop(xp, inputs, attrs):
    learning_rate, alpha, epsilon, weight_decay, momentum = inputs[:RMSPROP_TENSORS_START]
    factors = (learning_rate, alpha, learning_rate.dtype.type(1) - alpha, epsilon, weight_decay, momentum)
    centered, maximize = bool(attrs.get("centered", 0)), bool(attrs.get("maximize", 0))
    hyperparameters = (_Factors(factors), maximize)
    tensors = inputs[RMSPROP_TENSORS_START:]
    lists = 3 + centered + (momentum is not None)
    count = len(tensors) // lists
    columns = [tensors[kind * count : (kind + 1) * count] for kind in range(lists)]
    grad_avgs = columns[3] if centered else [None] * count
    buffers = columns[-1] if momentum is not None else [None] * count
    carried = [column for kind, column in enumerate(columns) if kind != 1]  # X and the states
    flat = _flat_inputs(xp, carried)
    if flat is None:
        columns = (columns[0], columns[1], columns[2], grad_avgs, buffers)
        return _one_by_one(xp, _RMSPROP, lists - 1, columns, hyperparameters)
    layout, flats = flat
    flat_grad_avg = flats[2] if centered else None
    flat_buffer = flats[-1] if momentum is not None else None
    arrays = (flats[0], xp.concatenate(columns[1], axis=None), flats[1], flat_grad_avg, flat_buffer)
    return _flat_results(layout, _flat_update(xp, _RMSPROP, arrays, hyperparameters))


def _rmsprop_update(arrays, results, scratch, xp, factors, maximize: bool) -> tuple:
    """One tensor's (or flat vector's, or block's) RMSprop update into new X, SQ (, GA) (, B), the
    decomposition's ops (as :func:`_adam_update`)."""
    x, g, square_avg, grad_avg, buffer = arrays
    learning_rate, alpha, one_minus_alpha, epsilon, weight_decay, momentum = factors
    gradient, negated = _decayed_gradient(xp, x, g, weight_decay, maximize, scratch[0])
    new_square_avg = xp.multiply(square_avg, alpha, out=results[1])
    average = xp.multiply(gradient, gradient, out=scratch[1])
    average *= one_minus_alpha
    new_square_avg += average
    new_states = [new_square_avg]
    if grad_avg is not None:
        if negated:  # (-G) - GA == -(G + GA)
            new_grad_avg = xp.add(gradient, grad_avg, out=results[2])
            xp.negative(new_grad_avg, out=new_grad_avg)
        else:
            new_grad_avg = xp.subtract(gradient, grad_avg, out=results[2])
        new_grad_avg *= one_minus_alpha
        new_grad_avg += grad_avg
        new_states.append(new_grad_avg)
        xp.multiply(new_grad_avg, new_grad_avg, out=average)
        xp.subtract(new_square_avg, average, out=average)
        xp.sqrt(average, out=average)
    else:
        xp.sqrt(new_square_avg, out=average)
    average += epsilon
    quotient = xp.divide(gradient, average, out=average)  # G' / A, or -(G' / A) while negated
    if buffer is not None:
        new_buffer = xp.multiply(buffer, momentum, out=results[-1])
        if negated:
            new_buffer -= quotient
        else:
            new_buffer += quotient
        new_states.append(new_buffer)
        step = xp.multiply(new_buffer, learning_rate, out=quotient)
        new_x = xp.subtract(x, step, out=results[0])
    else:
        quotient *= learning_rate
        new_x = xp.add(x, quotient, out=results[0]) if negated else xp.subtract(x, quotient, out=results[0])
    return (new_x, *new_states)


_RMSPROP = _Update("RMSprop", _rmsprop_update)
