"""DataLoader: batches, order, shuffling, workers (real processes), iterable datasets, errors."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal

import numpy as np
import pytest

import onnxnn
from onnxnn.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, TensorDataset, get_worker_info


class Rows(Dataset):
    """Sample i: a float32 row of i's and the label i."""

    def __init__(self, size: int = 10) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):
        return np.full(3, index, np.float32), index


class FailsAt(Rows):
    def __getitem__(self, index):
        if index == 5:
            raise ValueError(f"sample {index} is corrupt")
        return super().__getitem__(index)


class DiesAt(Rows):
    def __getitem__(self, index):
        if index == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(index)


class StopsAt(Rows):
    """A map-style dataset that signals its end by raising StopIteration at index 5."""

    def __getitem__(self, index):
        if index == 5:
            raise StopIteration
        return index


class WorkerSeeds(Rows):
    def __getitem__(self, index):
        return np.array([get_worker_info().id, onnxnn.initial_seed()])


class Ragged(Rows):
    def __getitem__(self, index):
        return np.zeros(index + 1, np.float32)


class Stream(IterableDataset):
    """0..n-1, each worker taking every num_workers-th value (the split PyTorch's docs show)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


class WorkerIds(Rows):
    def __getitem__(self, index):
        info = get_worker_info()
        return np.array([info.id, info.seed % 1000, int(onnxnn.initial_seed() == info.seed)])


def _labels(loader) -> list:
    return [labels.numpy().tolist() for _, labels in loader]


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize(
    "batch_size, drop_last, expected",
    [
        (4, False, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]),
        (4, True, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (10, False, [list(range(10))]),
    ],
)
def test_batches_are_consecutive_slices_in_order(num_workers, batch_size, drop_last, expected):
    loader = DataLoader(Rows(), batch_size=batch_size, drop_last=drop_last, num_workers=num_workers)
    assert len(loader) == len(expected)
    batches = list(loader)
    assert [labels.numpy().tolist() for _, labels in batches] == expected
    rows, labels = batches[0]
    assert rows.dtype == onnxnn.float32 and labels.dtype == onnxnn.int64
    np.testing.assert_array_equal(rows.numpy(), np.repeat(np.array(expected[0], np.float32)[:, None], 3, axis=1))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_shuffle_with_a_seeded_generator_is_a_reproducible_permutation(num_workers):
    def epoch(seed):
        loader = DataLoader(
            Rows(), batch_size=3, shuffle=True, num_workers=num_workers, generator=onnxnn.Generator().manual_seed(seed)
        )
        return sum(_labels(loader), [])

    first = epoch(7)
    assert sorted(first) == list(range(10)) and first != list(range(10))
    assert epoch(7) == first
    assert epoch(8) != first


@pytest.mark.parametrize("seeding", ["generator", "manual_seed"])
def test_one_seed_gives_the_same_shuffled_batches_for_every_num_workers(seeding):
    # PyTorch draws the workers' base seed in every iterator, workers or not, so the generator is in
    # the same state when the shuffle draws: more workers load faster without changing the batches.
    def two_epochs(num_workers):
        generator = onnxnn.Generator().manual_seed(42) if seeding == "generator" else None
        if generator is None:
            onnxnn.manual_seed(42)
        loader = DataLoader(list(range(8)), batch_size=4, shuffle=True, num_workers=num_workers, generator=generator)
        return [[batch.tolist() for batch in loader] for _ in range(2)]

    assert two_epochs(0) == two_epochs(2)


def test_persistent_workers_draw_the_base_seed_once():
    # A persistent iterator serves every epoch and PyTorch draws the base seed when it is made: after
    # the first epoch the generator advances only by the sampler's permutations.
    generator = onnxnn.Generator().manual_seed(42)
    loader = DataLoader(
        list(range(8)), batch_size=4, shuffle=True, num_workers=2, persistent_workers=True, generator=generator
    )
    first, second = [sum((batch.tolist() for batch in loader), []) for _ in range(2)]
    reference = onnxnn.Generator().manual_seed(42)
    assert first == sum(
        (batch.tolist() for batch in DataLoader(list(range(8)), batch_size=4, shuffle=True, generator=reference)), []
    )
    assert second == list(RandomSampler(range(8), generator=reference))


def test_persistent_workers_are_seeded_once():
    # PyTorch seeds a worker when it starts, not again on each epoch: initial_seed() stays base_seed + id.
    loader = DataLoader(WorkerSeeds(4), batch_size=None, num_workers=2, persistent_workers=True)
    first, second = [
        {int(worker): int(seed) for worker, seed in (batch.tolist() for batch in loader)} for _ in range(2)
    ]
    assert first == second and first[1] == first[0] + 1


def test_an_iterator_dropped_in_a_reference_cycle_stops_its_workers_with_a_request():
    # The cycle collector closes the garbage's queues (their weakref finalizers) before it calls the
    # iterator's __del__: the stop request must still reach the workers, which then exit on their
    # own (status 0) instead of being killed after a wait.
    before = set(multiprocessing.active_children())
    iterator = iter(DataLoader(Rows(8), batch_size=2, num_workers=2))
    assert next(iterator)[1].tolist() == [0, 1]
    workers = [process for process in multiprocessing.active_children() if process not in before]
    assert len(workers) == 2
    iterator.cycle = iterator
    del iterator
    gc.collect()
    assert [worker.exitcode for worker in workers] == [0, 0]


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_a_map_style_datasets_stop_iteration_ends_the_epoch_for_every_worker_count(num_workers):
    # PyTorch's workers send it back as an error like any other: raised in the main process, it ends the
    # epoch at the batch that raised, as without workers, and no later batch comes.
    loader = DataLoader(StopsAt(8), batch_size=2, num_workers=num_workers)
    assert [batch.tolist() for batch in loader] == [[0, 1], [2, 3]]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_batch_after_a_caught_dataset_error_comes_next(num_workers):
    # PyTorch's iterator goes on after a dataset's error, with or without workers.
    iterator = iter(DataLoader(FailsAt(8), batch_size=2, num_workers=num_workers))
    assert [next(iterator)[1].tolist() for _ in range(2)] == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="sample 5 is corrupt"):
        next(iterator)
    assert next(iterator)[1].tolist() == [6, 7]
    with pytest.raises(StopIteration):
        next(iterator)


def test_workers_give_the_same_batches_as_the_main_process():
    dataset = TensorDataset(onnxnn.arange(20.0).reshape(10, 2), onnxnn.arange(10))
    single = [[part.numpy() for part in batch] for batch in DataLoader(dataset, batch_size=3)]
    workers = [[part.numpy() for part in batch] for batch in DataLoader(dataset, batch_size=3, num_workers=2)]
    assert len(single) == len(workers)
    for ours, theirs in zip(single, workers):
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)


def test_persistent_workers_serve_several_epochs_with_prefetching():
    loader = DataLoader(Rows(), batch_size=2, num_workers=2, persistent_workers=True, prefetch_factor=3)
    first = _labels(loader)
    iterator = loader._workers_iterator
    processes = [worker.pid for worker in iterator._workers]
    next(iter(loader))  # an epoch left early: its prefetched batches must not leak into the next one
    assert _labels(loader) == first == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert loader._workers_iterator is iterator and [worker.pid for worker in iterator._workers] == processes
    iterator._shutdown()
    assert not any(worker.is_alive() for worker in iterator._workers)


def test_worker_info_seeds_and_init_fn():
    loader = DataLoader(WorkerIds(4), batch_size=1, num_workers=2, generator=onnxnn.Generator().manual_seed(3))
    rows = [batch.numpy()[0].tolist() for batch in loader]
    assert [row[0] for row in rows] == [0, 1, 0, 1]  # round-robin
    assert rows[0][1] != rows[1][1]  # base_seed + worker id
    assert all(row[2] == 1 for row in rows)  # onnxnn's default generator seeded with the worker's seed
    assert get_worker_info() is None


def _record_worker(worker_id):
    onnxnn.manual_seed(1000 + worker_id)


def test_worker_init_fn_runs_in_each_worker():
    loader = DataLoader(WorkerIds(2), batch_size=1, num_workers=2, worker_init_fn=_record_worker)
    rows = [batch.numpy()[0].tolist() for batch in loader]
    assert [row[2] for row in rows] == [0, 0]  # the init function reseeded after the worker's own seeding


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size, expected", [(3, [[0, 1, 2], [3, 4, 5], [6]]), (None, [[i] for i in range(7)])])
def test_iterable_datasets(num_workers, batch_size, expected):
    loader = DataLoader(Stream(7), batch_size=batch_size, num_workers=num_workers)
    # Without batching a sample stays what the dataset yields (an int), as PyTorch's default_convert.
    values = sorted(sum(([batch] if isinstance(batch, int) else batch.numpy().tolist() for batch in loader), []))
    assert values == sorted(sum(expected, []))


def test_a_dataset_error_is_raised_in_the_main_process_naming_the_worker():
    loader = DataLoader(FailsAt(), batch_size=2, num_workers=2)
    with pytest.raises(ValueError, match=r"(?s)Caught ValueError in DataLoader worker process 0.*sample 5 is corrupt"):
        list(loader)


def test_a_dataset_error_without_workers_is_the_error_itself():
    with pytest.raises(ValueError, match="sample 5 is corrupt"):
        list(DataLoader(FailsAt(), batch_size=2))


def test_a_worker_that_dies_is_reported_not_waited_for():
    loader = DataLoader(DiesAt(), batch_size=2, num_workers=2)
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(loader)


def test_ragged_samples_get_pytorch_s_stack_error():
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[1\] at entry 0"):
        next(iter(DataLoader(Ragged(), batch_size=2)))


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"shuffle": True, "sampler": [0, 1]}, "sampler option is mutually exclusive with shuffle"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive with batch_size"),
        ({"batch_size": None, "drop_last": True}, "mutually exclusive with drop_last"),
        ({"num_workers": -1}, "num_workers option should be non-negative"),
        ({"prefetch_factor": 2}, "prefetch_factor option could only be specified in multiprocessing"),
        ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
        ({"timeout": -1}, "timeout option should be non-negative"),
    ],
)
def test_contradictory_options_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(Rows(), **arguments)


def test_iterable_datasets_refuse_samplers_and_shuffle():
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(3), shuffle=True)


def test_batch_sampler_and_custom_collate():
    loader = DataLoader(Rows(), batch_sampler=[[9, 0], [3]], collate_fn=lambda samples: [label for _, label in samples])
    assert list(loader) == [[9, 0], [3]]
    assert len(loader) == 2


def _failing_init(worker_id):
    raise OSError(f"worker {worker_id} cannot open its shard")


def test_a_failing_worker_init_fn_is_raised_in_the_main_process():
    loader = DataLoader(Rows(), batch_size=2, num_workers=2, worker_init_fn=_failing_init)
    with pytest.raises(OSError, match=r"(?s)Caught OSError in DataLoader worker process 0.*cannot open its shard"):
        list(loader)


class Images(Dataset):
    """Sample i: a 4x64x64 float32 image of i's (64 KB: even one sample travels through shared memory)."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index):
        return {"image": np.full((4, 64, 64), index, np.float32), "label": index}


def _segments(prefix: str) -> list:
    return [name for name in os.listdir("/dev/shm") if name.startswith(prefix)]


@pytest.mark.parametrize("batch_size", [4, None])
def test_large_batches_come_through_shared_memory_unchanged(batch_size):
    from onnxnn.utils.data import _shared_memory

    single = list(DataLoader(Images(), batch_size=batch_size))
    loader = DataLoader(Images(), batch_size=batch_size, num_workers=2)
    workers = list(loader)
    assert len(single) == len(workers)
    for ours, theirs in zip(single, workers):
        assert type(ours["image"]) is type(theirs["image"])  # a Tensor collated, an array as the dataset gave it
        np.testing.assert_array_equal(np.asarray(ours["image"]), np.asarray(theirs["image"]))
        np.testing.assert_array_equal(np.asarray(ours["label"]), np.asarray(theirs["label"]))
    assert np.asarray(workers[0]["image"]).nbytes >= _shared_memory.SHARE_MIN_BYTES


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="shared memory segments are files only on Linux")
@pytest.mark.parametrize("persistent_workers", [False, True])
def test_batches_left_in_flight_leave_no_shared_memory_behind(persistent_workers):
    loader = DataLoader(Images(), batch_size=2, num_workers=2, prefetch_factor=3, persistent_workers=persistent_workers)
    iterator = iter(loader)
    next(iterator)  # the other requests are prefetched: made in the workers, some never received
    prefix = iterator._segment_prefix
    if persistent_workers:
        assert len(list(loader)) == 6  # a new epoch drops the last one's batches
        assert not _segments(prefix)
    iterator._shutdown()
    assert not _segments(prefix)


def test_shared_memory_round_trip_of_every_dtype_and_release():
    from onnxnn.utils.data import _shared_memory

    batch = (
        [onnxnn.ones(128, 128, dtype=onnxnn.bfloat16), np.arange(20000, dtype=np.int64)],
        {"mask": np.ones((256, 256), bool), "small": np.zeros(3)},
    )
    prefix = _shared_memory.segment_prefix() + "test"
    shared = _shared_memory.to_shared_memory(batch, prefix)
    assert isinstance(shared[1]["small"], np.ndarray)  # under SHARE_MIN_BYTES: sent as it is
    back = _shared_memory.from_shared_memory(shared)
    assert back[0][0].dtype == onnxnn.bfloat16
    np.testing.assert_array_equal(back[0][0].float().numpy(), np.ones((128, 128), np.float32))
    np.testing.assert_array_equal(back[0][1], batch[0][1])
    np.testing.assert_array_equal(back[1]["mask"], batch[1]["mask"])
    dropped = _shared_memory.to_shared_memory(batch, prefix)
    _shared_memory.release(dropped)
    if os.path.isdir("/dev/shm"):
        assert not _segments(prefix)


class NumpyDraws(Dataset):
    """Each item is a draw of numpy's global generator, as numpy-based augmentation makes."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return np.random.random_sample(2)


def test_numpy_draws_differ_between_workers_and_epochs():
    loader = DataLoader(NumpyDraws(), batch_size=1, num_workers=2)
    first = [batch.numpy().tolist() for batch in loader]
    second = [batch.numpy().tolist() for batch in loader]
    assert first[0] != first[1]  # worker 0's first item against worker 1's
    assert first != second  # a new base seed each epoch


@pytest.mark.parametrize(
    "name", ["batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"]
)
def test_what_the_batches_are_built_from_cannot_change_after_construction(name):
    loader = DataLoader(list(range(5)), batch_size=2)
    with pytest.raises(ValueError, match=f"{name} attribute should not be set after DataLoader is initialized"):
        setattr(loader, name, getattr(loader, name))
    loader.num_workers = 0  # the others may change
    assert [batch.tolist() for batch in loader] == [[0, 1], [2, 3], [4]]


class _BatchedOnly(Dataset):
    """A dataset read a batch at a time (a database query, a memory-mapped file): no __getitem__."""

    def __init__(self, size: int):
        self.size = size

    def __getitems__(self, indices):
        return [10 * index for index in indices]

    def __len__(self) -> int:
        return self.size


def test_a_datasets_batched_read_is_used_through_subsets_and_stacks():
    from onnxnn.utils.data import StackDataset, Subset

    loader = DataLoader(_BatchedOnly(5), batch_size=2)
    assert [batch.tolist() for batch in loader] == [[0, 10], [20, 30], [40]]
    subset = Subset(_BatchedOnly(5), [4, 2, 0])
    assert [batch.tolist() for batch in DataLoader(subset, batch_size=3)] == [[40, 20, 0]]
    stacked = StackDataset(_BatchedOnly(3), TensorDataset(onnxnn.arange(3)))
    (first, (second,)), *_ = DataLoader(stacked, batch_size=3)
    assert first.tolist() == [0, 10, 20] and second.tolist() == [0, 1, 2]
