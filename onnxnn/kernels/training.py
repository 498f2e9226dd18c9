"""Optimizer kernels of the ``ai.onnx.preview.training`` domain: Momentum.

The arithmetic is the decomposition's (``runtime/ops/training.py``) op for op, so both executors
round alike: ``V_new = alpha * V + beta' * (G + norm_coefficient * X)`` and ``X_new = X - R * V_new``
(Nesterov: ``X - R * (G' + alpha * V_new)``), with ``beta' = 1`` on the first update (``T == 0``).
"""
from __future__ import annotations

from .registry import FLOATING, kernels

__all__: list[str] = []

# Parameters of a small model are updated as one flat vector: a handful of numpy calls instead of
# seven per parameter, which on tiny arrays cost far more than their arithmetic. Large ones are
# updated one by one, so no step copies a big model's parameters into a buffer.
FLAT_UPDATE_MAX_ELEMENTS = 1 << 16


@kernels.register("Momentum", domain="ai.onnx.preview.training", types=FLOATING)
def momentum(xp, inputs, attrs):
    learning_rate, update_count = inputs[0], inputs[1]
    tensors = inputs[2:]
    count = len(tensors) // 3
    xs, gs, vs = tensors[:count], tensors[count:2 * count], tensors[2 * count:]
    beta = attrs["beta"] if int(update_count) > 0 else 1.0
    dtype = xs[0].dtype
    if count > 1 and sum(x.size for x in xs) <= FLAT_UPDATE_MAX_ELEMENTS and all(x.dtype == dtype for x in xs):
        new_x, new_v = _update(xp, xp.concatenate(xs, axis=None), xp.concatenate(gs, axis=None),
                               xp.concatenate(vs, axis=None), learning_rate, beta, attrs)
        new_values, new_velocities, start = [], [], 0
        for x in xs:
            stop = start + x.size
            new_values.append(new_x[start:stop].reshape(x.shape))
            new_velocities.append(new_v[start:stop].reshape(x.shape))
            start = stop
        return new_values + new_velocities
    updates = [_update(xp, x, g, v, learning_rate, beta, attrs) for x, g, v in zip(xs, gs, vs)]
    return [x for x, _ in updates] + [v for _, v in updates]


def _update(xp, x, g, v, learning_rate, beta: float, attrs: dict):
    scalar = x.dtype.type
    alpha, norm_coefficient = scalar(attrs["alpha"]), attrs["norm_coefficient"]
    gradient = g if norm_coefficient == 0 else x * scalar(norm_coefficient) + g
    scaled = gradient if beta == 1 else gradient * scalar(beta)
    velocity = v * alpha + scaled
    direction = gradient + velocity * alpha if attrs.get("mode", "standard") == "nesterov" else velocity
    return x - learning_rate.astype(x.dtype) * direction, velocity
