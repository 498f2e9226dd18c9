"""``DistributedSampler``: each rank's share of a dataset's indices, as ``torch.utils.data.distributed``.

``utils`` sits in the layer of ``nn`` and ``optim``, below ``onnxnn.distributed``, so the default
process group's rank and size are published here by ``init_process_group`` (and withdrawn by
``destroy_process_group``) rather than read from it.
"""

from __future__ import annotations

import math
from typing import Iterator

from ...ir.random import Generator
from ...runtime.random_creation import randperm
from .sampler import Sampler

__all__ = ["DistributedSampler", "publish_default_world"]


class _DefaultWorld:
    rank_and_size: tuple[int, int] | None = None


def publish_default_world(rank_and_size: tuple[int, int] | None) -> None:
    """Called by ``onnxnn.distributed``: the default group's ``(rank, world size)``, or None once destroyed."""
    _DefaultWorld.rank_and_size = rank_and_size


class DistributedSampler(Sampler):
    """Splits ``range(len(dataset))`` into ``num_replicas`` equal shares; rank ``r`` iterates share ``r``.

    Args:
        dataset: anything with ``len()``.
        num_replicas: the number of shares (default: the default group's world size).
        rank: this process's share (default: its rank in the default group).
        shuffle: permute the indices every epoch, the same way on every rank (seeded by
            ``seed + epoch``; call :meth:`set_epoch` at the start of each epoch).
        seed: the shuffle's base seed; every rank must use the same.
        drop_last: drop the tail so every share has the same length without repeats; otherwise
            the indices are padded with the first ones so the shares are equal.

    Raises:
        ValueError: ``rank`` is outside ``[0, num_replicas - 1]``, or ``num_replicas`` or ``rank``
            is left out and no default process group is initialized (``init_process_group``).
    """

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            world = _DefaultWorld.rank_and_size
            if world is None:  # PyTorch's error: onnxnn.distributed is there, but no group is initialized
                raise ValueError(
                    "Default process group has not been initialized, please make sure to call init_process_group."
                )
            num_replicas = world[1] if num_replicas is None else num_replicas
            rank = world[0] if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(dataset) % num_replicas != 0:
            # Split to the nearest length that divides evenly, so no rank gets a repeated sample.
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            generator = Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = randperm(len(self.dataset), generator=generator).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch, which seeds this epoch's shuffle: call it before each epoch's iteration."""
        self.epoch = epoch
