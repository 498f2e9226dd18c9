"""Factor schedulers: ``ConstantLR``, ``LinearLR``, ``PolynomialLR``, ``MultiplicativeLR`` (PyTorch's formulas).

Kept apart from ``lr_scheduler.py`` to hold files under ~600 lines; ``onnxnn.optim.lr_scheduler``
re-exports them, so they are used under PyTorch's names there.
"""

from __future__ import annotations

from typing import Callable

from .lr_scheduler import LambdaLR, LRScheduler, _param_groups_val_list
from .optimizer import Optimizer

__all__ = ["ConstantLR", "LinearLR", "MultiplicativeLR", "PolynomialLR"]


class ConstantLR(LRScheduler):
    """Multiplies each group's lr by ``factor`` until epoch ``total_iters``, then restores it.

    Example::

        >>> scheduler = ConstantLR(optimizer, factor=0.5, total_iters=4)  # 0.025 x4, then 0.05
    """

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        lrs = _param_groups_val_list(self.optimizer, "lr")
        if self.last_epoch == 0:
            return [lr * self.factor for lr in lrs]
        if self.last_epoch != self.total_iters:
            return lrs
        return [lr * (1.0 / self.factor) for lr in lrs]

    def _get_closed_form_lr(self) -> list[float]:
        on = self.last_epoch >= self.total_iters
        return [base_lr * (self.factor + on * (1 - self.factor)) for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """Scales each group's lr by a factor going linearly from ``start_factor`` to ``end_factor`` over ``total_iters``.

    Example::

        >>> scheduler = LinearLR(optimizer, start_factor=0.5, total_iters=4)  # 0.025, 0.03125, ... 0.05
    """

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        lrs = _param_groups_val_list(self.optimizer, "lr")
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self._is_initial or self.last_epoch > self.total_iters:
            return lrs
        # The ratio of consecutive factors, so the chainable form reproduces the closed form.
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [lr * ratio for lr in lrs]

    def _get_closed_form_lr(self) -> list[float]:
        # Multiplied before divided, left to right as PyTorch writes it: dividing first is an ulp off.
        span = self.end_factor - self.start_factor
        return [
            base_lr * (self.start_factor + span * min(self.total_iters, self.last_epoch) / self.total_iters)
            for base_lr in self.base_lrs
        ]


class PolynomialLR(LRScheduler):
    """Decays each group's lr as ``base_lr * (1 - epoch / total_iters) ** power`` until ``total_iters``.

    Example::

        >>> scheduler = PolynomialLR(optimizer, total_iters=4, power=1.0)  # 0.001, 0.00075, ... 0
    """

    def __init__(
        self,
        optimizer: Optimizer,
        total_iters: int = 5,
        power: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        lrs = _param_groups_val_list(self.optimizer, "lr")
        if self._is_initial or self.last_epoch > self.total_iters:
            return lrs
        decay = (
            (1.0 - self.last_epoch / self.total_iters) / (1.0 - (self.last_epoch - 1) / self.total_iters)
        ) ** self.power
        return [lr * decay for lr in lrs]

    def _get_closed_form_lr(self) -> list[float]:
        remaining = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * remaining**self.power for base_lr in self.base_lrs]


class MultiplicativeLR(LambdaLR):
    """Multiplies each group's lr by ``lr_lambda(epoch)`` at every step after the first.

    Example::

        >>> scheduler = MultiplicativeLR(optimizer, lr_lambda=lambda epoch: 0.95)
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | list,
        last_epoch: int = -1,
    ) -> None:
        for function in lr_lambda if isinstance(lr_lambda, (list, tuple)) else [lr_lambda]:
            if not callable(function):
                raise TypeError(f"lr_lambda should be a function, but got {type(function).__name__}")
        super().__init__(optimizer, lr_lambda, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        lrs = _param_groups_val_list(self.optimizer, "lr")
        if self._is_initial:
            return lrs
        return [lr * function(self.last_epoch) for function, lr in zip(self.lr_lambdas, lrs)]
