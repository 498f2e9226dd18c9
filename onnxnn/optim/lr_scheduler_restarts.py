"""``CosineAnnealingWarmRestarts`` (SGDR), PyTorch's formula and ``step(epoch)`` semantics.

Kept apart from ``lr_scheduler.py`` to hold files under ~600 lines; ``onnxnn.optim.lr_scheduler``
re-exports it.
"""

from __future__ import annotations

import math

from .lr_scheduler import LRScheduler, _param_groups_val_list, _update_param_group_val
from .optimizer import Optimizer

__all__ = ["CosineAnnealingWarmRestarts"]


class CosineAnnealingWarmRestarts(LRScheduler):
    r"""Cosine annealing with warm restarts (SGDR, Loshchilov & Hutter 2016).

    ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2``, where ``T_cur`` counts
    epochs since the last restart and the period ``T_i`` starts at ``T_0`` and is multiplied by
    ``T_mult`` at each restart. ``step(epoch)`` accepts fractional epochs, as in PyTorch.

    Example::

        >>> scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=10, T_mult=2)
    """

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur: float = last_epoch  # fractional epochs: step(epoch=2.5) as in PyTorch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        cosine = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base_lr - self.eta_min) * cosine for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advances one epoch, or moves to ``epoch`` (fractional allowed), restarting periods as needed."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                # A remainder, not a difference: resumed with last_epoch=N, T_cur starts at N + 1.
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    # Number of completed periods: T_0 * (T_mult**n - 1) / (T_mult - 1) <= epoch.
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        # _step_count stays as the base class's initial step set it (0), as in PyTorch, whose
        # step-order warning this step skips too.
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _update_param_group_val(group, "lr", lr)
        self._last_lr = _param_groups_val_list(self.optimizer, "lr")
