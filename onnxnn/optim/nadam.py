"""NAdam: Adam with Nesterov momentum and a momentum decay schedule."""

from __future__ import annotations

from typing import Iterable

from ..ir import dtypes
from ..runtime.grad_mode import no_grad
from ..runtime.internal import full_tensor, rebind, record_update, value_of
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

__all__ = ["NAdam", "nadam"]


class NAdam(Optimizer):
    r"""Implements NAdam (Adam with Nesterov momentum), as ``torch.optim.NAdam``.

    .. math::
        \mu_t = \beta_1 (1 - \tfrac12 0.96^{t \psi}), \quad
        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2, \\
        \theta_t = \theta_{t-1} - \gamma \Big(\frac{(1 - \mu_t) g_t}{1 - \prod_{i \le t} \mu_i}
        + \frac{\mu_{t+1} m_t}{1 - \prod_{i \le t+1} \mu_i}\Big) \Big/ \Big(\sqrt{v_t / (1 - \beta_2^t)} + \epsilon\Big)

    with :math:`\psi` the momentum decay and :math:`g_t` the gradient plus :math:`\lambda \theta_{t-1}`
    (or, with decoupled weight decay, :math:`\theta_{t-1}` first scaled by :math:`1 - \gamma\lambda`).

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 2e-3).
        betas: coefficients of the running averages of the gradient and its square (default: (0.9, 0.999)).
        eps: term added to the denominator for numerical stability (default: 1e-8).
        weight_decay: weight decay (L2 penalty) (default: 0).
        momentum_decay: momentum decay :math:`\psi` (default: 4e-3).
        decoupled_weight_decay: decay the weights directly, as AdamW does (NAdamW) (default: False).
        maximize: maximize the objective instead of minimizing (default: False).
        foreach, capturable: accepted for compatibility; every step is one graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.NAdam(model.parameters(), lr=2e-3)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_adam_hyperparameters(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._steps_as_tensors()
        for group in self.param_groups:
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)
            for param in group["params"]:
                param_state = self.state.get(param)
                if param_state and not isinstance(param_state.get("mu_product", 0), Tensor):
                    param_state["mu_product"] = full_tensor((), float(param_state["mu_product"]), dtypes.float32)

    def _init_group(self, group: dict):
        return self._group_states(group, ("exp_avg", "exp_avg_sq", "mu_product", "step"), _fresh_state)

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, exp_avgs, exp_avg_sqs, mu_products, steps = self._init_group(group)
        beta1, beta2 = group["betas"]
        nadam(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            mu_products,
            steps,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            momentum_decay=group["momentum_decay"],
            eps=group["eps"],
            decoupled_weight_decay=group["decoupled_weight_decay"],
            maximize=group["maximize"],
            capturable=group.get("capturable", False),
        )
        counters = steps + mu_products if group.get("capturable", False) else []
        return params + exp_avgs + exp_avg_sqs + counters


def nadam(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    mu_products: list[Tensor],
    state_steps: list[Tensor],
    decoupled_weight_decay: bool = False,
    *,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    momentum_decay: float,
    eps: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional NAdam: records the update of every tensor in ``params`` and its state (lazily, in place).

    The step counts and the momentum products are scalars kept on the host (as PyTorch does without
    ``capturable``); float32 and float64 tensors are updated by fused ``NAdam`` nodes
    (``ir/update_formulas.py``), fed the step's coefficients as data. With ``capturable``, their
    counts, products and coefficients are computed in the graph instead.
    """
    count: float | Tensor  # a Python number, or a float64 0-d tensor of the graph (capturable)
    mu_product: float | Tensor
    learning_rate: float | Tensor
    # Hyperparameters given as 0-d tensors are read as the numbers they hold (the host computes with them).
    lr, beta1, beta2, eps, weight_decay, momentum_decay = map(
        float, (lr, beta1, beta2, eps, weight_decay, momentum_decay)
    )
    with no_grad():
        fused: list[int] = []
        settings: list[tuple[dict, tuple]] = []
        for index, param in enumerate(params):
            if param.dtype in REDUCED_FLOATS:
                count = _increment_step(state_steps[index])
                mu, mu_next = _momentum_coefficients(count, beta1, momentum_decay)
                mu_product = _multiply_host_scalar(mu_products[index], mu)
                grad = -grads[index] if maximize else grads[index]
                coefficients = (mu, mu_next, mu_product, mu_product * mu_next, 1 - beta2**count)
                _opmath_step(
                    param,
                    grad,
                    exp_avgs[index],
                    exp_avg_sqs[index],
                    coefficients,
                    beta1,
                    beta2,
                    lr,
                    eps,
                    weight_decay,
                    decoupled_weight_decay,
                )
                continue
            fused.append(index)
            if capturable:
                counted = _captured_count(state_steps[index])
                mu, mu_next = _momentum_coefficients(counted, beta1, momentum_decay)
                product = mu_products[index] * mu.to(mu_products[index].dtype)  # rounded as the host's
                record_update(mu_products[index], product)
                mu_product = product.to(counted.dtype)
                count = counted
                learning_rate = _graph_number(lr, counted)
            else:
                count = _increment_step(state_steps[index])
                mu, mu_next = _momentum_coefficients(count, beta1, momentum_decay)
                mu_product = _multiply_host_scalar(mu_products[index], mu)
                learning_rate = lr
            decay = _decay_factor(weight_decay, lr, decoupled_weight_decay)
            hyperparameters = (
                1 - beta1,
                beta2,
                1 - beta2,
                1 - beta2**count,
                eps,
                learning_rate * (1 - mu) / (1 - mu_product),
                learning_rate * mu_next / (1 - mu_product * mu_next),
                decay,
            )
            attributes = {"decoupled_weight_decay": int(decoupled_weight_decay), "maximize": int(maximize)}
            settings.append((attributes, hyperparameters))
        _record_formula_updates("NAdam", *_picked(fused, params, grads, exp_avgs, exp_avg_sqs), settings)


def _momentum_coefficients(count, beta1: float, momentum_decay: float) -> tuple:
    """``(mu_t, mu_{t+1})`` of step ``count`` (a Python number, or a float64 tensor in the graph)."""
    mu = beta1 * (1.0 - 0.5 * 0.96 ** (count * momentum_decay))
    return mu, beta1 * (1.0 - 0.5 * 0.96 ** ((count + 1) * momentum_decay))


def _opmath_step(
    param: Tensor,
    grad: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    coefficients: tuple,
    beta1: float,
    beta2: float,
    lr: float,
    eps: float,
    weight_decay: float,
    decoupled_weight_decay: bool,
) -> None:
    """One float16/bfloat16 parameter's step, op for op as ``torch.optim.NAdam``'s single-tensor step."""
    mu, mu_next, mu_product, mu_product_next, bias_correction2 = coefficients
    step = OpmathStep(param)
    weights, gradient = step.load(param), step.load(grad)
    weights, gradient = step.decay(weights, gradient, lr, weight_decay, decoupled_weight_decay)
    new_exp_avg, new_exp_avg_sq = step.moments(exp_avg, exp_avg_sq, gradient, beta1, beta2)
    denom = step.sqrt(step.divide(new_exp_avg_sq, "bias_correction2", bias_correction2))
    denom = step.add_number(denom, "eps", eps)
    gradient_value = -lr * (1.0 - mu) / (1.0 - mu_product)
    weights = step.addcdiv(weights, gradient, denom, "-lr*(1-mu)/(1-mu_product)", gradient_value)
    average_value = (-lr * mu_next) / (1.0 - mu_product_next)
    weights = step.addcdiv(weights, new_exp_avg, denom, "-lr*mu_next/(1-mu_product_next)", average_value)
    step.store(exp_avg, new_exp_avg)
    step.store(exp_avg_sq, new_exp_avg_sq)
    step.store(param, weights)


def _multiply_host_scalar(scalar: Tensor, factor: float) -> float:
    """``scalar *= factor`` on the host, rounded to the tensor's dtype as PyTorch's in-place product is."""
    product = scalar.dtype.numpy_dtype.type(scalar.item()) * scalar.dtype.numpy_dtype.type(factor)
    rebind(scalar, value_of(full_tensor((), float(product), scalar.dtype, scalar.device)))
    return float(product)


def _fresh_state(param: Tensor) -> dict:
    return {
        "step": _new_step_tensor(),
        # The running product of the momentum coefficients, a float32 0-d tensor as in PyTorch.
        "mu_product": full_tensor((), 1.0, dtypes.float32),
        "exp_avg": _zeros_like(param),
        "exp_avg_sq": _zeros_like(param),
    }
