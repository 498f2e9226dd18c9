"""Autograd from several Python threads at once: backwards into one shared model add every
contribution to its parameters' ``.grad`` (PyTorch's ``AccumulateGrad`` holds a mutex) and survive
another thread's ``zero_grad``, and non-reentrant checkpoints in several threads each record their
own thread's ops, while a profiler window opens and closes in another thread too.

Each test makes the interpreter switch threads as often as it can (``sys.setswitchinterval``), so
that an unguarded read-add-write or a process-wide observer slot is interleaved in every run.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Callable

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.ir.mode import MODE
from onnxnn.profiler import profile
from onnxnn.utils.checkpoint import checkpoint

THREADS = 4
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(autouse=True)
def frequent_switches():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def _run_in_threads(work: Callable[[int], None], count: int = THREADS) -> list:
    """Runs ``work(index)`` in ``count`` threads at once (none starts before all are up); the
    exceptions they raised."""
    errors: list = []
    start = threading.Barrier(count)

    def guarded(index: int) -> None:
        try:
            start.wait()
            work(index)
        except Exception as error:  # reported by the test, not lost in the thread
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


# ---------------------------------------------------------------- backwards into shared parameters


def _plain(loss) -> None:
    loss.backward()


def _into_inputs(parameters: list) -> Callable:
    return lambda loss: loss.backward(inputs=parameters)


def _creating_graph(loss) -> None:
    loss.backward(create_graph=True)


# (id, backward call given the loss and the parameters, context each thread runs in, iterations per
# thread). The replayed backward is the fast path's (it reads every .grad first and writes last);
# the others take the general driver, whose window is one accumulation wide: more iterations.
BACKWARDS = [
    pytest.param(lambda parameters: _plain, contextlib.nullcontext, 200, id="replayed"),
    pytest.param(lambda parameters: _plain, lambda: onnxnn.set_executor("kernels"), 200, id="replayed-kernels"),
    pytest.param(lambda parameters: _plain, lambda: onnxnn.set_fast_path(False), 400, id="general-driver"),
    pytest.param(_into_inputs, contextlib.nullcontext, 400, id="backward-inputs"),
    pytest.param(lambda parameters: _creating_graph, contextlib.nullcontext, 200, id="create-graph"),
]


@pytest.mark.parametrize("backward_of, context, iterations", BACKWARDS)
def test_concurrent_backwards_add_every_contribution(backward_of, context, iterations):
    # All-ones weights and input: every gradient is a small integer, so the sum over threads and
    # iterations is exact in float32 (below 2**24) whatever the order of the additions. One small
    # layer: the more backwards a second, the more often two threads' accumulations meet.
    layer = nn.Linear(4, 1)
    parameters = [layer.weight, layer.bias]
    with onnxnn.no_grad():
        for parameter in parameters:
            parameter.fill_(1.0)
    x = onnxnn.ones(2, 4)
    backward = backward_of(parameters)

    def work(index: int) -> None:
        with context():
            for _ in range(iterations):
                backward(onnxnn.relu(layer(x)).sum())

    assert not _run_in_threads(work)
    calls = THREADS * iterations
    # Per call, for a batch of 2 rows of ones: d(sum)/d(output) = 1 in both rows.
    expected = {"weight": np.full((1, 4), 2.0 * calls), "bias": np.full(1, 2.0 * calls)}
    for (name, want), parameter in zip(expected.items(), parameters):
        np.testing.assert_array_equal(parameter.grad.detach().numpy(), want, err_msg=name)


def test_zero_grad_in_another_thread_during_backwards():
    # The optimizer's zero_grad does not wait for backwards (nor does PyTorch's): what it races with
    # is lost or kept, but a backward must not fail on a .grad set to None under it.
    # Sizes of this test's own, so that its backwards are replayed from its own trace (one traced
    # while other threads raced could have left the structure to the general driver).
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 1))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.0)
    x = onnxnn.ones(3, 6)
    for _ in range(3):  # traced and compiled first, with .grad unset and set, to be replayed in the race
        optimizer.zero_grad()
        model(x).sum().backward()
        model(x).sum().backward()
    done = threading.Event()

    def work(index: int) -> None:
        if index == 1:
            while not done.is_set():
                optimizer.zero_grad()
            return
        try:
            for _ in range(3000):
                model(x).sum().backward()
        finally:
            done.set()

    errors = _run_in_threads(work, count=2)
    assert not errors, errors[0]


# ---------------------------------------------------------------- checkpoints and the profiler


def _checkpointed_training(case: tuple, iterations: int) -> np.ndarray:
    """The weight gradient ``iterations`` non-reentrant checkpointed backwards accumulate (``case``
    is ``_case``'s weight, bias and input)."""
    weight, bias, x = case
    layer = nn.Linear(*weight.shape[::-1])
    with onnxnn.no_grad():
        layer.weight.copy_(onnxnn.from_numpy(weight))
        layer.bias.copy_(onnxnn.from_numpy(bias))
    inputs = onnxnn.from_numpy(x)
    for _ in range(iterations):
        output = checkpoint(lambda h: onnxnn.tanh(layer(h)) * 2, inputs, use_reentrant=False)
        output.sum().backward()
    return layer.weight.grad.detach().numpy()


def _check_against_torch(got: np.ndarray, weight: np.ndarray, bias: np.ndarray, x: np.ndarray, iterations: int):
    torch = pytest.importorskip("torch")
    tensor_weight = torch.from_numpy(weight.astype(np.float64)).requires_grad_()
    pre_activation = torch.from_numpy(x.astype(np.float64)) @ tensor_weight.T + torch.from_numpy(
        bias.astype(np.float64)
    )
    (torch.tanh(pre_activation) * 2).sum().backward()
    want = iterations * tensor_weight.grad.numpy()
    # Per element, a sum over the batch per call (tanh's rounding within a few eps of each term) and
    # over the calls: eps times the terms added, times the sum of their magnitudes.
    terms = 2 * (1 - np.tanh(pre_activation.detach().numpy()) ** 2)
    magnitudes = iterations * (np.abs(terms).T @ np.abs(x.astype(np.float64)))
    bound = EPS32 * (iterations + x.shape[0] + x.shape[1] + 8) * magnitudes
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) / bound)


def _case(seed: int, features: int = 8, batch: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    generator = np.random.default_rng(seed)
    weight = generator.standard_normal((features, features)).astype(np.float32) / np.sqrt(features)
    bias = generator.standard_normal(features).astype(np.float32)
    x = generator.standard_normal((batch, features)).astype(np.float32)
    return weight, bias, x


def test_non_reentrant_checkpoints_in_threads_record_their_own_thread():
    # Each thread has its own model. A checkpoint's recorder in a process-wide slot was uninstalled
    # by another thread's checkpoint leaving (a recomputation then recorded fewer tensors:
    # CheckpointError), and another's leaving reinstalled it after its thread had ended.
    iterations = 200
    cases = [_case(seed) for seed in range(THREADS)]
    results: dict = {}

    def work(index: int) -> None:
        results[index] = _checkpointed_training(cases[index], iterations)

    errors = _run_in_threads(work)
    assert not errors, errors[0]
    assert MODE.observer is None, "a checkpoint's recorder was left installed"  # (this thread is in no block)
    for index, case in enumerate(cases):
        _check_against_torch(results[index], *case, iterations)


def test_profiler_windows_and_checkpoints_in_other_threads():
    # A window opening and closing in one thread while others checkpoint: the window neither drops
    # nor revives their recorders, and still attributes its own thread's ops to their module.
    iterations = 100
    cases = [_case(seed) for seed in range(THREADS - 1)]
    results: dict = {}
    done = threading.Event()
    finished: list = []
    attributed: list = []
    model = nn.Sequential(nn.Linear(8, 8))
    x = onnxnn.randn(2, 8)

    def work(index: int) -> None:
        if index == THREADS - 1:
            while not done.is_set():
                with profile() as window:
                    model(x).sum().item()
                attributed.append(any(event.module == "model.0" for event in window.events()))
            return
        try:
            results[index] = _checkpointed_training(cases[index], iterations)
        finally:
            finished.append(index)
            if len(finished) == len(cases):  # the last checkpointing thread: the windows stop
                done.set()

    errors = _run_in_threads(work)
    assert not errors, errors[0]
    assert MODE.observer is None and MODE.profiler is None
    assert attributed and all(attributed)
    for index, case in enumerate(cases):
        _check_against_torch(results[index], *case, iterations)
