"""Dynamic batching: requests for one model arriving within a window run as one onnxruntime call.

The first request to arrive opens a window of ``max_queue_delay`` seconds; requests arriving in it are
stacked along the first (dynamic) axis until ``max_batch_size`` rows, run once, and the outputs are
split back by each request's row count. Requests whose other axes differ cannot be stacked: they run
as separate batches of the same window. While a batch runs, the next window fills, so under load the
batches grow by themselves.
"""

from __future__ import annotations

import asyncio
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
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._carried: _Pending | None = None  # arrived in a full window; opens the next one
        self._task: asyncio.Task | None = None
        self._slots = asyncio.Semaphore(concurrent_batches)
        self._running: set[asyncio.Task] = set()  # referenced so that the loop does not drop them

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._serve_forever())

    async def stop(self) -> None:
        """Stop after the queued requests ran (the server stops taking requests first)."""
        while not self._queue.empty() or self._carried is not None or self._running:
            await asyncio.sleep(0.01)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def infer(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's outputs for one request, run as part of a batch."""
        pending = _Pending(arrays, asyncio.get_running_loop().create_future())
        await self._queue.put(pending)
        return await pending.future

    async def _next_window(self) -> list[_Pending]:
        first = self._carried or await self._queue.get()
        self._carried = None
        window, rows = [first], first.rows
        deadline = asyncio.get_running_loop().time() + self.max_queue_delay
        while rows < self.max_batch_size:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                pending = (
                    self._queue.get_nowait() if remaining <= 0 else await asyncio.wait_for(self._queue.get(), remaining)
                )
            except (asyncio.QueueEmpty, asyncio.TimeoutError):
                break
            if rows + pending.rows > self.max_batch_size:
                self._carried = pending
                break
            window.append(pending)
            rows += pending.rows
        return window

    async def _serve_forever(self) -> None:
        while True:
            window = await self._next_window()
            groups: dict[tuple, list[_Pending]] = {}
            for pending in window:
                groups.setdefault(pending.signature, []).append(pending)
            for group in groups.values():
                # At most ``concurrent_batches`` run at once (Triton's instance count); while they run,
                # the next window fills.
                await self._slots.acquire()
                self._running.add(asyncio.get_running_loop().create_task(self._run(group)))

    async def _run(self, group: list[_Pending]) -> None:
        try:
            await self._run_group(group)
        finally:
            self._slots.release()
            self._running.discard(asyncio.current_task())

    async def _run_group(self, group: list[_Pending]) -> None:
        names = list(group[0].arrays)
        stacked = {name: np.concatenate([pending.arrays[name] for pending in group]) for name in names}
        rows = [pending.rows for pending in group]
        self._observe_batch(sum(rows))
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(self._executor, self.model.run, stacked)
        except Exception as error:  # handed to each request, whose handler turns it into a response
            for pending in group:
                if not pending.future.done():
                    pending.future.set_exception(error)
            return
        offsets = np.cumsum([0] + rows)
        for pending, start, stop in zip(group, offsets[:-1], offsets[1:]):
            if not pending.future.done():  # done: the client went away
                pending.future.set_result({name: output[start:stop] for name, output in outputs.items()})
