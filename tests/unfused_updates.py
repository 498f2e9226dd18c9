"""Adam's, Adagrad's and RMSprop's updates as onnxnn computed them before their fused nodes: elementwise ops.

The reference of the fused ops' exactness tests. Before the nodes existed, ``optim/adam.py``,
``optim/adagrad.py`` and ``optim/rmsprop.py`` recorded these Tensor ops per parameter, each
rounded to the parameter's dtype, with every hyperparameter a Python number computed in float64
(``1 - beta1``, ``lr / (1 - beta1 ** step)``, ...) and cast to the parameter's dtype once. The
fused nodes must give the same bits.
"""

from __future__ import annotations

import math

import numpy as np


def unfused_adam_step(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    max_exp_avg_sq,
    step: float,
    *,
    lr: float,
    betas: tuple = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0,
    amsgrad: bool = False,
    maximize: bool = False,
    decoupled_weight_decay: bool = False,
) -> tuple:
    """One parameter's step ``step`` (counted from 1): its new (param, exp_avg, exp_avg_sq, max_exp_avg_sq).

    ``max_exp_avg_sq`` is returned unchanged (None stays None) without amsgrad.
    """
    dtype = param.dtype.type
    beta1, beta2 = betas
    grad = -grad if maximize else grad
    new_param = param
    if weight_decay != 0:
        if decoupled_weight_decay:
            new_param = param * dtype(1 - lr * weight_decay)
        else:
            grad = grad + param * dtype(weight_decay)
    new_exp_avg = exp_avg + (grad - exp_avg) * dtype(1 - beta1)
    new_exp_avg_sq = exp_avg_sq * dtype(beta2) + grad * grad * dtype(1 - beta2)
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = math.sqrt(1 - beta2**step)
    second_moment = new_exp_avg_sq
    if amsgrad:
        max_exp_avg_sq = second_moment = np.maximum(max_exp_avg_sq, new_exp_avg_sq)
    denominator = np.sqrt(second_moment) / dtype(bias_correction2_sqrt) + dtype(eps)
    new_param = new_param - new_exp_avg / denominator * dtype(lr / bias_correction1)
    return tuple(
        None if array is None else np.asarray(array, param.dtype)
        for array in (new_param, new_exp_avg, new_exp_avg_sq, max_exp_avg_sq)
    )


def unfused_adagrad_step(
    param,
    grad,
    state_sum,
    step: float,
    *,
    lr: float = 1e-2,
    lr_decay: float = 0,
    weight_decay: float = 0,
    eps: float = 1e-10,
    maximize: bool = False,
) -> tuple:
    """One parameter's step ``step`` (counted from 1): its new (param, sum)."""
    dtype = param.dtype.type
    grad = -grad if maximize else grad
    if weight_decay != 0:
        grad = grad + param * dtype(weight_decay)
    decayed_lr = lr / (1 + (step - 1) * lr_decay)
    new_sum = state_sum + grad * grad
    std = np.sqrt(new_sum) + dtype(eps)
    new_param = param - grad / std * dtype(decayed_lr)
    return np.asarray(new_param, param.dtype), np.asarray(new_sum, param.dtype)


def unfused_rmsprop_step(
    param,
    grad,
    square_avg,
    grad_avg,
    buffer,
    step: float,
    *,
    lr: float = 1e-2,
    alpha: float = 0.99,
    eps: float = 1e-8,
    weight_decay: float = 0,
    momentum: float = 0,
    centered: bool = False,
    maximize: bool = False,
) -> tuple:
    """One parameter's step: its new (param, square_avg, grad_avg, momentum_buffer).

    ``grad_avg`` (without ``centered``) and ``buffer`` (without momentum) are returned unchanged.
    """
    dtype = param.dtype.type
    grad = -grad if maximize else grad
    if weight_decay != 0:
        grad = grad + param * dtype(weight_decay)
    new_square_avg = square_avg * dtype(alpha) + grad * grad * dtype(1 - alpha)
    if centered:
        grad_avg = grad_avg + (grad - grad_avg) * dtype(1 - alpha)
        average = np.sqrt(new_square_avg - grad_avg * grad_avg)
    else:
        average = np.sqrt(new_square_avg)
    average = average + dtype(eps)
    if momentum > 0:
        buffer = buffer * dtype(momentum) + grad / average
        new_param = param - buffer * dtype(lr)
    else:
        new_param = param - grad / average * dtype(lr)
    return tuple(np.asarray(array, param.dtype) for array in (new_param, new_square_avg, grad_avg, buffer))
