"""Collectives on onnxnn tensors over MPI, in ``torch.distributed``'s names and semantics.

Each collective realizes its tensors to numpy, runs the MPI operation on the numpy buffers with a
nonblocking call (``Iallreduce``, ``Ibcast``, ...) and, when the operation completes, rebinds the
tensors in place to the result, as onnxnn's in-place methods do. ``async_op=True`` returns the
:class:`Work` handle at once; otherwise the call waits, at most the group's timeout, and a wait that
runs out raises a RuntimeError (which, uncaught, ends the whole job through the abort hook that
:func:`~onnxnn.distributed.init_process_group` installs).

Object collectives send pickles, but a receiving rank rebuilds only plain data (None, bools, numbers,
strings, bytes, lists, tuples, dicts, sets) with onnxnn's restricted unpickler: a rank cannot make
another run code. ``allow_pickle=True`` (onnxnn's addition) opts in to arbitrary objects.
"""

from __future__ import annotations

import datetime
import enum
import pickle
import time

import numpy as np
from mpi4py import MPI

from ..export.restricted_unpickler import RestrictedUnpickler
from ..runtime import internal
from ..runtime.tensor import Tensor
from .process_group import ProcessGroup, _group_or_default

__all__ = [
    "ReduceOp",
    "Work",
    "all_reduce",
    "reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "gather",
    "scatter",
    "send",
    "recv",
    "isend",
    "irecv",
    "barrier",
    "broadcast_object_list",
    "all_gather_object",
]


class ReduceOp(enum.Enum):
    """How a reduction combines the ranks' values."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


# AVG is a SUM divided afterwards: MPI has no average.
_MPI_OPS = {
    ReduceOp.SUM: MPI.SUM,
    ReduceOp.AVG: MPI.SUM,
    ReduceOp.PRODUCT: MPI.PROD,
    ReduceOp.MIN: MPI.MIN,
    ReduceOp.MAX: MPI.MAX,
    ReduceOp.BAND: MPI.BAND,
    ReduceOp.BOR: MPI.BOR,
    ReduceOp.BXOR: MPI.BXOR,
}
# numpy dtypes MPI reduces natively; others (float16, bfloat16) are reduced in float32.
_NATIVE = {np.dtype(name) for name in ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")}
# After this many unsuccessful tests a wait sleeps between tests, so a waiting rank leaves the CPU
# to the others (the CI machine runs two ranks on two cores).
_SPIN_TESTS = 200
_POLL_SECONDS = 2e-4


class Work:
    """The handle of a collective started with ``async_op=True``.

    ``wait()`` blocks until the operation completes (at most ``timeout``, else the group's) and
    writes the results into the tensors; ``is_completed()`` tells without blocking.
    """

    def __init__(self, requests: list, group: ProcessGroup, finish=None, name: str = "collective"):
        self._requests = requests
        self._group = group
        self._finish = finish
        self._name = name
        self._done = False
        self._status = MPI.Status()
        self.source_rank: int | None = None  # recv: the sender's global rank, once complete
        self._keep: object = None  # send: the buffer, which must outlive the operation

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish(self)

    def _test(self) -> bool:
        if len(self._requests) == 1:  # keep the status: recv reports the sender
            return self._requests[0].Test(self._status)
        return MPI.Request.Testall(self._requests)

    def is_completed(self) -> bool:
        """Whether the operation has completed (results are written when it has)."""
        if not self._done and self._test():
            self._complete()
        return self._done

    def is_success(self) -> bool:
        return self.is_completed()

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        """Blocks until the operation completes and its results are in the tensors.

        Raises:
            RuntimeError: the other ranks did not take part within ``timeout`` (default: the group's).
        """
        if self._done:
            return True
        limit = (timeout or self._group.timeout).total_seconds()
        deadline = time.monotonic() + limit
        tests = 0
        while not self._test():
            tests += 1
            if tests > _SPIN_TESTS:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"onnxnn.distributed: {self._name} on rank {MPI.COMM_WORLD.Get_rank()} timed out after "
                        f"{limit:g} s waiting for the other ranks of {self._group}"
                    )
                time.sleep(_POLL_SECONDS)
        self._complete()
        return True

    def result(self) -> list:
        return []


def _run(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def _check_tensor(tensor, name: str = "tensor") -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor\n"
            f"             but got {type(tensor)} instead."
        )


def _array(tensor: Tensor) -> np.ndarray:
    """A writable C-contiguous copy of the tensor's value (computing it if pending)."""
    return np.array(tensor.numpy(force=True), order="C", copy=True)


def _write(tensor: Tensor, array: np.ndarray) -> None:
    """Rebinds ``tensor`` in place to ``array`` (cast to its dtype and shape)."""
    array = np.asarray(array).astype(tensor.dtype.numpy_dtype, copy=False).reshape(tuple(tensor.shape))
    internal.rebind(tensor, internal.value_of(internal.constant_tensor(array, tensor.dtype, tensor.device)))


def _bytes(array: np.ndarray) -> np.ndarray:
    # Data movement needs no MPI datatype: send bytes, so every dtype (float16, bfloat16) travels.
    return array.reshape(-1).view(np.uint8)


def _reducible(array: np.ndarray) -> np.ndarray:
    return array if array.dtype in _NATIVE else array.astype(np.float32)


def _average(array: np.ndarray, op: ReduceOp, size: int) -> np.ndarray:
    if op is not ReduceOp.AVG:
        return array
    if array.dtype.kind in "iub":
        return array // size
    return array / np.asarray(size, array.dtype)


def _reduce_op(op) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        raise ValueError(f"Invalid reduce operation {op!r}: expected a member of ReduceOp")
    return op


# ---------------------------------------------------------------------------------- reductions
def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False):
    """Reduces ``tensor`` across all ranks of ``group`` with ``op``; every rank gets the result in place.

    Returns:
        A :class:`Work` handle if ``async_op``, else None.
    """
    _check_tensor(tensor)
    op, pg = _reduce_op(op), _group_or_default(group)
    buffer = _reducible(_array(tensor))
    request = pg.comm.Iallreduce(MPI.IN_PLACE, buffer, op=_MPI_OPS[op])
    return _run(Work([request], pg, lambda _: _write(tensor, _average(buffer, op, pg.size())), "all_reduce"), async_op)


def reduce(tensor: Tensor, dst: int = 0, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduces ``tensor`` across ranks into rank ``dst``'s ``tensor`` (a global rank)."""
    _check_tensor(tensor)
    op, pg = _reduce_op(op), _group_or_default(group)
    root = pg.group_rank(dst)
    buffer = _reducible(_array(tensor))
    is_root = pg.rank() == root
    request = pg.comm.Ireduce(
        MPI.IN_PLACE if is_root else buffer, buffer if is_root else None, op=_MPI_OPS[op], root=root
    )
    finish = (lambda _: _write(tensor, _average(buffer, op, pg.size()))) if is_root else None
    return _run(Work([request], pg, finish, "reduce"), async_op)


def reduce_scatter_tensor(
    output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False
):
    """Reduces ``input`` across ranks and gives rank ``r`` the ``r``-th of its equal chunks along dim 0."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    op, pg = _reduce_op(op), _group_or_default(group)
    if input.numel() != output.numel() * pg.size():
        raise ValueError("input tensor must be the same size as output size times world size")
    source = _reducible(_array(input)).reshape(-1)
    buffer = np.empty(output.numel(), source.dtype)
    request = pg.comm.Ireduce_scatter_block(source, buffer, op=_MPI_OPS[op])
    finish = lambda _: _write(output, _average(buffer, op, pg.size()))  # noqa: E731
    return _run(Work([request], pg, finish, "reduce_scatter_tensor"), async_op)


# ---------------------------------------------------------------------------------- data movement
def broadcast(tensor: Tensor, src: int = 0, group=None, async_op: bool = False):
    """Sends rank ``src``'s ``tensor`` (a global rank) to every rank of ``group``, in place."""
    _check_tensor(tensor)
    pg = _group_or_default(group)
    root = pg.group_rank(src)
    array = _array(tensor)
    request = pg.comm.Ibcast(_bytes(array), root=root)
    finish = (lambda _: _write(tensor, array)) if pg.rank() != root else None
    return _run(Work([request], pg, finish, "broadcast"), async_op)


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fills ``tensor_list[r]`` with rank ``r``'s ``tensor`` on every rank."""
    _check_tensor(tensor)
    pg = _group_or_default(group)
    if not isinstance(tensor_list, list) or len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list must be a list of {pg.size()} tensors (one per rank)")
    for item in tensor_list:
        _check_tensor(item, "tensor_list")
        if tuple(item.shape) != tuple(tensor.shape) or item.dtype != tensor.dtype:
            raise ValueError("all_gather: every tensor of tensor_list must have the shape and dtype of tensor")
    source = _array(tensor)
    gathered = np.empty((pg.size(),) + source.shape, source.dtype)
    request = pg.comm.Iallgather(_bytes(source), _bytes(gathered))

    def finish(_):
        for item, part in zip(tensor_list, gathered):
            _write(item, part)

    return _run(Work([request], pg, finish, "all_gather"), async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op: bool = False):
    """Concatenates every rank's ``input_tensor`` along dim 0 (or stacks them) into ``output_tensor``."""
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    pg = _group_or_default(group)
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError("output tensor size must be equal to world_size times input tensor size")
    if output_tensor.dtype != input_tensor.dtype:
        raise ValueError("output tensor must have the same type as input tensor")
    source = _array(input_tensor)
    gathered = np.empty(output_tensor.numel(), source.dtype)
    request = pg.comm.Iallgather(_bytes(source), _bytes(gathered))
    return _run(Work([request], pg, lambda _: _write(output_tensor, gathered), "all_gather_into_tensor"), async_op)


def gather(tensor: Tensor, gather_list: list | None = None, dst: int = 0, group=None, async_op: bool = False):
    """Collects every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (a global rank)."""
    _check_tensor(tensor)
    pg = _group_or_default(group)
    root = pg.group_rank(dst)
    is_root = pg.rank() == root
    if is_root and gather_list is None:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    if not is_root and gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    if is_root and len(gather_list) != pg.size():  # type: ignore[arg-type]  # not None on the root (above)
        raise ValueError(f"gather: gather_list must hold {pg.size()} tensors (one per rank)")
    source = _array(tensor)
    gathered = np.empty((pg.size(),) + source.shape, source.dtype) if is_root else None
    request = pg.comm.Igather(
        _bytes(source),
        _bytes(gathered) if gathered is not None else None,
        root=root,
    )

    def finish(_):  # on the root only, where gather_list and gathered are set
        for item, part in zip(gather_list, gathered):  # type: ignore[arg-type]
            _write(item, part)

    return _run(Work([request], pg, finish if is_root else None, "gather"), async_op)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int = 0, group=None, async_op: bool = False):
    """Gives rank ``r`` the tensor ``scatter_list[r]`` of rank ``src`` (a global rank), in ``tensor``."""
    _check_tensor(tensor)
    pg = _group_or_default(group)
    root = pg.group_rank(src)
    is_root = pg.rank() == root
    if is_root and scatter_list is None:
        raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
    if not is_root and scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    dtype = tensor.dtype.numpy_dtype
    received = np.empty(tuple(tensor.shape), dtype)
    parts = None
    if scatter_list is not None and is_root:
        if len(scatter_list) != pg.size():
            raise ValueError(f"scatter: scatter_list must hold {pg.size()} tensors (one per rank)")
        parts = np.stack([_array(item).astype(dtype, copy=False).reshape(received.shape) for item in scatter_list])
    request = pg.comm.Iscatter(_bytes(parts) if parts is not None else None, _bytes(received), root=root)
    return _run(Work([request], pg, lambda _: _write(tensor, received), "scatter"), async_op)


def isend(tensor: Tensor, dst: int, group=None, tag: int = 0) -> Work:
    """Starts sending ``tensor`` to rank ``dst`` (a global rank); returns its :class:`Work`."""
    _check_tensor(tensor)
    pg = _group_or_default(group)
    array = _array(tensor)
    request = pg.comm.Isend(_bytes(array), dest=pg.group_rank(dst), tag=tag)
    work = Work([request], pg, None, "send")
    work._keep = array  # the buffer must outlive the send
    return work


def irecv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0) -> Work:
    """Starts receiving into ``tensor`` from rank ``src`` (any rank if None); returns its :class:`Work`."""
    _check_tensor(tensor)
    pg = _group_or_default(group)
    received = np.empty(tuple(tensor.shape), tensor.dtype.numpy_dtype)
    source = MPI.ANY_SOURCE if src is None else pg.group_rank(src)
    request = pg.comm.Irecv(_bytes(received), source=source, tag=tag)

    def finish(work):
        work.source_rank = pg.ranks[work._status.Get_source()]
        _write(tensor, received)

    return Work([request], pg, finish, "recv")


def send(tensor: Tensor, dst: int, group=None, tag: int = 0) -> None:
    """Sends ``tensor`` to rank ``dst`` (a global rank), waiting until the buffer may be reused."""
    isend(tensor, dst, group, tag).wait()


def recv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0) -> int:
    """Receives into ``tensor`` from rank ``src`` (any rank if None); returns the sender's global rank."""
    work = irecv(tensor, src, group, tag)
    work.wait()
    assert work.source_rank is not None  # set when the receive completes
    return work.source_rank


def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids=None):
    """Waits until every rank of ``group`` has reached this call (at most the group's timeout)."""
    pg = _group_or_default(group)
    return _run(Work([pg.comm.Ibarrier()], pg, None, "barrier"), async_op)


# ---------------------------------------------------------------------------------- objects
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
    pg = _group_or_default(group)
    root = pg.group_rank(src)
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
