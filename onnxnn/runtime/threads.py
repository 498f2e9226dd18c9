"""Threads: how many threads onnxnn's computations use, with PyTorch's functions and meaning.

``set_num_threads`` sets the intra-op threads of every onnxruntime session built from then on
(graphs too small to gain from threads keep running on one) and of numpy's BLAS, which the
kernels executor's matrix products use. Sessions already built keep their thread pools, so the
caches holding them are emptied when the count changes.
"""

from __future__ import annotations

from ..ir.caches import clear_caches
from ..ir.mode import MODE, available_cores, intra_op_thread_count

__all__ = ["get_num_threads", "set_num_threads", "get_num_interop_threads", "set_num_interop_threads"]

_blas_limits: list = []  # the threadpoolctl limiter in force (kept so that the limit stays applied)
_interop_set = [False]


def _check_count(function: str, count) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise RuntimeError(f"{function} expects an int, but got {type(count).__name__}")
    if count <= 0:
        raise RuntimeError(f"{function} expects a positive integer")
    return count


def get_num_threads() -> int:
    """Returns the number of threads used for parallelizing CPU operations (one per core by default)."""
    return intra_op_thread_count()


def set_num_threads(count: int) -> None:
    """Sets the number of threads used for intra-op parallelism on CPU.

    Applies to onnxruntime sessions built from now on (cached ones are dropped) and to numpy's
    BLAS, which the ``"kernels"`` executor's matrix products use.

    Args:
        count: a positive number of threads.

    Example::

        >>> onnxnn.set_num_threads(1)   # one thread per computation, e.g. beside other processes
    """
    count = _check_count("set_num_threads", count)
    from threadpoolctl import threadpool_limits  # deferred: it inspects the loaded BLAS libraries

    # Limited again even when the count is the same: a BLAS library loaded since the last call
    # (scipy's, say) starts with a thread per core.
    _blas_limits[:] = [threadpool_limits(limits=count, user_api="blas")]
    if count != MODE.intra_op_threads:
        MODE.intra_op_threads = count
        clear_caches()  # sessions built before keep their own thread pools


def get_num_interop_threads() -> int:
    """Returns the number of threads used for inter-op parallelism on CPU (one per core by default)."""
    return MODE.inter_op_threads or available_cores()


def set_num_interop_threads(count: int) -> None:
    """Sets the number of threads onnxruntime may use to run independent nodes at once.

    As in PyTorch it can be set once; it applies to sessions built from then on.

    Args:
        count: a positive number of threads.

    Raises:
        RuntimeError: ``count`` is not a positive int, or the count was set before.
    """
    count = _check_count("set_num_interop_threads", count)
    if _interop_set[0]:
        raise RuntimeError(
            "Error: cannot set number of interop threads after parallel work has started or "
            "set_num_interop_threads called"
        )
    _interop_set[0] = True
    MODE.inter_op_threads = count
    clear_caches()
