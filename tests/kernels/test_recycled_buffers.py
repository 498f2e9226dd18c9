"""Recycled output buffers (onnxnn/kernels/recycled_buffers.py): a buffer is handed out again only
when the pool holds its one reference, so nothing anyone can still read is ever overwritten."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from onnxnn.kernels import recycled_buffers
from onnxnn.kernels.recycled_buffers import RECYCLE_MIN_ELEMENTS, recycled_empty

LARGE = (RECYCLE_MIN_ELEMENTS,)

pytestmark = pytest.mark.skipif(recycled_buffers._FREE_THREADED, reason="without a GIL every array is fresh")


@pytest.fixture(autouse=True)
def _empty_pool():
    recycled_buffers._clear()
    yield
    recycled_buffers._clear()


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_a_buffer_nothing_refers_to_is_handed_out_again():
    first = recycled_empty(LARGE, np.float32)
    address = _address(first)
    del first
    again = recycled_empty(LARGE, np.float32)
    assert _address(again) == address


@pytest.mark.parametrize(
    "holder",
    [
        lambda array: array,
        lambda array: array[10:20],
        lambda array: array.reshape(2, -1).T,
        lambda array: memoryview(array),
        lambda array: np.frombuffer(memoryview(array), np.float32),
        lambda array: [array],
    ],
    ids=["the array", "a slice", "a reshaped view", "a memoryview", "an array over its buffer", "a list"],
)
def test_a_buffer_still_referred_to_is_never_handed_out(holder):
    first = recycled_empty(LARGE, np.float32)
    first[:] = 7
    held = holder(first)
    del first
    other = recycled_empty(LARGE, np.float32)
    other[:] = -1
    assert np.all(np.asarray(held if not isinstance(held, list) else held[0]) == 7)
    del held, other
    assert len(recycled_buffers._pools[(LARGE, np.dtype(np.float32))].buffers) == 2


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((RECYCLE_MIN_ELEMENTS // 2, 2), np.float32), (LARGE, np.float64), ((RECYCLE_MIN_ELEMENTS - 1,), np.float32)],
    ids=["another shape", "another dtype", "a small array"],
)
def test_a_buffer_serves_only_its_own_shape_and_dtype(shape, dtype):
    address = _address(recycled_empty(LARGE, np.float32))
    array = recycled_empty(shape, dtype)
    assert array.shape == shape and array.dtype == dtype and array.flags.c_contiguous
    assert _address(array) != address


def test_small_arrays_are_not_kept():
    recycled_empty((RECYCLE_MIN_ELEMENTS - 1,), np.float32)
    assert not recycled_buffers._pools


@pytest.mark.parametrize("per_step", [3, 300], ids=["a few tensors", "a transformer's many equal matrices"])
def test_a_steady_loop_keeps_two_generations_of_buffers(per_step):
    live = [recycled_empty(LARGE, np.float32) for _ in range(per_step)]
    for _ in range(20):  # each step's results replace the previous step's, as an optimizer's do
        live = [recycled_empty(LARGE, np.float32) for _ in range(per_step)]
    assert len(recycled_buffers._pools[(LARGE, np.dtype(np.float32))].buffers) == 2 * per_step
    assert len({_address(array) for array in live}) == per_step


def test_the_buffers_of_a_step_start_apart_within_a_page():
    """A loop that reads some of these arrays while writing others stalls when they start within a
    few cache lines of each other modulo 4 KiB (4K aliasing): an optimizer step's new parameters
    and states (and the previous step's, which it reads) start at least 512 bytes apart."""
    arrays = [recycled_empty(LARGE, np.float32) for _ in range(6)]
    offsets = sorted(_address(array) % 4096 for array in arrays)
    gaps = [later - earlier for earlier, later in zip(offsets, offsets[1:] + [offsets[0] + 4096])]
    assert min(gaps) >= 512
    assert all(array.flags.c_contiguous and array.flags.writeable for array in arrays)


def test_a_buffer_is_taken_by_one_thread_at_a_time(monkeypatch):
    # Compiled nodes run beside onnxruntime's sessions on a thread of their own: while one thread is
    # finding a free buffer, another asking for one must wait, or both could take the same buffer.
    original = recycled_buffers._Pool.free_buffer
    others: list = []
    finished_meanwhile: list = []

    def free_buffer(pool):
        if not others:  # the first search: another thread asks for a buffer meanwhile
            others.append(threading.Thread(target=recycled_empty, args=(LARGE, np.float32)))
            others[0].start()
            others[0].join(timeout=0.2)
            finished_meanwhile.append(not others[0].is_alive())
        return original(pool)

    monkeypatch.setattr(recycled_buffers._Pool, "free_buffer", free_buffer)
    recycled_empty(LARGE, np.float32)
    others[0].join()
    assert finished_meanwhile == [False]


@pytest.mark.parametrize(
    ("make", "pooled"),
    [
        (lambda: recycled_empty(LARGE, np.float32), True),
        (lambda: recycled_empty((RECYCLE_MIN_ELEMENTS - 1,), np.float32), False),
        (lambda: np.empty(LARGE, np.float32), False),
        (lambda: np.empty(2 * RECYCLE_MIN_ELEMENTS, np.float32)[:RECYCLE_MIN_ELEMENTS], False),
    ],
    ids=["a pool's", "a small one", "a plain array", "a view of a plain array"],
)
def test_an_array_is_in_the_pool_only_when_the_pool_keeps_its_buffer(make, pooled):
    assert recycled_buffers.in_pool(make()) is pooled


def test_past_the_bound_of_buffers_per_shape_an_array_is_not_in_the_pool(monkeypatch):
    monkeypatch.setattr(recycled_buffers, "_MOST_PER_KEY", 1)
    kept, beyond = recycled_empty(LARGE, np.float32), recycled_empty(LARGE, np.float32)
    assert recycled_buffers.in_pool(kept) and not recycled_buffers.in_pool(beyond)
