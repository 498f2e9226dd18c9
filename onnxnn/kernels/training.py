"""Optimizer kernels of the ``ai.onnx.preview.training`` domain: Momentum.

The arithmetic is the decomposition's (``runtime/ops/training.py``) op for op, so both executors
round alike: ``V_new = alpha * V + beta' * (G + norm_coefficient * X)`` and ``X_new = X - R * V_new``
(Nesterov: ``X - R * (G' + alpha * V_new)``), with ``beta' = 1`` on the first update (``T == 0``).
"""
from __future__ import annotations

from .registry import FLOATING, kernels

__all__: list[str] = []


@kernels.register("Momentum", domain="ai.onnx.preview.training", types=FLOATING)
def momentum(xp, inputs, attrs):
    learning_rate, update_count = inputs[0], inputs[1]
    tensors = inputs[2:]
    count = len(tensors) // 3
    alpha, beta = attrs["alpha"], attrs["beta"]
    norm_coefficient = attrs["norm_coefficient"]
    nesterov = attrs.get("mode", "standard") == "nesterov"
    new_values, new_velocities = [], []
    for index in range(count):
        x, g, v = tensors[index], tensors[count + index], tensors[2 * count + index]
        scalar = x.dtype.type
        gradient = g if norm_coefficient == 0 else x * scalar(norm_coefficient) + g
        scaled = gradient
        if beta != 1:
            scaled = gradient * (scalar(beta) if int(update_count) > 0 else scalar(1))
        velocity = v * scalar(alpha) + scaled
        direction = gradient + velocity * scalar(alpha) if nesterov else velocity
        new_values.append(x - learning_rate.astype(x.dtype) * direction)
        new_velocities.append(velocity)
    return new_values + new_velocities
