"""Optimizer updates as onnxnn computed them before their fused nodes: elementwise ops.

The reference of the fused ops' exactness tests. Before the nodes existed, ``optim/adam.py``,
``optim/adagrad.py``, ``optim/rmsprop.py`` (and Adamax's, NAdam's, RAdam's and Adadelta's
modules) recorded these Tensor ops per parameter, each
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


# Adamax's, NAdam's, RAdam's and Adadelta's steps as their Tensor ops computed them before their
# fused nodes (onnxnn/ir/update_formulas.py), in the same order.


def unfused_adamax_step(
    param,
    grad,
    exp_avg,
    exp_inf,
    step: float,
    *,
    lr: float = 2e-3,
    betas: tuple = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0,
    maximize: bool = False,
) -> tuple:
    """One parameter's step ``step`` (counted from 1): its new (param, exp_avg, exp_inf)."""
    dtype = param.dtype.type
    beta1, beta2 = betas
    grad = -grad if maximize else grad
    if weight_decay != 0:
        grad = grad + param * dtype(weight_decay)
    new_exp_avg = exp_avg + (grad - exp_avg) * dtype(1 - beta1)
    new_exp_inf = np.maximum(exp_inf * dtype(beta2), np.abs(grad) + dtype(eps))
    new_param = param - new_exp_avg / new_exp_inf * dtype(lr / (1 - beta1**step))
    return tuple(np.asarray(array, param.dtype) for array in (new_param, new_exp_avg, new_exp_inf))


def _decayed(param, grad, dtype, lr: float, weight_decay: float, decoupled: bool, maximize: bool) -> tuple:
    """``(param', grad')`` after maximize's negation and weight decay, decoupled or L2."""
    grad = -grad if maximize else grad
    if weight_decay != 0 and decoupled:
        return param * dtype(1 - lr * weight_decay), grad
    if weight_decay != 0:
        return param, grad + param * dtype(weight_decay)
    return param, grad


def unfused_nadam_step(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    mu_product,
    step: float,
    *,
    lr: float = 2e-3,
    betas: tuple = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0,
    momentum_decay: float = 4e-3,
    decoupled_weight_decay: bool = False,
    maximize: bool = False,
) -> tuple:
    """One parameter's step: its new (param, exp_avg, exp_avg_sq, mu_product); ``mu_product`` is the
    float32 product of the momentum coefficients so far, kept on the host."""
    dtype = param.dtype.type
    beta1, beta2 = betas
    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
    mu_product = float(np.float32(mu_product) * np.float32(mu))
    mu_product_next = mu_product * mu_next
    new_param, grad = _decayed(param, grad, dtype, lr, weight_decay, decoupled_weight_decay, maximize)
    new_exp_avg = exp_avg + (grad - exp_avg) * dtype(1 - beta1)
    new_exp_avg_sq = exp_avg_sq * dtype(beta2) + grad * grad * dtype(1 - beta2)
    denominator = np.sqrt(new_exp_avg_sq / dtype(1 - beta2**step)) + dtype(eps)
    grad_step = dtype(lr * (1 - mu) / (1 - mu_product))
    average_step = dtype(lr * mu_next / (1 - mu_product_next))
    new_param = new_param - grad / denominator * grad_step - new_exp_avg / denominator * average_step
    arrays = tuple(np.asarray(array, param.dtype) for array in (new_param, new_exp_avg, new_exp_avg_sq))
    return (*arrays, mu_product)


def unfused_radam_step(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    step: float,
    *,
    lr: float = 1e-3,
    betas: tuple = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0,
    decoupled_weight_decay: bool = False,
    maximize: bool = False,
) -> tuple:
    """One parameter's step: its new (param, exp_avg, exp_avg_sq), rectified once rho_t passes 5."""
    dtype = param.dtype.type
    beta1, beta2 = betas
    new_param, grad = _decayed(param, grad, dtype, lr, weight_decay, decoupled_weight_decay, maximize)
    new_exp_avg = exp_avg + (grad - exp_avg) * dtype(1 - beta1)
    new_exp_avg_sq = exp_avg_sq * dtype(beta2) + grad * grad * dtype(1 - beta2)
    bias_correction1, bias_correction2 = 1 - beta1**step, 1 - beta2**step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * beta2**step / bias_correction2
    if rho_t > 5.0:
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        scale = lr * math.sqrt(bias_correction2) * rect / bias_correction1
        update = new_exp_avg / (np.sqrt(new_exp_avg_sq) + dtype(eps)) * dtype(scale)
    else:
        update = new_exp_avg * dtype(lr / bias_correction1)
    return tuple(np.asarray(array, param.dtype) for array in (new_param - update, new_exp_avg, new_exp_avg_sq))


def unfused_adadelta_step(
    param,
    grad,
    square_avg,
    acc_delta,
    step: float,
    *,
    lr: float = 1.0,
    rho: float = 0.9,
    eps: float = 1e-6,
    weight_decay: float = 0,
    maximize: bool = False,
) -> tuple:
    """One parameter's step: its new (param, square_avg, acc_delta)."""
    dtype = param.dtype.type
    _, grad = _decayed(param, grad, dtype, lr, weight_decay, False, maximize)
    new_square_avg = square_avg * dtype(rho) + grad * grad * dtype(1 - rho)
    delta = np.sqrt(acc_delta + dtype(eps)) / np.sqrt(new_square_avg + dtype(eps)) * grad
    new_acc_delta = acc_delta * dtype(rho) + delta * delta * dtype(1 - rho)
    new_param = param - delta * dtype(lr)
    return tuple(np.asarray(array, param.dtype) for array in (new_param, new_square_avg, new_acc_delta))


def unfused_asgd_step(
    param,
    grad,
    ax,
    eta,
    mu,
    step: float,
    *,
    lr: float = 1e-2,
    lambd: float = 1e-4,
    alpha: float = 0.75,
    t0: float = 1e6,
    weight_decay: float = 0,
    maximize: bool = False,
) -> tuple:
    """One parameter's step: its new (param, ax, eta, mu); ``eta`` and ``mu`` are kept on the host as
    float32 numbers, as PyTorch keeps them (0-d float32 tensors)."""
    dtype = param.dtype.type
    _, grad = _decayed(param, grad, dtype, lr, weight_decay, False, maximize)
    new_param = param * dtype(1 - lambd * eta) - grad * dtype(eta)
    new_ax = ax + (new_param - ax) * dtype(mu) if mu != 1 else new_param
    new_eta = float(np.float32(lr / ((1 + lambd * lr * step) ** alpha)))
    new_mu = float(np.float32(1 / max(1, step - t0)))
    return np.asarray(new_param, param.dtype), np.asarray(new_ax, param.dtype), new_eta, new_mu


def unfused_rprop_step(
    param,
    grad,
    prev,
    step_size,
    step: float,
    *,
    lr: float = 1e-2,
    etas: tuple = (0.5, 1.2),
    step_sizes: tuple = (1e-6, 50),
    maximize: bool = False,
) -> tuple:
    """One parameter's step: its new (param, prev, step_size); ``step_size`` starts as ``lr``."""
    dtype = param.dtype.type
    etaminus, etaplus = etas
    grad = -grad if maximize else grad
    agreement = grad * prev
    flipped = agreement < 0
    factor = np.where(agreement > 0, dtype(etaplus), np.where(flipped, dtype(etaminus), dtype(1)))
    new_step_size = np.minimum(np.maximum(step_size * factor, dtype(step_sizes[0])), dtype(step_sizes[1]))
    kept_grad = np.where(flipped, dtype(0), grad)
    new_param = param - np.sign(kept_grad) * new_step_size
    return tuple(np.asarray(array, param.dtype) for array in (new_param, kept_grad, new_step_size))


def unfused_sgd_step(
    param, grad, step: float, *, lr: float = 1e-3, weight_decay: float = 0, maximize: bool = False
) -> tuple:
    """One parameter's step of SGD without momentum: its new (param,)."""
    dtype = param.dtype.type
    _, grad = _decayed(param, grad, dtype, lr, weight_decay, False, maximize)
    return (np.asarray(param - dtype(lr) * grad, param.dtype),)
