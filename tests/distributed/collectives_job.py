"""Run under ``mpiexec -n 2``: every collective on small tensors; writes ``rank<r>.json`` into the folder argv[2].

The test (test_collectives.py) recomputes each expectation with numpy from the same per-rank inputs.
"""

import json
import os
import sys

import numpy as np

import onnxnn
import onnxnn.distributed as dist
from onnxnn.utils.data.distributed import DistributedSampler


def rank_data(rank: int, shape=(2, 3)) -> np.ndarray:
    # Per-rank inputs the test can rebuild: small integers-valued floats, so sums are exact.
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 10 * rank + 1).astype(np.float32)


def main() -> None:
    executor = sys.argv[1]
    onnxnn.set_executor(executor)
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    out = {"rank": rank, "size": size, "initialized": dist.is_initialized()}

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
