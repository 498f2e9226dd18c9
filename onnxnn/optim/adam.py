"""Adam and AdamW: adaptive moment estimation, with L2 or decoupled weight decay, sharing one core."""

from __future__ import annotations

from typing import Iterable

from ..ir.device import CPU
from ..runtime.grad_mode import no_grad
from ..runtime.internal import record_update
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _check_adam_hyperparameters
from ..runtime.ops.opmath import REDUCED_FLOATS
from .step_recording import (
    OpmathStep,
    _check_differentiable,
    _hyperparameter,
    _new_step_tensor,
    _record_fused_updates,
    _zeros_like,
)

__all__ = ["Adam", "AdamW", "adam", "adamw"]


class Adam(Optimizer):
    r"""Implements Adam, as ``torch.optim.Adam``.

    .. math::
        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2, \quad
        \theta_t = \theta_{t-1} - \frac{\gamma}{1 - \beta_1^t} \frac{m_t}{\sqrt{v_t / (1 - \beta_2^t)} + \epsilon}

    with :math:`g_t` the gradient plus :math:`\lambda \theta_{t-1}` (or, with decoupled weight decay,
    :math:`\theta_{t-1}` first scaled by :math:`1 - \gamma\lambda`), and with amsgrad the running
    maximum of :math:`v_t` in the denominator.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        betas: coefficients of the running averages of the gradient and its square (default: (0.9, 0.999)).
        eps: term added to the denominator for numerical stability (default: 1e-8).
        weight_decay: weight decay (L2 penalty) (default: 0).
        amsgrad: use the AMSGrad variant (default: False).
        maximize: maximize the objective instead of minimizing (default: False).
        decoupled_weight_decay: decay the weights directly, as AdamW does (default: False).
        capturable: compute the step count and bias corrections in the graph instead of on the host.
        foreach, fused: accepted for compatibility; every step is one fused graph anyway.
        differentiable: must be False.

    Example::

        >>> optimizer = onnxnn.optim.Adam(model.parameters(), lr=1e-3)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        betas = _validate_adam_arguments(lr, betas, eps, weight_decay, foreach, capturable)
        _check_differentiable(differentiable)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)
        if fused and foreach:  # meaningless here (every step is fused), but refused as PyTorch refuses it
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._steps_as_tensors()
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)

    def _init_group(self, group: dict):
        params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = [], [], [], [], [], []
        for param in group["params"]:
            if param.grad is None:
                continue
            params.append(param)
            grads.append(param.grad)
            state = self.state[param]
            if len(state) == 0:
                state["step"] = _new_step_tensor(param.device if group.get("capturable") else CPU)
                state["exp_avg"] = _zeros_like(param)
                state["exp_avg_sq"] = _zeros_like(param)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = _zeros_like(param)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            if group["amsgrad"]:
                max_exp_avg_sqs.append(state["max_exp_avg_sq"])
            steps.append(state["step"])
        return params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = self._init_group(group)
        beta1, beta2 = group["betas"]
        capturable = group.get("capturable", False)
        adam(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            max_exp_avg_sqs,
            steps,
            amsgrad=group["amsgrad"],
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=group["maximize"],
            decoupled_weight_decay=group["decoupled_weight_decay"],
            capturable=capturable,
        )
        return params + exp_avgs + exp_avg_sqs + max_exp_avg_sqs + (steps if capturable else [])


class AdamW(Adam):
    r"""Implements AdamW (Adam with decoupled weight decay), as ``torch.optim.AdamW``.

    Each step first scales the parameters by :math:`1 - \gamma\lambda`, then applies Adam's update
    without weight decay in the gradient.

    Args:
        params: tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        betas: coefficients of the running averages (default: (0.9, 0.999)).
        eps: term added to the denominator for numerical stability (default: 1e-8).
        weight_decay: decoupled weight decay coefficient (default: 1e-2).
        amsgrad: use the AMSGrad variant (default: False).
        maximize: maximize the objective instead of minimizing (default: False).

    Example::

        >>> optimizer = onnxnn.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        # An AdamW always decouples its weight decay, even after loading an Adam's state dict, whose
        # groups say ``decoupled_weight_decay: False``.
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True


def _validate_adam_arguments(lr, betas, eps, weight_decay, foreach, capturable) -> tuple:
    """Raises PyTorch's errors for bad arguments; returns ``betas`` as a tuple, one-element tensors 0-d."""
    # Refused as PyTorch refuses it (its foreach step cannot take a tensor lr), though onnxnn could.
    if isinstance(lr, Tensor) and foreach and not capturable:
        raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
    _check_adam_hyperparameters(lr, eps, betas, weight_decay)
    if not all(isinstance(beta, float) for beta in betas[:2]) and not all(
        isinstance(beta, Tensor) for beta in betas[:2]
    ):
        raise ValueError("betas must be either both floats or both Tensors")
    for index, beta in enumerate(betas[:2]):
        if isinstance(beta, Tensor):
            if foreach and not capturable:
                raise ValueError(f"betas[{index}] as a Tensor is not supported for capturable=False and foreach=True")
            if beta.numel() != 1:
                raise ValueError(f"Tensor betas[{index}] must be 1-element")
    return tuple(beta.squeeze() if isinstance(beta, Tensor) and beta.dim() != 0 else beta for beta in betas)


def adam(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    max_exp_avg_sqs: list[Tensor],
    state_steps: list[Tensor],
    decoupled_weight_decay: bool = False,
    *,
    amsgrad: bool,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional Adam: records the update of every tensor in ``params`` and its state (lazily, in place).

    ``state_steps`` are float32 0-d tensors. By default they are incremented on the host and each
    group of parameters with one dtype, device and step count is updated by one fused ``Adam``
    node (runtime/ops/training.py) whose hyperparameters, step count included, are fed data. With
    ``capturable`` (PyTorch's name for a step that runs without the host), the step count and the
    bias corrections are computed in the graph, so a recorded step can be replayed as it is
    (``onnxnn.export.training_step_to_onnx`` relies on this).
    """
    with no_grad():
        if capturable:
            _capturable_updates(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                max_exp_avg_sqs,
                state_steps,
                decoupled_weight_decay,
                amsgrad=amsgrad,
                beta1=beta1,
                beta2=beta2,
                lr=lr,
                weight_decay=weight_decay,
                eps=eps,
                maximize=maximize,
            )
            return
        _fused_updates(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            max_exp_avg_sqs,
            state_steps,
            decoupled_weight_decay,
            amsgrad=amsgrad,
            beta1=beta1,
            beta2=beta2,
            lr=lr,
            weight_decay=weight_decay,
            eps=eps,
            maximize=maximize,
        )


def _fused_updates(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    max_exp_avg_sqs,
    state_steps,
    decoupled_weight_decay,
    *,
    amsgrad,
    beta1,
    beta2,
    lr,
    weight_decay,
    eps,
    maximize,
) -> None:
    """Records one Adam node per dtype, device and step count of the parameters."""
    attributes = {
        "decoupled_weight_decay": int(bool(decoupled_weight_decay)),
        "amsgrad": int(bool(amsgrad)),
        "maximize": int(bool(maximize)),
    }

    def hyperparameters(step: float, scalar) -> tuple:
        return (
            scalar("lr", lr),
            scalar("step", step),
            scalar("beta1", beta1),
            scalar("beta2", beta2),
            scalar("eps", eps),
            scalar("weight_decay", weight_decay) if weight_decay != 0 else None,
        )

    states = [exp_avgs, exp_avg_sqs] + ([max_exp_avg_sqs] if amsgrad else [])
    _record_fused_updates("Adam", attributes, params, grads, states, state_steps, hyperparameters)


def _capturable_updates(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    max_exp_avg_sqs,
    state_steps,
    decoupled_weight_decay,
    *,
    amsgrad,
    beta1,
    beta2,
    lr,
    weight_decay,
    eps,
    maximize,
) -> None:
    """Adam with the step count and bias corrections in the graph, as Tensor arithmetic per parameter."""
    for index, param in enumerate(params):
        grad = grads[index] if not maximize else -grads[index]
        exp_avg, exp_avg_sq = exp_avgs[index], exp_avg_sqs[index]
        step = state_steps[index] + 1.0
        record_update(state_steps[index], step)
        if param.dtype in REDUCED_FLOATS:
            max_exp_avg_sq = max_exp_avg_sqs[index] if amsgrad else None
            states = (exp_avg, exp_avg_sq, max_exp_avg_sq)
            hyperparameters = (beta1, beta2, lr, weight_decay, eps, decoupled_weight_decay)
            _opmath_capturable_step(param, grad, states, step, hyperparameters)
            continue
        new_param = param
        if weight_decay != 0:
            if decoupled_weight_decay:
                new_param = param * _hyperparameter("1-lr*weight_decay", 1 - lr * weight_decay, param)
            else:
                grad = grad + param * _hyperparameter("weight_decay", weight_decay, param)
        new_exp_avg = exp_avg + (grad - exp_avg) * _hyperparameter("1-beta1", 1 - beta1, exp_avg)
        new_exp_avg_sq = exp_avg_sq * _hyperparameter("beta2", beta2, exp_avg_sq) + grad * grad * _hyperparameter(
            "1-beta2", 1 - beta2, exp_avg_sq
        )
        bias_correction1 = 1 - _hyperparameter("beta1", beta1, step) ** step
        bias_correction2_sqrt = (1 - _hyperparameter("beta2", beta2, step) ** step).sqrt()
        step_size = _hyperparameter("lr", lr, step) / bias_correction1
        second_moment = new_exp_avg_sq
        if amsgrad:
            second_moment = max_exp_avg_sqs[index].maximum(new_exp_avg_sq)
            record_update(max_exp_avg_sqs[index], second_moment)
        denom = second_moment.sqrt() / bias_correction2_sqrt.to(param.dtype) + _hyperparameter("eps", eps, param)
        new_param = new_param - new_exp_avg / denom * step_size.to(param.dtype)
        record_update(exp_avg, new_exp_avg)
        record_update(exp_avg_sq, new_exp_avg_sq)
        record_update(param, new_param)


def _opmath_capturable_step(param: Tensor, grad: Tensor, states: tuple, step: Tensor, hyperparameters: tuple) -> None:
    """One float16/bfloat16 parameter's capturable step, op for op as ``torch.optim.Adam``'s single-tensor
    step computes it with ``capturable=True`` (which PyTorch allows on CUDA only; its CPU kernels are
    followed here). The bias corrections are float32 0-d tensors computed from the ``step`` tensor;
    the half-precision tensors divide by one and add one at float32, as CPU kernels read a 0-d operand."""
    exp_avg, exp_avg_sq, max_exp_avg_sq = states
    beta1, beta2, lr, weight_decay, eps, decoupled_weight_decay = hyperparameters
    arithmetic = OpmathStep(param)
    weights, gradient = arithmetic.load(param), arithmetic.load(grad)
    weights, gradient = arithmetic.decay(weights, gradient, lr, weight_decay, decoupled_weight_decay)
    new_exp_avg, new_exp_avg_sq = arithmetic.moments(exp_avg, exp_avg_sq, gradient, beta1, beta2)
    one = _hyperparameter("one", 1.0, step)
    bias_correction1 = one - _hyperparameter("beta1", beta1, step) ** step
    bias_correction2 = one - _hyperparameter("beta2", beta2, step) ** step
    # A Python number divided by a tensor is the tensor's reciprocal times the number (Tensor.__rtruediv__).
    step_size_neg = -((one / bias_correction1) * _hyperparameter("lr", lr, step))
    second_moment = new_exp_avg_sq
    if max_exp_avg_sq is not None:
        second_moment = arithmetic.load(max_exp_avg_sq).maximum(new_exp_avg_sq)
        arithmetic.store(max_exp_avg_sq, second_moment)
    denom = arithmetic.rounded(arithmetic.sqrt(second_moment) / (bias_correction2.sqrt() * step_size_neg))
    denom = arithmetic.rounded(denom + (one / step_size_neg) * _hyperparameter("eps", eps, step))
    arithmetic.store(exp_avg, new_exp_avg)
    arithmetic.store(exp_avg_sq, new_exp_avg_sq)
    arithmetic.store(param, arithmetic.rounded(weights + new_exp_avg / denom))


def adamw(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    max_exp_avg_sqs: list[Tensor],
    state_steps: list[Tensor],
    *,
    amsgrad: bool,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    capturable: bool = False,
) -> None:
    """Functional AdamW: :func:`adam` with decoupled weight decay."""
    adam(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        max_exp_avg_sqs,
        state_steps,
        True,
        amsgrad=amsgrad,
        capturable=capturable,
        beta1=beta1,
        beta2=beta2,
        lr=lr,
        weight_decay=weight_decay,
        eps=eps,
        maximize=maximize,
    )
