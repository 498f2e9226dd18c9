"""Process groups on MPI: ``init_process_group``, ranks, ``new_group``, ``barrier`` and the job-wide abort.

A process group is an MPI communicator. ``init_process_group(backend="mpi")`` takes the rank and the
world size from ``MPI.COMM_WORLD`` (so ``mpiexec -n 4 python train.py``, a cluster's ``srun`` or any
MPI launcher starts the job); ``RANK``/``WORLD_SIZE`` set by PyTorch's launchers are checked against
them, since MPI, not the environment, decides who is who.

A rank that raises must not leave the others blocked in a collective forever: ``init_process_group``
installs a ``sys.excepthook`` that prints the error with its rank and calls ``MPI_Abort``, which ends
every rank of the job, and every collective waits at most the group's ``timeout``.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import traceback
import warnings
from typing import Any

try:
    from mpi4py import MPI
except ImportError as error:  # the optional dependency: say how to get it
    raise ImportError(
        "onnxnn.distributed needs mpi4py and an MPI library: pip install 'onnxnn[distributed]'"
    ) from error

from ..utils.data.distributed import publish_default_world

# How long an uncaught error's report gets to reach the launcher before the abort (see _abort_on_uncaught).
ABORT_REPORT_SECONDS = 0.2

__all__ = [
    "Backend",
    "ProcessGroup",
    "GroupMember",
    "init_process_group",
    "destroy_process_group",
    "is_initialized",
    "is_available",
    "is_mpi_available",
    "get_rank",
    "get_world_size",
    "get_backend",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "new_group",
    "default_pg_timeout",
]

# PyTorch's default for collectives other than NCCL's.
default_pg_timeout = datetime.timedelta(minutes=30)


class Backend(str):
    """The names of communication backends; onnxnn has one, ``"mpi"``."""

    MPI = "mpi"

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name}")
        value = name.lower()
        if value != cls.MPI:
            raise ValueError(f"Invalid backend: '{name}': onnxnn.distributed supports only the 'mpi' backend")
        return super().__new__(cls, value)


class ProcessGroup:
    """A set of ranks that run collectives together: an MPI communicator and its global ranks.

    Args:
        comm: the communicator (``MPI.COMM_NULL`` on ranks outside the group).
        ranks: the global ranks of the members, in group-rank order.
        timeout: how long a collective may wait for the other ranks.
    """

    def __init__(self, comm, ranks: list[int], timeout: datetime.timedelta):
        self.comm = comm
        self.ranks = list(ranks)
        self.timeout = timeout

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def group_rank(self, global_rank: int) -> int:
        """The rank within this group of ``global_rank``; ValueError if it is not a member."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"Global rank {global_rank} is not part of group {self}") from None

    def __repr__(self) -> str:
        return f"ProcessGroup(backend='mpi', ranks={self.ranks})"


class GroupMember:
    """``GroupMember.WORLD`` is the default group; ``NON_GROUP_MEMBER`` what ``new_group`` gives outsiders."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


class _State:
    """The process-wide state ``init_process_group`` sets up."""

    world: ProcessGroup | None = None
    previous_excepthook: Any = None  # sys.excepthook before init_process_group installed its own


def is_available() -> bool:
    """Whether onnxnn.distributed can run (mpi4py imported, so yes)."""
    return True


def is_mpi_available() -> bool:
    return True


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has been called (and not destroyed since)."""
    return _State.world is not None


def _abort_on_uncaught(kind, value, trace) -> None:
    # Another rank may be waiting in a collective for this one: print the error, then end the whole job.
    world = _State.world
    rank = MPI.COMM_WORLD.Get_rank()
    message = "".join(traceback.format_exception(kind, value, trace))
    # One write: mpiexec may stop forwarding a rank's output once the abort begins, and a report
    # split across two writes could lose its second half (seen under load).
    sys.stderr.write(
        f"[rank {rank}] {message}"
        f"[rank {rank}] onnxnn.distributed: aborting the job (MPI_Abort) after an uncaught error\n"
    )
    sys.stderr.flush()
    if world is not None and not MPI.Is_finalized():
        # The launcher kills every rank on an abort, and may drop output it has not yet read from
        # this rank's pipe (the whole report was lost once under load): let it read first.
        time.sleep(ABORT_REPORT_SECONDS)
        MPI.COMM_WORLD.Abort(1)


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Initializes the default process group from MPI.

    Args:
        backend: ``"mpi"`` (the default and the only one).
        init_method: ignored: MPI's launcher connects the ranks (``"env://"`` is accepted).
        timeout: how long a collective may wait for the other ranks before it raises (default 30 min).
        world_size: if given, must equal MPI's world size.
        rank: if given, must equal MPI's rank.

    Raises:
        ValueError: ``backend`` is not ``"mpi"``, or ``rank``/``world_size`` (or the ``RANK``/
            ``WORLD_SIZE`` environment variables) disagree with MPI's.
        RuntimeError: the default group is already initialized.
    """
    Backend(backend if backend is not None else Backend.MPI)
    if _State.world is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {type(timeout).__name__}")
    comm = MPI.COMM_WORLD
    mpi_rank, mpi_size = comm.Get_rank(), comm.Get_size()
    # PyTorch's launchers (torchrun) export RANK/WORLD_SIZE; under mpiexec they are unset or must agree.
    for name, given, actual, what in (
        ("rank", rank, mpi_rank, "rank"),
        ("world_size", world_size, mpi_size, "world size"),
        ("RANK", int(os.environ.get("RANK", -1)), mpi_rank, "rank"),
        ("WORLD_SIZE", int(os.environ.get("WORLD_SIZE", -1)), mpi_size, "world size"),
    ):
        if given != -1 and given != actual:
            raise ValueError(f"{name}={given} disagrees with MPI's {what} {actual}")
    world = ProcessGroup(comm.Dup(), list(range(mpi_size)), timeout or default_pg_timeout)
    _State.world = GroupMember.WORLD = world
    publish_default_world((world.rank(), world.size()))
    _State.previous_excepthook = sys.excepthook
    sys.excepthook = _abort_on_uncaught


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Frees ``group``'s communicator; with no group, the default group (and the abort hook) too."""
    if group is None or group is _State.world:
        world = _default_group()
        world.comm.Free()
        _State.world = GroupMember.WORLD = None
        publish_default_world(None)
        if sys.excepthook is _abort_on_uncaught:
            sys.excepthook = _State.previous_excepthook or sys.__excepthook__
        return
    if group is not GroupMember.NON_GROUP_MEMBER and group.comm != MPI.COMM_NULL:
        group.comm.Free()


def _default_group() -> ProcessGroup:
    if _State.world is None:
        raise ValueError("Default process group has not been initialized, please make sure to call init_process_group.")
    return _State.world


def _group_or_default(group) -> ProcessGroup:
    world = _default_group()
    if group is None:
        return world
    if group is GroupMember.NON_GROUP_MEMBER:
        raise RuntimeError("The given group is not a group this rank is a member of")
    return group


def _not_in_group(group, operation: str) -> bool:
    """True (after PyTorch's warning) when ``group`` is one this rank is not in: the collective does nothing.

    PyTorch lets every rank call a subgroup's collective; the ranks outside it return None at once.
    """
    if group is not GroupMember.NON_GROUP_MEMBER:
        return False
    global_rank = -1 if _State.world is None else _State.world.rank()
    warnings.warn(
        f"Running {operation} on global rank {global_rank} which does not belong to the given group.", stacklevel=3
    )
    return True


def _registered(group) -> ProcessGroup:
    if not isinstance(group, ProcessGroup):
        raise ValueError(f"Group {group} is not registered, please create group with torch.distributed.new_group API")
    return group


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """The rank within ``group`` of ``global_rank`` (the identity on the default group).

    Raises:
        ValueError: ``group`` is not a process group, or ``global_rank`` is not one of its members.
    """
    if group is GroupMember.WORLD:
        return global_rank
    return _registered(group).group_rank(global_rank)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The global rank of ``group``'s rank ``group_rank`` (the identity on the default group).

    Raises:
        ValueError: ``group`` is not a process group, or it has no rank ``group_rank``.
    """
    if group is GroupMember.WORLD:
        return group_rank
    ranks = _registered(group).ranks
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return ranks[group_rank]


def get_process_group_ranks(group: ProcessGroup | None) -> list[int]:
    """The global ranks of ``group``'s members (the default group's if None), in group-rank order."""
    return list(_registered(group or _default_group()).ranks)


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (the default group if None); -1 if it is not a member."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group_or_default(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in ``group`` (the default group if None); -1 if this rank is not a member."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group_or_default(group).size()


def get_backend(group: ProcessGroup | None = None) -> str:
    _group_or_default(group)
    return Backend.MPI


def new_group(ranks=None, timeout: datetime.timedelta | None = None, backend=None, pg_options=None, **kwargs):
    """Creates a group of ``ranks`` (global ranks; all ranks if None). Every rank of the job must call it.

    Returns:
        The new :class:`ProcessGroup`, or ``GroupMember.NON_GROUP_MEMBER`` on ranks not in ``ranks``.

    Raises:
        ValueError: a rank is out of range or repeated.
    """
    world = _default_group()
    members = list(range(world.size())) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(members)) != len(members) or any(r < 0 or r >= world.size() for r in members):
        raise ValueError(f"Invalid ranks {list(ranks)} for a world of size {world.size()}")
    # MPI_Comm_create is collective over the parent: every rank calls it, outsiders get COMM_NULL.
    comm = world.comm.Create(world.comm.Get_group().Incl(members))
    if comm == MPI.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    return ProcessGroup(comm, members, timeout or world.timeout)
