"""Object collectives: picklable Python objects exchanged between ranks, in ``torch.distributed``'s names.

Senders pickle; a receiving rank rebuilds only plain data (None, bools, numbers, strings, bytes, lists,
tuples, dicts, sets) with onnxnn's restricted unpickler, so a rank cannot make another run code.
``allow_pickle=True`` (onnxnn's addition) opts in to arbitrary objects between ranks you trust.
"""

from __future__ import annotations

import pickle

import numpy as np
from mpi4py import MPI

from ..export.restricted_unpickler import RestrictedUnpickler
from .collectives import Work, _root, _run
from .process_group import ProcessGroup, _group_or_default, _not_in_group

__all__ = ["broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list"]


def _refuse_global(module: str, name: str):
    raise pickle.UnpicklingError(
        f"onnxnn.distributed received an object of class {module}.{name}; only plain data (None, bools, numbers, "
        "str, bytes, lists, tuples, dicts, sets) is rebuilt by default. Pass allow_pickle=True on every rank to "
        "exchange arbitrary objects between ranks you trust."
    )


def _refuse_persistent(_):
    raise pickle.UnpicklingError("onnxnn.distributed: persistent ids are not accepted")


def _loads(data: bytes, allow_pickle: bool):
    if allow_pickle:
        return pickle.loads(data)
    return RestrictedUnpickler(data, _refuse_global, _refuse_persistent, "an object sent by another rank").load()


def _bcast_bytes(pg: ProcessGroup, data: bytes | None, root: int) -> bytes:
    size = np.array([0 if data is None else len(data)], np.int64)
    _run(Work([pg.comm.Ibcast(size, root=root)], pg, None, "broadcast_object_list"), False)
    buffer = np.frombuffer(data, np.uint8).copy() if data is not None else np.empty(int(size[0]), np.uint8)
    _run(Work([pg.comm.Ibcast(buffer, root=root)], pg, None, "broadcast_object_list"), False)
    return buffer.tobytes()


def broadcast_object_list(
    object_list: list, src: int = 0, group=None, device=None, *, allow_pickle: bool = False
) -> None:
    """Replaces ``object_list``'s items on every rank by those of rank ``src`` (a global rank).

    Args:
        object_list: the objects to send (on ``src``) or a list of as many placeholders (elsewhere).
        allow_pickle: rebuild arbitrary objects (only between ranks you trust); by default only plain
            data is accepted and anything else raises ``pickle.UnpicklingError`` on the receivers.
    """
    if _not_in_group(group, "broadcast_object_list"):
        return None
    pg = _group_or_default(group)
    root = _root(pg, src, "broadcast")
    is_root = pg.rank() == root
    data = _bcast_bytes(pg, pickle.dumps(list(object_list), protocol=4) if is_root else None, root)
    if not is_root:
        received = _loads(data, allow_pickle)
        if len(received) != len(object_list):
            raise ValueError(
                f"broadcast_object_list: rank {src} sent {len(received)} objects, this rank expects {len(object_list)}"
            )
        object_list[:] = received


def all_gather_object(object_list: list, obj, group=None, *, allow_pickle: bool = False) -> None:
    """Fills ``object_list[r]`` with rank ``r``'s ``obj`` on every rank (see :func:`broadcast_object_list`)."""
    if _not_in_group(group, "all_gather_object"):
        return None
    pg = _group_or_default(group)
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list must have {pg.size()} entries (one per rank)")
    data = np.frombuffer(pickle.dumps(obj, protocol=4), np.uint8).copy()
    sizes = np.empty(pg.size(), np.int64)
    _run(Work([pg.comm.Iallgather(np.array([data.size], np.int64), sizes)], pg, None, "all_gather_object"), False)
    gathered = np.empty(int(sizes.sum()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    request = pg.comm.Iallgatherv(data, [gathered, (sizes, offsets), MPI.BYTE])
    _run(Work([request], pg, None, "all_gather_object"), False)
    for rank, (start, size) in enumerate(zip(offsets, sizes)):
        chunk = gathered[start : start + size].tobytes()
        object_list[rank] = obj if rank == pg.rank() else _loads(chunk, allow_pickle)


def _pickle(obj) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj, protocol=4), np.uint8).copy()


def _root_of(pg: ProcessGroup, rank: int | None, group_rank: int | None, name: str) -> int:
    """The group rank of the root, given as a global ``rank`` or as ``group_rank`` (rank 0 if neither)."""
    if rank is not None and group_rank is not None:
        raise ValueError("Can't specify both group_rank and global_rank")
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
        return group_rank
    return _root(pg, 0 if rank is None else rank, name)


def gather_object(
    obj,
    object_gather_list: list | None = None,
    dst: int | None = None,
    group=None,
    group_dst: int | None = None,
    *,
    allow_pickle: bool = False,
) -> None:
    """Fills ``object_gather_list[r]`` on rank ``dst`` (a global rank; 0 by default) with rank ``r``'s ``obj``.

    Raises:
        ValueError: ``object_gather_list`` is missing on ``dst`` or given on another rank.
    """
    if _not_in_group(group, "gather_object"):
        return None
    pg = _group_or_default(group)
    root = _root_of(pg, dst, group_dst, "gather")
    is_root = pg.rank() == root
    if is_root and not object_gather_list:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    if not is_root and object_gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    data = _pickle(obj)
    sizes = np.empty(pg.size(), np.int64)
    _run(Work([pg.comm.Iallgather(np.array([data.size], np.int64), sizes)], pg, None, "gather_object"), False)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    gathered = np.empty(int(sizes.sum()) if is_root else 0, np.uint8)
    receive = [gathered, (sizes, offsets), MPI.BYTE] if is_root else None
    _run(Work([pg.comm.Igatherv(data, receive, root=root)], pg, None, "gather_object"), False)
    if is_root:
        for rank, (start, size) in enumerate(zip(offsets, sizes)):
            object_gather_list[rank] = _loads(gathered[start : start + size].tobytes(), allow_pickle)  # type: ignore[index]
    return None


def scatter_object_list(
    scatter_object_output_list: list,
    scatter_object_input_list: list | None = None,
    src: int | None = None,
    group=None,
    group_src: int | None = None,
    *,
    allow_pickle: bool = False,
) -> None:
    """Stores ``scatter_object_input_list[r]`` of rank ``src`` (a global rank; 0 by default) as rank ``r``'s
    ``scatter_object_output_list[0]``.

    Raises:
        ValueError: the output list is empty, or ``src`` gives no input list.
    """
    if _not_in_group(group, "scatter_object_list"):
        return None
    pg = _group_or_default(group)
    root = _root_of(pg, src, group_src, "scatter")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    is_root = pg.rank() == root
    send = None
    size = np.zeros(1, np.int64)
    sizes = np.zeros(pg.size(), np.int64)
    if is_root:
        if scatter_object_input_list is None:
            raise ValueError("source rank must provide non-None scatter_object_input_list")
        if len(scatter_object_input_list) != pg.size():
            raise RuntimeError(
                f"scatter_object_list: {len(scatter_object_input_list)} objects for a group of {pg.size()} ranks"
            )
        parts = [_pickle(item) for item in scatter_object_input_list]
        sizes = np.array([part.size for part in parts], np.int64)
        send = [np.concatenate(parts), (sizes, np.concatenate([[0], np.cumsum(sizes)[:-1]])), MPI.BYTE]
    _run(Work([pg.comm.Iscatter(sizes if is_root else None, size, root=root)], pg, None, "scatter_object_list"), False)
    received = np.empty(int(size[0]), np.uint8)
    _run(Work([pg.comm.Iscatterv(send, received, root=root)], pg, None, "scatter_object_list"), False)
    scatter_object_output_list[0] = _loads(received.tobytes(), allow_pickle)
    return None
