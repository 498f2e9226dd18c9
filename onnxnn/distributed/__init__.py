"""onnxnn.distributed: PyTorch's ``torch.distributed`` on MPI (mpi4py).

Install with ``pip install 'onnxnn[distributed]'`` (mpi4py and MPICH's wheel) and launch with
``mpiexec -n 4 python train.py``; the same program runs under a cluster's own MPI and scheduler.
See docs/how-to/distributed.md.

``DistributedDataParallel`` lives here (``onnxnn.distributed.DistributedDataParallel``), not in
``onnxnn.nn.parallel``: ``nn`` sits below this package in onnxnn's layers and cannot import it.
"""

from __future__ import annotations

from .collectives import (
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    barrier,
    broadcast,
    broadcast_object_list,
    gather,
    irecv,
    isend,
    recv,
    reduce,
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
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    new_group,
)
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
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "default_pg_timeout",
    "destroy_process_group",
    "gather",
    "get_backend",
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
    "reduce_scatter_tensor",
    "scatter",
    "send",
    "SyncBatchNorm",
]
