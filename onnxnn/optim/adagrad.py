"""Adagrad: per-coordinate learning rates scaled by the accumulated squared gradients."""

from __future__ import annotations

from typing import Iterable

from ..runtime.grad_mode import no_grad
from ..runtime.internal import full_tensor
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _check_learning_rate
from .step_recording import _check_differentiable, _new_step_tensor, _record_fused_updates

__all__ = ["Adagrad", "adagrad"]


class Adagrad(Optimizer):
    r"""Implements Adagrad, as ``torch.optim.Adagrad``.

    .. math::
        \tilde\gamma = \frac{\gamma}{1 + (t - 1)\eta}, \quad s_t = s_{t-1} + g_t^2, \quad
        \theta_t = \theta_{t-1} - \tilde\gamma \frac{g_t}{\sqrt{s_t} + \epsilon}

    Unlike the other optimizers, the state (``step`` and ``sum``) is created for every parameter
    when the optimizer is constructed, as PyTorch does; parameters of a group added later get it at
    their first step, ``sum`` filled with the constructor's ``initial_accumulator_value``.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-2).
        lr_decay: learning rate decay :math:`\eta` (default: 0).
        weight_decay: weight decay (L2 penalty) (default: 0).
        initial_accumulator_value: initial value of the sum of squared gradients (default: 0).
        eps: term added to the denominator for numerical stability (default: 1e-10).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, fused: accepted for compatibility; every step is one fused graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.Adagrad(model.parameters(), lr=0.1)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_learning_rate(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)
        if fused and foreach:  # meaningless here (every step is fused), but refused as PyTorch refuses it
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        # The constructor's value for every group, as PyTorch fills the sums: a group's own
        # ``initial_accumulator_value`` is kept in it but never read.
        for group in self.param_groups:
            for param in group["params"]:
                self._init_state(param, initial_accumulator_value)

    def _init_state(self, param: Tensor, initial_accumulator_value: float) -> None:
        state = self.state[param]
        state["step"] = _new_step_tensor()
        state["sum"] = full_tensor(param.shape, initial_accumulator_value, param.dtype, param.device)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._steps_as_tensors()
        for group in self.param_groups:
            group.setdefault("maximize", False)

    def share_memory(self) -> None:
        """Kept for compatibility: onnxnn's state values are immutable and need no shared memory."""

    def _init_group(self, group: dict):
        params, grads, state_sums, steps = [], [], [], []
        for param in group["params"]:
            if param.grad is None:
                continue
            state = self.state[param]
            if "sum" not in state:
                # A group added after construction: PyTorch 2.13 initializes its state here, lazily,
                # from the constructor's value (``defaults``), not the group's.
                self._init_state(param, self.defaults["initial_accumulator_value"])
            params.append(param)
            grads.append(param.grad)
            state_sums.append(state["sum"])
            steps.append(state["step"])
        return params, grads, state_sums, steps

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, state_sums, steps = self._init_group(group)
        adagrad(
            params,
            grads,
            state_sums,
            steps,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            lr_decay=group["lr_decay"],
            eps=group["eps"],
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        return params + state_sums + (steps if group.get("capturable", False) else [])


def adagrad(
    params: list[Tensor],
    grads: list[Tensor],
    state_sums: list[Tensor],
    state_steps: list[Tensor],
    *,
    lr: float,
    weight_decay: float,
    lr_decay: float,
    eps: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional Adagrad: records the update of every tensor in ``params`` and its state (lazily, in place).

    Each group of parameters with one dtype, device and step count is updated by one fused
    ``Adagrad`` node (runtime/ops/training.py) whose hyperparameters, step count included, are fed data.
    ``capturable`` (PyTorch's Adagrad has no such option; an exported training step sets it) counts
    the steps in the graph.
    """

    def hyperparameters(step: float, scalar) -> tuple:
        return (
            scalar("lr", lr),
            scalar("step", step),
            scalar("lr_decay", lr_decay),
            scalar("eps", eps),
            scalar("weight_decay", weight_decay) if weight_decay != 0 else None,
        )

    with no_grad():
        attributes = {"maximize": int(bool(maximize))}
        _record_fused_updates(
            "Adagrad", attributes, params, grads, [state_sums], state_steps, hyperparameters, capturable=capturable
        )
