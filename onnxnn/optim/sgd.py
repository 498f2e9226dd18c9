"""SGD: stochastic gradient descent with optional momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

from typing import Iterable

from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _assign, _check_differentiable, _Hyperparameters

__all__ = ["SGD", "sgd"]


class SGD(Optimizer):
    r"""Implements stochastic gradient descent (optionally with momentum), as ``torch.optim.SGD``.

    .. math::
        g_t = \nabla f(\theta_{t-1}) + \lambda \theta_{t-1}, \quad
        b_t = \mu b_{t-1} + (1 - \tau) g_t \ (b_1 = g_1), \quad
        \theta_t = \theta_{t-1} - \gamma (g_t + \mu b_t \text{ if nesterov else } b_t)

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        momentum: momentum factor (default: 0).
        dampening: dampening for momentum (default: 0).
        weight_decay: L2 penalty (default: 0).
        nesterov: enables Nesterov momentum (default: False).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, fused: accepted for compatibility; every step is one fused graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> optimizer.zero_grad()
        >>> loss_fn(model(input), target).backward()
        >>> optimizer.step()
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _check_differentiable(differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)

    def _init_group(self, group: dict) -> tuple[list, list, list]:
        params, grads, momentum_buffers = [], [], []
        for param in group["params"]:
            if param.grad is None:
                continue
            params.append(param)
            grads.append(param.grad)
            if group["momentum"] != 0:
                momentum_buffers.append(self.state[param].get("momentum_buffer"))
        return params, grads, momentum_buffers

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, momentum_buffers = self._init_group(group)
        sgd(params, grads, momentum_buffers, weight_decay=group["weight_decay"],
            momentum=group["momentum"], lr=group["lr"], dampening=group["dampening"],
            nesterov=group["nesterov"], maximize=group["maximize"])
        updated = list(params)
        if group["momentum"] != 0:
            for param, buffer in zip(params, momentum_buffers):
                self.state[param]["momentum_buffer"] = buffer
                updated.append(buffer)
        return updated


def sgd(params: list[Tensor], d_p_list: list[Tensor], momentum_buffer_list: list[Tensor | None], *,
        weight_decay: float, momentum: float, lr: float, dampening: float, nesterov: bool,
        maximize: bool) -> None:
    """Functional SGD: records the update of every tensor in ``params`` (lazily, in place).

    ``momentum_buffer_list`` entries that are None are filled with new buffers (the first step
    copies the gradient). Nothing is computed until the values are realized.
    """
    scalar = _Hyperparameters()
    with no_grad():
        for index, param in enumerate(params):
            grad = d_p_list[index] if not maximize else -d_p_list[index]
            if weight_decay != 0:
                grad = grad + param * scalar("weight_decay", weight_decay, param)
            if momentum != 0:
                buffer = momentum_buffer_list[index]
                if buffer is None:
                    # A copy computed by the step (not an alias of ``.grad``), so later steps see
                    # distinct inputs and reuse one compiled graph from the second step on.
                    buffer = grad.clone()
                    momentum_buffer_list[index] = buffer
                else:
                    damped = grad
                    if dampening != 0:  # a constructor setting: one node fewer in the usual case
                        damped = grad * scalar("1-dampening", 1 - dampening, buffer)
                    new_buffer = buffer * scalar("momentum", momentum, buffer) + damped
                    _assign(buffer, new_buffer)
                if nesterov:
                    grad = grad + buffer * scalar("momentum", momentum, buffer)
                else:
                    grad = buffer
            _assign(param, param - grad * scalar("lr", lr, param))
