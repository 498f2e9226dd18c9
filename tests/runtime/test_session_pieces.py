"""A session of more than ``MOST_SESSION_NODES`` nodes runs as pieces, one after another
(runtime/split_sessions.py), in a plan cut around compiled nodes or on one thread, and returns what
the one session would.

onnxruntime builds a session in time superlinear in its nodes; the pieces only add values passed
from one to the next, and a value the later pieces no longer read is dropped as soon as its last
reader has run.
"""

from __future__ import annotations

import copy
import weakref

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.ir.executors import executor
from onnxnn.runtime import split_sessions
from onnxnn.runtime.realization import clear_cache
from onnxnn.runtime.split_sessions import SplitSession

from tolerances import gamma


def _runners() -> list:
    return list(executor("onnxruntime").cache.sessions.values())


@pytest.fixture
def parts(monkeypatch) -> list:
    """The node count of every piece (or session between compiled nodes) a cut plan compiles from now on,
    the view ops left out (a piece repeats those whose results it reads, rather than copy them)."""
    counts: list = []
    original = split_sessions._part

    def counting(model, nodes, *arguments):
        counts.append(sum(node.op_type not in split_sessions._VIEW_OPS for node in nodes))
        return original(model, nodes, *arguments)

    monkeypatch.setattr(split_sessions, "_part", counting)
    return counts


def _chain(x: onnxnn.Tensor, links: int) -> onnxnn.Tensor:
    """``links`` rounds of tanh(0.9 y + 0.1 x): three nodes each, every round reading the input again,
    so that the input crosses into every piece."""
    y = x
    for _ in range(links):
        y = (y * 0.9 + x * 0.1).tanh()
    return y


def _chain_formula(x: np.ndarray, links: int) -> np.ndarray:
    y = x.astype(np.float64)
    for _ in range(links):
        y = np.tanh(y * 0.9 + x.astype(np.float64) * 0.1)
    return y


def test_a_large_session_without_compiled_nodes_runs_in_pieces_of_at_most_the_bound(one_thread, monkeypatch, parts):
    monkeypatch.setattr(split_sessions, "MOST_SESSION_NODES", 30)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    links = 40
    pieces = _chain(onnxnn.tensor(x), links).numpy()
    (runner,) = _runners()
    assert isinstance(runner, SplitSession) and runner.compiled == 0
    assert runner.sessions == len(parts) >= 4 and max(parts) <= 30
    # Each round: three roundings in float32, and tanh contracts what came before (|tanh'| <= 1).
    np.testing.assert_allclose(pieces, _chain_formula(x, links), rtol=0, atol=links * 4 * gamma(1))
    clear_cache()
    monkeypatch.setattr(split_sessions, "MOST_SESSION_NODES", 10**9)
    whole = _chain(onnxnn.tensor(x), links).numpy()
    assert not any(isinstance(found, SplitSession) for found in _runners())
    np.testing.assert_array_equal(pieces, whole)  # the same kernels on the same values


def test_on_two_threads_a_session_between_no_compiled_nodes_stays_whole(two_threads, monkeypatch):
    # Pieces on more than one thread would each keep a spinning pool, taking the cores from the next.
    monkeypatch.setattr(split_sessions, "MOST_SESSION_NODES", 30)
    _chain(onnxnn.tensor(np.ones((2, 3), np.float32)), 40).numpy()
    assert not any(isinstance(found, SplitSession) for found in _runners())


def test_a_session_within_the_bound_stays_one_session(one_thread, monkeypatch):
    monkeypatch.setattr(split_sessions, "MOST_SESSION_NODES", 1000)
    _chain(onnxnn.tensor(np.ones((2, 3), np.float32)), 40).numpy()
    assert not any(isinstance(found, SplitSession) for found in _runners())


def _small_network() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )


def _gradients_after_a_step(model: nn.Module, x: np.ndarray, target: np.ndarray) -> dict:
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(onnxnn.tensor(x)), onnxnn.tensor(target)).backward()
    optimizer.step()
    return {name: parameter.grad.numpy() for name, parameter in model.named_parameters()}


def test_a_training_step_cut_into_pieces_gives_the_gradients_of_one_session(one_thread, monkeypatch, parts):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    target = np.array([1, 3])
    model = _small_network()
    twin = copy.deepcopy(model)
    monkeypatch.setattr(split_sessions, "MOST_SESSION_NODES", 10**9)
    whole = _gradients_after_a_step(model, x, target)
    whole_parts = list(parts)
    clear_cache()
    parts.clear()
    monkeypatch.setattr(split_sessions, "MOST_SESSION_NODES", 20)
    pieces = _gradients_after_a_step(twin, x, target)
    assert len(parts) > len(whole_parts) and max(parts) <= 20
    # Only the sessions' boundaries differ (onnxruntime may fuse a node pair in one and not the other):
    # a weight gradient sums batch x height x width products, twice over through the network.
    terms = 2 * (x.shape[0] * x.shape[2] * x.shape[3] * 8 * 9)
    for name, gradient in whole.items():
        np.testing.assert_allclose(
            pieces[name], gradient, rtol=0, atol=gamma(terms) * np.abs(gradient).max(), err_msg=name
        )
    for (name, parameter), (_, twin_parameter) in zip(model.named_parameters(), twin.named_parameters()):
        np.testing.assert_allclose(
            twin_parameter.detach().numpy(), parameter.detach().numpy(), rtol=gamma(terms), atol=1e-7, err_msg=name
        )


class _Tracked(np.ndarray):
    """An array a weak reference can follow (numpy's own arrays take none)."""


def test_a_value_no_later_stage_reads_is_dropped_once_its_last_reader_ran():
    references: list = []
    alive_at_the_last_stage: list = []

    def first(feeds):
        return [(feeds[0] + 1).view(_Tracked)]

    def second(feeds):
        references.append(weakref.ref(feeds[0]))
        return [feeds[0] * 2]

    def third(feeds):
        alive_at_the_last_stage.append(references[0]() is not None)
        return [feeds[0] + feeds[1]]

    # Slots: 0 the input, 1 first's result (read only by second), 2 second's, 3 third's (returned).
    stages = [(first, [0], True, None), (second, [1], True, None), (third, [0, 2], True, None)]
    (result,) = SplitSession(stages, 1, [3], [])([np.arange(3.0)])
    np.testing.assert_array_equal(result, np.arange(3.0) + (np.arange(3.0) + 1) * 2)
    assert alive_at_the_last_stage == [False]
