"""What a DataLoader worker process runs, and what it tells the main process.

A worker reads batch requests ``(task index, indices)`` from its own queue and answers on the
shared result queue with ``(task index, batch)``; ``None`` asks it to stop. An exception in the
dataset travels back as an :class:`ExceptionWrapper` and is raised again in the main process.
"""

from __future__ import annotations

import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...ir.random import manual_seed
from ._shared_memory import to_shared_memory

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper", "ResumeIteration", "IterableExhausted", "worker_loop"]

# How often a waiting worker checks that the main process is still there (seconds).
STATUS_CHECK_INTERVAL = 5.0


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id``, ``num_workers``, ``seed`` and the
    worker's own copy of ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The current worker's :class:`WorkerInfo`, or ``None`` in the main process.

    An ``IterableDataset`` uses it to give each worker its own share of the stream.
    """
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback as text."""

    def __init__(self, exc_info, where: str) -> None:
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        message = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            message = KeyError(message)  # KeyError shows its argument's repr: keep the newlines readable
        try:
            exception = self.exc_type(message)
        except Exception:
            raise RuntimeError(message) from None  # a type whose constructor needs other arguments
        raise exception


@dataclass(frozen=True)
class ResumeIteration:
    """Asks a persistent worker to start its dataset's iterator again (a new epoch).

    The worker is not seeded again: PyTorch seeds a worker once, when it starts.
    """


@dataclass(frozen=True)
class IterableExhausted:
    """A worker's answer once its copy of an ``IterableDataset`` has no more samples."""

    worker_id: int


class _MapFetcher:
    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable) -> None:
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, indices):
        if self.auto_collation:
            read_batch = getattr(self.dataset, "__getitems__", None)
            if read_batch:  # the dataset's own batched read, which PyTorch's fetcher prefers
                return self.collate_fn(read_batch(list(indices)))
            return self.collate_fn([self.dataset[index] for index in indices])
        return self.collate_fn(self.dataset[indices])


class _IterableFetcher:
    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.iterator = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, indices):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        samples = []
        for _ in indices:
            try:
                samples.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not samples or (self.drop_last and len(samples) < len(indices)):
            raise StopIteration
        return self.collate_fn(samples)


def make_fetcher(iterable: bool, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool):
    if iterable:
        return _IterableFetcher(dataset, auto_collation, collate_fn, drop_last)
    return _MapFetcher(dataset, auto_collation, collate_fn)


def _seed_worker(seed: int) -> None:
    """Seeds Python's, onnxnn's and numpy's global generators from the worker's seed (the base seed
    drawn by the loader's iterator, plus the worker's id), as PyTorch's workers do: otherwise
    numpy-based augmentation would draw the same numbers in every worker and every epoch (a forked
    copy of the parent's state)."""
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence(seed).generate_state(4))


def worker_loop(
    iterable: bool,
    dataset,
    index_queue,
    result_queue,
    auto_collation: bool,
    collate_fn: Callable,
    drop_last: bool,
    base_seed: int,
    init_fn: Callable | None,
    worker_id: int,
    num_workers: int,
    segment_prefix: str,
) -> None:
    """The body of worker ``worker_id``: answer batch requests until asked to stop.

    Large arrays of each batch go back through shared memory segments named ``segment_prefix...``.
    """
    global _worker_info
    seed = base_seed + worker_id
    _seed_worker(seed)
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    where = f"in DataLoader worker process {worker_id}"
    fetcher = None
    failure = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
    except Exception:
        failure = ExceptionWrapper(sys.exc_info(), where)
    exhausted = False
    while True:
        try:
            request = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
        except queue.Empty:
            continue
        if request is None:
            break
        if isinstance(request, ResumeIteration):
            try:
                fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                exhausted = False
            except Exception:
                failure = ExceptionWrapper(sys.exc_info(), where)
            result_queue.put((request, None))
            continue
        task, indices = request
        if failure is not None or fetcher is None:
            answer: Any = failure  # the main process raises it and stops the workers
        elif exhausted:
            continue  # the main process already knows; it asked before hearing
        else:
            try:
                answer = fetcher.fetch(indices)
            except Exception as error:
                if isinstance(error, StopIteration) and iterable:
                    answer, exhausted = IterableExhausted(worker_id), True
                else:
                    # A map-style dataset's StopIteration is an error like any other, as PyTorch's
                    # worker treats it: raised again in the main process, it ends the epoch there,
                    # as it does without workers, instead of only retiring this worker.
                    answer = ExceptionWrapper(sys.exc_info(), where)
            else:
                try:
                    answer = to_shared_memory(answer, f"{segment_prefix}{worker_id}")
                except OSError:  # no room for a segment (a small /dev/shm): the pipe still works
                    pass
        result_queue.put((task, answer))
    result_queue.cancel_join_thread()  # the main process may not read what is still buffered
