"""Known plans: a forward replay's result is realized without walking its history.

Once a replayed structure's plan is learned, realizing a replay's result picks the plan's inputs
from the values the replay read. It must give what the walk would have given, bitwise, and must
let the walk run whenever the walk could find something else: a pending argument, a value given
twice, a changed weight, another executor, dropped caches.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.runtime import realization
from onnxnn.runtime.fastpath import known_plans


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


@pytest.fixture
def walks(monkeypatch) -> list:
    """Counts the planning walks realizations make (one entry per walk)."""
    counted: list = []
    for module in (realization, known_plans):
        walk = module.plan

        def counting(*args, walk=walk, **kwargs):
            counted.append(args)
            return walk(*args, **kwargs)

        monkeypatch.setattr(module, "plan", counting)
    return counted


def _mlp() -> nn.Module:
    onnxnn.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4)).eval()


def _plain(module, *args) -> np.ndarray:
    """What recording the forward gives (no replay, no known plan)."""
    with onnxnn.set_fast_path(False), onnxnn.no_grad():
        return module(*args).numpy()


def _settle(module, *args, calls: int = 12) -> None:
    """Calls until the structure is traced, its plan learned and its session settled."""
    with onnxnn.no_grad():
        for _ in range(calls):
            module(*args).numpy()


@pytest.mark.parametrize("batch", [1, 64])
def test_a_settled_replay_is_realized_without_a_walk_and_bitwise_as_recorded(walks, batch):
    module = _mlp()
    inputs = [onnxnn.randn(batch, 12) for _ in range(4)]
    _settle(module, inputs[0])
    walks.clear()
    with onnxnn.no_grad():
        results = [module(x).numpy() for x in inputs]
    assert walks == []
    for x, result in zip(inputs, results):
        assert result.tobytes() == _plain(module, x).tobytes()


def test_large_weights_run_their_specialized_session_without_a_walk(walks):
    onnxnn.manual_seed(0)
    module = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)).eval()
    x = onnxnn.randn(32, 256)
    _settle(module, x)
    walks.clear()
    with onnxnn.no_grad():
        result = module(x).numpy()
    assert walks == []
    assert result.tobytes() == _plain(module, x).tobytes()


def test_a_pending_argument_is_planned_with_its_history(walks):
    module = _mlp()
    x = onnxnn.randn(5, 12)
    _settle(module, x)
    walks.clear()
    with onnxnn.no_grad():
        result = module(x * 2 + 1).numpy()
    assert len(walks) == 1
    np.testing.assert_array_equal(result, _plain(module, x * 2 + 1))


def test_changed_weights_are_read_where_they_are_now():
    module = _mlp()
    x = onnxnn.randn(5, 12)
    _settle(module, x)
    before = _plain(module, x)
    bias = module[2].bias.detach().numpy().copy()
    with onnxnn.no_grad():
        module[0].weight.add_(0.5)  # in place, and a pending value until read
        in_place = module(x).numpy()
        module[2].bias.data = onnxnn.ones(16)  # another value: the specialization no longer matches
        replaced = module(x).numpy()
    np.testing.assert_array_equal(replaced, _plain(module, x))
    module[2].bias.data = onnxnn.from_numpy(bias)
    np.testing.assert_array_equal(in_place, _plain(module, x))  # the in-place change, and only it
    assert not np.array_equal(in_place, before)


def test_one_tensor_given_for_two_arguments_after_three_and_back():
    onnxnn.manual_seed(0)
    attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    query, key, value = (onnxnn.randn(2, 3, 8) for _ in range(3))

    def call(*args):
        with onnxnn.no_grad():
            return attention(*args, need_weights=False)[0].numpy()

    def plain(*args):
        with onnxnn.set_fast_path(False), onnxnn.no_grad():
            return attention(*args, need_weights=False)[0].numpy()

    for _ in range(12):
        call(query, key, value)
    for args in [(query, query, query), (query, key, value), (query, key, key), (query, key, value)]:
        assert call(*args).tobytes() == plain(*args).tobytes()


def test_another_executor_and_dropped_caches_walk_again(walks):
    module = _mlp()
    x = onnxnn.randn(5, 12)
    _settle(module, x)
    expected = _plain(module, x)
    for switch in (lambda: onnxnn.set_executor("kernels"), onnxnn.clear_caches):
        switch()
        walks.clear()
        with onnxnn.no_grad():
            result = module(x).numpy()
        assert len(walks) == 1
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)  # float32, 16 terms per sum
    onnxnn.set_executor("auto")


def test_a_replay_returning_several_tensors_is_walked(walks):
    onnxnn.manual_seed(0)
    lstm = nn.LSTM(4, 6, batch_first=True).eval()
    x = onnxnn.randn(2, 3, 4)
    for _ in range(12):
        walks.clear()
        with onnxnn.no_grad():
            output, (hidden, _) = lstm(x)
        np.testing.assert_array_equal(hidden.numpy()[0], output.numpy()[:, -1])
        assert walks  # no known plan: each realization walks


@pytest.fixture
def lookups(monkeypatch) -> list:
    """Counts the known plans' lookups of their entries (``KnownPlan.plan_of``), which a prepared run skips."""
    counted: list = []
    plan_of = known_plans.KnownPlan.plan_of

    def counting(self, *args):
        counted.append(args)
        return plan_of(self, *args)

    monkeypatch.setattr(known_plans.KnownPlan, "plan_of", counting)
    return counted


def _wide_mlp() -> nn.Module:
    """Weights large enough for an inference specialization (their session embeds them)."""
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)).eval()


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("build", [_mlp, _wide_mlp])
def test_a_settled_replay_runs_its_entry_without_looking_it_up_and_bitwise_as_recorded(lookups, executor, build):
    onnxnn.manual_seed(0)
    module = build()
    inputs = [onnxnn.randn(8, module[0].in_features) for _ in range(3)]
    with onnxnn.set_executor(executor):
        for x in inputs * 4:  # (one input given every time would be embedded in the session as a weight)
            _settle(module, x, calls=1)
        lookups.clear()
        with onnxnn.no_grad():
            results = [module(x).numpy() for x in inputs]
        assert lookups == []
        for x, result in zip(inputs, results):
            assert result.tobytes() == _plain(module, x).tobytes()


def test_an_evicted_entry_is_looked_up_and_compiled_again(lookups):
    onnxnn.manual_seed(0)
    module = _wide_mlp()
    x = onnxnn.randn(8, 256)
    with onnxnn.set_executor("onnxruntime"):
        _settle(module, x)
        info = realization.cache_info()
        realization.set_cache_size(0)  # evicts every entry and session: a prepared run must let its entry go
        realization.set_cache_size(info["capacity"])
        lookups.clear()
        with onnxnn.no_grad():
            result = module(x).numpy()
        assert len(lookups) == 1
        assert realization.cache_info()["misses"] > info["misses"]
        # The structure's new entry runs its general session until it is specialized again (its third run).
        assert result.tobytes() == _plain(module, x).tobytes()


def test_two_models_of_one_structure_in_turn_each_run_their_own_specialization(lookups):
    onnxnn.manual_seed(0)
    first, second = _wide_mlp(), _wide_mlp()
    x = onnxnn.randn(8, 256)
    with onnxnn.set_executor("onnxruntime"):
        _settle(first, x)
        _settle(second, x)
        expected = [_plain(first, x), _plain(second, x)]
        assert not np.array_equal(*expected)
        lookups.clear()
        with onnxnn.no_grad():
            for _ in range(3):
                for module, result in zip((first, second), expected):
                    assert module(x).numpy().tobytes() == result.tobytes()
    assert lookups == []
