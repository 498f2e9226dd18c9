"""The layer loops' threads (kernels/loop_threads.c): a pool kept between calls, whose workers and the
calling thread take a call's pieces one at a time.

Which thread runs a piece must change none of its bits: loops split over channels (batch
normalization, depthwise weight gradients) or elements (ReLU's gradient) give the one-thread result
on any number of threads; the weight gradient, split over samples, the sums of its per-thread ranges.
The pool must also survive what per-call threads did not have to: a forked child (none of its workers),
a caller that changed its floating-point mode after the workers started, a system refusing threads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from onnxnn.ir.conv_weight_gradient import weight_gradient_geometry
from onnxnn.kernels import compiled_convolutions, compiled_normalization
from onnxnn.kernels.float_modes import set_thread_flush_denormal

pytestmark = pytest.mark.skipif(
    not compiled_normalization.available(), reason=f"{compiled_normalization.unavailable_reason()}"
)

EPSILON = 1e-5
# 2^20 elements: four threads' worth (one per 2^18) for every loop, and 16 channels for their pieces.
SHAPE = (16, 16, 64, 64)


def _arrays(shape=SHAPE, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    scale = rng.standard_normal(shape[1]).astype(np.float32)
    bias = rng.standard_normal(shape[1]).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    residual = rng.standard_normal(shape).astype(np.float32)
    return x, scale, bias, g, residual


RELU, RELU6 = compiled_normalization.RELU_BOUNDS, (0.0, 6.0)


def _forward(bounds, residual: bool):
    def run(threads: int) -> list:
        x, scale, bias, _, added = _arrays()
        return compiled_normalization.batch_norm_training(
            x, scale, bias, EPSILON, threads, bounds, added if residual else None
        )

    return run


def _gradient(bounds):
    def run(threads: int) -> list:
        x, scale, bias, g, _ = _arrays()
        output, mean, variance = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON, 1, bounds or RELU)
        mask = output if bounds else None
        return compiled_normalization.batch_norm_training_gradient(
            g, x, scale, mean, variance, EPSILON, threads, mask, bounds or RELU
        )

    return run


def _activation_gradient(bounds):
    def run(threads: int) -> list:
        x, _, _, g, _ = _arrays()
        return [compiled_normalization.activation_gradient(g, x - 2, bounds, threads)]

    return run


def _depthwise(threads: int) -> list:
    # 64 channels x 9 taps x 8 samples x 4096 positions: 19 million products, four threads' worth.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 64, 64, 64)).astype(np.float32)
    g = rng.standard_normal((8, 64, 64, 64)).astype(np.float32)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 64}
    geometry = weight_gradient_geometry(x.shape, g.shape, attrs)
    return [compiled_convolutions.weight_gradient(x, g, geometry, threads)]


# The loops whose pieces are whole channels or ranges of elements.
SPLIT_BY_CHANNELS = {
    "forward": _forward(None, residual=False),
    "forward-relu": _forward(RELU, residual=False),
    "forward-relu6": _forward(RELU6, residual=False),
    "forward-residual": _forward(None, residual=True),
    "forward-residual-relu": _forward(RELU, residual=True),
    "gradient": _gradient(None),
    "gradient-relu-masked": _gradient(RELU),
    "gradient-relu6-masked": _gradient(RELU6),
    "relu-gradient": _activation_gradient(RELU),
    "relu6-gradient": _activation_gradient(RELU6),
    "depthwise-weight-gradient": _depthwise,
}


@pytest.mark.parametrize("threads", [2, 4])
@pytest.mark.parametrize("loop", SPLIT_BY_CHANNELS)
def test_loops_split_by_channels_give_the_one_thread_bits_on_any_number_of_threads(loop, threads):
    one = SPLIT_BY_CHANNELS[loop](1)
    for _ in range(3):  # the pieces land on other threads each time
        for expected, result in zip(one, SPLIT_BY_CHANNELS[loop](threads)):
            np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("threads", [2, 4])
def test_the_weight_gradient_on_threads_is_its_ranges_of_samples_summed_in_order(threads):
    # 8 samples x 16 x 16 channels x 9 taps x 1024 positions: 19 million products, four threads' worth.
    # Each thread's range sums as a one-thread call over those samples; the ranges add in their order,
    # whichever thread summed which.
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 16, 32, 32)).astype(np.float32)
    g = rng.standard_normal((8, 16, 32, 32)).astype(np.float32)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    expected = None
    for samples in np.array_split(np.arange(x.shape[0]), threads):
        geometry = weight_gradient_geometry(x[samples].shape, g[samples].shape, attrs)
        part = compiled_convolutions.weight_gradient(x[samples], g[samples], geometry, 1)
        expected = part if expected is None else expected + part
    geometry = weight_gradient_geometry(x.shape, g.shape, attrs)
    for _ in range(3):
        np.testing.assert_array_equal(compiled_convolutions.weight_gradient(x, g, geometry, threads), expected)


def test_workers_started_earlier_round_as_the_caller_rounds_now():
    # Subnormal inputs, read as zero when the caller flushes them: the pool's workers, started while
    # it kept them, must flush too where the caller asks for it afterwards.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(SHAPE) * 1e-39).astype(np.float32)
    scale, bias = np.ones(SHAPE[1], np.float32), np.zeros(SHAPE[1], np.float32)
    compiled_normalization.batch_norm_training(x, scale, bias, EPSILON, 4)  # the workers start
    kept = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON, 1)[0]
    if not set_thread_flush_denormal(True):
        pytest.skip("this CPU or build cannot flush subnormals")
    try:
        flushed = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON, 1)[0]
        threaded = compiled_normalization.batch_norm_training(x, scale, bias, EPSILON, 4)[0]
    finally:
        set_thread_flush_denormal(False)
    assert np.count_nonzero(kept) > 0 and np.count_nonzero(flushed) == 0  # the mode matters here
    np.testing.assert_array_equal(threaded, flushed)


def _run_script(script: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120, **options
    )


# A multi-threaded call of each kind of loop, compared with its one-thread result: ``check()``.
_CHECK = """
    import numpy as np
    from onnxnn.ir.conv_weight_gradient import weight_gradient_geometry
    from onnxnn.kernels import compiled_convolutions, compiled_normalization

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 64, 64)).astype(np.float32)  # each loop two threads' worth
    scale, bias = np.ones(32, np.float32), np.zeros(32, np.float32)
    geometry = weight_gradient_geometry(x.shape, x.shape, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    depthwise = weight_gradient_geometry(x.shape, x.shape, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 32})
    ONE = [
        *compiled_normalization.batch_norm_training(x, scale, bias, 1e-5, 1),
        compiled_convolutions.weight_gradient(x[:4], x[:4], geometry, 1)
        + compiled_convolutions.weight_gradient(x[4:], x[4:], geometry, 1),
        compiled_convolutions.weight_gradient(x, x, depthwise, 1),
    ]

    def check():
        results = [
            *compiled_normalization.batch_norm_training(x, scale, bias, 1e-5, 2),
            compiled_convolutions.weight_gradient(x, x, geometry, 2),
            compiled_convolutions.weight_gradient(x, x, depthwise, 2),
        ]
        return all(np.array_equal(a, b) for a, b in zip(ONE, results))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_forked_child_runs_multithreaded_loops_on_workers_of_its_own():
    # The parent's workers exist; the child has none of them and must neither wait for them nor fail.
    script = (
        _CHECK
        + """
    import os, sys
    assert check()  # the parent's pool has its workers now
    child = os.fork()
    if child == 0:
        threads_before = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
        same = check() and check()
        # Where the system lists them: the child started a worker of its own (the parent's count for nothing).
        started = threads_before is None or len(os.listdir("/proc/self/task")) > threads_before
        os._exit(0 if same and started else 1)
    _, status = os.waitpid(child, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    """
    )
    finished = _run_script(script)
    assert finished.returncode == 0, finished.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="limits address space through /proc and rlimits")
def test_a_system_refusing_threads_leaves_the_loops_on_the_calling_thread():
    # Threads' stacks of 256 MiB (RLIMIT_STACK) in an address space with 64 MiB left: no worker starts,
    # and every call runs its pieces on its own thread, to the same values (per-call threads failed it).
    script = (
        _CHECK
        + """
    import resource
    size = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (size * 1024 + (64 << 20), resource.RLIM_INFINITY))
    assert check()
    """
    )

    def large_stacks():
        import resource

        resource.setrlimit(resource.RLIMIT_STACK, (256 << 20, resource.RLIM_INFINITY))

    finished = _run_script(script, preexec_fn=large_stacks)
    assert finished.returncode == 0, finished.stderr
