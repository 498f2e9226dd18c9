"""ASGD: stochastic gradient descent with a decaying step and a running (Polyak) average of the iterates."""

from __future__ import annotations

from typing import Iterable

from ..ir import dtypes
from ..runtime.grad_mode import no_grad
from ..runtime.internal import full_tensor, rebind, record_update, value_of
from ..runtime.tensor import Tensor
from ..runtime.ops.opmath import REDUCED_FLOATS
from .optimizer import Optimizer, _check_learning_rate
from .step_recording import (
    _decay_factor,
    _captured_count,
    _check_differentiable,
    _formula_outputs,
    _graph_number,
    _hyperparameter,
    _increment_step,
    _new_step_tensor,
    _picked,
    _record_formula_updates,
    _zeros_like,
)

__all__ = ["ASGD", "asgd"]


class ASGD(Optimizer):
    r"""Implements averaged stochastic gradient descent, as ``torch.optim.ASGD``.

    .. math::
        \theta_t = (1 - \lambda \eta_{t-1}) \theta_{t-1} - \eta_{t-1} g_t, \quad
        a_t = a_{t-1} + \mu_{t-1} (\theta_t - a_{t-1}), \\
        \eta_t = \frac{\gamma}{(1 + \lambda \gamma t)^\alpha}, \quad \mu_t = \frac{1}{\max(1, t - t_0)}

    with :math:`g_t` the gradient plus the weight decay times :math:`\theta_{t-1}`, and the average
    :math:`a_t` (state ``ax``) equal to :math:`\theta_t` while :math:`\mu_{t-1} = 1`.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-2).
        lambd: decay term (default: 1e-4).
        alpha: power for the eta update (default: 0.75).
        t0: point at which to start averaging (default: 1e6).
        weight_decay: weight decay (L2 penalty) (default: 0).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, capturable: accepted for compatibility; every step is one graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.ASGD(model.parameters(), lr=1e-2, t0=100)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_learning_rate(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            lambd=lambd,
            alpha=alpha,
            t0=t0,
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
            for param in group["params"]:
                param_state = self.state.get(param)
                for key in ("eta", "mu"):
                    if param_state and key in param_state and not isinstance(param_state[key], Tensor):
                        param_state[key] = full_tensor((), float(param_state[key]), dtypes.float32)

    def _init_group(self, group: dict):
        def fresh_state(param: Tensor) -> dict:
            # step, eta and mu are float32 0-d tensors, as PyTorch keeps them.
            return {
                "step": _new_step_tensor(),
                "eta": full_tensor((), float(group["lr"]), dtypes.float32),
                "mu": full_tensor((), 1.0, dtypes.float32),
                "ax": _zeros_like(param),
            }

        return self._group_states(group, ("mu", "ax", "eta", "step"), fresh_state)

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, mus, axs, etas, steps = self._init_group(group)
        asgd(
            params,
            grads,
            axs,
            mus,
            etas,
            steps,
            lambd=group["lambd"],
            lr=group["lr"],
            t0=group["t0"],
            alpha=group["alpha"],
            weight_decay=group["weight_decay"],
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        return params + axs + (steps + etas + mus if group.get("capturable", False) else [])


def asgd(
    params: list[Tensor],
    grads: list[Tensor],
    axs: list[Tensor],
    mus: list[Tensor],
    etas: list[Tensor],
    state_steps: list[Tensor],
    *,
    lambd: float,
    lr: float,
    t0: float,
    alpha: float,
    weight_decay: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional ASGD: records the update of every tensor in ``params`` and its average (lazily, in place).

    The step counts, ``eta`` and ``mu`` are scalars kept on the host (as PyTorch does without
    ``capturable``); float32 and float64 tensors are updated by fused ``ASGD`` nodes
    (``ir/update_formulas.py``), fed the step's coefficients as data. With ``capturable``, the
    counts, ``eta`` and ``mu`` are computed in the graph, which averages where ``mu != 1``.
    """
    # Hyperparameters given as 0-d tensors are read as the numbers they hold (the host computes with them).
    lambd, lr, t0, alpha, weight_decay = map(float, (lambd, lr, t0, alpha, weight_decay))
    with no_grad():
        fused: list[int] = []
        settings: list[tuple[dict, tuple]] = []
        for index, (param, mu, eta, step) in enumerate(zip(params, mus, etas, state_steps)):
            if capturable and param.dtype not in REDUCED_FLOATS:
                hyperparameters = (lambd, lr, t0, alpha, weight_decay, maximize)
                _captured_update(param, grads[index], axs[index], (mu, eta, step), hyperparameters)
                continue
            count = _increment_step(step)
            eta_value, mu_value = float(eta.item()), float(mu.item())
            if param.dtype in REDUCED_FLOATS:
                _elementwise_step(param, grads[index], axs[index], eta_value, mu_value, lambd, weight_decay, maximize)
            else:
                fused.append(index)
                decay = _decay_factor(weight_decay)
                averaging = mu_value if mu_value != 1 else None
                settings.append(({"maximize": int(maximize)}, (1 - lambd * eta_value, eta_value, averaging, decay)))
            _set_host_scalar(eta, lr / ((1 + lambd * lr * count) ** alpha))
            _set_host_scalar(mu, 1 / max(1, count - t0))
        _record_formula_updates("ASGD", *_picked(fused, params, grads, axs), settings)


def _captured_update(param: Tensor, grad: Tensor, ax: Tensor, counters: tuple, hyperparameters: tuple) -> None:
    """One float32/float64 parameter's ``capturable`` step: ``eta``, ``mu`` and the count read and
    updated in the graph as the host computes them, the average picked by ``mu != 1`` between the
    node that averages and the one that takes the new parameter."""
    mu, eta, step = counters
    lambd, lr, t0, alpha, weight_decay, maximize = hyperparameters
    counted = _captured_count(step)
    eta_value, mu_value = eta.to(counted.dtype), mu.to(counted.dtype)
    decay = _decay_factor(weight_decay)
    attributes = {"maximize": int(maximize)}
    results = {}
    for averaging in (mu_value, None):
        factors = (1 - lambd * eta_value, eta_value, averaging, decay)
        results[averaging is not None] = _formula_outputs("ASGD", attributes, factors, param, grad, [ax])
    record_update(param, results[True][0])
    record_update(ax, results[True][1].where(mu != 1, results[False][1]))
    record_update(eta, (_graph_number(lr, counted) / ((1 + lambd * lr * counted) ** alpha)).to(eta.dtype))
    record_update(mu, (_graph_number(1.0, counted) / (counted - t0).clamp(min=1)).to(mu.dtype))


def _elementwise_step(
    param: Tensor,
    grad: Tensor,
    ax: Tensor,
    eta_value: float,
    mu_value: float,
    lambd: float,
    weight_decay: float,
    maximize: bool,
) -> None:
    """One float16/bfloat16 parameter's step as elementwise ops, each rounding to its dtype."""
    grad = -grad if maximize else grad
    if weight_decay != 0:
        grad = grad + param * _hyperparameter("weight_decay", weight_decay, param)
    new_param = param * _hyperparameter("1-lambd*eta", 1 - lambd * eta_value, param)
    new_param = new_param - grad * _hyperparameter("eta", eta_value, param)
    if mu_value != 1:
        record_update(ax, ax + (new_param - ax) * _hyperparameter("mu", mu_value, ax))
    else:
        # Before t0 the average is the iterate itself (values are immutable, so sharing one is a copy).
        record_update(ax, new_param)
    record_update(param, new_param)


def _set_host_scalar(scalar: Tensor, value: float) -> None:
    rebind(scalar, value_of(full_tensor((), value, scalar.dtype, scalar.device)))
