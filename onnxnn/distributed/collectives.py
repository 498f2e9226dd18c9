"""Collectives on onnxnn tensors over MPI, in ``torch.distributed``'s names and semantics.

Each collective realizes its tensors to numpy, runs the MPI operation on the numpy buffers with a
nonblocking call (``Iallreduce``, ``Ibcast``, ...) and, when the operation completes, rebinds the
tensors in place to the result, as onnxnn's in-place methods do. ``async_op=True`` returns the
:class:`Work` handle at once; otherwise the call waits, at most the group's timeout, and a wait that
runs out raises a RuntimeError (which, uncaught, ends the whole job through the abort hook that
:func:`~onnxnn.distributed.init_process_group` installs).

Object collectives send pickles, but a receiving rank rebuilds only plain data (None, bools, numbers,
strings, bytes, lists, tuples, dicts, sets) with onnxnn's restricted unpickler: a rank cannot make
another run code. ``allow_pickle=True`` (onnxnn's addition) opts in to arbitrary objects. They live in
object_collectives.py.

A rank outside the group it passes (``new_group`` gave it ``GroupMember.NON_GROUP_MEMBER``) gets
PyTorch's warning and a None return: the collective does nothing there.
"""

from __future__ import annotations

import datetime
import enum
import time

import numpy as np
from mpi4py import MPI

from ..runtime import internal
from ..runtime.tensor import Tensor
from .process_group import GroupMember, ProcessGroup, _group_or_default, _not_in_group

__all__ = [
    "ReduceOp",
    "Work",
    "all_reduce",
    "reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "gather",
    "scatter",
    "send",
    "recv",
    "isend",
    "irecv",
    "barrier",
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
# numpy dtypes MPI reduces exactly, in their own type; float16 and bfloat16 are reduced in float32
# (two ranks' values round once, as PyTorch's). Unsigned integers wrap modulo 2**bits as onnxnn's
# own uint ops do (gloo refuses uint16/32/64 with "Invalid scalar type"; MPI reduces them exactly).
_NATIVE = {
    np.dtype(name)
    for name in ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
}
# bool, as PyTorch (gloo) reduces it: SUM/MAX/BOR are a logical or, PRODUCT/MIN/BAND a logical and, BXOR
# an exclusive or. MPI defines only logical ops on C_BOOL, so the 0/1 bytes are reduced as uint8.
_BOOL_OPS = {
    ReduceOp.SUM: MPI.BOR,
    ReduceOp.MAX: MPI.BOR,
    ReduceOp.BOR: MPI.BOR,
    ReduceOp.PRODUCT: MPI.BAND,
    ReduceOp.MIN: MPI.BAND,
    ReduceOp.BAND: MPI.BAND,
    ReduceOp.BXOR: MPI.BXOR,
}
_BITWISE = {ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR}
# After this many unsuccessful tests a wait sleeps between tests, so a waiting rank leaves the CPU
# to the others (the CI machine runs two ranks on two cores).
_SPIN_TESTS = 200
_POLL_SECONDS = 2e-4


class Work:
    """The handle of a collective started with ``async_op=True``.

    ``wait()`` blocks until the operation completes (at most ``timeout``, else the group's) and
    writes the results into the tensors; ``is_completed()`` tells without blocking.
    """

    def __init__(
        self,
        requests: list,
        group: ProcessGroup,
        finish=None,
        name: str = "collective",
        outputs=None,
        timeout: datetime.timedelta | None = None,
    ):
        self._requests = requests
        self._group = group
        self._finish = finish
        self._name = name
        # What result() gives: the output tensors as PyTorch's (a list, or a function that makes it once
        # complete); None where PyTorch's raises.
        self._outputs = outputs
        self._timeout = timeout  # barrier(timeout=): overrides the group's
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
        limit = (timeout or self._timeout or self._group.timeout).total_seconds()
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
        """The collective's output tensors (as PyTorch's Work.result(); barrier gives [])."""
        if self._outputs is None:
            raise RuntimeError("result() not implemented.")
        return list(self._outputs() if callable(self._outputs) else self._outputs)


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


def _check_tensor_list(tensors, name: str) -> None:
    if not isinstance(tensors, list):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor]\n"
            f"             but got {type(tensors)} instead."
        )
    if not all(isinstance(item, Tensor) for item in tensors):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor]\n"
            f"             but got {type(tensors)} with elements of type {[type(item) for item in tensors]}."
        )


def _same_dtype(tensors: list) -> None:
    for item in tensors[1:]:
        if item.dtype != tensors[0].dtype:
            raise ValueError(
                f"Invalid usage of tensors with different dtypesFound {tensors[0].dtype} and  {item.dtype}"
            )


def _root(pg: ProcessGroup, rank: int, name: str) -> int:
    """The group rank of the root ``rank`` (a global rank).

    On the default group PyTorch passes the rank through and the backend refuses it (RuntimeError); on
    another group translating it raises ValueError.
    """
    if pg is GroupMember.WORLD and not 0 <= rank < pg.size():
        raise RuntimeError(f"ProcessGroupMPI::{name}: invalid root rank: {rank}")
    return pg.group_rank(rank)


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


def _reducible(array: np.ndarray, op: ReduceOp):
    """The buffer MPI reduces for ``array`` and the MPI operation, refusing what PyTorch refuses."""
    if array.dtype == np.bool_:
        if op is ReduceOp.AVG:
            raise RuntimeError("result type Float can't be cast to the desired output type Bool")
        return array.view(np.uint8), _BOOL_OPS[op]
    if op in _BITWISE and array.dtype.kind not in "iu":
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    return (array if array.dtype in _NATIVE else array.astype(np.float32)), _MPI_OPS[op]


def _average(array: np.ndarray, op: ReduceOp, size: int) -> np.ndarray:
    if op is not ReduceOp.AVG:
        return array
    if array.dtype.kind in "iub":
        return array // size
    return array / np.asarray(size, array.dtype)


def _reduce_op(op) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"Invalid reduce operation {op!r}: expected a member of ReduceOp")
    return op


# ---------------------------------------------------------------------------------- reductions
def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False):
    """Reduces ``tensor`` across all ranks of ``group`` with ``op``; every rank gets the result in place.

    Returns:
        A :class:`Work` handle if ``async_op``, else None.
    """
    _check_tensor(tensor)
    if _not_in_group(group, "all_reduce"):
        return None
    op, pg = _reduce_op(op), _group_or_default(group)
    buffer, mpi_op = _reducible(_array(tensor), op)
    request = pg.comm.Iallreduce(MPI.IN_PLACE, buffer, op=mpi_op)
    finish = lambda _: _write(tensor, _average(buffer, op, pg.size()))  # noqa: E731
    return _run(Work([request], pg, finish, "all_reduce", [tensor]), async_op)


def reduce(tensor: Tensor, dst: int = 0, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduces ``tensor`` across ranks into rank ``dst``'s ``tensor`` (a global rank)."""
    _check_tensor(tensor)
    if _not_in_group(group, "reduce"):
        return None
    op, pg = _reduce_op(op), _group_or_default(group)
    root = _root(pg, dst, "reduce")
    buffer, mpi_op = _reducible(_array(tensor), op)
    is_root = pg.rank() == root
    request = pg.comm.Ireduce(MPI.IN_PLACE if is_root else buffer, buffer if is_root else None, op=mpi_op, root=root)
    finish = (lambda _: _write(tensor, _average(buffer, op, pg.size()))) if is_root else None
    return _run(Work([request], pg, finish, "reduce", [tensor]), async_op)


def reduce_scatter_tensor(
    output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False
):
    """Reduces ``input`` across ranks and gives rank ``r`` the ``r``-th of its equal chunks along dim 0."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    if _not_in_group(group, "reduce_scatter_tensor"):
        return None
    op, pg = _reduce_op(op), _group_or_default(group)
    if input.numel() != output.numel() * pg.size():
        raise ValueError("input tensor must be the same size as output size times world size")
    return _reduce_scatter(output, _array(input), op, pg, "reduce_scatter_tensor", async_op)


def reduce_scatter(output: Tensor, input_list: list, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduces ``input_list[r]`` across ranks into rank ``r``'s ``output``."""
    _check_tensor(output, "output")
    _check_tensor_list(input_list, "input_list")
    _same_dtype([output, *input_list])
    if _not_in_group(group, "reduce_scatter"):
        return None
    op, pg = _reduce_op(op), _group_or_default(group)
    if len(input_list) != pg.size():
        raise RuntimeError("invalid input tensor list size, must be world size")
    for index, item in enumerate(input_list):
        if tuple(item.shape) != tuple(output.shape):
            raise RuntimeError(
                f"reduce_scatter: invalid input tensor size at index {index} "
                f"(expected {tuple(output.shape)}, got {tuple(item.shape)})"
            )
    source = np.concatenate([_array(item).reshape(-1) for item in input_list])
    return _reduce_scatter(output, source, op, pg, "reduce_scatter", async_op)


def _reduce_scatter(output: Tensor, source: np.ndarray, op: ReduceOp, pg: ProcessGroup, name: str, async_op: bool):
    source, mpi_op = _reducible(source.reshape(-1), op)
    buffer = np.empty(output.numel(), source.dtype)
    request = pg.comm.Ireduce_scatter_block(source, buffer, op=mpi_op)
    finish = lambda _: _write(output, _average(buffer, op, pg.size()))  # noqa: E731
    return _run(Work([request], pg, finish, name), async_op)  # no outputs: PyTorch's result() raises here


# ---------------------------------------------------------------------------------- data movement
def broadcast(tensor: Tensor, src: int = 0, group=None, async_op: bool = False):
    """Sends rank ``src``'s ``tensor`` (a global rank) to every rank of ``group``, in place."""
    _check_tensor(tensor)
    if _not_in_group(group, "broadcast"):
        return None
    pg = _group_or_default(group)
    root = _root(pg, src, "broadcast")
    array = _array(tensor)
    request = pg.comm.Ibcast(_bytes(array), root=root)
    finish = (lambda _: _write(tensor, array)) if pg.rank() != root else None
    return _run(Work([request], pg, finish, "broadcast", [tensor]), async_op)


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fills ``tensor_list[r]`` with rank ``r``'s ``tensor`` on every rank."""
    _check_tensor(tensor)
    _check_tensor_list(tensor_list, "tensor_list")
    _same_dtype([tensor, *tensor_list])
    if _not_in_group(group, "all_gather"):
        return None
    pg = _group_or_default(group)
    if len(tensor_list) != pg.size():
        raise RuntimeError(
            f"all_gather: invalid output tensor list size {len(tensor_list)}, must be world size {pg.size()}"
        )
    for index, item in enumerate(tensor_list):
        if tuple(item.shape) != tuple(tensor.shape):
            raise RuntimeError(
                f"all_gather: invalid output tensor list at index {index} "
                f"(expected {tuple(tensor.shape)}, got {tuple(item.shape)})"
            )
    source = _array(tensor)
    gathered = np.empty((pg.size(),) + source.shape, source.dtype)
    request = pg.comm.Iallgather(_bytes(source), _bytes(gathered))

    def finish(_):
        for item, part in zip(tensor_list, gathered):
            _write(item, part)

    return _run(Work([request], pg, finish, "all_gather", list(tensor_list)), async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op: bool = False):
    """Concatenates every rank's ``input_tensor`` along dim 0 (or stacks them) into ``output_tensor``."""
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    if _not_in_group(group, "all_gather_into_tensor"):
        return None
    pg = _group_or_default(group)
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError("output tensor size must be equal to world_size times input tensor size")
    if output_tensor.dtype != input_tensor.dtype:
        raise RuntimeError("output tensor must have the same type as input tensor")
    source = _array(input_tensor)
    gathered = np.empty(output_tensor.numel(), source.dtype)
    request = pg.comm.Iallgather(_bytes(source), _bytes(gathered))
    finish = lambda _: _write(output_tensor, gathered)  # noqa: E731
    chunks = lambda: output_tensor.chunk(pg.size())  # noqa: E731 - result(): PyTorch's gives the ranks' chunks
    return _run(Work([request], pg, finish, "all_gather_into_tensor", chunks), async_op)


def gather(tensor: Tensor, gather_list: list | None = None, dst: int = 0, group=None, async_op: bool = False):
    """Collects every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (a global rank)."""
    _check_tensor(tensor)
    if _not_in_group(group, "gather"):
        return None
    pg = _group_or_default(group)
    root = _root(pg, dst, "gather")
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

    outputs = list(gather_list) if is_root else []  # type: ignore[arg-type]
    return _run(Work([request], pg, finish if is_root else None, "gather", outputs), async_op)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int = 0, group=None, async_op: bool = False):
    """Gives rank ``r`` the tensor ``scatter_list[r]`` of rank ``src`` (a global rank), in ``tensor``."""
    _check_tensor(tensor)
    if _not_in_group(group, "scatter"):
        return None
    pg = _group_or_default(group)
    root = _root(pg, src, "scatter")
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
        for index, item in enumerate(scatter_list):
            if tuple(item.shape) != tuple(tensor.shape):
                raise RuntimeError(
                    f"ProcessGroupMPI::scatter: invalid tensor size at index {index} "
                    f"(expected {tuple(tensor.shape)}, got {tuple(item.shape)})"
                )
        parts = np.stack([_array(item).astype(dtype, copy=False) for item in scatter_list])
    request = pg.comm.Iscatter(_bytes(parts) if parts is not None else None, _bytes(received), root=root)
    return _run(Work([request], pg, lambda _: _write(tensor, received), "scatter", [tensor]), async_op)


def isend(tensor: Tensor, dst: int, group=None, tag: int = 0) -> Work | None:
    """Starts sending ``tensor`` to rank ``dst`` (a global rank); returns its :class:`Work`."""
    _check_tensor(tensor)
    if _not_in_group(group, "isend"):
        return None
    pg = _group_or_default(group)
    array = _array(tensor)
    request = pg.comm.Isend(_bytes(array), dest=pg.group_rank(dst), tag=tag)
    work = Work([request], pg, None, "send")
    work._keep = array  # the buffer must outlive the send
    return work


def irecv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0) -> Work | None:
    """Starts receiving into ``tensor`` from rank ``src`` (any rank if None); returns its :class:`Work`."""
    _check_tensor(tensor)
    if _not_in_group(group, "irecv"):
        return None
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
    if group is GroupMember.NON_GROUP_MEMBER:  # PyTorch translates dst first, which fails here
        raise ValueError("Invalid process group specified")
    work = isend(tensor, dst, group, tag)
    assert work is not None  # a member of the group
    work.wait()


def recv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0) -> int:
    """Receives into ``tensor`` from rank ``src`` (any rank if None); returns the sender's global rank.

    Returns -1 (after a warning) on a rank outside ``group``, as PyTorch.
    """
    work = irecv(tensor, src, group, tag)
    if work is None:
        return -1
    work.wait()
    assert work.source_rank is not None  # set when the receive completes
    return work.source_rank


def barrier(
    group: ProcessGroup | None = None,
    async_op: bool = False,
    device_ids=None,
    timeout: datetime.timedelta | None = None,
):
    """Waits until every rank of ``group`` has reached this call (at most ``timeout``, else the group's)."""
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"barrier(): timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    if _not_in_group(group, "barrier"):
        return None
    pg = _group_or_default(group)
    return _run(Work([pg.comm.Ibarrier()], pg, None, "barrier", [], timeout), async_op)
