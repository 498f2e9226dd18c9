"""RAdam: Adam whose adaptive learning rate is rectified while the second moment estimate is unreliable."""

from __future__ import annotations

import math
from typing import Iterable

from ..runtime.grad_mode import no_grad
from ..runtime.internal import record_update
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _check_adam_hyperparameters
from ..runtime.ops.opmath import REDUCED_FLOATS
from .step_recording import (
    _decay_factor,
    OpmathStep,
    _captured_count,
    _check_differentiable,
    _formula_outputs,
    _graph_number,
    _increment_step,
    _new_step_tensor,
    _picked,
    _record_formula_updates,
    _zeros_like,
)

__all__ = ["RAdam", "radam"]


class RAdam(Optimizer):
    r"""Implements RAdam (rectified Adam), as ``torch.optim.RAdam``.

    .. math::
        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2, \quad
        \rho_\infty = \frac{2}{1 - \beta_2} - 1, \quad \rho_t = \rho_\infty - \frac{2 t \beta_2^t}{1 - \beta_2^t}, \\
        \theta_t = \theta_{t-1} - \gamma \frac{m_t}{1 - \beta_1^t} \cdot
        \begin{cases} r_t \frac{\sqrt{1 - \beta_2^t}}{\sqrt{v_t} + \epsilon} & \rho_t > 5 \\
        1 & \text{otherwise} \end{cases},
        \quad r_t = \sqrt{\frac{(\rho_t - 4)(\rho_t - 2)\rho_\infty}{(\rho_\infty - 4)(\rho_\infty - 2)\rho_t}}

    with :math:`g_t` the gradient plus :math:`\lambda \theta_{t-1}` (or, with decoupled weight decay,
    :math:`\theta_{t-1}` first scaled by :math:`1 - \gamma\lambda`).

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        betas: coefficients of the running averages of the gradient and its square (default: (0.9, 0.999)).
        eps: term added to the denominator for numerical stability (default: 1e-8).
        weight_decay: weight decay (L2 penalty) (default: 0).
        decoupled_weight_decay: decay the weights directly, as AdamW does (RAdamW) (default: False).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, capturable: accepted for compatibility; every step is one graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.RAdam(model.parameters(), lr=1e-3)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_adam_hyperparameters(lr, eps, betas, weight_decay)
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            decoupled_weight_decay=decoupled_weight_decay,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._steps_as_tensors()
        for group in self.param_groups:
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)

    def _init_group(self, group: dict):
        return self._group_states(group, ("exp_avg", "exp_avg_sq", "step"), _fresh_state)

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, exp_avgs, exp_avg_sqs, steps = self._init_group(group)
        beta1, beta2 = group["betas"]
        radam(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            steps,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            decoupled_weight_decay=group["decoupled_weight_decay"],
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        return params + exp_avgs + exp_avg_sqs + (steps if group.get("capturable", False) else [])


def radam(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    state_steps: list[Tensor],
    decoupled_weight_decay: bool = False,
    *,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional RAdam: records the update of every tensor in ``params`` and its state (lazily, in place).

    The step counts are kept on the host, so whether the step is rectified (:math:`\\rho_t > 5`) is
    decided there, as PyTorch does without ``capturable``; float32 and float64 tensors are updated
    by fused ``RAdam`` nodes (``ir/update_formulas.py``), fed the coefficients as data. With
    ``capturable``, the counts and coefficients are computed in the graph, which picks the
    rectified or the plain step per tensor by ``rho_t > 5``.
    """
    # Hyperparameters given as 0-d tensors are read as the numbers they hold (the host computes with them).
    lr, beta1, beta2, eps, weight_decay = map(float, (lr, beta1, beta2, eps, weight_decay))
    rho_inf = 2 / (1 - beta2) - 1
    with no_grad():
        fused: list[int] = []
        settings: list[tuple[dict, tuple]] = []
        for index, param in enumerate(params):
            if capturable and param.dtype not in REDUCED_FLOATS:
                moments = (exp_avgs[index], exp_avg_sqs[index])
                hyperparameters = (beta1, beta2, lr, eps, weight_decay, decoupled_weight_decay, maximize)
                _captured_update(param, grads[index], moments, state_steps[index], hyperparameters)
                continue
            count = _increment_step(state_steps[index])
            if param.dtype in REDUCED_FLOATS:
                grad = -grads[index] if maximize else grads[index]
                _opmath_step(
                    param,
                    grad,
                    exp_avgs[index],
                    exp_avg_sqs[index],
                    count,
                    beta1,
                    beta2,
                    lr,
                    eps,
                    weight_decay,
                    decoupled_weight_decay,
                )
                continue
            fused.append(index)
            bias_correction1 = 1 - beta1**count
            bias_correction2 = 1 - beta2**count
            rho_t = rho_inf - 2 * count * beta2**count / bias_correction2
            rectified = rho_t > 5.0
            if rectified:
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                step_size = lr * math.sqrt(bias_correction2) * rect / bias_correction1
            else:
                step_size = lr / bias_correction1
            decay = _decay_factor(weight_decay, lr, decoupled_weight_decay)
            attributes = {
                "decoupled_weight_decay": int(decoupled_weight_decay),
                "maximize": int(maximize),
                "rectified": int(rectified),
            }
            settings.append((attributes, (1 - beta1, beta2, 1 - beta2, eps, step_size, decay)))
        _record_formula_updates("RAdam", *_picked(fused, params, grads, exp_avgs, exp_avg_sqs), settings)


def _captured_update(param: Tensor, grad: Tensor, moments: tuple, step: Tensor, hyperparameters: tuple) -> None:
    """One float32/float64 parameter's ``capturable`` step: its count and coefficients computed in the
    graph as the host computes them, both forms recorded and the new parameter picked by ``rho_t > 5``."""
    beta1, beta2, lr, eps, weight_decay, decoupled_weight_decay, maximize = hyperparameters
    counted = _captured_count(step)
    bias_correction1 = 1 - beta1**counted
    bias_correction2 = 1 - beta2**counted
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * counted * beta2**counted / bias_correction2
    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)).sqrt()
    step_sizes = {
        1: lr * bias_correction2.sqrt() * rect / bias_correction1,
        0: _graph_number(lr, counted) / bias_correction1,
    }
    decay = _decay_factor(weight_decay, lr, decoupled_weight_decay)
    results = {}
    for rectified, step_size in step_sizes.items():
        attributes = {
            "decoupled_weight_decay": int(decoupled_weight_decay),
            "maximize": int(maximize),
            "rectified": rectified,
        }
        factors = (1 - beta1, beta2, 1 - beta2, eps, step_size, decay)
        results[rectified] = _formula_outputs("RAdam", attributes, factors, param, grad, list(moments))
    record_update(param, results[1][0].where(rho_t > 5.0, results[0][0]))  # NaN rectified steps unpicked
    for moment, new_moment in zip(moments, results[1][1:]):
        record_update(moment, new_moment)


def _opmath_step(
    param: Tensor,
    grad: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    count: float,
    beta1: float,
    beta2: float,
    lr: float,
    eps: float,
    weight_decay: float,
    decoupled_weight_decay: bool,
) -> None:
    """One float16/bfloat16 parameter's step, op for op as ``torch.optim.RAdam``'s single-tensor step."""
    step = OpmathStep(param)
    weights, gradient = step.load(param), step.load(grad)
    weights, gradient = step.decay(weights, gradient, lr, weight_decay, decoupled_weight_decay)
    new_exp_avg, new_exp_avg_sq = step.moments(exp_avg, exp_avg_sq, gradient, beta1, beta2)
    bias_correction1 = 1 - beta1**count
    bias_correction2 = 1 - beta2**count
    update = step.multiply(step.divide(new_exp_avg, "bias_correction1", bias_correction1), "lr", lr)
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * count * (beta2**count) / bias_correction2
    if rho_t > 5.0:
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
        root = step.add_number(step.sqrt(new_exp_avg_sq), "eps", eps)
        # ``bias_correction2**0.5 / root`` is ``root.reciprocal() * bias_correction2**0.5`` (Tensor.__rtruediv__).
        adaptive_lr = step.multiply(step.rounded(1.0 / root), "bias_correction2**0.5", bias_correction2**0.5)
        update = step.multiply(step.rounded(update * adaptive_lr), "rect", rect)
    step.store(exp_avg, new_exp_avg)
    step.store(exp_avg_sq, new_exp_avg_sq)
    step.store(param, step.rounded(weights - update))


def _fresh_state(param: Tensor) -> dict:
    return {"step": _new_step_tensor(), "exp_avg": _zeros_like(param), "exp_avg_sq": _zeros_like(param)}
