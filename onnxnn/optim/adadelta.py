"""Adadelta: steps scaled by the ratio of running root mean squares of past updates and gradients."""

from __future__ import annotations

from typing import Iterable

from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _check_learning_rate
from ..runtime.ops.opmath import REDUCED_FLOATS
from .step_recording import (
    _decay_factor,
    OpmathStep,
    _check_differentiable,
    _count_step,
    _new_step_tensor,
    _picked,
    _record_formula_updates,
    _zeros_like,
)

__all__ = ["Adadelta", "adadelta"]


class Adadelta(Optimizer):
    r"""Implements Adadelta, as ``torch.optim.Adadelta``.

    .. math::
        v_t = \rho v_{t-1} + (1 - \rho) g_t^2, \quad
        \Delta x_t = \frac{\sqrt{u_{t-1} + \epsilon}}{\sqrt{v_t + \epsilon}} g_t, \quad
        u_t = \rho u_{t-1} + (1 - \rho) \Delta x_t^2, \quad \theta_t = \theta_{t-1} - \gamma \Delta x_t

    with :math:`g_t` the gradient plus :math:`\lambda \theta_{t-1}` when weight decay is set.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: coefficient that scales delta before it is applied to the parameters (default: 1.0).
        rho: coefficient of the running averages of squared gradients and squared updates (default: 0.9).
        eps: term added to the denominator for numerical stability (default: 1e-6).
        weight_decay: weight decay (L2 penalty) (default: 0).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, capturable: accepted for compatibility; every step is one graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.Adadelta(model.parameters())
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_learning_rate(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            capturable=capturable,
            foreach=foreach,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._steps_as_tensors()
        for group in self.param_groups:
            group.setdefault("maximize", False)

    def _init_group(self, group: dict):
        return self._group_states(group, ("square_avg", "acc_delta", "step"), _fresh_state)

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, square_avgs, acc_deltas, steps = self._init_group(group)
        adadelta(
            params,
            grads,
            square_avgs,
            acc_deltas,
            steps,
            lr=group["lr"],
            rho=group["rho"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        return params + square_avgs + acc_deltas + (steps if group.get("capturable", False) else [])


def adadelta(
    params: list[Tensor],
    grads: list[Tensor],
    square_avgs: list[Tensor],
    acc_deltas: list[Tensor],
    state_steps: list[Tensor],
    *,
    lr: float,
    rho: float,
    eps: float,
    weight_decay: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional Adadelta: records the update of every tensor in ``params`` and its state (lazily, in place).

    The step counts are kept on the host (Adadelta's update does not read them); float32 and
    float64 tensors are updated by fused ``Adadelta`` nodes (``ir/update_formulas.py``).
    """
    # Hyperparameters given as 0-d tensors are read as the numbers they hold (the host computes with them).
    lr, rho, eps, weight_decay = map(float, (lr, rho, eps, weight_decay))
    with no_grad():
        fused: list[int] = []
        settings: list[tuple[dict, tuple]] = []
        for index, (param, step) in enumerate(zip(params, state_steps)):
            _count_step(step, capturable)  # read by nothing
            if param.dtype in REDUCED_FLOATS:
                grad = -grads[index] if maximize else grads[index]
                _opmath_step(param, grad, square_avgs[index], acc_deltas[index], lr, rho, eps, weight_decay)
                continue
            fused.append(index)
            decay = _decay_factor(weight_decay)
            settings.append(({"maximize": int(maximize)}, (lr, rho, 1 - rho, eps, decay)))
        _record_formula_updates("Adadelta", *_picked(fused, params, grads, square_avgs, acc_deltas), settings)


def _opmath_step(
    param: Tensor,
    grad: Tensor,
    square_avg: Tensor,
    acc_delta: Tensor,
    lr: float,
    rho: float,
    eps: float,
    weight_decay: float,
) -> None:
    """One float16/bfloat16 parameter's step, op for op as ``torch.optim.Adadelta``'s single-tensor step."""
    step = OpmathStep(param)
    weights, gradient = step.load(param), step.load(grad)
    weights, gradient = step.decay(weights, gradient, 0.0, weight_decay, decoupled=False)
    new_square_avg = step.multiply(step.load(square_avg), "rho", rho)
    new_square_avg = step.addcmul(new_square_avg, gradient, gradient, "1-rho", 1 - rho)
    std = step.sqrt(step.add_number(new_square_avg, "eps", eps))
    delta = step.sqrt(step.add_number(step.load(acc_delta), "eps", eps))
    delta = step.rounded(step.rounded(delta / std) * gradient)
    new_acc_delta = step.multiply(step.load(acc_delta), "rho", rho)
    new_acc_delta = step.addcmul(new_acc_delta, delta, delta, "1-rho", 1 - rho)
    step.store(square_avg, new_square_avg)
    step.store(acc_delta, new_acc_delta)
    step.store(param, step.add(weights, delta, "-lr", -lr))


def _fresh_state(param: Tensor) -> dict:
    return {"step": _new_step_tensor(), "square_avg": _zeros_like(param), "acc_delta": _zeros_like(param)}
