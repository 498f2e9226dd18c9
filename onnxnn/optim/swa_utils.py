"""Stochastic weight averaging and exponential moving averages of a model (``torch.optim.swa_utils``).

``AveragedModel`` keeps a copy of a model whose parameters (and, with ``use_buffers``, buffers) are
running averages of the model's; ``SWALR`` anneals the learning rate to a constant for the averaging
phase; ``update_bn`` recomputes batch-norm statistics for averaged weights with one pass over data.
"""

from __future__ import annotations

import itertools
import math
from copy import deepcopy
from typing import Any, Callable, Iterable, Literal, Sequence

from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from ..runtime.creation import tensor
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from ..ir import dtypes
from .lr_scheduler import LRScheduler, _format_param
from .optimizer import Optimizer

__all__ = [
    "AveragedModel",
    "update_bn",
    "SWALR",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]

AverageFunction = Callable[[Tensor, Tensor, Any], Tensor]
MultiAverageFunction = Callable[[Sequence[Tensor], Sequence[Tensor], Any], None]


def _check_decay(decay: float) -> None:
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_avg_fn(decay: float = 0.999) -> AverageFunction:
    """The exponential moving average of one parameter: ``decay * averaged + (1 - decay) * current``.

    Args:
        decay: the weight of the running average, in [0, 1].

    Returns:
        ``avg_fn(averaged, current, num_averaged)`` for :class:`AveragedModel`.
    """
    _check_decay(decay)

    def ema_update(averaged: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        return decay * averaged + (1 - decay) * current

    return ema_update


def get_swa_avg_fn() -> AverageFunction:
    """The equally weighted running average of one parameter: ``averaged + (current - averaged) / (n + 1)``."""

    def swa_update(averaged: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        return averaged + (current - averaged) / (num_averaged + 1)

    return swa_update


def _in_place(average: AverageFunction) -> MultiAverageFunction:
    """The list form of a per-parameter average: each averaged tensor is overwritten in place."""

    def update(averaged: Sequence[Tensor], current: Sequence[Tensor], num_averaged: Any) -> None:
        with no_grad():
            for averaged_tensor, current_tensor in zip(averaged, current):
                averaged_tensor.copy_(average(averaged_tensor, current_tensor, num_averaged))

    return update


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAverageFunction:
    """The exponential moving average over lists of parameters, updated in place.

    Args:
        decay: the weight of the running average, in [0, 1].

    Returns:
        ``multi_avg_fn(averaged_list, current_list, num_averaged)`` for :class:`AveragedModel`.
    """
    return _in_place(get_ema_avg_fn(decay))


def get_swa_multi_avg_fn() -> MultiAverageFunction:
    """The equally weighted running average over lists of parameters, updated in place."""
    return _in_place(get_swa_avg_fn())


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are running averages of ``model``'s (SWA or EMA).

    The first :meth:`update_parameters` copies the model's values; later calls average them with
    ``avg_fn`` (per tensor) or ``multi_avg_fn`` (over lists, in place), by default with equal
    weights. Without ``use_buffers`` the buffers (batch-norm statistics) are copied from the model
    at each update, not averaged; recompute them afterwards with :func:`update_bn`.

    Args:
        model: the module to average.
        device: where to keep the averaged copy (default: the model's device).
        avg_fn: ``avg_fn(averaged, current, num_averaged) -> Tensor``.
        multi_avg_fn: ``multi_avg_fn(averaged_list, current_list, num_averaged)``, in place.
        use_buffers: average the buffers too.

    Example::

        >>> swa_model = onnxnn.optim.swa_utils.AveragedModel(model)
        >>> ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
        >>> for input, target in loader:
        ...     ...
        ...     optimizer.step()
        ...     ema_model.update_parameters(model)
    """

    n_averaged: Tensor

    def __init__(
        self,
        model: Module,
        device=None,
        avg_fn: AverageFunction | None = None,
        multi_avg_fn: MultiAverageFunction | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dtypes.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """Runs the averaged copy."""
        return self.module(*args, **kwargs)

    def _averaged_tensors(self, model: Module) -> tuple[list[Tensor], list[Tensor]]:
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.module.parameters()), list(model.parameters())
        if len(mine) != len(theirs):
            raise ValueError(
                f"update_parameters: the model has {len(theirs)} tensors to average, "
                f"the averaged copy {len(mine)}; pass the model this AveragedModel was built from"
            )
        for index, (averaged, current) in enumerate(zip(mine, theirs)):
            if tuple(averaged.shape) != tuple(current.shape):
                raise ValueError(
                    f"update_parameters: tensor {index} has shape {tuple(current.shape)} in the model "
                    f"but {tuple(averaged.shape)} in the averaged copy"
                )
        return mine, theirs

    def update_parameters(self, model: Module) -> None:
        """Folds the current values of ``model`` into the averages and counts one more model."""
        mine, theirs = self._averaged_tensors(model)
        # The averaged tensors themselves are passed on (under no_grad): an in-place update rebinds
        # the handle it is called on, so updating a detached alias would leave the parameter as it was.
        averaged = mine
        current = [tensor.detach().to(mine_tensor.device) for tensor, mine_tensor in zip(theirs, mine)]
        count = int(self.n_averaged.item())
        with no_grad():
            if count == 0:
                for averaged_tensor, current_tensor in zip(averaged, current):
                    averaged_tensor.copy_(current_tensor)
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn(averaged, current, self.n_averaged)
            else:
                _in_place(self.avg_fn or get_swa_avg_fn())(averaged, current, self.n_averaged)
            if not self.use_buffers:
                for own_buffer, model_buffer in zip(self.module.buffers(), model.buffers()):
                    own_buffer.copy_(model_buffer.detach().to(own_buffer.device))
            self.n_averaged.add_(1)


def update_bn(loader: Iterable[Any], model: Module, device=None) -> None:
    """Recomputes the running statistics of every batch-norm layer of ``model`` with one pass over ``loader``.

    The statistics are reset and then accumulated as a cumulative average (``momentum=None``) in
    training mode; the momenta and the model's mode are restored afterwards.

    Args:
        loader: batches, each a tensor or a list/tuple whose first element is the model's input.
        model: the model (typically an :class:`AveragedModel`).
        device: if given, each input is moved there first.
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    try:
        for module in momenta:
            module.reset_running_stats()
            module.momentum = None
        model.train()
        with no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = batch.to(device)
                model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


def _linear_anneal(progress: float) -> float:
    return progress


def _cosine_anneal(progress: float) -> float:
    return (1 - math.cos(math.pi * progress)) / 2


_ANNEAL_FUNCTIONS = {"cos": _cosine_anneal, "linear": _linear_anneal}


class SWALR(LRScheduler):
    """Anneals each group's learning rate to ``swa_lr`` over ``anneal_epochs`` epochs, then holds it.

    Args:
        optimizer: the wrapped optimizer.
        swa_lr: the final learning rate, one value or one per param group.
        anneal_epochs: epochs of the annealing phase (0: jump to ``swa_lr`` at the first step).
        anneal_strategy: ``"cos"`` or ``"linear"``.
        last_epoch: the index of the last epoch.

    Example::

        >>> swa_scheduler = SWALR(optimizer, swa_lr=0.05, anneal_epochs=5)
        >>> for epoch in range(swa_start, epochs):
        ...     train_one_epoch()
        ...     swa_model.update_parameters(model)
        ...     swa_scheduler.step()
    """

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float | list[float],
        anneal_epochs: int = 10,
        anneal_strategy: Literal["cos", "linear"] = "cos",
        last_epoch: int = -1,
    ) -> None:
        if anneal_strategy not in _ANNEAL_FUNCTIONS:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:  # a bool is an int, as PyTorch accepts
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        for value, group in zip(_format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = value
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, progress: float) -> float:
        """The fraction of the way from the starting lr to ``swa_lr`` at ``progress`` in [0, 1]."""
        return _ANNEAL_FUNCTIONS[self._anneal_strategy](progress)

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        # Inverts one annealing step, so that the schedule stays chainable with other schedulers.
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        """Interpolates between the lr the previous step started from and ``swa_lr``."""
        self._warn_get_lr_called_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        previous_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        previous_lrs = [
            self._get_initial_lr(group["lr"], group["swa_lr"], previous_alpha) for group in self.optimizer.param_groups
        ]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [
            group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, previous_lrs)
        ]
