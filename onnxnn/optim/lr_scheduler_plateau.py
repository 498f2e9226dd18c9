"""``ReduceLROnPlateau``: the lr reduced when a metric stops improving, as PyTorch 2.13's.

Kept apart from ``lr_scheduler.py`` to hold files under ~600 lines; ``onnxnn.optim.lr_scheduler``
re-exports it.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from .lr_scheduler import (
    EPOCH_DEPRECATION_WARNING,
    LRScheduler,
    _check_optimizer,
    _param_groups_val_list,
    _update_param_group_val,
)
from .optimizer import Optimizer

__all__ = ["ReduceLROnPlateau"]


class ReduceLROnPlateau(LRScheduler):
    """Reduces each group's lr by ``factor`` when a metric has stopped improving for ``patience`` epochs.

    Args:
        optimizer: the wrapped optimizer.
        mode: ``"min"`` (the metric should decrease) or ``"max"`` (default: ``"min"``).
        factor: new_lr = lr * factor (default: 0.1).
        patience: epochs without improvement tolerated before reducing (default: 10).
        threshold: the least change counted as an improvement (default: 1e-4).
        threshold_mode: ``"rel"`` (best * (1 -/+ threshold)) or ``"abs"`` (best -/+ threshold).
        cooldown: epochs to wait after a reduction before counting bad epochs again (default: 0).
        min_lr: a lower bound on the lr, one value or one per group (default: 0).
        eps: reductions smaller than this are skipped (default: 1e-8).

    Example::

        >>> scheduler = ReduceLROnPlateau(optimizer, "min")
        >>> for epoch in range(10):
        ...     scheduler.step(validate(model))
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr=0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        _check_optimizer(optimizer)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            default_min_lr, min_lrs = None, list(min_lr)
        else:
            default_min_lr, min_lrs = min_lr, [min_lr] * len(optimizer.param_groups)
        self._check_modes(mode, threshold_mode)
        self.factor = factor
        self.optimizer = optimizer
        self.default_min_lr = default_min_lr
        self.min_lrs = min_lrs
        self.patience = patience
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _param_groups_val_list(optimizer, "lr")
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    @staticmethod
    def _check_modes(mode: str, threshold_mode: str) -> None:
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        self._check_modes(mode, threshold_mode)
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def _reset(self) -> None:
        """Forgets the best value and the bad-epoch and cooldown counters."""
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch: int | None = None) -> None:  # type: ignore[override]
        """Records ``metrics`` (a number or one-element tensor) for one epoch and reduces the lr if it plateaued."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during cooldown are ignored
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _param_groups_val_list(self.optimizer, "lr")

    def _reduce_lr(self, epoch: int) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs from "
                    f"when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due "
                    "to a new param group being added to the optimizer. Please modify the "
                    "`min_lrs` field to match the length of the `optimizer` param groups."
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for index, group in enumerate(groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[index])
            if old_lr - new_lr > self.eps:
                _update_param_group_val(group, "lr", new_lr)

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether ``a`` improves on ``best`` by more than the threshold, in the scheduler's mode."""
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)
