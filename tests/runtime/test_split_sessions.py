"""A session cut around compiled nodes (runtime/split_sessions.py) returns what one session would.

A plan whose convolutions' weight gradients the compiled loop takes runs in stages: a first session,
the loops (on as many threads as the sessions), and a second session for what reads their results (an optimizer's update
recorded in the same step). Values are checked against float64 formulas with bounds from the sums'
lengths, and against the same plan run as one session.
"""

from __future__ import annotations

import os
import select
import signal
import threading

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.ir.conv_weight_gradient import OP_TYPE
from onnxnn.ir.domains import ONNXNN_DOMAIN
from onnxnn.ir.executors import executor
from onnxnn.kernels import compiled_convolutions
from onnxnn.runtime.fastpath import plan_cache
from onnxnn.runtime.realization import realize
from onnxnn.runtime import split_sessions
from onnxnn.runtime.split_sessions import SplitSession
from onnxnn.runtime.tensor import apply_op

from tolerances import assert_within, gamma

pytestmark = pytest.mark.skipif(
    not compiled_convolutions.available(), reason=f"{compiled_convolutions.unavailable_reason()}"
)


def _runners() -> list:
    """The runners the plans compiled (on onnxruntime: the ``one_thread`` and ``two_threads`` fixtures)."""
    return list(executor("onnxruntime").cache.sessions.values())


def _weight_gradient(x, g):
    """ConvWeightGradient of a 3x3 convolution with padding 1, recorded as the node."""
    attrs = {"kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [1, 1, 1, 1]}
    return apply_op(OP_TYPE, (x, g), attrs, "ConvolutionBackward0", domain=ONNXNN_DOMAIN)


def _formula(x, g):
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    height, width = g.shape[2:]
    taps = [
        [np.einsum("nmhw,nchw->mc", g, padded[:, :, i : i + height, j : j + width]) for j in range(3)] for i in range(3)
    ]
    return np.stack([np.stack(row, axis=-1) for row in taps], axis=-2)


def _bound(x, g):
    return gamma(x.shape[0] * g.shape[2] * g.shape[3]) * _formula(np.abs(x), np.abs(g))


def _arrays(rng, batch=2, channels=8, out_channels=6, size=7):
    x = rng.standard_normal((batch, channels, size, size)).astype(np.float32)
    g = rng.standard_normal((batch, out_channels, size, size)).astype(np.float32)
    return x, g


def test_what_reads_a_compiled_result_runs_in_a_second_session(one_thread):
    rng = np.random.default_rng(0)
    x, g = _arrays(rng)
    x_tensor, g_tensor = onnxnn.tensor(x), onnxnn.tensor(g)
    # Computed before the weight gradient (its input), from it, and beside it from the same input.
    relu = (x_tensor * 2.0).relu()
    doubled = _weight_gradient(relu, g_tensor) * 2.0 + 1.0
    beside = relu.sum()
    realize([doubled._value, beside._value, relu._value])
    # A session computing relu (and beside), the loop, a session reading its result.
    assert [(runner.sessions, runner.compiled) for runner in _runners() if isinstance(runner, SplitSession)] == [(2, 1)]
    relu_expected = np.maximum(x * 2.0, 0)
    np.testing.assert_array_equal(relu.numpy(), relu_expected)
    assert_within(beside.item(), relu_expected.astype(np.float64).sum(), gamma(x.size) * np.abs(relu_expected).sum())
    bound = 2 * _bound(relu_expected, g) + 4 * np.finfo(np.float32).eps * np.abs(_formula(relu_expected, g)) + 1e-7
    assert_within(doubled.numpy(), _formula(relu_expected, g) * 2.0 + 1.0, bound)


def test_a_weight_gradient_read_by_another_runs_after_it(one_thread):
    rng = np.random.default_rng(1)
    x, g = _arrays(rng)
    first = _weight_gradient(onnxnn.tensor(x), onnxnn.tensor(g))  # (6, 8, 3, 3)
    # Read as a batch of 6 samples of 8 channels on 3x3 "images" by a second weight gradient.
    h = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    second = _weight_gradient(first, onnxnn.tensor(h))
    result = second.numpy()
    # Levels: the first loop reads the plan's inputs, the second the first's result; no session.
    assert [(runner.sessions, runner.compiled) for runner in _runners() if isinstance(runner, SplitSession)] == [(0, 2)]
    first_expected = _formula(x, g)
    # The first result's own rounding, carried through the second sum, plus the second sum's.
    carried = _formula(_bound(x, g), np.abs(h)) + _formula(np.abs(first_expected), np.abs(h)) * gamma(9)
    assert_within(result, _formula(first_expected, h), 2 * carried)


def test_the_loops_use_as_many_threads_as_the_sessions(two_threads):
    rng = np.random.default_rng(2)
    x, g = _arrays(rng, batch=8, channels=16, out_channels=16, size=32)  # enough work for two threads
    result = _weight_gradient(onnxnn.tensor(x), onnxnn.tensor(g)).numpy()
    assert [runner.threads for runner in _runners() if isinstance(runner, SplitSession)] == [2]
    assert_within(result, _formula(x, g), _bound(x, g))


def test_a_training_step_with_its_update_in_the_plan_runs_the_update_after_the_loop(one_thread):
    # loss = sum(conv(x, w) * target): the weight's gradient is the weight gradient of x and target,
    # and SGD's update (in the same plan as the backward, as a small model's step records it) reads it.
    rng = np.random.default_rng(3)
    x, target = _arrays(rng)
    layer = nn.Conv2d(8, 6, 3, padding=1, bias=False)
    before = layer.weight.detach().numpy().copy()
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    (layer(onnxnn.tensor(x)) * onnxnn.tensor(target)).sum().backward()
    optimizer.step()
    assert any(isinstance(runner, SplitSession) and runner.sessions == 2 for runner in _runners())
    gradient = layer.weight.grad.numpy()
    assert_within(gradient, _formula(x, target), _bound(x, target))
    # The first step with momentum moves by lr * gradient: two roundings in float32.
    step = np.float32(0.1) * gradient
    expected = before.astype(np.float64) - step
    assert_within(layer.weight.detach().numpy(), expected, np.finfo(np.float32).eps * (np.abs(before) + np.abs(step)))


def test_a_specialized_session_gives_the_general_ones_values(one_thread):
    # The same large inputs run after run: the entry then embeds them in a session of its own
    # (plan_cache.Specialization), cut around the loop like the general one, so the values do not
    # change when it takes over.
    rng = np.random.default_rng(4)
    x, g = _arrays(rng, batch=8, channels=16, out_channels=16, size=8)
    x_tensor, g_tensor = onnxnn.tensor(x), onnxnn.tensor(g)
    runs = plan_cache.SPECIALIZE_AFTER_RUNS + 3
    results = [_weight_gradient(x_tensor, g_tensor).numpy() for _ in range(runs)]
    specializations = [entry.specialization for entry in plan_cache._entries["onnxruntime"].values()]
    assert any(isinstance(found.session, SplitSession) for found in specializations if found is not None)
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
    assert_within(results[0], _formula(x, g), _bound(x, g))


def test_a_depthwise_convolutions_weight_gradient_runs_as_its_loop(one_thread):
    # A depthwise Conv2d's (groups = channels) weight gradient is the node with a group attribute,
    # which the depthwise loop takes at any channel count (here 96, past the ungrouped loop's 64).
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 96, 9, 9)).astype(np.float32)
    conv = nn.Conv2d(96, 96, 3, padding=1, groups=96, bias=False)
    y = conv(onnxnn.tensor(x))
    g = rng.standard_normal(y.shape).astype(np.float32)
    (y * onnxnn.tensor(g)).sum().backward()
    grad = conv.weight.grad.numpy()
    assert [runner.compiled for runner in _runners() if isinstance(runner, SplitSession)] == [1]
    expected = np.concatenate([_formula(x[:, c : c + 1], g[:, c : c + 1]) for c in range(96)])
    bound = np.concatenate([_bound(x[:, c : c + 1], g[:, c : c + 1]) for c in range(96)])
    assert_within(grad, expected, bound)


def test_the_sessions_of_a_cut_plan_share_one_arena_and_a_whole_plans_keeps_its_own(one_thread):
    # The shared arena makes the buffers one session frees the next one's (runtime/sessions.py).
    rng = np.random.default_rng(6)
    x, g = _arrays(rng)
    relu = (onnxnn.tensor(x) * 2.0).relu()
    (_weight_gradient(relu, onnxnn.tensor(g)) * 2.0).numpy()
    (onnxnn.tensor(x) + 1.0).numpy()  # a plan with no compiled node: one session

    def shares_the_arena(session) -> bool:
        try:
            entry = session.session.get_session_options().get_session_config_entry("session.use_env_allocators")
        except RuntimeError:  # onnxruntime raises for an entry never set
            return False
        return entry == "1"

    cut = [runner for runner in _runners() if isinstance(runner, SplitSession)]
    parts = [run for runner in cut for run, _, is_session, _ in runner.stages if is_session]
    whole = [runner for runner in _runners() if not isinstance(runner, SplitSession)]
    assert len(parts) == 2 and all(shares_the_arena(part) for part in parts)
    assert whole and not any(shares_the_arena(runner) for runner in whole)


@pytest.mark.parametrize("chained", [False, True])
def test_the_sessions_of_a_cut_plan_take_the_whole_plans_threads(chained, two_threads):
    # Their inputs have no recorded sizes: the threads come from the whole plan's work estimate. Past
    # two sessions their pools do not spin (each would take the cores from the next).
    rng = np.random.default_rng(7)
    x, g = _arrays(rng, batch=32, channels=16, out_channels=16, size=32)
    result = _weight_gradient((onnxnn.tensor(x) * 2.0).relu(), onnxnn.tensor(g)) * 2.0
    if chained:  # a second loop reading the first's result: three sessions
        second = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
        result = _weight_gradient(result, onnxnn.tensor(second)) * 3.0
    result.numpy()
    (runner,) = [runner for runner in _runners() if isinstance(runner, SplitSession)]
    parts = [run.session for run, _, is_session, _ in runner.stages if is_session]
    assert len(parts) == (3 if chained else 2)
    assert all(part.get_session_options().intra_op_num_threads == 2 for part in parts)

    def spins(part) -> bool:
        try:
            return part.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") != "0"
        except RuntimeError:  # never set: onnxruntime's default, spinning
            return True

    assert [spins(part) for part in parts] == [not chained] * len(parts)


def test_a_view_read_after_a_compiled_node_is_repeated_rather_than_returned(one_thread):
    # The first session returns what the loop reads (relu), not the reshaped input: the second session
    # reshapes the input itself (a returned view is copied at every run).
    rng = np.random.default_rng(8)
    x, g = _arrays(rng)
    x_tensor = onnxnn.tensor(x)
    relu = (x_tensor * 2.0).relu()
    result = _weight_gradient(relu, onnxnn.tensor(g)).sum() + x_tensor.reshape(-1)
    values = result.numpy()
    (runner,) = [runner for runner in _runners() if isinstance(runner, SplitSession)]
    first = runner.stages[0][0]
    assert len(first.output_names) == 1  # relu, which the loop reads (and the Tensor holds)
    gradient = _formula(np.maximum(x * 2.0, 0), g)
    expected = gradient.sum() + x.reshape(-1).astype(np.float64)
    magnitude = np.abs(gradient).sum() + np.abs(x.reshape(-1))
    bound = _bound(np.maximum(x * 2.0, 0), g).sum() + gamma(gradient.size + 1) * magnitude
    assert_within(values, expected, bound)


def _beside_plan(rng):
    """Three weight gradients: ``a`` of the plan's inputs, read only by the sum at the end; ``b``, whose
    double a second level's loop ``d`` reads. Stages: a session (relu), the loops a and b, a session
    (b * 2), the loop d, a session (the sum, which reads a and d)."""
    x, g = _arrays(rng)
    h = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    x_tensor, g_tensor = onnxnn.tensor(x), onnxnn.tensor(g)
    a = _weight_gradient((x_tensor * 2.0).relu(), g_tensor)
    b = _weight_gradient(x_tensor, g_tensor)
    d = _weight_gradient(b * 2.0, onnxnn.tensor(h))
    return a.sum() + d.sum(), (x, g, h)


def _recorded_runs(monkeypatch) -> list:
    """The inputs and results of every SplitSession run from now on."""
    runs: list = []
    original = SplitSession.__call__

    def call(self, inputs):
        results = original(self, inputs)
        runs.append((self, list(inputs), results))
        return results

    monkeypatch.setattr(SplitSession, "__call__", call)
    return runs


def test_on_two_threads_a_loop_read_only_after_a_later_session_runs_beside_it(two_threads, monkeypatch):
    runs = _recorded_runs(monkeypatch)
    total, (x, g, h) = _beside_plan(np.random.default_rng(9))
    value = total.item()
    ((runner, inputs, results),) = runs
    # The sum moved to the last session, so a's loop (the first compiled stage) runs beside the
    # session computing b * 2; b's and d's results are read by the very next stage.
    kinds = [is_session for _, _, is_session, _ in runner.stages]
    assert kinds == [True, False, False, True, False, True]
    assert runner.beside == {1: 1}
    a = _formula(np.maximum(x * 2.0, 0), g)
    b = _formula(x, g)
    d = _formula(b * 2.0, h)
    carried = _formula(2 * _bound(x, g), np.abs(h)) + _formula(np.abs(2 * b), np.abs(h)) * gamma(9)
    bound = (
        _bound(np.maximum(x * 2.0, 0), g).sum()
        + 2 * carried.sum()
        + gamma(a.size + d.size) * (np.abs(a).sum() + np.abs(d).sum())
    )
    assert_within(value, a.sum() + d.sum(), bound)
    # It runs on the side thread; the same stages run one after another give the same bits.
    run, slots, is_session, position = runner.stages[1]
    threads_used: list = []

    def noting_its_thread(feeds, threads):
        threads_used.append(threading.current_thread())
        return run(feeds, threads)

    runner.stages[1] = (noting_its_thread, slots, is_session, position)
    runner(inputs)
    assert threads_used and threads_used[0] is not threading.main_thread()
    runner.beside = {}
    for beside, serial in zip(results, runner(inputs)):
        np.testing.assert_array_equal(beside, serial)


def test_on_one_thread_every_stage_runs_in_turn(one_thread):
    _beside_plan(np.random.default_rng(10))[0].numpy()
    (runner,) = [runner for runner in _runners() if isinstance(runner, SplitSession)]
    assert runner.beside == {}
    # The sum of a stays where it can first run, in the session after the first loops.
    assert [is_session for _, _, is_session, _ in runner.stages] == [True, False, False, True, False, True]


def test_an_error_beside_the_sessions_reaches_the_caller_after_every_stage_stopped(two_threads, monkeypatch):
    runs = _recorded_runs(monkeypatch)
    _beside_plan(np.random.default_rng(11))[0].numpy()
    ((runner, inputs, _),) = runs
    (index,) = runner.beside
    _, slots, is_session, position = runner.stages[index]

    def failing(feeds, threads):
        raise RuntimeError("the loop failed")

    runner.stages[index] = (failing, slots, is_session, position)
    with pytest.raises(RuntimeError, match="the loop failed"):
        runner(inputs)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_forked_child_runs_loops_beside_its_sessions_on_a_thread_of_its_own(two_threads):
    # The parent's side thread exists; a forked child has none and must start its own.
    expected = _beside_plan(np.random.default_rng(12))[0].item()
    assert split_sessions._BESIDE
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: the same plan again, then its verdict through the pipe
        try:
            same = _beside_plan(np.random.default_rng(12))[0].item() == expected
            os.write(write_end, b"ok" if same else b"no")
        finally:
            os._exit(0)
    os.close(write_end)
    finished, _, _ = select.select([read_end], [], [], 60)  # a child waiting on a missing thread never ends
    verdict = os.read(read_end, 2) if finished else b""
    if not verdict:
        os.kill(child, signal.SIGKILL)
    _, status = os.waitpid(child, 0)
    assert verdict == b"ok" and status == 0


def test_a_held_view_repeated_in_a_later_session_keeps_its_one_slot(one_thread):
    # The view is an output of the first session (a Tensor holds it) and is repeated in the second,
    # which reads it beside the loop's result: only the first returns it, so every later slot stays
    # where the runner looks for it.
    rng = np.random.default_rng(13)
    x, g = _arrays(rng)
    x_tensor = onnxnn.tensor(x)
    view = (x_tensor[:, :, :3, :3] * 3.0).reshape(-1)
    total = _weight_gradient((x_tensor * 2.0).relu(), onnxnn.tensor(g)).reshape(-1)[: view.shape[0]] + view
    realize([total._value, view._value])
    (runner,) = [runner for runner in _runners() if isinstance(runner, SplitSession)]
    assert runner.sessions == 2
    view_expected = (x[:, :, :3, :3] * np.float32(3.0)).reshape(-1)
    np.testing.assert_array_equal(view.numpy(), view_expected)
    gradient = _formula(np.maximum(x * 2.0, 0), g).reshape(-1)[: view_expected.size]
    bound = _bound(np.maximum(x * 2.0, 0), g).reshape(-1)[: view_expected.size]
    bound = bound + np.finfo(np.float32).eps * np.abs(gradient + view_expected)
    assert_within(total.numpy(), gradient + view_expected, bound)
