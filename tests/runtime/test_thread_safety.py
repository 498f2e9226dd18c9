"""onnxnn used from several threads at once: every thread gets its serial results, and its own modes.

Threads share pending graphs (one builds a model's intermediates, others read them), realized
weights, compiled plans, forward templates and specializations. The threaded tests make the
interpreter switch threads every microsecond (``preempted``), so that a check-then-act on shared
state is interrupted often; their assertions compare values with numpy, never timings. The walk
and compilation tests do by hand, in one thread, what another thread may do between a plan's walk
and its compilation.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.ir.mode import MODE
from onnxnn.ir.plan import plan
from onnxnn.runtime.fastpath import forward_replay, plan_cache
from onnxnn.runtime.depth import MAX_PENDING_DEPTH, pending_depth, unbounded_depth
from onnxnn.runtime.internal import value_of
from onnxnn.runtime.realization import recording_only, run_plan

EXECUTORS = ["onnxruntime", "kernels"]
WIDTH = 32
LAYERS = 6
# float32 products of WIDTH terms through LAYERS tanh layers (|weights| ~ 1/sqrt(WIDTH)): the two
# executors and numpy sum in different orders, a few float32 ulps per layer.
TOLERANCE = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


@pytest.fixture
def preempted():
    """Threads switch every microsecond (Python's default is 5 ms): races in a few bytecodes show."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def _in_threads(work, count: int) -> list:
    """Runs ``work(index)`` in ``count`` threads started together; returns what they raised."""
    barrier = threading.Barrier(count)
    errors: list = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except Exception as error:  # reported by the test, with the others'
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _weights(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32) for _ in range(LAYERS)]


def _chain(x, weights: list) -> list:
    """Every layer's output of ``tanh(h @ w)`` layers, pending (as tensors) or computed (as arrays)."""
    outputs = []
    for weight in weights:
        x = (x @ weight).tanh() if isinstance(x, onnxnn.Tensor) else np.tanh(x @ weight)
        outputs.append(x)
    return outputs


# ---------------------------------------------------------------- a compilation reads what the walk found


def _realize_an_intermediate(layers: list) -> None:
    layers[2].numpy()  # another thread reads an intermediate: it is realized, its node dropped


def _walk_the_nodes_again(layers: list) -> None:
    # Another thread's plan reads the same pending nodes behind an extra one, which shifts their
    # positions (the walk's scratch, kept on the nodes) by one.
    plan([(onnxnn.ones(1, WIDTH) * 2.0 + layers[3])._value])


@pytest.mark.parametrize("meanwhile", [_realize_an_intermediate, _walk_the_nodes_again], ids=lambda f: f.__name__)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_plan_compiles_as_it_was_walked(executor, meanwhile):
    weights = [onnxnn.from_numpy(weight) for weight in _weights()]
    rng = np.random.default_rng(1)
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        x = rng.standard_normal((4, WIDTH)).astype(np.float32)
        layers = _chain(onnxnn.from_numpy(x), weights)
        graph = plan([layers[-1]._value])  # the intermediates are held: they are outputs too
        meanwhile(layers)
        run_plan(graph)  # compiled now
        for got, want in zip(layers, _chain(x, _weights())):
            np.testing.assert_allclose(got.numpy(), want, **TOLERANCE)
        # A new graph of the structure (the last layer read first) runs what was compiled: it holds
        # no data of the first graph.
        x = rng.standard_normal((4, WIDTH)).astype(np.float32)
        layers = _chain(onnxnn.from_numpy(x), weights)
        layers[-1].numpy()
        for got, want in zip(layers, _chain(x, _weights())):
            np.testing.assert_allclose(got.numpy(), want, **TOLERANCE)


# ---------------------------------------------------------------- threads reading one pending graph


@pytest.mark.parametrize("executor", EXECUTORS)
def test_threads_reading_one_pending_graph_get_its_values(executor, preempted):
    weights = [onnxnn.from_numpy(weight) for weight in _weights()]
    rng = np.random.default_rng(2)
    wrong: list = []

    def read(layers: list, expected: list, index: int) -> None:
        with onnxnn.set_executor(executor):
            for layer in ((index * 2) % LAYERS, LAYERS - 1, LAYERS - 1 - index % LAYERS):
                if not np.allclose(layers[layer].numpy(), expected[layer], **TOLERANCE):
                    wrong.append((index, layer))

    for _ in range(12):
        x = rng.standard_normal((4, WIDTH)).astype(np.float32)
        with onnxnn.no_grad():
            layers = _chain(onnxnn.from_numpy(x), weights)
        expected = _chain(x, _weights())
        errors = _in_threads(lambda index: read(layers, expected, index), 6)
        assert not errors, errors[0]
    assert not wrong
    # And the sessions kept for these structures hold nothing of one graph: a thread alone is right.
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        for layer in range(LAYERS):
            x = rng.standard_normal((4, WIDTH)).astype(np.float32)
            got = _chain(onnxnn.from_numpy(x), weights)[layer].numpy()
            np.testing.assert_allclose(got, _chain(x, _weights())[layer], **TOLERANCE)


# ---------------------------------------------------------------- one model served from several threads


def test_threads_replaying_a_new_forward_template_at_once(preempted):
    # A forward is traced at its second call and its replay code is written at its first replay:
    # here by whichever of the threads comes first.
    x = onnxnn.from_numpy(np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32))
    for seed in range(6):
        onnxnn.manual_seed(seed)
        model = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(8)]).eval()
        with onnxnn.no_grad(), onnxnn.set_fast_path(True):
            expected = model(x).numpy()
            model(x)  # traced
        results: list = []

        def call(_index: int) -> None:
            with onnxnn.no_grad(), onnxnn.set_fast_path(True):  # per thread
                results.append(model(x).numpy())

        errors = _in_threads(call, 6)
        assert not errors, errors[0]
        for result in results:
            np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)


def _models_of_several_depths(count: int, seed: int) -> list:
    models = []
    for index in range(count):
        onnxnn.manual_seed(seed + index)
        layers = [
            nn.Sequential(nn.Linear(16, 16), nn.Tanh() if (layer + index) % 2 else nn.ReLU()) for layer in range(24)
        ]
        models.append(nn.Sequential(*layers[: 16 + index]).eval())
    return models


@pytest.mark.parametrize("seed", [0, 10, 20, 30, 40])
def test_a_thread_tracing_its_forward_leaves_the_others_replaying(seed, preempted):
    # A forward is traced at its second call; each thread's model is traced once, whatever the other
    # threads record or replay meanwhile (a trace is the tracing thread's own).
    calls = 5
    x = onnxnn.from_numpy(np.random.default_rng(seed).standard_normal((2, 16)).astype(np.float32))
    models = _models_of_several_depths(6, seed)
    with onnxnn.no_grad(), onnxnn.set_fast_path(False):
        expected = [model(x).numpy() for model in models]
    forward_replay.reset_counts()
    wrong: list = []
    in_step = threading.Barrier(len(models))  # every thread traces (its second call) at the same time

    def call(index: int) -> None:
        with onnxnn.no_grad(), onnxnn.set_fast_path(True):  # per thread
            for _ in range(calls):
                in_step.wait()
                if not np.allclose(models[index](x).numpy(), expected[index], rtol=1e-5, atol=1e-6):
                    wrong.append(index)

    errors = _in_threads(call, len(models))
    assert not errors, errors[0]
    assert not wrong
    assert forward_replay.replay_info() == {"traced": len(models), "replayed": len(models) * (calls - 2)}


def _let_others_run() -> None:
    time.sleep(0)  # releases the interpreter lock: a waiting thread runs (what a preemption does)


def _yielding(monkeypatch) -> None:
    """Lets other threads run right after a specialization matches (the window in which two threads
    could change the entry's bookkeeping at once), as a preemption there would."""
    matches = plan_cache.Specialization.matches

    def yielding(self, inputs):
        found = matches(self, inputs)
        _let_others_run()
        return found

    monkeypatch.setattr(plan_cache.Specialization, "matches", yielding)


@pytest.mark.parametrize("settled", [True, False], ids=["specialized", "being-watched"])
def test_models_of_one_architecture_taking_turns_in_threads(settled, preempted, monkeypatch):
    # Each model gets an inference specialization of its own weights (plan_cache), which the
    # threads then switch between, or watch the inputs for at once.
    _yielding(monkeypatch)
    rng = np.random.default_rng(4)
    models = []
    for seed in range(3):
        onnxnn.manual_seed(seed)
        models.append(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8)).eval())
    inputs = [rng.standard_normal((2, 64)).astype(np.float32) for _ in range(4)]
    with onnxnn.set_executor("onnxruntime"), onnxnn.set_fast_path(True), onnxnn.no_grad():
        expected = [[model(onnxnn.from_numpy(x)).numpy() for x in inputs] for model in models]
        if settled:
            for _ in range(plan_cache.SPECIALIZE_AFTER_RUNS + 1):
                for model in models:
                    model(onnxnn.from_numpy(inputs[0])).numpy()
    wrong: list = []

    def serve(index: int) -> None:
        with onnxnn.set_executor("onnxruntime"), onnxnn.set_fast_path(True), onnxnn.no_grad():
            for call in range(12):
                which = (index + call) % len(models)
                got = models[which](onnxnn.from_numpy(inputs[call % len(inputs)])).numpy()
                if not np.allclose(got, expected[which][call % len(inputs)], rtol=1e-5, atol=1e-5):
                    wrong.append((index, call))

    errors = _in_threads(serve, 6)
    assert not errors, errors[0]
    assert not wrong


# ---------------------------------------------------------------- the modes are per thread


def _executor_mode() -> tuple:
    return (onnxnn.get_executor(), MODE.eager)


SWITCHES = [
    # (the switch as a block, what it sets there as a thread reads it, the process's default)
    (lambda: onnxnn.set_executor("kernels", eager=True), _executor_mode, ("kernels", True), ("auto", False)),
    (lambda: onnxnn.set_executor("onnxruntime"), _executor_mode, ("onnxruntime", False), ("auto", False)),
    (lambda: onnxnn.set_fast_path(False), onnxnn.is_fast_path_enabled, False, True),
]
SWITCH_IDS = ["kernels-eager", "onnxruntime", "fast-path-off"]


@pytest.fixture
def process_defaults():
    """The process's defaults (whatever the suite runs with: ONNXNN_FAST_PATH=0), put back after."""
    executor, eager, fast_path = onnxnn.get_executor(), MODE.eager, onnxnn.is_fast_path_enabled()
    onnxnn.set_executor("auto")
    onnxnn.set_fast_path(True)
    yield
    onnxnn.set_executor(executor, eager=eager)
    onnxnn.set_fast_path(fast_path)


@pytest.mark.parametrize("switch, read, inside, default", SWITCHES, ids=SWITCH_IDS)
def test_a_block_in_one_thread_leaves_the_others_modes(process_defaults, switch, read, inside, default):
    entered, release = threading.Event(), threading.Event()
    seen: dict = {}

    def in_block() -> None:
        with switch():
            seen["own"] = read()
            entered.set()
            release.wait()

    blocked = threading.Thread(target=in_block)
    blocked.start()
    entered.wait()
    seen["main"] = read()
    other = threading.Thread(target=lambda: seen.setdefault("other", read()))
    other.start()
    other.join()
    release.set()
    blocked.join()
    assert seen == {"own": inside, "main": default, "other": default}


@pytest.mark.parametrize("switch, read, inside, default", SWITCHES, ids=SWITCH_IDS)
def test_overlapping_blocks_in_two_threads_leave_the_defaults(process_defaults, switch, read, inside, default):
    # The first block is left while the second is still open, the second last (each restored the
    # value it found on entry when these were per process).
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with switch():
            first_in.set()
            second_in.wait()
        first_out.set()

    def second() -> None:
        first_in.wait()
        with onnxnn.set_executor("onnxruntime"), onnxnn.set_fast_path(True), switch():
            second_in.set()
            first_out.wait()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read() == default
    assert _executor_mode() == ("auto", False) and onnxnn.is_fast_path_enabled()


def test_threads_entering_blocks_at_once_see_their_own_modes(process_defaults, preempted):
    # The call that opens a block sets the process's value for an instant (``with`` makes the call,
    # then enters the block), which the block's start takes back, however the threads interleave.
    wrong: list = []
    choices = [("kernels", True), ("onnxruntime", False), ("kernels", False), ("auto", True)]

    def switch(index: int) -> None:
        for turn in range(200):
            name, eager = choices[(index + turn) % len(choices)]
            with onnxnn.set_executor(name, eager=eager):
                with onnxnn.set_fast_path(turn % 2 == 0):
                    _let_others_run()
                    if _executor_mode() != (name, eager) or onnxnn.is_fast_path_enabled() != (turn % 2 == 0):
                        wrong.append((index, turn))

    errors = _in_threads(switch, 4)
    assert not errors, errors[0]
    assert not wrong
    assert _executor_mode() == ("auto", False) and onnxnn.is_fast_path_enabled()


def test_a_plain_call_sets_the_process_default_and_a_block_inside_restores_it(process_defaults):
    seen: list = []
    try:
        onnxnn.set_executor("kernels")  # a plain call: every thread without a block of its own
        worker = threading.Thread(target=lambda: seen.append(onnxnn.get_executor()))
        worker.start()
        worker.join()
        with onnxnn.set_executor("onnxruntime"):
            onnxnn.set_executor("auto", eager=True)  # inside a block: this thread's, until the block ends
            seen.append(_executor_mode())
        seen.append(_executor_mode())
    finally:
        onnxnn.set_executor("auto")
    assert seen == ["kernels", ("auto", True), ("kernels", False)]


def _records_deep_history() -> int:
    """The pending depth of a history recorded one op past the bound in this thread."""
    x = onnxnn.ones(3)
    for _ in range(MAX_PENDING_DEPTH + 1):
        x = x + 1
    return pending_depth(value_of(x))


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(recording_only, id="recording_only"),  # a training step being exported
        pytest.param(unbounded_depth, id="unbounded_depth"),  # a model being exported
    ],
)
def test_an_export_in_one_thread_leaves_the_others_realizing(block):
    # An export's blocks keep its own thread's work pending; another thread's reads and deep
    # histories are computed as always.
    entered, release = threading.Event(), threading.Event()

    def exporting() -> None:
        with block():
            entered.set()
            assert release.wait(60)

    thread = threading.Thread(target=exporting)
    thread.start()
    try:
        assert entered.wait(60)
        np.testing.assert_array_equal((onnxnn.arange(3.0) * 2).numpy(), [0.0, 2.0, 4.0])
        assert _records_deep_history() <= MAX_PENDING_DEPTH
    finally:
        release.set()
        thread.join()
