"""Rprop: per-element step sizes grown or shrunk by the sign agreement of successive gradients."""

from __future__ import annotations

from typing import Iterable

from ..runtime.grad_mode import no_grad
from ..runtime.internal import full_tensor, record_update
from ..runtime.tensor import Tensor
from ..runtime.ops.opmath import REDUCED_FLOATS
from .optimizer import Optimizer, _check_learning_rate
from .step_recording import (
    _check_differentiable,
    _count_step,
    _hyperparameter,
    _new_step_tensor,
    _picked,
    _record_formula_updates,
    _zeros_like,
)

__all__ = ["Rprop", "rprop"]


class Rprop(Optimizer):
    r"""Implements the resilient backpropagation algorithm, as ``torch.optim.Rprop``.

    .. math::
        \eta_t = \begin{cases} \min(\eta_{t-1} \eta_+, \Gamma_{max}) & g_t g_{t-1} > 0 \\
        \max(\eta_{t-1} \eta_-, \Gamma_{min}) & g_t g_{t-1} < 0 \\ \eta_{t-1} & \text{otherwise} \end{cases},
        \quad \theta_t = \theta_{t-1} - \eta_t \operatorname{sgn}(g_t)

    where a gradient whose sign flipped is taken as zero, both in this step and as :math:`g_{t}` of the next.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: initial step size (default: 1e-2).
        etas: multiplicative decrease and increase factors :math:`(\eta_-, \eta_+)` (default: (0.5, 1.2)).
        step_sizes: minimal and maximal step sizes :math:`(\Gamma_{min}, \Gamma_{max})` (default: (1e-6, 50)).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, capturable: accepted for compatibility; every step is one graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.Rprop(model.parameters(), lr=1e-2)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_learning_rate(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            etas=etas,
            step_sizes=step_sizes,
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
        def fresh_state(param: Tensor) -> dict:
            step_size = full_tensor(param.shape, float(group["lr"]), param.dtype, param.device)
            return {"step": _new_step_tensor(), "prev": _zeros_like(param), "step_size": step_size}

        return self._group_states(group, ("prev", "step_size", "step"), fresh_state)

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, prevs, step_sizes, steps = self._init_group(group)
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        rprop(
            params,
            grads,
            prevs,
            step_sizes,
            steps,
            step_size_min=step_size_min,
            step_size_max=step_size_max,
            etaminus=etaminus,
            etaplus=etaplus,
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        return params + prevs + step_sizes + (steps if group.get("capturable", False) else [])


def rprop(
    params: list[Tensor],
    grads: list[Tensor],
    prevs: list[Tensor],
    step_sizes: list[Tensor],
    state_steps: list[Tensor],
    *,
    step_size_min: float,
    step_size_max: float,
    etaminus: float,
    etaplus: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional Rprop: records the update of every tensor in ``params`` and its state (lazily, in place).

    The step counts are kept on the host (Rprop's update does not read them); float32 and float64
    tensors are updated by fused ``Rprop`` nodes (``ir/update_formulas.py``).
    """
    # Hyperparameters given as 0-d tensors are read as the numbers they hold (the host computes with them).
    etaminus, etaplus, step_size_min, step_size_max = map(float, (etaminus, etaplus, step_size_min, step_size_max))
    with no_grad():
        fused: list[int] = []
        settings: list[tuple[dict, tuple]] = []
        for index, (param, step) in enumerate(zip(params, state_steps)):
            _count_step(step, capturable)  # read by nothing
            if param.dtype in REDUCED_FLOATS:
                _elementwise_step(
                    param,
                    grads[index],
                    prevs[index],
                    step_sizes[index],
                    (etaminus, etaplus, step_size_min, step_size_max),
                    maximize,
                )
                continue
            fused.append(index)
            settings.append(({"maximize": int(maximize)}, (etaminus, etaplus, step_size_min, step_size_max)))
        _record_formula_updates("Rprop", *_picked(fused, params, grads, prevs, step_sizes), settings)


def _elementwise_step(
    param: Tensor, grad: Tensor, prev: Tensor, step_size: Tensor, hyperparameters: tuple, maximize: bool
) -> None:
    """One float16/bfloat16 parameter's step as elementwise ops, each rounding to its dtype."""
    etaminus, etaplus, step_size_min, step_size_max = hyperparameters
    grad = -grad if maximize else grad
    agreement = grad * prev
    flipped = agreement.lt(0)
    unchanged = _hyperparameter("etaminus", etaminus, param).where(flipped, _hyperparameter("one", 1.0, param))
    factor = _hyperparameter("etaplus", etaplus, param).where(agreement.gt(0), unchanged)
    new_step_size = (step_size * factor).clamp(
        _hyperparameter("step_size_min", step_size_min, param),
        _hyperparameter("step_size_max", step_size_max, param),
    )
    # A flipped sign means the last step overshot: skip this element's step and let the next one
    # count as a fresh start (PyTorch zeroes where the factor is etaminus).
    kept_grad = grad.masked_fill(flipped, 0.0)
    record_update(prev, kept_grad)
    record_update(step_size, new_step_size)
    record_update(param, param - kept_grad.sign() * new_step_size)
