"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` each worker is a real process (``multiprocessing``) with its own copy of
the dataset. The main process deals batch requests round-robin, keeps ``prefetch_factor``
requests in flight per worker, and hands batches out in request order. Workers start by
``forkserver`` on Linux and ``spawn`` elsewhere, not ``fork``: a forked child would inherit
onnxruntime sessions whose thread pools did not survive the fork, and its first run would wait
for them forever. The forkserver imports onnxnn once, so workers start in milliseconds.
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import sys
from typing import Any, Callable, Iterator

from ...ir.random import Generator, default_generator
from ._shared_memory import from_shared_memory, release, remove_segments, segment_prefix
from ._worker import ExceptionWrapper, IterableExhausted, ResumeIteration, make_fetcher, worker_loop
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]

# How long the main process waits for a batch before checking that every worker is alive (seconds).
LIVENESS_CHECK_INTERVAL = 1.0

# The queues of every worker iterator not yet shut down, by the iterator's id. An iterator dropped
# in a reference cycle is shut down by the cycle collector, which runs the weakref callbacks of the
# garbage before any __del__. Were its queues garbage too, their finalizers would have run first:
# an index queue closed, so the stop request put after that never reached its worker (the shutdown
# waited 5 s per worker, then killed it), and the queues' semaphores unlinked, so a worker still
# starting could not open them. Held here, the queues outlive the iterator's shutdown.
_OPEN_QUEUES: dict[int, tuple] = {}


class _InfiniteConstantSampler(Sampler):
    """The sampler of an ``IterableDataset``: ``None`` forever (the dataset decides when it ends)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


def _default_context():
    if sys.platform.startswith("linux"):
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["onnxnn"])
        return context
    return multiprocessing.get_context("spawn")


_FIXED_AFTER_INIT = frozenset({"batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"})


class DataLoader:
    """Iterates over a dataset in batches, as ``torch.utils.data.DataLoader``.

    Args:
        dataset: a map-style ``Dataset`` (``__getitem__`` and ``__len__``) or an ``IterableDataset``.
        batch_size: samples per batch; ``None`` turns automatic batching off (each sample is only
            converted, numpy arrays to tensors).
        shuffle: a new random order each epoch (a ``RandomSampler``).
        sampler: the order of the indices (exclusive with ``shuffle``).
        batch_sampler: yields whole lists of indices (exclusive with ``batch_size``, ``shuffle``,
            ``sampler`` and ``drop_last``).
        num_workers: worker processes; 0 loads in the main process.
        collate_fn: merges a list of samples into a batch (default :func:`default_collate`).
        pin_memory: accepted for compatibility; onnxnn's host arrays need no pinning.
        drop_last: drop the last, incomplete batch.
        timeout: seconds to wait for a worker's batch before raising (0: no limit).
        worker_init_fn: called in each worker with its id, after seeding and before loading.
        multiprocessing_context: a ``multiprocessing`` context or its start method's name.
        generator: the generator of the shuffling and of the workers' base seed.
        prefetch_factor: batches requested ahead per worker (default 2 with workers).
        persistent_workers: keep the workers between epochs.

    Example::

        >>> loader = DataLoader(TensorDataset(inputs, targets), batch_size=32, shuffle=True)
        >>> for batch_inputs, batch_targets in loader:
        ...     loss = criterion(model(batch_inputs), batch_targets)
    """

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Any = None,
        batch_sampler: Sampler | Any = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable | None = None,
        multiprocessing_context=None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                    f"but got batch_sampler={batch_sampler}"
                )
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        if isinstance(multiprocessing_context, str):
            multiprocessing_context = multiprocessing.get_context(multiprocessing_context)

        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.drop_last = drop_last
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._workers_iterator: _WorkersIterator | None = None
        self._initialized = True

    def __setattr__(self, name: str, value) -> None:
        # What the batches and the workers were built from is fixed once the loader exists (PyTorch's
        # rule): a later change would be silently ignored by the samplers made from it.
        if name in _FIXED_AFTER_INIT and self.__dict__.get("_initialized"):
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> Iterator:
        if self.num_workers == 0:
            return _SingleProcessIterator(self)
        if not self.persistent_workers:
            return _WorkersIterator(self)
        if self._workers_iterator is None:
            self._workers_iterator = _WorkersIterator(self)
        else:
            self._workers_iterator.reset()
        return self._workers_iterator

    def __len__(self) -> int:
        if self._iterable:
            length = len(self.dataset)  # TypeError when the iterable dataset has no length, as in PyTorch
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    def _base_seed(self) -> int:
        return int((self.generator or default_generator).numpy.integers(2**62))


class _SingleProcessIterator:
    def __init__(self, loader: DataLoader) -> None:
        self._indices = iter(loader._index_sampler)
        # Unused without workers, but drawn as PyTorch's every iterator draws it: the generator then
        # advances the same way for every num_workers, so one seed gives the same shuffle for all.
        self._base_seed = loader._base_seed()
        self._fetcher = make_fetcher(
            loader._iterable, loader.dataset, loader._auto_collation, loader.collate_fn, loader.drop_last
        )

    def __iter__(self):
        return self

    def __next__(self):
        return self._fetcher.fetch(next(self._indices))


class _WorkersIterator:
    """Batches from ``num_workers`` processes, in order."""

    def __init__(self, loader: DataLoader) -> None:
        self._loader = loader
        context = loader.multiprocessing_context or _default_context()
        self._result_queue = context.Queue()
        self._index_queues: list = []
        self._workers: list = []
        self._shut_down = False
        _OPEN_QUEUES[id(self)] = (self._result_queue, self._index_queues)
        self._segment_prefix = segment_prefix()
        # PyTorch's order: the sampler's iterator, then the base seed (a sampler that draws as soon as
        # it is iterated draws first), the same draws as the single-process iterator makes.
        self._indices = iter(loader._index_sampler)
        base_seed = loader._base_seed()
        for worker_id in range(loader.num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()
            worker = context.Process(
                target=worker_loop,
                args=(
                    loader._iterable,
                    loader.dataset,
                    index_queue,
                    self._result_queue,
                    loader._auto_collation,
                    loader.collate_fn,
                    loader.drop_last,
                    base_seed,
                    loader.worker_init_fn,
                    worker_id,
                    loader.num_workers,
                    self._segment_prefix,
                ),
                daemon=True,
            )
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        self._start_epoch()

    def _start_epoch(self) -> None:
        self._active = [True] * self._loader.num_workers
        self._next_worker = itertools.cycle(range(self._loader.num_workers))
        self._sent = 0  # requests made
        self._received = 0  # the next request whose batch is handed out
        self._tasks: dict[int, tuple] = {}  # request -> (worker,) while pending, (worker, batch) once here
        in_flight = max(self._loader.prefetch_factor or 0, 1)  # at least one request, or nothing would come
        for _ in range(in_flight * self._loader.num_workers):
            self._request()

    def reset(self) -> None:
        """A new epoch on the same (persistent) workers.

        No new base seed is drawn and the workers are not seeded again, as in PyTorch: the workers'
        generators go on from where the last epoch left them, and the loader's generator advances
        only by the sampler's draws, as it does between the epochs of a single-process loader.
        """
        self._indices = iter(self._loader._index_sampler)
        for index_queue in self._index_queues:
            index_queue.put(ResumeIteration())
        for task in self._tasks.values():  # the last epoch's batches that arrived but were not taken
            if len(task) == 2:
                release(task[1])
        resumed = 0
        while resumed < len(self._workers):
            task, batch = self._receive()
            if isinstance(task, ResumeIteration):
                resumed += 1
            else:
                release(batch)  # still in flight when the last epoch was left
        self._start_epoch()

    def _request(self) -> None:
        if not any(self._active):
            return
        try:
            indices = next(self._indices)
        except StopIteration:
            return
        worker = next(self._next_worker)
        while not self._active[worker]:
            worker = next(self._next_worker)
        self._index_queues[worker].put((self._sent, indices))
        self._tasks[self._sent] = (worker,)
        self._sent += 1

    def __iter__(self):
        return self

    def __next__(self):
        try:
            batch = self._next()
        except StopIteration:  # the epoch's end
            if not self._loader.persistent_workers:
                self._shutdown()
            raise
        except BaseException:
            self._shutdown()
            raise
        # A dataset's error is raised here with the workers kept, as PyTorch keeps them: a caller who
        # catches it gets the next batch from the next call, as without workers. A map-style
        # dataset's StopIteration ends a for loop here, as it does without workers.
        return self._unwrap(batch)

    def _next(self):
        while True:
            while self._received < self._sent:  # skip requests a finished iterable worker will not answer
                task = self._tasks.get(self._received)
                if task is not None and (len(task) == 2 or self._active[task[0]]):
                    break
                skipped = self._tasks.pop(self._received, None)
                if skipped is not None and len(skipped) == 2:
                    release(skipped[1])
                self._received += 1
            else:
                raise StopIteration
            task = self._tasks[self._received]
            if len(task) == 2:
                del self._tasks[self._received]
                self._received += 1
                self._request()
                return task[1]
            number, batch = self._receive()
            if isinstance(batch, IterableExhausted):
                self._active[batch.worker_id] = False
                self._tasks.pop(number, None)
                continue
            if number == self._received:
                del self._tasks[number]
                self._received += 1
                self._request()
                return batch
            self._tasks[number] = (self._tasks[number][0], batch)

    @staticmethod
    def _unwrap(batch):
        if isinstance(batch, ExceptionWrapper):
            batch.reraise()
        return from_shared_memory(batch)

    def _receive(self):
        """The next answer from any worker; raises if a worker died or ``timeout`` passed."""
        timeout = self._loader.timeout
        waited = 0.0
        while True:
            wait = LIVENESS_CHECK_INTERVAL if not timeout else min(LIVENESS_CHECK_INTERVAL, timeout - waited)
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                waited += wait
            dead = [worker for worker in self._workers if not worker.is_alive()]
            if dead:
                pids = ", ".join(str(worker.pid) for worker in dead)
                codes = ", ".join(str(worker.exitcode) for worker in dead)
                self._shutdown()
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly (exit code(s) {codes})")
            if timeout and waited >= timeout:
                self._shutdown()
                raise RuntimeError(f"DataLoader timed out after {timeout} seconds")

    def _shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        try:
            for index_queue in self._index_queues:
                try:
                    index_queue.put(None)
                except (OSError, ValueError):
                    pass
            for worker in self._workers:
                worker.join(timeout=5.0)
                if worker.is_alive():
                    worker.terminate()
                    worker.join()
            for index_queue in self._index_queues:
                index_queue.close()
            # Batches that arrived but will never be returned: their shared memory segments go now.
            for task in self._tasks.values():
                if len(task) == 2:
                    release(task[1])
            self._tasks.clear()
            while True:
                try:
                    _, batch = self._result_queue.get_nowait()
                except (queue.Empty, OSError, EOFError, ValueError):
                    break
                release(batch)
            remove_segments(self._segment_prefix)  # made by the stopped workers, never received
            self._result_queue.cancel_join_thread()
            self._result_queue.close()
        finally:
            _OPEN_QUEUES.pop(id(self), None)

    def __del__(self) -> None:
        try:
            self._shutdown()
        except Exception:
            pass  # interpreter shutdown: the daemon workers end with the process
