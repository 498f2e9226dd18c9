"""Dynamic batching: requests for one model arriving within a window run as one onnxruntime call.

A batch runs when a slot is free (``concurrent_batches`` run at once) and either ``max_batch_size``
rows are queued or the oldest queued request has waited ``max_queue_delay`` seconds. Its requests are
stacked along the first (dynamic) axis, run once, and the outputs are split back by each request's row
count. Requests whose other axes differ cannot be stacked: they run one after the other in the same
slot. While the slots are busy, requests queue, so under load the batches grow by themselves.

A batch that fails runs again one request at a time, so that one client's bad request (an index out
of range, say) fails alone, and no client sees an error message built from another client's data.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from .model import ServedModel

__all__ = ["DynamicBatcher"]


@dataclass
class _Pending:
    arrays: dict[str, np.ndarray]
    future: asyncio.Future
    arrived: float  # the event loop's clock

    @property
    def rows(self) -> int:
        return next(iter(self.arrays.values())).shape[0]

    @property
    def signature(self) -> tuple:
        """What must agree for two requests to stack: every input's shape past the first axis."""
        return tuple((name, array.shape[1:]) for name, array in sorted(self.arrays.items()))


class DynamicBatcher:
    """Queues a model's requests and runs them in batches on ``executor``.

    Args:
        model: a ready model whose inputs and outputs all have a dynamic first axis.
        max_batch_size: the most rows one run stacks (a single larger request still runs, alone).
        max_queue_delay: seconds the first request of a batch waits for others.
        executor: where ``model.run`` runs, off the event loop.
        observe_batch: called with each run's row count (the batch-size metric).
        concurrent_batches: how many batches may run at once (on as many executor threads).
    """

    def __init__(
        self,
        model: ServedModel,
        max_batch_size: int,
        max_queue_delay: float,
        executor: Executor,
        observe_batch: Callable[[int], None],
        concurrent_batches: int = 1,
    ) -> None:
        self.model = model
        self.max_batch_size = max_batch_size
        self.max_queue_delay = max_queue_delay
        self._executor = executor
        self._observe_batch = observe_batch
        self._queue: collections.deque[_Pending] = collections.deque()
        self._queued_rows = 0
        self._arrived = asyncio.Event()  # the queue is not empty
        self._full = asyncio.Event()  # the queue holds max_batch_size rows: no need to wait longer
        self._task: asyncio.Task | None = None
        self._slots = asyncio.Semaphore(concurrent_batches)
        self._running: set[asyncio.Task] = set()  # referenced so that the loop does not drop them

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._serve_forever())

    async def stop(self) -> None:
        """Stop after the queued requests ran (the server stops taking requests first)."""
        while self._queue or self._running:
            await asyncio.sleep(0.01)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def infer(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's outputs for one request, run as part of a batch."""
        loop = asyncio.get_running_loop()
        pending = _Pending(arrays, loop.create_future(), loop.time())
        self._queue.append(pending)
        self._queued_rows += pending.rows
        self._arrived.set()
        if self._queued_rows >= self.max_batch_size:
            self._full.set()
        return await pending.future

    def _take_window(self) -> list[_Pending]:
        window: list[_Pending] = []
        rows = 0
        while self._queue and (not window or rows + self._queue[0].rows <= self.max_batch_size):
            pending = self._queue.popleft()
            window.append(pending)
            rows += pending.rows
        self._queued_rows -= rows
        if not self._queue:
            self._arrived.clear()
        if self._queued_rows < self.max_batch_size:
            self._full.clear()
        return window

    async def _serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # A free slot first (at most ``concurrent_batches`` run at once, Triton's instance count):
            # while all are busy, requests queue up and the next batch takes them all at once.
            await self._slots.acquire()
            await self._arrived.wait()
            remaining = self._queue[0].arrived + self.max_queue_delay - loop.time()
            if remaining > 0 and not self._full.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._full.wait(), remaining)
            window = self._take_window()
            groups: dict[tuple, list[_Pending]] = {}
            for pending in window:
                groups.setdefault(pending.signature, []).append(pending)
            task = loop.create_task(self._run(list(groups.values())))
            self._running.add(task)

    async def _run(self, groups: list[list[_Pending]]) -> None:
        try:
            for group in groups:
                await self._run_group(group)
        finally:
            self._slots.release()
            self._running.discard(asyncio.current_task())

    async def _run_group(self, group: list[_Pending]) -> None:
        if len(group) == 1:
            await self._run_alone(group[0])
            return
        names = list(group[0].arrays)
        stacked = {name: np.concatenate([pending.arrays[name] for pending in group]) for name in names}
        rows = [pending.rows for pending in group]
        self._observe_batch(sum(rows))
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(self._executor, self.model.run, stacked)
        except Exception:  # the batch's error may come from any one request and quote its data
            for pending in group:
                await self._run_alone(pending)
            return
        offsets = np.cumsum([0] + rows)
        for pending, start, stop in zip(group, offsets[:-1], offsets[1:]):
            if not pending.future.done():  # done: the client went away
                pending.future.set_result({name: output[start:stop] for name, output in outputs.items()})

    async def _run_alone(self, pending: _Pending) -> None:
        """Run one request by itself; its own result or error goes to its own future."""
        if pending.future.done():  # the client went away
            return
        self._observe_batch(pending.rows)
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(self._executor, self.model.run, pending.arrays)
        except Exception as error:  # the request's handler turns it into a response
            if not pending.future.done():
                pending.future.set_exception(error)
            return
        if not pending.future.done():
            pending.future.set_result(outputs)
