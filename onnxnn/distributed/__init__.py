"""onnxnn.distributed: PyTorch's ``torch.distributed`` on MPI (mpi4py).

Install with ``pip install 'onnxnn[distributed]'`` (mpi4py and MPICH's wheel) and launch with
``mpiexec -n 4 python train.py``; the same program runs under a cluster's own MPI and scheduler.
See docs/how-to/distributed.md.

``DistributedDataParallel`` lives here (``onnxnn.distributed.DistributedDataParallel``), not in
``onnxnn.nn.parallel``: ``nn`` sits below this package in onnxnn's layers and cannot import it.
"""

from __future__ import annotations

from .all_to_all import all_to_all, all_to_all_single
from .collectives import (
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
)
from .data_parallel import DistributedDataParallel
from .process_group import (
    Backend,
    GroupMember,
    ProcessGroup,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    new_group,
)
from .object_collectives import all_gather_object, broadcast_object_list, gather_object, scatter_object_list
from .sync_batchnorm import SyncBatchNorm

__all__ = [
    "Backend",
    "DistributedDataParallel",
    "GroupMember",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "default_pg_timeout",
    "destroy_process_group",
    "gather",
    "gather_object",
    "get_backend",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "isend",
    "new_group",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "SyncBatchNorm",
]
