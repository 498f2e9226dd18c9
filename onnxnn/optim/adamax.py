"""Adamax: Adam with the infinity norm of the gradients in place of their running mean square."""

from __future__ import annotations

from typing import Iterable

from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _check_adam_hyperparameters
from ..runtime.ops.opmath import REDUCED_FLOATS
from .step_recording import (
    _decay_factor,
    OpmathStep,
    _captured_count,
    _check_differentiable,
    _graph_number,
    _increment_step,
    _new_step_tensor,
    _picked,
    _record_formula_updates,
    _zeros_like,
)

__all__ = ["Adamax", "adamax"]


class Adamax(Optimizer):
    r"""Implements Adamax (a variant of Adam based on the infinity norm), as ``torch.optim.Adamax``.

    .. math::
        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad u_t = \max(\beta_2 u_{t-1}, |g_t| + \epsilon), \quad
        \theta_t = \theta_{t-1} - \frac{\gamma m_t}{(1 - \beta_1^t) u_t}

    with :math:`g_t` the gradient plus :math:`\lambda \theta_{t-1}` when weight decay is set.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 2e-3).
        betas: coefficients of the running average of the gradient and of the infinity norm (default: (0.9, 0.999)).
        eps: term added to the denominator for numerical stability (default: 1e-8).
        weight_decay: weight decay (L2 penalty) (default: 0).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, capturable: accepted for compatibility; every step is one graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.Adamax(model.parameters(), lr=2e-3)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_adam_hyperparameters(lr, eps, betas, weight_decay)
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._steps_as_tensors()
        for group in self.param_groups:
            group.setdefault("maximize", False)

    def _init_group(self, group: dict):
        return self._group_states(group, ("exp_avg", "exp_inf", "step"), _fresh_state)

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, exp_avgs, exp_infs, steps = self._init_group(group)
        beta1, beta2 = group["betas"]
        adamax(
            params,
            grads,
            exp_avgs,
            exp_infs,
            steps,
            eps=group["eps"],
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        return params + exp_avgs + exp_infs + (steps if group.get("capturable", False) else [])


def adamax(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_infs: list[Tensor],
    state_steps: list[Tensor],
    *,
    eps: float,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional Adamax: records the update of every tensor in ``params`` and its state (lazily, in place).

    The step counts are kept on the host; float32 and float64 tensors are updated by fused
    ``Adamax`` nodes (``ir/update_formulas.py``), fed the bias-corrected learning rate as data. With
    ``capturable``, their step counts and learning rates are computed in the graph instead (an
    exported training step then counts its own steps).
    """
    # Hyperparameters given as 0-d tensors are read as the numbers they hold (the host computes with them).
    lr, beta1, beta2, eps, weight_decay = map(float, (lr, beta1, beta2, eps, weight_decay))
    with no_grad():
        fused: list[int] = []
        settings: list[tuple[dict, tuple]] = []
        for index, (param, step) in enumerate(zip(params, state_steps)):
            if param.dtype in REDUCED_FLOATS:
                count = _increment_step(step)
                grad = -grads[index] if maximize else grads[index]
                _opmath_step(param, grad, exp_avgs[index], exp_infs[index], count, eps, beta1, beta2, lr, weight_decay)
                continue
            fused.append(index)
            if capturable:
                counted = _captured_count(step)
                step_size = _graph_number(lr, counted) / (1 - beta1**counted)
            else:
                step_size = lr / (1 - beta1 ** _increment_step(step))
            decay = _decay_factor(weight_decay)
            settings.append(({"maximize": int(maximize)}, (step_size, 1 - beta1, beta2, eps, decay)))
        _record_formula_updates("Adamax", *_picked(fused, params, grads, exp_avgs, exp_infs), settings)


def _opmath_step(
    param: Tensor,
    grad: Tensor,
    exp_avg: Tensor,
    exp_inf: Tensor,
    count: float,
    eps: float,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
) -> None:
    """One float16/bfloat16 parameter's step, op for op as ``torch.optim.Adamax``'s single-tensor step."""
    step = OpmathStep(param)
    weights, gradient = step.load(param), step.load(grad)
    weights, gradient = step.decay(weights, gradient, 0.0, weight_decay, decoupled=False)
    new_exp_avg = step.lerp(step.load(exp_avg), gradient, "1-beta1", 1 - beta1)
    new_exp_inf = step.multiply(step.load(exp_inf), "beta2", beta2).maximum(step.add_number(gradient.abs(), "eps", eps))
    clr = lr / (1 - beta1**count)
    step.store(exp_avg, new_exp_avg)
    step.store(exp_inf, new_exp_inf)
    step.store(param, step.addcdiv(weights, new_exp_avg, new_exp_inf, "-lr/bias_correction1", -clr))


def _fresh_state(param: Tensor) -> dict:
    return {"step": _new_step_tensor(), "exp_avg": _zeros_like(param), "exp_inf": _zeros_like(param)}
