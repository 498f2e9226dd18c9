"""Schedulers of schedulers: ``SequentialLR`` (one after another) and ``ChainedScheduler`` (all at once).

Kept apart from ``lr_scheduler.py`` to hold files under ~600 lines; ``onnxnn.optim.lr_scheduler``
re-exports them under PyTorch's names.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Sequence

from .lr_scheduler import LRScheduler, _param_groups_val_list, _update_param_group_val
from .lr_scheduler_plateau import ReduceLROnPlateau
from .optimizer import Optimizer

__all__ = ["SequentialLR", "ChainedScheduler"]


def _check_schedulers(owner: str, schedulers: Sequence, optimizer: Optimizer) -> None:
    for index, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{owner} at index {index} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(
                f"{owner} does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs to be "
                f"specified when calling `step`, but got one at index {index} in the given schedulers sequence."
            )
        if scheduler.optimizer is not optimizer:
            raise ValueError(
                f"{owner} expects all schedulers to belong to the same optimizer, but got scheduler "
                f"{type(scheduler).__name__} at index {index} has {scheduler.optimizer}, which is different "
                f"from {type(optimizer).__name__}."
            )


def _undo_initial_steps(scheduler) -> None:
    """Takes back the step each scheduler took when it was built, through nested schedulers of schedulers."""
    if hasattr(scheduler, "_schedulers"):
        for inner in scheduler._schedulers:
            _undo_initial_steps(inner)
    elif hasattr(scheduler, "last_epoch"):
        scheduler.last_epoch -= 1


class _SchedulerOfSchedulers(LRScheduler):
    """``state_dict`` holds each inner scheduler's state dict, not the schedulers themselves."""

    _schedulers: list

    def state_dict(self) -> dict[str, Any]:
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        inner = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, scheduler_state in zip(self._schedulers, inner):
            scheduler.load_state_dict(scheduler_state)


class SequentialLR(_SchedulerOfSchedulers):
    """Runs ``schedulers[i]`` from ``milestones[i - 1]`` on; each takes over from epoch 0 of its own.

    Args:
        optimizer: the optimizer all the schedulers wrap.
        schedulers: the schedulers, in order.
        milestones: the epochs at which the next scheduler takes over (one fewer than schedulers).
        last_epoch: the index of the last epoch.

    Example::

        >>> warmup = ConstantLR(optimizer, factor=0.1, total_iters=2)
        >>> decay = ExponentialLR(optimizer, gamma=0.9)
        >>> scheduler = SequentialLR(optimizer, schedulers=[warmup, decay], milestones=[2])
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence,
        milestones: Sequence[int],
        last_epoch: int = -1,
    ) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got no scheduler.")
        _check_schedulers(type(self).__name__, schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
                f"milestone points, but got number of schedulers {len(schedulers)} and the number of milestones "
                f"to be equal to {len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # Each scheduler stepped once when it was built; start over from the initial lrs and let only
        # the one in charge at epoch 0 take its initial step, as PyTorch does.
        for group in optimizer.param_groups:
            _update_param_group_val(group, "lr", group["initial_lr"])
        _undo_initial_steps(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]  # no epoch, as PyTorch's: step(epoch) is a TypeError
        """Advances one epoch: the scheduler in charge steps, or the one taking over starts at its epoch 0."""
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)  # a scheduler taking over starts at its own epoch 0 (closed form)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_SchedulerOfSchedulers):
    """Steps every scheduler at each step, so their factors multiply.

    Args:
        schedulers: the schedulers, stepped in this order.
        optimizer: the optimizer they wrap (default: the first scheduler's).

    Example::

        >>> warmup = ConstantLR(optimizer, factor=0.1, total_iters=2)
        >>> scheduler = ChainedScheduler([warmup, ExponentialLR(optimizer, gamma=0.9)])
    """

    def __init__(self, schedulers: Sequence, optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler to be chained, but got no scheduler."
            )
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers(type(self).__name__, schedulers, optimizer)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = _param_groups_val_list(optimizer, "lr")

    def step(self) -> None:  # type: ignore[override]  # no epoch, as PyTorch's: step(epoch) is a TypeError
        """Steps every scheduler once, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _param_groups_val_list(self.optimizer, "lr")
