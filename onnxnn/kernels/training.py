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
    hyperparameters = (learning_rate, alpha, beta, norm_coefficient, attrs.get("mode", "standard") == "nesterov")
    tensors = inputs[MOMENTUM_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, vs = tensors[:count], tensors[count : 2 * count], tensors[2 * count :]
    flat = _flat_inputs(xp, (xs, vs))
    if flat is None:
        return _one_by_one(xp, _update, (xs, gs, vs), hyperparameters)
    layout, (flat_x, flat_v) = flat
    return _flat_results(layout, _update(flat_x, xp.concatenate(gs, axis=None), flat_v, *hyperparameters))


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


def _one_by_one(xp, update, tensor_lists: tuple, hyperparameters) -> list:
    """``update`` of each tensor on its own; its results regrouped by kind (parameters, then each state)."""
    updates = [update(*arrays, *hyperparameters) for arrays in zip(*tensor_lists)]
    # Registered with finished_results: C-contiguous arrays, also for 0-d and strided parameters.
    return [xp.asarray(results[kind], order="C") for kind in range(len(updates[0])) for results in updates]


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
    options = (decoupled, bool(attrs.get("maximize", 0)))
    tensors = inputs[ADAM_TENSORS_START:]
    lists = 5 if amsgrad else 4
    count = len(tensors) // lists
    xs, gs, ms, vs = (tensors[kind * count : (kind + 1) * count] for kind in range(4))
    v_maxes = tensors[4 * count :] if amsgrad else None
    carried = (xs, ms, vs, v_maxes) if amsgrad else (xs, ms, vs)
    flat = _flat_inputs(xp, carried)
    if flat is None:
        columns = (xs, gs, ms, vs, v_maxes if amsgrad else [None] * count)
        return _one_by_one(xp, _adam_update, columns, (xp, factors, options))
    layout, flats = flat
    flat_v_max = flats[3] if amsgrad else None
    return _flat_results(
        layout,
        _adam_update(flats[0], xp.concatenate(gs, axis=None), flats[1], flats[2], flat_v_max, xp, factors, options),
    )


def _decayed_gradient(x, g, weight_decay, maximize: bool) -> tuple:
    """``(G', negated)``: the gradient with L2 weight decay, ``G + X * weight_decay`` (``-G + ...``
    when maximizing), or G itself, ``negated`` saying that maximize's negation is still to apply
    (negation commutes exactly with every op the updates use)."""
    if weight_decay is None:
        return g, maximize
    gradient = x * weight_decay
    if maximize:
        gradient -= g
    else:
        gradient += g
    return gradient, False


def _adam_update(x, g, m, v, v_max, xp, factors, options) -> tuple:
    """One tensor's (or one flat vector's) Adam update: new X, M, V (and Vmax when given).

    Each product and sum is the decomposition's, in its order up to commutativity and negation
    (both exact in IEEE arithmetic). A large update's time goes to fresh memory, not arithmetic, so
    it allocates its outputs and one scratch array (that becomes the new X) and writes everything
    else in place, never into an input.
    """
    if x.ndim == 0:  # numpy's 0-d arithmetic makes scalars, which the writes below cannot target
        arrays = (None if a is None else a.reshape(1) for a in (x, g, m, v, v_max))
        # mypy cannot count the five arrays the generator unpacks into x, g, m, v, v_max.
        results = _adam_update(*arrays, xp, factors, options)  # type: ignore[call-arg]
        return tuple(result.reshape(()) for result in results)
    # One layout for all: a transposed gradient (a weight's, from the backward's Gemm) mixed with
    # C-ordered states would make every elementwise pass strided and every result need a copy.
    x, g, m, v = (xp.ascontiguousarray(array) for array in (x, g, m, v))
    dtype = x.dtype
    one_minus_beta1, beta2, one_minus_beta2, epsilon, step_size, bias_correction2_sqrt, decay = (
        None if factor is None else _as_dtype(factor, dtype) for factor in factors
    )
    decoupled, maximize = options
    gradient, negated = _decayed_gradient(x, g, None if decoupled else decay, maximize)
    if negated:  # (-G) - M == -(G + M) exactly
        new_m = xp.add(gradient, m)
        xp.negative(new_m, out=new_m)
    else:
        new_m = gradient - m
    new_m *= one_minus_beta1
    new_m += m
    new_v = v * beta2
    scratch = gradient * gradient if gradient is g else xp.multiply(gradient, gradient, out=gradient)
    scratch *= one_minus_beta2
    new_v += scratch
    new_v_max = None if v_max is None else xp.maximum(xp.ascontiguousarray(v_max), new_v)
    denominator = xp.sqrt(new_v if v_max is None else new_v_max, out=scratch)
    denominator /= bias_correction2_sqrt
    denominator += epsilon
    step = xp.divide(new_m, denominator, out=denominator)
    step *= step_size
    if decay is not None and decoupled:
        new_x = x * decay
        new_x -= step
    else:
        new_x = xp.subtract(x, step, out=step)
    return (new_x, new_m, new_v) if v_max is None else (new_x, new_m, new_v, new_v_max)


# ---------------------------------------------------------------------- Adagrad


@kernels.register("Adagrad", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def adagrad(xp, inputs, attrs):
    learning_rate, step, lr_decay, epsilon, weight_decay = inputs[:ADAGRAD_TENSORS_START]
    one = learning_rate.dtype.type(1)
    factors = (epsilon, learning_rate / (one + (step - one) * lr_decay), weight_decay)
    maximize = bool(attrs.get("maximize", 0))
    tensors = inputs[ADAGRAD_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, sums = tensors[:count], tensors[count : 2 * count], tensors[2 * count :]
    flat = _flat_inputs(xp, (xs, sums))
    if flat is None:
        return _one_by_one(xp, _adagrad_update, (xs, gs, sums), (xp, factors, maximize))
    layout, (flat_x, flat_sum) = flat
    flat_g = xp.concatenate(gs, axis=None)
    return _flat_results(layout, _adagrad_update(flat_x, flat_g, flat_sum, xp, factors, maximize))


def _adagrad_update(x, g, state_sum, xp, factors, maximize: bool) -> tuple:
    """One tensor's (or flat vector's) Adagrad update: new X and S, the decomposition's ops in place
    where they may be (as :func:`_adam_update`)."""
    if x.ndim == 0:  # numpy's 0-d arithmetic makes scalars, which the writes below cannot target
        results = _adagrad_update(x.reshape(1), g.reshape(1), state_sum.reshape(1), xp, factors, maximize)
        return tuple(result.reshape(()) for result in results)
    x, g, state_sum = (xp.ascontiguousarray(array) for array in (x, g, state_sum))
    epsilon, decayed_lr, weight_decay = (None if factor is None else _as_dtype(factor, x.dtype) for factor in factors)
    gradient, negated = _decayed_gradient(x, g, weight_decay, maximize)
    new_sum = gradient * gradient
    new_sum += state_sum
    std = xp.sqrt(new_sum)
    std += epsilon
    step = xp.divide(gradient, std, out=std)
    step *= decayed_lr
    new_x = xp.add(x, step, out=step) if negated else xp.subtract(x, step, out=step)
    return new_x, new_sum


# ---------------------------------------------------------------------- RMSprop


@kernels.register("RMSprop", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def rmsprop(xp, inputs, attrs):
    learning_rate, alpha, epsilon, weight_decay, momentum = inputs[:RMSPROP_TENSORS_START]
    factors = (learning_rate, alpha, learning_rate.dtype.type(1) - alpha, epsilon, weight_decay, momentum)
    centered, maximize = bool(attrs.get("centered", 0)), bool(attrs.get("maximize", 0))
    tensors = inputs[RMSPROP_TENSORS_START:]
    lists = 3 + centered + (momentum is not None)
    count = len(tensors) // lists
    columns = [tensors[kind * count : (kind + 1) * count] for kind in range(lists)]
    grad_avgs = columns[3] if centered else [None] * count
    buffers = columns[-1] if momentum is not None else [None] * count
    carried = [column for kind, column in enumerate(columns) if kind != 1]  # X and the states
    flat = _flat_inputs(xp, carried)
    if flat is None:
        return _one_by_one(
            xp, _rmsprop_update, (columns[0], columns[1], columns[2], grad_avgs, buffers), (xp, factors, maximize)
        )
    layout, flats = flat
    flat_grad_avg = flats[2] if centered else None
    flat_buffer = flats[-1] if momentum is not None else None
    return _flat_results(
        layout,
        _rmsprop_update(
            flats[0], xp.concatenate(columns[1], axis=None), flats[1], flat_grad_avg, flat_buffer, xp, factors, maximize
        ),
    )


def _rmsprop_update(x, g, square_avg, grad_avg, buffer, xp, factors, maximize: bool) -> tuple:
    """One tensor's (or flat vector's) RMSprop update: new X, SQ (, GA) (, B), the decomposition's ops
    in place where they may be (as :func:`_adam_update`)."""
    if x.ndim == 0:  # numpy's 0-d arithmetic makes scalars, which the writes below cannot target
        arrays = (None if a is None else a.reshape(1) for a in (x, g, square_avg, grad_avg, buffer))
        # mypy cannot count the five arrays the generator unpacks into x, g, square_avg, grad_avg, buffer.
        reshaped = _rmsprop_update(*arrays, xp, factors, maximize)  # type: ignore[call-arg, arg-type]
        return tuple(result.reshape(()) for result in reshaped)
    x, g, square_avg = (xp.ascontiguousarray(array) for array in (x, g, square_avg))
    learning_rate, alpha, one_minus_alpha, epsilon, weight_decay, momentum = (
        None if factor is None else _as_dtype(factor, x.dtype) for factor in factors
    )
    gradient, negated = _decayed_gradient(x, g, weight_decay, maximize)
    new_square_avg = square_avg * alpha
    scratch = gradient * gradient
    scratch *= one_minus_alpha
    new_square_avg += scratch
    new_grad_avg = None
    if grad_avg is not None:
        grad_avg = xp.ascontiguousarray(grad_avg)
        if negated:  # (-G) - GA == -(G + GA)
            new_grad_avg = xp.add(gradient, grad_avg)
            xp.negative(new_grad_avg, out=new_grad_avg)
        else:
            new_grad_avg = gradient - grad_avg
        new_grad_avg *= one_minus_alpha
        new_grad_avg += grad_avg
        xp.multiply(new_grad_avg, new_grad_avg, out=scratch)
        xp.subtract(new_square_avg, scratch, out=scratch)
        xp.sqrt(scratch, out=scratch)
    else:
        xp.sqrt(new_square_avg, out=scratch)
    scratch += epsilon
    quotient = xp.divide(gradient, scratch, out=scratch)  # G' / A, or -(G' / A) while negated
    results = [None, new_square_avg] + ([new_grad_avg] if new_grad_avg is not None else [])
    if buffer is not None:
        new_buffer = xp.ascontiguousarray(buffer) * momentum
        if negated:
            new_buffer -= quotient
        else:
            new_buffer += quotient
        step = xp.multiply(new_buffer, learning_rate, out=quotient)
        new_x = xp.subtract(x, step, out=step)
        results.append(new_buffer)
    else:
        quotient *= learning_rate
        new_x = xp.add(x, quotient, out=quotient) if negated else xp.subtract(x, quotient, out=quotient)
    results[0] = new_x
    return tuple(results)
