"""onnxnn's optimizer kernels (domain ``ai.onnxnn``, ``TRAINING_DOMAIN``): Momentum, Adam, Adagrad, RMSprop.

The arithmetic is the decompositions' (``runtime/ops/training.py``) op for op, so both executors
round alike. Momentum: ``V_new = alpha * V + beta' * (G + norm_coefficient * X)`` and
``X_new = X - R * V_new`` (Nesterov: ``X - R * (G' + alpha * V_new)``), with ``beta' = 1`` on the
first update (``T == 0``). Adam, Adagrad and RMSprop: torch.optim's steps, written out in
runtime/ops/training.py.

float16/bfloat16 Momentum, Adam and RMSprop updates have their own formulas (``_low_precision_*``):
float32 ops rounded to the tensors' dtype where PyTorch's ops round, as their decompositions do,
``lerp_`` and ``addcmul_`` with the fused multiply-add of PyTorch's vectorized CPU kernels.

Each kernel reads its node's inputs and hands the per-tensor update (its numpy formula, and the
op type naming its compiled loop) to update_driver.py, which applies it to every tensor of the node.
"""

from __future__ import annotations

import functools

import numpy as np

from ..ir import dtypes
from ..ir.domains import (
    ADAGRAD_TENSORS_START,
    ADAM_TENSORS_START,
    MOMENTUM_TENSORS_START,
    RMSPROP_TENSORS_START,
    TRAINING_DOMAIN,
)
from ..ir.kernel_registry import FLOATING, kernels
from .update_driver import Factors, Update, run_update

__all__: list[str] = []


# native_low_precision: float16/bfloat16 tensors get their own update (_low_precision_momentum_update),
# PyTorch's rounding of each op, rather than the float32 update widened and rounded once.
@kernels.register("Momentum", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def momentum(xp, inputs, attrs):
    learning_rate, update_count, alpha, beta, norm_coefficient = inputs[:MOMENTUM_TENSORS_START]
    if beta is not None and int(update_count) == 0:
        beta = None  # the first update takes the whole gradient
    nesterov = attrs.get("mode", "standard") == "nesterov"
    tensors = inputs[MOMENTUM_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, vs = tensors[:count], tensors[count : 2 * count], tensors[2 * count :]
    if xs[0].dtype in _LOW_PRECISION:
        # The factors are float32 whatever the tensors' dtype, so they travel as options, uncast.
        factors = _low_precision_factors(xs[0].dtype, learning_rate, alpha, beta, norm_coefficient)
        return run_update(xp, _LOW_PRECISION_MOMENTUM, xs, gs, (vs,), (Factors(()), (factors, nesterov)))
    hyperparameters = (Factors((learning_rate, alpha, beta, norm_coefficient)), nesterov)
    return run_update(xp, _MOMENTUM, xs, gs, (vs,), hyperparameters)


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


_MOMENTUM = Update("Momentum", _momentum_update)

_LOW_PRECISION = (dtypes.float16.numpy_dtype, dtypes.bfloat16.numpy_dtype)


def _float32(value):
    """A hyperparameter (None where omitted) as a float32 scalar, PyTorch's "opmath" for float16/bfloat16."""
    return None if value is None else np.float32(float(value))


def _rounded_through(dtype):
    """``rounded(value)``: a hyperparameter as float32, rounded to ``dtype`` on the way, as PyTorch
    rounds the scalar of ``add`` (the decomposition's, runtime/ops/training.py, are so too)."""

    def rounded(value):
        return None if value is None else np.float32(np.float32(float(value)).astype(dtype))

    return rounded


def _low_precision_factors(dtype, learning_rate, alpha, beta, norm_coefficient) -> tuple:
    """(R, alpha, alpha, beta, norm_coefficient) as float32 scalars, all but the first alpha rounded
    to ``dtype`` on the way."""
    rounded = _rounded_through(dtype)
    return rounded(learning_rate), _float32(alpha), rounded(alpha), rounded(beta), rounded(norm_coefficient)


def _low_precision_momentum_update(arrays, results, scratch, xp, factors, options) -> tuple:
    """One float16/bfloat16 tensor's (or flat vector's, or block's) update into new X and V: the
    decomposition's float32 ops, rounded to the tensor's dtype where it rounds."""
    x, g, v = arrays
    (learning_rate, alpha, rounded_alpha, beta, norm_coefficient), nesterov = options
    dtype = x.dtype
    rounded = functools.partial(_rounded_to, dtype)

    wide_x = x.astype(np.float32)
    gradient = g.astype(np.float32)
    if norm_coefficient is not None:
        gradient = rounded(gradient + wide_x * norm_coefficient)
    velocity = rounded(v.astype(np.float32) * alpha)
    velocity += gradient if beta is None else gradient * beta
    new_v = _narrowed(velocity, dtype, results[1])
    direction = new_v.astype(np.float32)
    if nesterov:
        direction = rounded(gradient + direction * rounded_alpha)
    new_x = _narrowed(wide_x - learning_rate * direction, dtype, results[0])
    return new_x, new_v


def _rounded_to(dtype, value):
    """A float32 result rounded to ``dtype`` and back: one of PyTorch's float16/bfloat16 ops."""
    return value.astype(dtype).astype(np.float32)


def _narrowed(value, dtype, out):
    """``value`` rounded to ``dtype``: into ``out`` where the driver gives one, else a new array."""
    if out is None:
        return value.astype(dtype)
    out[...] = value
    return out


_LOW_PRECISION_MOMENTUM = Update("Momentum", _low_precision_momentum_update)


def _fused_multiply_add(first, second, addend):
    """``first * second + addend`` of float32 values rounded once to float32, as the fused multiply-add
    of PyTorch's vectorized ``lerp_`` and ``addcmul_`` kernels for float16/bfloat16 computes it.

    Computed in float64, where the product of two float32 values is exact; the sum's rounding to
    float64 and then to float32 differs from one rounding only at a float32 tie, which float64's 29
    extra bits make vanishingly rare.
    """
    return (first.astype(np.float64) * second + addend).astype(np.float32)


def _lerp(start, end, weight):
    """``start.lerp_(end, weight)`` of float32 values, ``weight`` a float32 scalar, as PyTorch's kernel:
    ``fma(weight, end - start, start)``, or ``fma(weight - 1, end - start, end)`` where ``|weight| >=
    0.5`` (so a weight of 1 gives ``end`` exactly)."""
    if abs(weight) < 0.5:
        return _fused_multiply_add(weight, end - start, start)
    return _fused_multiply_add(weight - np.float32(1), end - start, end)


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
    if xs[0].dtype in _LOW_PRECISION:
        # The factors are float32 whatever the tensors' dtype, so they travel as options, uncast.
        # ``add_(eps)`` and ``add(param, alpha=weight_decay)`` round their scalar to the dtype first.
        rounded = _rounded_through(xs[0].dtype)
        *moments, epsilon_factor, step_size, bias_correction2_sqrt, decay = [_float32(value) for value in factors]
        wide = (
            *moments,
            rounded(epsilon_factor),
            step_size,
            bias_correction2_sqrt,
            decay if decoupled else rounded(decay),
        )
        return run_update(xp, _LOW_PRECISION_ADAM, xs, gs, (ms, vs, v_maxes), (Factors(()), (wide, options)))
    return run_update(xp, _ADAM, xs, gs, (ms, vs, v_maxes), (Factors(factors), options))


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


_ADAM = Update("Adam", _adam_update)


def _low_precision_adam_update(arrays, results, scratch, xp, factors, options) -> tuple:
    """One float16/bfloat16 tensor's (or flat vector's, or block's) Adam update: the decomposition's
    float32 ops (runtime/ops/training_half_precision.py ``low_precision_adam``), rounded to the tensor's dtype where
    PyTorch's single-tensor step rounds."""
    x, g, m, v, v_max = arrays
    wide_factors, (decoupled, maximize) = options  # ``factors`` is empty: they are float32, in the options
    one_minus_beta1, beta2, one_minus_beta2, epsilon, step_size, bias_correction2_sqrt, decay = wide_factors
    dtype = x.dtype
    rounded = functools.partial(_rounded_to, dtype)

    wide_x = x.astype(np.float32)
    gradient = g.astype(np.float32)
    if maximize:
        gradient = -gradient
    if decay is not None and decoupled:
        wide_x = rounded(wide_x * decay)
    elif decay is not None:
        gradient = rounded(gradient + decay * wide_x)
    new_m = _narrowed(_lerp(m.astype(np.float32), gradient, one_minus_beta1), dtype, results[1])
    # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    scaled_gradient = one_minus_beta2 * gradient
    square_avg = rounded(v.astype(np.float32) * beta2)
    new_v = _narrowed(_fused_multiply_add(scaled_gradient, gradient, square_avg), dtype, results[2])
    second_moment = new_v
    if v_max is not None:
        second_moment = xp.maximum(v_max, new_v, out=results[3])
    root = rounded(xp.sqrt(second_moment.astype(np.float32)))
    denominator = rounded(rounded(root / bias_correction2_sqrt) + epsilon)
    # param.addcdiv_(exp_avg, denom, value=-step_size): ``param + (value * exp_avg) / denom``
    step = (-step_size * new_m.astype(np.float32)) / denominator
    new_x = _narrowed(wide_x + step, dtype, results[0])
    return (new_x, new_m, new_v) if v_max is None else (new_x, new_m, new_v, second_moment)


_LOW_PRECISION_ADAM = Update("Adam", _low_precision_adam_update)


# ---------------------------------------------------------------------- Adagrad


@kernels.register("Adagrad", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def adagrad(xp, inputs, attrs):
    learning_rate, step, lr_decay, epsilon, weight_decay = inputs[:ADAGRAD_TENSORS_START]
    one = learning_rate.dtype.type(1)
    factors = (epsilon, learning_rate / (one + (step - one) * lr_decay), weight_decay)
    hyperparameters = (Factors(factors), bool(attrs.get("maximize", 0)))
    tensors = inputs[ADAGRAD_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, sums = tensors[:count], tensors[count : 2 * count], tensors[2 * count :]
    return run_update(xp, _ADAGRAD, xs, gs, (sums,), hyperparameters)


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


_ADAGRAD = Update("Adagrad", _adagrad_update)


# ---------------------------------------------------------------------- RMSprop


@kernels.register("RMSprop", domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True, native_low_precision=True)
def rmsprop(xp, inputs, attrs):
    learning_rate, alpha, epsilon, weight_decay, momentum = inputs[:RMSPROP_TENSORS_START]
    factors = (learning_rate, alpha, learning_rate.dtype.type(1) - alpha, epsilon, weight_decay, momentum)
    centered, maximize = bool(attrs.get("centered", 0)), bool(attrs.get("maximize", 0))
    hyperparameters = (Factors(factors), maximize)
    tensors = inputs[RMSPROP_TENSORS_START:]
    lists = 3 + centered + (momentum is not None)
    count = len(tensors) // lists
    columns = [tensors[kind * count : (kind + 1) * count] for kind in range(lists)]
    grad_avgs = columns[3] if centered else None
    buffers = columns[-1] if momentum is not None else None
    update = _RMSPROP
    if columns[0][0].dtype in _LOW_PRECISION:
        dtype = columns[0][0].dtype
        wide, rounded = _float32, _rounded_through(dtype)
        low_precision_factors = (
            wide(learning_rate),
            rounded(learning_rate),
            wide(alpha),
            wide(factors[2]),
            rounded(epsilon),
            rounded(weight_decay),
            wide(momentum),
        )
        update, hyperparameters = _LOW_PRECISION_RMSPROP, (Factors(()), (low_precision_factors, maximize))
    return run_update(xp, update, columns[0], columns[1], (columns[2], grad_avgs, buffers), hyperparameters)


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


_RMSPROP = Update("RMSprop", _rmsprop_update)


def _low_precision_rmsprop_update(arrays, results, scratch, xp, factors, options) -> tuple:
    """One float16/bfloat16 tensor's (or flat vector's, or block's) update into new X, SQ (, GA) (, B):
    the decomposition's float32 ops, rounded to the tensor's dtype where it rounds."""
    x, g, square_avg, grad_avg, buffer = arrays
    (learning_rate, rounded_lr, alpha, one_minus_alpha, epsilon, weight_decay, momentum), maximize = options
    dtype = x.dtype
    rounded = functools.partial(_rounded_to, dtype)

    wide_x = x.astype(np.float32)
    gradient = -g.astype(np.float32) if maximize else g.astype(np.float32)
    if weight_decay is not None:
        gradient = rounded(gradient + wide_x * weight_decay)
    # square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    new_square_avg = rounded(square_avg.astype(np.float32) * alpha)
    new_square_avg = _fused_multiply_add(one_minus_alpha * gradient, gradient, new_square_avg)
    new_states = [_narrowed(new_square_avg, dtype, results[1])]
    new_square_avg = new_states[0].astype(np.float32)
    if grad_avg is not None:
        new_grad_avg = _lerp(grad_avg.astype(np.float32), gradient, one_minus_alpha)
        new_states.append(_narrowed(new_grad_avg, dtype, results[2]))
        new_grad_avg = new_states[-1].astype(np.float32)
        # square_avg.addcmul(grad_avg, grad_avg, value=-1): the product of two float16/bfloat16 values
        # is exact in float32, so the fused multiply-add's one rounding is the difference's.
        average = rounded(xp.sqrt(rounded(new_square_avg - new_grad_avg * new_grad_avg)))
    else:
        average = rounded(xp.sqrt(new_square_avg))
    average = rounded(average + epsilon)
    if buffer is not None:
        # buf.mul_(momentum).addcdiv_(grad, avg), then param.add_(buf, alpha=-lr)
        new_buffer = rounded(buffer.astype(np.float32) * momentum)
        new_buffer += gradient / average
        new_states.append(_narrowed(new_buffer, dtype, results[-1]))
        new_x = _narrowed(wide_x - rounded_lr * new_states[-1].astype(np.float32), dtype, results[0])
    else:
        # param.addcdiv_(grad, avg, value=-lr): ``param + (value * grad) / avg``
        new_x = _narrowed(wide_x + (-learning_rate * gradient) / average, dtype, results[0])
    return (new_x, *new_states)


_LOW_PRECISION_RMSPROP = Update("RMSprop", _low_precision_rmsprop_update)
