"""set_num_threads and friends: PyTorch's functions, applied to onnxruntime sessions and numpy's BLAS."""

from __future__ import annotations

import os

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import onnxnn
from onnxnn.ir.executors import executor
from onnxnn.ir.mode import MODE
from onnxnn.runtime import threads


@pytest.fixture
def restore_threads():
    before = (MODE.intra_op_threads, MODE.inter_op_threads, threads._interop_set[0])
    with threadpool_limits(limits=None):  # restores the BLAS limits found on entry
        yield
    MODE.intra_op_threads, MODE.inter_op_threads, threads._interop_set[0] = before
    threads._blas_limits.clear()
    onnxnn.clear_caches()


def _session_options_after_a_large_matmul():
    onnxnn.clear_caches()
    with onnxnn.set_executor("onnxruntime"):
        x = onnxnn.randn(300, 300)
        result = (x @ x).numpy()
    sessions = list(executor("onnxruntime").cache.sessions.values())
    assert sessions, "the matmul ran in an onnxruntime session"
    return sessions[-1].session.get_session_options(), result, x.numpy()


def test_the_default_is_one_thread_per_available_core(restore_threads):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    MODE.intra_op_threads = MODE.inter_op_threads = 0  # as in a process that never set them
    assert onnxnn.get_num_threads() == cores
    assert onnxnn.get_num_interop_threads() == cores


@pytest.mark.parametrize("count", [1, 2])
def test_set_num_threads_reaches_new_sessions_and_numpys_blas(restore_threads, count):
    onnxnn.set_num_threads(count)
    assert onnxnn.get_num_threads() == count
    options, result, x = _session_options_after_a_large_matmul()
    assert options.intra_op_num_threads == count
    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and all(info["num_threads"] == count for info in blas)
    # 300 float32 products per element: within 300 roundings of the float64 product.
    expected = x.astype(np.float64) @ x.astype(np.float64)
    bound = 300 * np.finfo(np.float32).eps * (np.abs(x).astype(np.float64) @ np.abs(x).astype(np.float64))
    assert np.all(np.abs(result - expected) <= bound)


def test_the_same_count_again_limits_blas_and_keeps_the_sessions(restore_threads):
    onnxnn.set_num_threads(1)
    _session_options_after_a_large_matmul()
    sessions = dict(executor("onnxruntime").cache.sessions)
    threadpool_limits(limits=2, user_api="blas")  # as a BLAS library loaded since would start
    onnxnn.set_num_threads(1)
    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and all(info["num_threads"] == 1 for info in blas)
    assert dict(executor("onnxruntime").cache.sessions) == sessions  # same threads: nothing rebuilt


def test_small_graphs_keep_one_thread(restore_threads):
    onnxnn.set_num_threads(2)
    onnxnn.clear_caches()
    with onnxnn.set_executor("onnxruntime"):
        (onnxnn.randn(3, 3) * 2).numpy()
    options = list(executor("onnxruntime").cache.sessions.values())[-1].session.get_session_options()
    assert options.intra_op_num_threads == 1


@pytest.mark.parametrize("function", [onnxnn.set_num_threads, onnxnn.set_num_interop_threads])
@pytest.mark.parametrize(
    "count, message",
    [
        (0, "expects a positive integer"),
        (-2, "expects a positive integer"),
        (1.5, "expects an int, but got float"),
        ("2", "expects an int, but got str"),
        (True, "expects an int, but got bool"),
    ],
)
def test_bad_counts_are_refused_and_change_nothing(restore_threads, function, count, message):
    before = (MODE.intra_op_threads, MODE.inter_op_threads)
    with pytest.raises(RuntimeError, match=f"{function.__name__} {message}"):
        function(count)
    assert (MODE.intra_op_threads, MODE.inter_op_threads) == before


def test_interop_threads_can_be_set_once(restore_threads):
    threads._interop_set[0] = False
    onnxnn.set_num_interop_threads(1)
    assert onnxnn.get_num_interop_threads() == 1
    options, _, _ = _session_options_after_a_large_matmul()
    assert options.inter_op_num_threads == 1
    with pytest.raises(RuntimeError, match="cannot set number of interop threads"):
        onnxnn.set_num_interop_threads(2)
    assert onnxnn.get_num_interop_threads() == 1
