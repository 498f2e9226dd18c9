"""Adafactor: Adam-like steps whose second moment of a matrix is kept as one row and one column factor."""

from __future__ import annotations

import math
from typing import Iterable

from ..ir import dtypes
from ..ir.type_info import finfo
from ..runtime.grad_mode import no_grad
from ..runtime.internal import record_update
from ..runtime.ops.opmath import REDUCED_FLOATS
from ..runtime.tensor import Tensor
from .optimizer import Optimizer
from .step_recording import (
    OpmathStep,
    _as_step_tensor,
    _captured_count,
    _graph_number,
    _hyperparameter,
    _increment_step,
    _new_step_tensor,
)

__all__ = ["Adafactor", "adafactor"]


class Adafactor(Optimizer):
    r"""Implements Adafactor (arXiv:1804.04235), as ``torch.optim.Adafactor``.

    A parameter of two or more dimensions keeps the running mean of its squared gradient as a row
    factor :math:`R` and a column factor :math:`C` over its last two dimensions (memory of a row and
    a column instead of the whole matrix); a vector keeps it whole (:math:`V`). At step :math:`t`,
    with :math:`\hat\beta_{2,t} = 1 - t^{\tau}`, :math:`\rho_t = \min(\gamma, 1/\sqrt t)` and
    :math:`\alpha_t = \max(\epsilon_2, \mathrm{RMS}(\theta_{t-1}))\rho_t`:

    .. math::
        \theta \leftarrow \theta (1 - \gamma\lambda), \quad
        \hat V_t = \frac{R_t C_t}{\max(\overline{R_t}, \epsilon_1)}, \quad
        U_t = \frac{G_t}{\max(\sqrt{\hat V_t}, \epsilon_1)}, \quad
        \theta_t = \theta - \frac{\alpha_t U_t}{\max(1, \mathrm{RMS}(U_t) / d)}

    where :math:`R_t` and :math:`C_t` move toward the row and column means of :math:`G_t^2` by
    :math:`t^{\tau}`. As PyTorch's (and unlike the paper), ``lr`` caps :math:`\rho_t` and scales the
    decoupled weight decay, and :math:`\epsilon_1` is applied to the estimate, not to the factors.
    The two norms PyTorch reads on the host each step (``.item()``) are computed in the step's graph.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: the largest relative step size, and the weight decay's factor (default: 1e-2).
        beta2_decay: :math:`\tau`, the decay rate of the second moment's coefficient; <= 0 (default: -0.8).
        eps: :math:`(\epsilon_1, \epsilon_2)`; None for :math:`\epsilon_1` is the parameter dtype's
            machine epsilon (default: (None, 1e-3)).
        d: the clipping threshold of the update's RMS, >= 1 (default: 1.0).
        weight_decay: decoupled weight decay coefficient (default: 0.0).
        foreach: accepted for compatibility; every step is one graph anyway.
        maximize: maximize the objective instead of minimizing (default: False).

    Example::

        >>> optimizer = onnxnn.optim.Adafactor(model.parameters(), lr=1e-2)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float | Tensor = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(
            lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach, maximize=maximize
        )
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
        for param_state in self.state.values():
            if "step" in param_state:
                param_state["step"] = _as_step_tensor(param_state["step"])

    def _init_group(self, group: dict):
        params, grads, row_vars, col_vars, variances, steps = [], [], [], [], [], []
        for param in group["params"]:
            if param.grad is None:
                continue
            if param.is_complex():
                raise RuntimeError("Adafactor does not support complex parameters")
            params.append(param)
            grads.append(param.grad)
            state = self.state[param]
            if len(state) == 0:
                state["step"] = _new_step_tensor()
                grad = param.grad
                if grad.dim() > 1:
                    state["row_var"] = grad.new_zeros((*grad.shape[:-1], 1))
                    state["col_var"] = grad.new_zeros((*grad.shape[:-2], 1, grad.shape[-1]))
                else:
                    state["variance"] = grad.new_zeros(grad.shape)
            row_vars.append(state.get("row_var"))
            col_vars.append(state.get("col_var"))
            variances.append(state.get("variance"))
            steps.append(state["step"])
        return params, grads, row_vars, col_vars, variances, steps

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, row_vars, col_vars, variances, steps = self._init_group(group)
        eps1, eps2 = group["eps"]
        adafactor(
            params,
            grads,
            row_vars,
            col_vars,
            variances,
            steps,
            d=group["d"],
            lr=group["lr"],
            beta2_decay=group["beta2_decay"],
            weight_decay=group["weight_decay"],
            eps1=eps1,
            eps2=eps2,
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        states = [state for state in (*row_vars, *col_vars, *variances) if state is not None]
        return params + states + (steps if group.get("capturable", False) else [])


def adafactor(
    params: list[Tensor],
    grads: list[Tensor],
    row_vars: list[Tensor | None],
    col_vars: list[Tensor | None],
    variances: list[Tensor | None],
    state_steps: list[Tensor],
    *,
    d: float,
    lr: float | Tensor,
    beta2_decay: float,
    weight_decay: float,
    eps1: float | None,
    eps2: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional Adafactor: records the update of every tensor in ``params`` and its factors (lazily,
    in place). ``row_vars``/``col_vars`` hold the factors of parameters of two or more dimensions
    (None for vectors), ``variances`` the second moments of vectors (None for the others).

    ``capturable`` (PyTorch's Adafactor has no such option; an exported training step sets it)
    counts the float32/float64 parameters' steps in the graph, and the factors read from the count."""
    lr = float(lr)
    with no_grad():
        for param, grad, row_var, col_var, variance, step in zip(
            params, grads, row_vars, col_vars, variances, state_steps
        ):
            grad = -grad if maximize else grad
            epsilon1 = finfo(param.dtype).eps if eps1 is None else eps1
            if param.dtype in REDUCED_FLOATS:
                hyperparameters = (_increment_step(step), lr, beta2_decay, weight_decay, epsilon1, eps2, d)
                _opmath_step(param, grad, (row_var, col_var, variance), hyperparameters)
                continue
            if capturable:
                counted = _captured_count(step)
                moved = (counted**beta2_decay).to(param.dtype)
                relative_step = _graph_number(lr, counted).minimum(_graph_number(1.0, counted) / counted**0.5)
                rho = relative_step.to(param.dtype)
            else:
                count = _increment_step(step)
                moved = _hyperparameter("step**beta2_decay", count**beta2_decay, param)
                rho = _hyperparameter("rho", min(lr, 1 / count**0.5), param)
            # alpha_t reads the parameter before its decay.
            parameter_rms = param.norm() / math.sqrt(param.numel())
            alpha = parameter_rms.clamp(min=eps2) * rho
            decayed = param
            if weight_decay != 0:
                decayed = param * _hyperparameter("1-lr*weight_decay", 1 - lr * weight_decay, param)
            squared = grad.square()
            if row_var is not None and col_var is not None:
                new_row_var = row_var + (squared.mean(dim=-1, keepdim=True) - row_var) * moved
                new_col_var = col_var + (squared.mean(dim=-2, keepdim=True) - col_var) * moved
                row_scale = new_row_var.mean(dim=-2, keepdim=True).clamp(min=epsilon1)
                estimate = new_row_var * new_col_var / row_scale  # the outer product of the factors
                record_update(row_var, new_row_var)
                record_update(col_var, new_col_var)
            else:
                assert variance is not None  # a vector's (``_init_group``)
                estimate = variance + (squared - variance) * moved
                record_update(variance, estimate)
            # eps1 squared: the square root below keeps its magnitude.
            update = estimate.clamp(min=epsilon1 * epsilon1).rsqrt() * grad
            update_rms = update.norm() / (math.sqrt(update.numel()) * d)
            record_update(param, decayed - update * (alpha / update_rms.clamp(min=1.0)))


def _opmath_step(param: Tensor, grad: Tensor, states: tuple, hyperparameters: tuple) -> None:
    """One float16/bfloat16 parameter's step, op for op as ``torch.optim.Adafactor``'s single-tensor
    step: each op computed in float32 and rounded once to the parameter's dtype, its Python scalars
    read at float32. The two norms PyTorch reads on the host (``.item()``) are rounded to the dtype,
    and the step size computed from them in float64, as Python does."""
    count, lr, beta2_decay, weight_decay, epsilon1, eps2, d = hyperparameters
    row_var, col_var, variance = states
    step = OpmathStep(param)
    gradient = step.load(grad)
    moved = count**beta2_decay
    weights = step.load(param)
    parameter_rms = step.rounded(weights.norm()).to(dtypes.float64) / step.host_number(
        "numel**0.5", param.numel() ** 0.5
    )
    alpha = parameter_rms.clamp(min=eps2) * step.host_number("rho", min(lr, 1 / count**0.5))
    if weight_decay != 0:
        weights = step.multiply(weights, "1-lr*weight_decay", 1 - lr * weight_decay)
    if row_var is not None and col_var is not None:
        # PyTorch's ``norm(grad, dim).square_().div_(size)``: three ops, three roundings.
        row_mean = step.divide(
            step.rounded(step.rounded(gradient.norm(dim=-1, keepdim=True)).square()), "size", grad.shape[-1]
        )
        col_mean = step.divide(
            step.rounded(step.rounded(gradient.norm(dim=-2, keepdim=True)).square()), "size", grad.shape[-2]
        )
        new_row_var = step.lerp_either(step.load(row_var), row_mean, "step**beta2_decay", moved)
        new_col_var = step.lerp_either(step.load(col_var), col_mean, "step**beta2_decay", moved)
        row_scale = step.rounded(new_row_var.mean(dim=-2, keepdim=True)).clamp(min=epsilon1)
        estimate = step.rounded(step.rounded(new_row_var * new_col_var) / step.rounded(row_scale))
        step.store(row_var, new_row_var)
        step.store(col_var, new_col_var)
    else:
        estimate = step.lerp_either(step.load(variance), step.rounded(gradient * gradient), "step**beta2_decay", moved)
        step.store(variance, estimate)
    # eps1 squared: the square root below keeps its magnitude.
    update = step.rounded(step.rounded(estimate.clamp(min=epsilon1 * epsilon1)).rsqrt())
    update = step.rounded(update * gradient)
    update_rms = step.rounded(update.norm()).to(dtypes.float64) / step.host_number(
        "numel**0.5*d", update.numel() ** 0.5 * d
    )
    scale = -alpha / update_rms.clamp(min=1.0)
    # ``param.add_(update, alpha=-alpha / denom)``: alpha rounded to the dtype, its product with the
    # update exact in float32.
    step.store(param, step.rounded(weights + step.alpha_of(scale) * update))
