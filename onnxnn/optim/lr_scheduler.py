"""Learning-rate schedulers with PyTorch's semantics: chainable ``get_lr``, closed forms, state dicts.

A scheduler writes ``group["lr"]`` into the optimizer's param groups: a Python number is replaced, a
Tensor lr is filled in place (it stays the tensor the caller passed, as in PyTorch). The optimizer
feeds it to the step graph as data, so changing it never recompiles the step.
"""

from __future__ import annotations

import functools
import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from typing import Any, Callable

from ..runtime.tensor import Tensor
from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LambdaLR",
    "OneCycleLR",
]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. "
    "Please use `scheduler.step()` to step the scheduler. During the deprecation, if epoch is different "
    "from None, the closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _track_step_called(optimizer: Optimizer) -> None:
    """Wraps ``optimizer.step`` (once per optimizer) so that a call marks the optimizer as stepped, as
    PyTorch's schedulers do: :meth:`LRScheduler.step` warns when its first step comes before the
    optimizer's (a step taken before the scheduler existed does not count), and, when the optimizer's
    ``step`` has since been replaced by one without this wrapper, that it was overridden."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    # The wrapper lives on the optimizer, so it holds neither the optimizer nor its bound step (a
    # reference cycle): a bound step is kept as its function and bound on each call; a plain
    # function the caller set on the instance is called as it is.
    optimizer_reference = weakref.ref(optimizer)
    function: Any = getattr(optimizer.step, "__func__", None)
    plain_step: Any = optimizer.step if function is None else None

    @functools.wraps(plain_step if function is None else function)
    def wrapper(*args, **kwargs):
        stepped = optimizer_reference()
        stepped._opt_called = True  # type: ignore[union-attr]
        if function is None:
            return plain_step(*args, **kwargs)
        return function.__get__(stepped, type(stepped))(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    optimizer.step = wrapper  # type: ignore[method-assign]


def _copy(value):
    """``value``, a Tensor cloned: the scheduler's copies never alias the caller's or the groups' tensors."""
    return value.clone() if isinstance(value, Tensor) else value


def _format_param(name: str, optimizer: Optimizer, param) -> list:
    """One value per param group: a list/tuple of the right length, or one value repeated (tensors cloned)."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(param)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return [_copy(value) for value in param]
    return [_copy(param) for _ in optimizer.param_groups]


def _param_groups_val_list(optimizer: Optimizer, key: str) -> list:
    """``group[key]`` of every param group, tensors cloned."""
    return [_copy(group[key]) for group in optimizer.param_groups]


def _update_param_group_val(group: dict, key: str, value) -> None:
    """Sets ``group[key]`` to ``value``; a Tensor there is filled in place, so whoever holds it sees the change."""
    current = group[key]
    if isinstance(current, Tensor):
        current.fill_(value.squeeze() if isinstance(value, Tensor) and value.dim() != 0 else value)
    else:
        group[key] = value


class LRScheduler:
    """Base class of the learning-rate schedulers.

    Subclasses implement ``get_lr()`` (the chainable form: new lrs from the current ones) and may
    implement ``_get_closed_form_lr()`` (lrs as a function of ``last_epoch`` and ``base_lrs``).
    The step taken at construction runs with ``_is_initial`` set, as PyTorch's "initial mode": the
    chainable forms leave the lr as it is then, so a scheduler resumed with ``last_epoch=N``
    applies no extra decay.

    Args:
        optimizer: the wrapped optimizer.
        last_epoch: the index of the last epoch; -1 starts a new schedule and records each
            group's ``initial_lr``; resuming requires ``initial_lr`` in every group.
    """

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for index, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{index}] when resuming scheduler "
                        "with last_epoch >= 0.\nThis typically happens when:\n1. You're trying to resume training "
                        "from a checkpoint but haven't properly loaded the optimizer state\n2. You're using "
                        "last_epoch >= 0 for a fresh training run (not recommended)"
                    )
        self.base_lrs: list = _param_groups_val_list(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_step_called(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        """Counts steps from zero and applies the schedule's value at ``last_epoch + 1``, in initial mode."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores the attributes saved by :meth:`state_dict`."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list:
        """The learning rates of the last ``step()``, one per param group (tensor lrs as copies)."""
        return self._last_lr

    def get_lr(self) -> list[float]:
        """The new learning rates (chainable form), computed by ``step()``."""
        raise NotImplementedError

    def _warn_get_lr_called_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                UserWarning,
                stacklevel=3,
            )

    def step(self, epoch: int | None = None) -> None:
        """Advances the schedule by one epoch (or, deprecated, to ``epoch``) and writes the lrs."""
        if self._step_count == 1 and not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
            warnings.warn(
                "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                "initialization. Please, make sure to call `optimizer.step()` before "
                "`lr_scheduler.step()`. See more details at "
                "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                UserWarning,
            )
        elif self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
                "later, you should call them in the opposite order: `optimizer.step()` before "
                "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                "value of the learning rate schedule. See more details at "
                "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                UserWarning,
            )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """Moves to the next epoch (or to ``epoch``, by the closed form where there is one) and writes the lrs."""
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                if hasattr(self, "_get_closed_form_lr"):
                    values = self._get_closed_form_lr()
                else:
                    values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _update_param_group_val(group, "lr", lr)
        self._last_lr = _param_groups_val_list(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    """Deprecated name of :class:`LRScheduler`, kept for older code that subclasses it, as PyTorch keeps it.

    A subclass rather than an alias, as PyTorch's, so that its ``__name__`` is ``_LRScheduler``.
    """


class StepLR(LRScheduler):
    """Multiplies each group's lr by ``gamma`` every ``step_size`` epochs.

    Example::

        >>> scheduler = StepLR(optimizer, step_size=30, gamma=0.1)  # lr 0.05 -> 0.005 at epoch 30
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiplies each group's lr by ``gamma`` at each epoch listed in ``milestones``.

    Example::

        >>> scheduler = MultiStepLR(optimizer, milestones=[30, 80], gamma=0.1)
    """

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        if self.last_epoch not in self.milestones:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiplies each group's lr by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        if self._is_initial:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma**self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    r"""Anneals each group's lr from its initial value to ``eta_min`` along a cosine over ``T_max`` epochs.

    .. math:: \eta_t = \eta_{min} + \frac{1}{2}(\eta_{max} - \eta_{min})\left(1 + \cos\frac{t\pi}{T_{max}}\right)

    computed recursively (so it composes with other changes of the lr), as PyTorch does.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        groups = self.optimizer.param_groups
        if self._is_initial:
            return _param_groups_val_list(self.optimizer, "lr")
        if self._step_count == 1 and self.last_epoch > 0:
            return [
                self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                for base_lr in self.base_lrs
            ]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [
                group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                for base_lr, group in zip(self.base_lrs, groups)
            ]
        return [
            (1 + math.cos(math.pi * self.last_epoch / self.T_max))
            / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
            * (group["lr"] - self.eta_min)
            + self.eta_min
            for group in groups
        ]

    def _get_closed_form_lr(self) -> list[float]:
        return [
            self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
            for base_lr in self.base_lrs
        ]


class LambdaLR(LRScheduler):
    """Sets each group's lr to its initial lr times ``lr_lambda(epoch)`` (one function, or one per group).

    Example::

        >>> scheduler = LambdaLR(optimizer, lr_lambda=lambda epoch: 0.95 ** epoch)
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list, last_epoch: int = -1) -> None:
        # Checked by the base class only after reading param_groups: something without them raises
        # AttributeError here, as in PyTorch.
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        """Attributes except the optimizer; of ``lr_lambdas`` only callable objects' ``__dict__`` (not functions)."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        for index, function in enumerate(self.lr_lambdas):
            if not isinstance(function, types.FunctionType):
                state["lr_lambdas"][index] = function.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for index, attributes in enumerate(lr_lambdas):
            if attributes is not None:
                self.lr_lambdas[index].__dict__.update(attributes)

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        return [base_lr * function(self.last_epoch) for function, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from ``max_lr / div_factor`` to ``max_lr``, then anneals far below.

    Momentum (``momentum``, or ``betas[0]`` for Adam-like optimizers) cycles inversely between
    ``max_momentum`` and ``base_momentum`` when ``cycle_momentum``. Step it after every batch.

    Args:
        optimizer: the wrapped optimizer.
        max_lr: the peak lr, one value or one per group.
        total_steps: the number of steps in the cycle; or give ``epochs`` and ``steps_per_epoch``.
        pct_start: the fraction of the cycle spent increasing the lr (default: 0.3).
        anneal_strategy: ``"cos"`` or ``"linear"`` (default: ``"cos"``).
        cycle_momentum: cycle the momentum inversely to the lr (default: True).
        base_momentum, max_momentum: the momentum range (default: 0.85, 0.95).
        div_factor: initial lr = max_lr / div_factor (default: 25).
        final_div_factor: minimum lr = initial lr / final_div_factor (default: 1e4).
        three_phase: a third phase annihilates the lr after a symmetric rise and fall (default: False).

    Example::

        >>> scheduler = OneCycleLR(optimizer, max_lr=0.01, steps_per_epoch=len(loader), epochs=10)
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        if three_phase:
            self._schedule_phases: list[dict[str, Any]] = [
                {
                    "end_step": float(pct_start * self.total_steps) - 1,
                    "start_lr": "initial_lr",
                    "end_lr": "max_lr",
                    "start_momentum": "max_momentum",
                    "end_momentum": "base_momentum",
                },
                {
                    "end_step": float(2 * pct_start * self.total_steps) - 2,
                    "start_lr": "max_lr",
                    "end_lr": "initial_lr",
                    "start_momentum": "base_momentum",
                    "end_momentum": "max_momentum",
                },
                {
                    "end_step": self.total_steps - 1,
                    "start_lr": "initial_lr",
                    "end_lr": "min_lr",
                    "start_momentum": "max_momentum",
                    "end_momentum": "max_momentum",
                },
            ]
        else:
            self._schedule_phases = [
                {
                    "end_step": float(pct_start * self.total_steps) - 1,
                    "start_lr": "initial_lr",
                    "end_lr": "max_lr",
                    "start_momentum": "max_momentum",
                    "end_momentum": "base_momentum",
                },
                {
                    "end_step": self.total_steps - 1,
                    "start_lr": "max_lr",
                    "end_lr": "min_lr",
                    "start_momentum": "base_momentum",
                    "end_momentum": "max_momentum",
                },
            ]
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            base_momentums = _format_param("base_momentum", optimizer, base_momentum)
        # Validated: only now are the param groups written.
        if last_epoch == -1:
            for index, group in enumerate(optimizer.param_groups):
                group["initial_lr"] = max_lrs[index] / div_factor
                group["max_lr"] = max_lrs[index]
                group["min_lr"] = group["initial_lr"] / final_div_factor
            if cycle_momentum:
                for high, low, group in zip(max_momentums, base_momentums, optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (high, *group["betas"][1:])
                    else:
                        group["momentum"] = high
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)

    def _anneal_func(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        self._warn_get_lr_called_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"Tried to step {step_num} times. The specified number of total steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for index, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or index == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal_func(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal_func(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


# Re-exported under torch.optim.lr_scheduler's names; defined apart to keep this file under ~600 lines.
from .lr_scheduler_factors import ConstantLR, LinearLR, MultiplicativeLR, PolynomialLR  # noqa: E402

__all__ += ["ConstantLR", "LinearLR", "MultiplicativeLR", "PolynomialLR"]
from .lr_scheduler_restarts import CosineAnnealingWarmRestarts  # noqa: E402

__all__ += ["CosineAnnealingWarmRestarts"]
from .lr_scheduler_composite import ChainedScheduler, SequentialLR  # noqa: E402

__all__ += ["SequentialLR", "ChainedScheduler"]
from .lr_scheduler_cyclic import CyclicLR  # noqa: E402

__all__ += ["CyclicLR"]
from .lr_scheduler_plateau import ReduceLROnPlateau  # noqa: E402

__all__ += ["ReduceLROnPlateau"]
