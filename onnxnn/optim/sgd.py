"""SGD: stochastic gradient descent with optional momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ..ir import dtypes
from ..ir.graph import Value, constant, static_constant
from ..runtime.internal import record_op, record_update, tensor_of, value_of
from ..runtime.ops.opmath import REDUCED_FLOATS
from ..runtime.ops.training import TRAINING_DOMAIN
from ..runtime.tensor import Tensor
from .optimizer import Optimizer
from .step_recording import (
    _decay_factor,
    _check_differentiable,
    _hyperparameter_scalar,
    _hyperparameter_value,
    _new_step_tensor,
    _occurrences,
    _picked,
    _record_formula_updates,
    _same_dtype,
    update_node,
)

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

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
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
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            foreach=foreach,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)
        if fused and foreach:  # meaningless here (every step is fused), but refused as PyTorch refuses it
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

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
        # Under ``capturable`` (PyTorch's SGD has no such option; an exported training step sets it) a
        # dampened buffer counts its updates in the graph: its first update takes the whole gradient,
        # which a count fixed when the step was recorded cannot say at each run of the graph.
        counts = None
        if group.get("capturable", False) and group["momentum"] != 0 and group["dampening"] != 0:
            counts = [self.state[param].setdefault("step", _new_step_tensor(param.device)) for param in params]
        sgd(
            params,
            grads,
            momentum_buffers,
            weight_decay=group["weight_decay"],
            momentum=group["momentum"],
            lr=group["lr"],
            dampening=group["dampening"],
            nesterov=group["nesterov"],
            maximize=group["maximize"],
            update_counts=counts,
        )
        updated = list(params) + (counts or [])
        if group["momentum"] != 0:
            for param, buffer in zip(params, momentum_buffers):
                self.state[param]["momentum_buffer"] = buffer
                updated.append(buffer)
        return updated


def sgd(
    params: list[Tensor],
    d_p_list: list[Tensor],
    momentum_buffer_list: list[Tensor | None],
    *,
    weight_decay: float,
    momentum: float,
    lr: float,
    dampening: float,
    nesterov: bool,
    maximize: bool,
    update_counts: list[Tensor] | None = None,
) -> None:
    """Functional SGD: records the update of every tensor in ``params`` (lazily, in place).

    ``momentum_buffer_list`` entries that are None are filled with new buffers (the first step
    copies the gradient). ``update_counts``: each buffer's count of updates so far, a 0-d tensor
    read and incremented in the graph (a buffer whose count is 0 takes the whole gradient), for a
    step recorded once and run many times; by default the buffers that exist count as updated.
    Nothing is computed until the values are realized.
    """
    if momentum == 0:
        _plain_updates(params, d_p_list, weight_decay=weight_decay, lr=lr, maximize=maximize)
        return
    gradients: list[Value] = []
    for param, d_p in zip(params, d_p_list):
        gradient = _same_dtype(value_of(d_p), value_of(param))
        gradients.append(update_node("Neg", gradient) if maximize else gradient)
    if momentum != 0:
        _momentum_updates(
            params,
            gradients,
            momentum_buffer_list,
            weight_decay=weight_decay,
            momentum=momentum,
            lr=lr,
            dampening=dampening,
            nesterov=nesterov,
            update_counts=update_counts,
        )
        return


def _plain_updates(params: list[Tensor], grads: list[Tensor], *, weight_decay: float, lr: float, maximize: bool):
    """SGD without momentum: one fused ``SGD`` node (``ir/update_formulas.py``) per group of float32 and
    float64 parameters; float16/bfloat16 ones as Mul and Sub nodes in their dtype, as PyTorch's ops round."""
    fused: list[int] = []
    decay = _decay_factor(weight_decay)
    for index, param in enumerate(params):
        if param.dtype not in REDUCED_FLOATS:
            fused.append(index)
            continue
        weight = value_of(param)
        gradient = _same_dtype(value_of(grads[index]), weight)
        gradient = update_node("Neg", gradient) if maximize else gradient
        if decay is not None:
            gradient = update_node(
                "Add", update_node("Mul", weight, _hyperparameter_value("weight_decay", decay, weight)), gradient
            )
        step = update_node("Mul", _hyperparameter_value("lr", lr, weight), gradient)
        record_update(param, update_node("Sub", weight, step))
    settings = [({"maximize": int(maximize)}, (lr, decay))] * len(fused)
    _record_formula_updates("SGD", *_picked(fused, params, grads), settings)


def _momentum_updates(
    params: list[Tensor],
    gradients: list[Value],
    buffers: list[Tensor | None],
    *,
    weight_decay: float,
    momentum: float,
    lr: float,
    dampening: float,
    nesterov: bool,
    update_counts: list[Tensor] | None,
) -> None:
    """Records one fused Momentum node (runtime/ops/training.py) per dtype and device of the parameters.

    Its update count is 0 for parameters without a buffer yet (their buffer starts as the whole
    gradient, as PyTorch's does) and 1 for the others; only that distinction changes the result.
    Parameters with an ``update_counts`` entry each take a node of their own, whose count is read
    from it in the graph. A parameter listed twice is updated once per occurrence, by successive
    nodes, as PyTorch does.
    """
    attributes = {"mode": "nesterov" if nesterov else "standard"}
    groups: dict = {}
    occurrences = _occurrences(params)
    for index, param in enumerate(params):
        weight = value_of(param)
        own = index if update_counts is not None else None
        key = (weight.dtype, weight.device, buffers[index] is None, occurrences[index], own)
        groups.setdefault(key, []).append(index)
    for (dtype, device, first_update, _, own), indices in groups.items():
        weights = [value_of(params[i]) for i in indices]
        velocities = [_zeros_value(weights[k]) if first_update else value_of(buffers[i]) for k, i in enumerate(indices)]
        # float16/bfloat16 updates get float32 hyperparameters, PyTorch's "opmath": the node rounds
        # them to the tensors' dtype only where PyTorch's ops do (runtime/ops/training.py).
        scalar_dtype = dtypes.float32 if dtype in REDUCED_FLOATS else dtype

        def scalar(name: str, value) -> Value:
            return _hyperparameter_scalar(name, value, scalar_dtype, device)

        if own is None:
            count = _UPDATE_COUNTS[not first_update]
        else:  # the count before this update, then counted up
            step = update_counts[own]  # type: ignore[index]
            count = value_of(step.to(dtypes.int64))
            record_update(step, step + 1.0)
        inputs = (
            scalar("lr", lr),
            count,
            scalar("momentum", momentum),
            scalar("1-dampening", 1 - dampening) if dampening != 0 else None,
            scalar("weight_decay", weight_decay) if weight_decay != 0 else None,
            *weights,
            *[gradients[i] for i in indices],
            *velocities,
        )
        outputs = record_op("Momentum", inputs, attributes, TRAINING_DOMAIN)
        for position, index in enumerate(indices):
            record_update(params[index], outputs[position])
            velocity = outputs[len(indices) + position]
            if first_update:
                buffers[index] = tensor_of(velocity)
            else:
                record_update(buffers[index], velocity)


_UPDATE_COUNTS = (static_constant(0, dtypes.int64), static_constant(1, dtypes.int64))


def _zeros_value(like: Value) -> Value:
    return constant(np.zeros(like.shape, like.dtype.numpy_dtype), like.dtype, like.device)
