"""``onnxnn.set_flush_denormal``: subnormal floats flushed to zero, as ``torch.set_flush_denormal`` does.

While the mode is on, a subnormal result is zero and a subnormal input reads as zero, on every
executor (the calling thread's numpy and onnxruntime's sessions, which are built again) and on
the threads sharing an optimizer's update; off, subnormals are kept. Where it cannot be set (no
compiled library, a CPU without the mode) it says so and changes nothing.
"""

from __future__ import annotations

import platform

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.mode import MODE
from onnxnn.kernels import compiled_updates
from onnxnn.kernels.float_modes import thread_flushes_denormal
from tests.kernels.update_chains import counted_shared_runs

SETTABLE = compiled_updates.unavailable_reason() is None and platform.machine().lower() in {
    "x86_64",
    "amd64",
    "aarch64",
    "arm64",
}
needs_the_mode = pytest.mark.skipif(not SETTABLE, reason=f"{compiled_updates.unavailable_reason() or 'CPU'}")


@pytest.fixture(autouse=True)
def _kept_afterwards():
    yield
    onnxnn.set_flush_denormal(False)


def test_it_can_be_set_wherever_the_library_is_built_on_such_a_cpu():
    assert onnxnn.set_flush_denormal(True) is SETTABLE
    assert thread_flushes_denormal() is SETTABLE
    assert MODE.flush_denormal is SETTABLE
    assert onnxnn.set_flush_denormal(False) is SETTABLE
    assert not thread_flushes_denormal() and not MODE.flush_denormal


@needs_the_mode
@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_subnormal_inputs_and_results_are_zero_only_while_flushing(executor, dtype):
    tiny = np.finfo(dtype).tiny
    values = np.array([tiny / 4, -tiny / 1024, tiny, -1.5], dtype)  # two subnormals, two normals
    with onnxnn.set_executor(executor):
        for flush in (True, False, True):
            assert onnxnn.set_flush_denormal(flush)
            read = (onnxnn.tensor(values) * onnxnn.tensor(np.ones(4, dtype))).numpy()
            halved = (onnxnn.tensor(np.full(3, tiny, dtype)) / onnxnn.tensor(np.full(3, 4.0, dtype))).numpy()
            np.testing.assert_array_equal(read, np.where(np.abs(values) < tiny, 0, values) if flush else values)
            np.testing.assert_array_equal(halved, np.zeros(3, dtype) if flush else np.full(3, tiny / 4, dtype))


@needs_the_mode
@pytest.mark.parametrize("flush", [True, False])
def test_the_threads_sharing_an_update_flush_as_the_calling_thread(flush, monkeypatch):
    monkeypatch.setattr(compiled_updates, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.setattr(compiled_updates, "THREADED_MIN_ELEMENTS", 0)
    monkeypatch.setattr(compiled_updates, "SHARE_MIN_ELEMENTS", 1)
    monkeypatch.setattr(MODE, "intra_op_threads", 3)
    if compiled_updates._THREADS.get() is None:
        pytest.skip(compiled_updates._THREADS.reason)
    shared = counted_shared_runs(monkeypatch)
    assert onnxnn.set_flush_denormal(flush)
    tiny = np.finfo(np.float32).tiny
    # Pieces of a third of a million elements each: the workers wake before the caller has taken them all.
    elements = 1 << 20
    parameter = onnxnn.nn.Parameter(onnxnn.full((elements,), 1.75 * float(tiny)))
    parameter.grad = onnxnn.ones(elements)
    onnxnn.optim.SGD([parameter], lr=1.5 * float(tiny), momentum=0.9).step()  # 1.75 tiny - 1.5 tiny: subnormal
    np.testing.assert_array_equal(parameter.detach().numpy(), np.full(elements, 0 if flush else tiny / 4, np.float32))
    assert shared == [3]


def test_where_it_cannot_be_set_nothing_changes(monkeypatch):
    monkeypatch.setattr("onnxnn.float_modes.set_thread_flush_denormal", lambda mode: False)
    assert onnxnn.set_flush_denormal(True) is False
    assert not MODE.flush_denormal and not thread_flushes_denormal()
