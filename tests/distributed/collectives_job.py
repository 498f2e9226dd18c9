"""Run under ``mpiexec -n 2``: every collective on small tensors; writes ``rank<r>.json`` into the folder argv[2].

The test (test_collectives.py) recomputes each expectation with numpy from the same per-rank inputs.
"""

import datetime
import json
import os
import sys
import warnings

import numpy as np

import onnxnn
import onnxnn.distributed as dist
from onnxnn.utils.data.distributed import DistributedSampler


def rank_data(rank: int, shape=(2, 3)) -> np.ndarray:
    # Per-rank inputs the test can rebuild: small integers-valued floats, so sums are exact.
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 10 * rank + 1).astype(np.float32)


UNSIGNED = ("uint16", "uint32", "uint64")
REDUCE_OPS = ("SUM", "MAX", "MIN", "PRODUCT", "BAND", "BOR", "BXOR")


def rank_unsigned(rank: int, dtype: str) -> np.ndarray:
    # Values float32 cannot hold (2**(bits - 8) + 1, the top of the range) and ones whose sum and
    # product wrap: a reduction through float32 gets them wrong.
    info = np.iinfo(dtype)
    return np.array([info.max - 295 + rank, 2 ** (info.bits - 8) + 1 + rank, 5 + rank, 3 * (rank + 1)], dtype)


def rank_bool(rank: int) -> np.ndarray:
    # The four (rank 0, rank 1) pairs: (T, T), (T, F), (F, T), (F, F).
    return np.array([True, True, False, False]) if rank == 0 else np.array([True, False, True, False])


def reductions(rank: int, size: int, dtype: str, data) -> dict:
    """all_reduce, reduce (to rank 1) and reduce_scatter_tensor with every op on ``data(rank)``."""
    out: dict = {}
    for op in REDUCE_OPS:
        reduce_op = getattr(dist.ReduceOp, op)
        t = onnxnn.tensor(data(rank))
        dist.all_reduce(t, op=reduce_op)
        out[f"all_reduce_{op}"] = t.tolist()
        t = onnxnn.tensor(data(rank))
        dist.reduce(t, dst=1, op=reduce_op)
        out[f"reduce_{op}"] = t.tolist()
        scattered = onnxnn.zeros(2, dtype=getattr(onnxnn, dtype))
        dist.reduce_scatter_tensor(scattered, onnxnn.tensor(data(rank)), op=reduce_op)
        out[f"reduce_scatter_tensor_{op}"] = scattered.tolist()
    return out


def outside_group(rank: int, group) -> dict:
    """Every collective on ``group`` (rank 0's alone): rank 1 is outside it and must get None and a warning."""
    t = onnxnn.tensor([5.0])
    calls = {
        "all_reduce": lambda: dist.all_reduce(t, group=group),
        "reduce": lambda: dist.reduce(t, dst=0, group=group),
        "broadcast": lambda: dist.broadcast(t, src=0, group=group),
        "all_gather": lambda: dist.all_gather([onnxnn.zeros(1)], t, group=group),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(onnxnn.zeros(1), t, group=group),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(onnxnn.zeros(1), t, group=group),
        "reduce_scatter": lambda: dist.reduce_scatter(onnxnn.zeros(1), [onnxnn.ones(1)], group=group),
        "gather": lambda: dist.gather(t, [onnxnn.zeros(1)] if rank == 0 else None, dst=0, group=group),
        "scatter": lambda: dist.scatter(t, [onnxnn.ones(1)] if rank == 0 else None, src=0, group=group),
        "all_to_all": lambda: dist.all_to_all([onnxnn.zeros(1)], [onnxnn.ones(1)], group=group),
        "all_to_all_single": lambda: dist.all_to_all_single(onnxnn.zeros(1), onnxnn.ones(1), group=group),
        "barrier": lambda: dist.barrier(group=group),
        "broadcast_object_list": lambda: dist.broadcast_object_list([1], src=0, group=group),
        "all_gather_object": lambda: dist.all_gather_object([None], 1, group=group),
        "gather_object": lambda: dist.gather_object(1, [None] if rank == 0 else None, dst=0, group=group),
        "scatter_object_list": lambda: dist.scatter_object_list([None], [1], src=0, group=group),
    }
    if rank == 1:  # point to point only outside: rank 0 alone in the group has no one to talk to
        calls.update(
            isend=lambda: dist.isend(t, dst=0, group=group),
            irecv=lambda: dist.irecv(t, src=0, group=group),
            recv=lambda: dist.recv(t, src=0, group=group),
        )
    out: dict = {}
    for name, call in calls.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                returned = call()
                out[name] = [returned if returned in (None, -1) else type(returned).__name__, t.tolist()]
            except Exception as error:  # noqa: BLE001 - the test shows what was raised
                out[name] = [f"{type(error).__name__}: {error}", t.tolist()]
        out[name].append([str(warning.message) for warning in caught])
    return out


def new_collectives(rank: int, size: int, group) -> dict:
    """all_to_all, all_to_all_single, reduce_scatter, gather_object, scatter_object_list, rank translation, result()."""
    out: dict = {}
    outputs = [onnxnn.zeros(2) for _ in range(size)]
    dist.all_to_all(outputs, [onnxnn.tensor([1.0, 2.0]) + 10 * rank + 2 * r for r in range(size)])
    out["all_to_all"] = [o.tolist() for o in outputs]
    # PyTorch's uneven example (gloo): rank 0 sends [0] | [1, 2], rank 1 sends [100, 101, 102] | [103].
    splits = {0: ([1, 2], [1, 3]), 1: ([3, 1], [2, 1])}[rank]
    source = onnxnn.tensor([0, 1, 2]) if rank == 0 else onnxnn.tensor([100, 101, 102, 103])
    received = onnxnn.zeros(sum(splits[1]), dtype=onnxnn.int64)
    dist.all_to_all_single(received, source, splits[1], splits[0])
    out["all_to_all_single_uneven"] = received.tolist()
    even = onnxnn.zeros(4, 2, dtype=onnxnn.bfloat16)
    work = dist.all_to_all_single(even, onnxnn.tensor(rank_data(rank, (4, 2))).bfloat16(), async_op=True)
    work.wait()
    out["all_to_all_single_even"] = even.float().tolist()
    out["all_to_all_single_result"] = [item is even for item in work.result()]
    output = onnxnn.zeros(2)
    dist.reduce_scatter(output, [onnxnn.tensor([1.0, 2.0]) + rank, onnxnn.tensor([3.0, 4.0]) * (rank + 1)])
    out["reduce_scatter"] = output.tolist()
    gathered: list | None = [None] * size if rank == 1 else None
    dist.gather_object({"rank": rank}, gathered, dst=1)
    out["gather_object"] = gathered
    mine = [None]
    dist.scatter_object_list(mine, [{"a": 1}, [2, 3]] if rank == 0 else None, src=0)
    out["scatter_object_list"] = mine
    world = dist.GroupMember.WORLD
    assert world is not None  # initialized
    out["ranks"] = [dist.get_group_rank(world, 7), dist.get_global_rank(world, 7), dist.get_process_group_ranks(None)]
    if rank == 0:  # the group [0] exists on rank 0 only
        out["ranks"] += [
            dist.get_group_rank(group, 0),
            dist.get_global_rank(group, 0),
            dist.get_process_group_ranks(group),
        ]
    t = onnxnn.tensor([1.0])
    results = {}
    parts: list = []
    for name, start, outputs_of in (
        ("all_reduce", lambda: dist.all_reduce(t, async_op=True), lambda: [t]),
        ("broadcast", lambda: dist.broadcast(t, src=0, async_op=True), lambda: [t]),
        ("reduce", lambda: dist.reduce(t, dst=0, async_op=True), lambda: [t]),
        ("all_gather", lambda: dist.all_gather(parts, t, async_op=True), lambda: parts),
        ("gather", lambda: dist.gather(t, parts if rank == 0 else None, dst=0, async_op=True), lambda: parts),
        ("scatter", lambda: dist.scatter(t, parts if rank == 0 else None, src=0, async_op=True), lambda: [t]),
        ("barrier", lambda: dist.barrier(async_op=True, timeout=datetime.timedelta(seconds=30)), lambda: []),
    ):
        parts = [onnxnn.zeros(1) for _ in range(size)]
        work = start()
        work.wait()
        expected = outputs_of()
        got = work.result()
        results[name] = [len(got), [any(item is e for e in expected) for item in got]]
    out["result"] = results
    return out


def main() -> None:
    executor = sys.argv[1]
    onnxnn.set_executor(executor)
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    out: dict = {"rank": rank, "size": size, "initialized": dist.is_initialized()}

    for op in ("SUM", "AVG", "MAX", "MIN", "PRODUCT"):
        t = onnxnn.tensor(rank_data(rank)) * 1.0  # a pending value: collectives realize it first
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[f"all_reduce_{op}"] = t.tolist()

    t = onnxnn.tensor(rank_data(rank))
    work = dist.all_reduce(t, async_op=True)
    out["async_type"] = type(work).__name__
    work.wait()
    out["async_completed"] = work.is_completed()
    out["all_reduce_async"] = t.tolist()

    t = onnxnn.tensor(rank_data(rank))
    dist.broadcast(t, src=1)
    out["broadcast"] = t.tolist()

    parts = [onnxnn.zeros(2, 3) for _ in range(size)]
    dist.all_gather(parts, onnxnn.tensor(rank_data(rank)))
    out["all_gather"] = [p.tolist() for p in parts]

    into = onnxnn.zeros(2 * size, 3)
    dist.all_gather_into_tensor(into, onnxnn.tensor(rank_data(rank)))
    out["all_gather_into_tensor"] = into.tolist()

    scattered = onnxnn.zeros(1, 3)
    dist.reduce_scatter_tensor(scattered, onnxnn.tensor(rank_data(rank)))
    out["reduce_scatter_tensor"] = scattered.tolist()

    gathered = [onnxnn.zeros(2, 3) for _ in range(size)] if rank == 0 else None
    dist.gather(onnxnn.tensor(rank_data(rank)), gathered, dst=0)
    out["gather"] = [g.tolist() for g in gathered] if gathered else None

    received = onnxnn.zeros(2, 3)
    dist.scatter(received, [onnxnn.tensor(rank_data(r) * 2) for r in range(size)] if rank == 1 else None, src=1)
    out["scatter"] = received.tolist()

    integers = onnxnn.tensor(np.array([rank + 1, 5], np.int64))
    dist.all_reduce(integers, op=dist.ReduceOp.PRODUCT)
    out["all_reduce_int64"] = integers.tolist()

    if rank == 0:
        dist.send(onnxnn.tensor(rank_data(7)), dst=1, tag=3)
        out["recv_from"] = None
    else:
        box = onnxnn.zeros(2, 3)
        out["recv_from"] = dist.recv(box, src=None, tag=3)
        out["recv"] = box.tolist()

    group = dist.new_group([0])
    out["group_rank"] = dist.get_rank(group)
    out["group_size"] = dist.get_world_size(group)

    # Each table below records its outcome or its error, so one fault does not hide the others.
    for name, run in (
        *(
            (f"unsigned_{dtype}", lambda dtype=dtype: reductions(rank, size, dtype, lambda r: rank_unsigned(r, dtype)))
            for dtype in UNSIGNED
        ),
        ("bool", lambda: reductions(rank, size, "bool", rank_bool)),
        ("outside_group", lambda: outside_group(rank, group)),
        ("new_collectives", lambda: new_collectives(rank, size, group)),
    ):
        try:
            out[name] = run()
        except Exception as error:  # noqa: BLE001 - the test shows what was raised
            out[name] = f"{type(error).__name__}: {error}"
        dist.barrier()  # a failed case on one rank must not pair with the next case's collectives

    objects = [{"lr": 0.1, "steps": [1, 2]}, ("a", 3)] if rank == 0 else [None, None]
    dist.broadcast_object_list(objects, src=0)
    out["broadcast_object_list"] = [objects[0], list(objects[1]), type(objects[1]).__name__]

    gathered_objects = [None] * size
    dist.all_gather_object(gathered_objects, {"rank": rank, "name": f"r{rank}"})
    out["all_gather_object"] = gathered_objects

    # An object that is not plain data is refused on the receiver unless pickle is allowed.
    try:
        dist.broadcast_object_list([np.float32(1.5)] if rank == 0 else [None], src=0)
        out["unsafe_refused"] = rank == 0  # the sender keeps its own list
    except Exception as error:  # noqa: BLE001 - the test checks the type and the message
        out["unsafe_refused"] = f"{type(error).__name__}: {error}"
    allowed = [np.float32(1.5)] if rank == 0 else [None]
    dist.broadcast_object_list(allowed, src=0, allow_pickle=True)
    out["pickle_allowed"] = float(allowed[0])

    sampler = DistributedSampler(range(10), seed=3)  # rank and world size from the default group
    out["sampler"] = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        out["sampler"].append(list(sampler))
    out["sampler_len"] = len(sampler)

    dist.barrier()
    dist.destroy_process_group()
    out["initialized_after"] = dist.is_initialized()
    with open(os.path.join(sys.argv[2], f"rank{rank}.json"), "w") as file:  # ranks' stdout interleave
        json.dump(out, file)


if __name__ == "__main__":
    main()
