"""RMSprop: gradient steps divided by a running root mean square of the gradients."""

from __future__ import annotations

from typing import Iterable

from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _check_learning_rate
from .step_recording import _check_differentiable, _new_step_tensor, _record_fused_updates, _zeros_like

__all__ = ["RMSprop", "rmsprop"]


class RMSprop(Optimizer):
    r"""Implements RMSprop, as ``torch.optim.RMSprop``.

    .. math::
        v_t = \alpha v_{t-1} + (1 - \alpha) g_t^2, \quad
        \tilde v_t = v_t - \bar g_t^2 \text{ if centered else } v_t, \quad
        \theta_t = \theta_{t-1} - \gamma \frac{g_t}{\sqrt{\tilde v_t} + \epsilon}

    where :math:`\bar g_t` is the running average of the gradients (centered only); with momentum
    :math:`\mu > 0` the step goes through a buffer :math:`b_t = \mu b_{t-1} + g_t / (\sqrt{\tilde v_t} + \epsilon)`.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-2).
        alpha: smoothing constant (default: 0.99).
        eps: term added to the denominator for numerical stability (default: 1e-8).
        weight_decay: weight decay (L2 penalty) (default: 0).
        momentum: momentum factor (default: 0).
        centered: normalize by an estimate of the gradient's variance (default: False).
        maximize: maximize the objective instead of minimizing (default: False).
        capturable, foreach: accepted for compatibility; every step is one fused graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_learning_rate(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            momentum=momentum,
            alpha=alpha,
            eps=eps,
            centered=centered,
            weight_decay=weight_decay,
            capturable=capturable,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._steps_as_tensors()
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("maximize", False)

    def _init_group(self, group: dict):
        params, grads, square_avgs, grad_avgs, momentum_buffers, steps = [], [], [], [], [], []
        for param in group["params"]:
            if param.grad is None:
                continue
            params.append(param)
            grads.append(param.grad)
            state = self.state[param]
            if len(state) == 0:
                state["step"] = _new_step_tensor()
                state["square_avg"] = _zeros_like(param)
                if group["momentum"] > 0:
                    state["momentum_buffer"] = _zeros_like(param)
                if group["centered"]:
                    state["grad_avg"] = _zeros_like(param)
            square_avgs.append(state["square_avg"])
            steps.append(state["step"])
            if group["momentum"] > 0:
                momentum_buffers.append(state["momentum_buffer"])
            if group["centered"]:
                grad_avgs.append(state["grad_avg"])
        return params, grads, square_avgs, grad_avgs, momentum_buffers, steps

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, square_avgs, grad_avgs, momentum_buffers, steps = self._init_group(group)
        rmsprop(
            params,
            grads,
            square_avgs,
            grad_avgs,
            momentum_buffers,
            steps,
            lr=group["lr"],
            alpha=group["alpha"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            momentum=group["momentum"],
            centered=group["centered"],
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        counted = steps if group.get("capturable", False) else []
        return params + square_avgs + grad_avgs + momentum_buffers + counted


def rmsprop(
    params: list[Tensor],
    grads: list[Tensor],
    square_avgs: list[Tensor],
    grad_avgs: list[Tensor],
    momentum_buffer_list: list[Tensor],
    state_steps: list[Tensor],
    *,
    lr: float,
    alpha: float,
    eps: float,
    weight_decay: float,
    momentum: float,
    centered: bool,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional RMSprop: records the update of every tensor in ``params`` and its state (lazily, in place).

    Each group of parameters with one dtype and device is updated by one fused ``RMSprop`` node
    (runtime/ops/training.py) whose hyperparameters are fed data; the step counts are kept on the host.
    """

    def hyperparameters(step, scalar) -> tuple:
        return (
            scalar("lr", lr),
            scalar("alpha", alpha),
            scalar("eps", eps),
            scalar("weight_decay", weight_decay) if weight_decay != 0 else None,
            scalar("momentum", momentum) if momentum > 0 else None,
        )

    states = [square_avgs] + ([grad_avgs] if centered else []) + ([momentum_buffer_list] if momentum > 0 else [])
    attributes = {"centered": int(bool(centered)), "maximize": int(bool(maximize))}
    with no_grad():
        _record_fused_updates(
            "RMSprop", attributes, params, grads, states, state_steps, hyperparameters, False, capturable
        )
