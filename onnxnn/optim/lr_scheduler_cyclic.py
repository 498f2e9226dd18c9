"""``CyclicLR``: the learning rate cycles between two bounds (Smith, "Cyclical Learning Rates for
Training Neural Networks"), with PyTorch's modes, momentum cycling and state dict.

Kept apart from ``lr_scheduler.py`` to hold files under ~600 lines; ``onnxnn.optim.lr_scheduler``
re-exports it under PyTorch's name.
"""

from __future__ import annotations

import math
import types
from typing import Any, Callable

from .lr_scheduler import LRScheduler, _check_optimizer, _format_param, _update_param_group_val
from .optimizer import Optimizer

__all__ = ["CyclicLR"]

_SCALE_MODES = {"triangular": "cycle", "triangular2": "cycle", "exp_range": "iterations"}


class CyclicLR(LRScheduler):
    """Cycles each group's lr between ``base_lr`` and ``max_lr``; step it after every batch.

    One cycle is ``step_size_up`` steps rising and ``step_size_down`` steps falling. ``mode`` scales
    the amplitude: ``"triangular"`` keeps it, ``"triangular2"`` halves it each cycle,
    ``"exp_range"`` multiplies it by ``gamma ** step``; or ``scale_fn(x)`` with ``scale_mode``
    (``"cycle"``: x is the cycle number, ``"iterations"``: the step). With ``cycle_momentum`` the
    momentum (or Adam's ``betas[0]``) moves inversely between ``max_momentum`` and ``base_momentum``.

    Args:
        optimizer: the wrapped optimizer.
        base_lr, max_lr: the bounds, one value or one per param group.
        step_size_up, step_size_down: steps of the rising and falling halves (down defaults to up).
        mode, gamma, scale_fn, scale_mode: the amplitude policy, as above.
        cycle_momentum, base_momentum, max_momentum: the momentum cycle.
        last_epoch: the index of the last step.

    Example::

        >>> scheduler = CyclicLR(optimizer, base_lr=0.01, max_lr=0.1, step_size_up=4)
    """

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.8,
        max_momentum: float | list[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        if mode not in _SCALE_MODES and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        if cycle_momentum and "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else _SCALE_MODES[mode]
        self.cycle_momentum = cycle_momentum
        # Validated: only now are the param groups written.
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _update_param_group_val(group, "lr", lr)
        if cycle_momentum:
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups):
                    self._set_momentum(group, high)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        """The amplitude factor at ``x`` (the cycle number or the step, per ``scale_mode``)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def _set_momentum(self, group: dict, momentum: float) -> None:
        if self.use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        rising = x <= self.step_ratio
        fraction = x / self.step_ratio if rising else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [low + (high - low) * fraction * scale for low, high in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for low, high, group in zip(self.base_momentums, self.max_momentums, self.optimizer.param_groups):
                self._set_momentum(group, high - (high - low) * fraction * scale)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The attributes; a custom ``scale_fn`` only by its ``__dict__`` (a callable object's
        state), never the function itself, as PyTorch: restore it by passing it again."""
        state = super().state_dict()
        function = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if function is not None and not isinstance(function, types.FunctionType):
            state["_scale_fn_custom"] = function.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        function_state = state.pop("_scale_fn_custom")
        super().load_state_dict(state)
        if function_state is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(function_state)
