"""onnxnn's optimizer kernels (domain ``onnxnn.training``): Momentum.

The arithmetic is the decomposition's (``runtime/ops/training.py``) op for op, so both executors
round alike: ``V_new = alpha * V + beta' * (G + norm_coefficient * X)`` and ``X_new = X - R * V_new``
(Nesterov: ``X - R * (G' + alpha * V_new)``), with ``beta' = 1`` on the first update (``T == 0``).
"""
from __future__ import annotations

from ..runtime.ops.training import MOMENTUM_TENSORS_START, TRAINING_DOMAIN
from .registry import FLOATING, kernels

__all__: list[str] = []

# Parameters of a small model are updated as one flat vector: a handful of numpy calls instead of
# seven per parameter, which on tiny arrays cost far more than their arithmetic. Large ones are
# updated one by one, so no step copies a big model's parameters into a buffer.
FLAT_UPDATE_MAX_ELEMENTS = 1 << 16


@kernels.register("Momentum", domain=TRAINING_DOMAIN, types=FLOATING)
def momentum(xp, inputs, attrs):
    learning_rate, update_count, alpha, beta, norm_coefficient = inputs[:MOMENTUM_TENSORS_START]
    if beta is not None and int(update_count) == 0:
        beta = None  # the first update takes the whole gradient
    hyperparameters = (learning_rate, alpha, beta, norm_coefficient, attrs.get("mode", "standard") == "nesterov")
    tensors = inputs[MOMENTUM_TENSORS_START:]
    count = len(tensors) // 3
    xs, gs, vs = tensors[:count], tensors[count:2 * count], tensors[2 * count:]
    dtype = xs[0].dtype
    if count > 1 and sum(x.size for x in xs) <= FLAT_UPDATE_MAX_ELEMENTS and all(x.dtype == dtype for x in xs):
        new_x, new_v = _update(xp.concatenate(xs, axis=None), xp.concatenate(gs, axis=None),
                               xp.concatenate(vs, axis=None), *hyperparameters)
        new_values, new_velocities, start = [], [], 0
        for x in xs:
            stop = start + x.size
            new_values.append(new_x[start:stop].reshape(x.shape))
            new_velocities.append(new_v[start:stop].reshape(x.shape))
            start = stop
        return new_values + new_velocities
    updates = [_update(x, g, v, *hyperparameters) for x, g, v in zip(xs, gs, vs)]
    return [x for x, _ in updates] + [v for _, v in updates]


def _update(x, g, v, learning_rate, alpha, beta, norm_coefficient, nesterov: bool):
    dtype = x.dtype
    alpha = alpha.astype(dtype, copy=False)
    gradient = g if norm_coefficient is None else x * norm_coefficient.astype(dtype, copy=False) + g
    scaled = gradient if beta is None else gradient * beta.astype(dtype, copy=False)
    velocity = v * alpha + scaled
    direction = gradient + velocity * alpha if nesterov else velocity
    return x - learning_rate.astype(dtype, copy=False) * direction, velocity
