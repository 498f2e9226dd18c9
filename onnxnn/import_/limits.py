"""How much memory one tensor of an imported model may ask for, checked before it is allocated.

A few bytes of ONNX can declare a tensor of 2**40 elements: a sparse initializer's dense dims, or
a ConstantOfShape / Expand / Tile whose shape comes from a small constant. onnxnn knows every
shape when it records a node, so such a tensor is refused before any memory is taken: one tensor
may not exceed the memory this process may use at all (the physical memory, or the address
space limit ``RLIMIT_AS`` / ``RLIMIT_DATA`` when one is set), since asking for more can only fail
or drive the machine into swap.
"""

from __future__ import annotations

import os

from ..runtime.internal import value_of
from ..runtime.tensor import Tensor

__all__ = ["allocation_limit", "check_allocation"]


_LIMIT: list[int] = []


def allocation_limit() -> int:
    """The most bytes one tensor may take: physical memory, or a lower address-space limit.

    Read once per process (the limits are set when a process starts).
    """
    if not _LIMIT:
        _LIMIT.append(_read_limit())
    return _LIMIT[0]


def _read_limit() -> int:
    limit = 2**63 - 1
    try:
        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import resource  # POSIX only: imported where it is used, inside the guard

        for kind in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            soft, _ = resource.getrlimit(kind)
            if soft != resource.RLIM_INFINITY and 0 < soft < limit:
                limit = soft
    except (ImportError, AttributeError, ValueError, OSError):
        pass
    return limit


def nbytes(shape, itemsize: int) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count * itemsize


def check_allocation(node: str, op_type: str, results) -> None:
    """Refuses node outputs larger than :func:`allocation_limit` before they are computed.

    Raises:
        RuntimeError: naming the node, its op_type and the shape asked for.
    """
    limit = _LIMIT[0] if _LIMIT else allocation_limit()
    for value in results:
        if type(value) is Tensor:
            value = value_of(value)  # its recorded Value: the shape without building a Size
        shape = getattr(value, "shape", None)
        itemsize = getattr(getattr(value, "dtype", None), "itemsize", None)
        if shape is None or itemsize is None:
            continue  # a sequence or map: its tensors were checked when they were made
        size = nbytes(shape, itemsize)
        if size > limit:
            raise RuntimeError(
                f"ONNX node '{node}' of op_type '{op_type}' would create a tensor of shape "
                f"{list(shape)} ({size:,} bytes), more than this process may allocate "
                f"({limit:,} bytes)"
            )
