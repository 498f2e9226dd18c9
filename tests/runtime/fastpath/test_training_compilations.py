"""A training loop compiles its step's graph once.

A large model's step is a graph of thousands of nodes, and onnxruntime takes seconds to build its
session (resnet152's: 9 s), so every graph a loop compiles beyond the one it runs is time its user
waits for nothing. Two ways a loop compiled more: the model's initialization (``zeros_``, ``ones_``,
BatchNorm's running statistics) left fills pending that ran in the first step, whose graph then
differed from every later one's; and the scalars every step feeds unchanged (the learning rate, the
loss's ignore_index) made the step a candidate for a specialization embedding them.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.runtime import realization as executor
from onnxnn.runtime.fastpath import plan_cache


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()  # sessions, plan entries and traced backwards, with their counters
    yield
    onnxnn.clear_caches()


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


def test_fills_of_a_realized_tensor_leave_nothing_pending():
    buffer = onnxnn.randn(4, 5)
    for fill, expected in [(lambda t: t.fill_(2.5), 2.5), (lambda t: t.zero_(), 0.0), (nn.init.ones_, 1.0)]:
        fill(buffer)
        assert buffer._value.data is not None  # realized: a later graph reads it, computes nothing for it
        np.testing.assert_array_equal(buffer.numpy(), np.full((4, 5), expected, np.float32))


def test_plain_sgd_steps_on_fresh_batches_compile_one_graph():
    model = _model().train()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    batch = 32  # inputs that change enough for a specialization of small unchanged ones to be weighed
    assert batch * 3 * 32 * 32 >= plan_cache.SPECIALIZE_MIN_RUN_ELEMENTS
    with onnxnn.set_executor("onnxruntime"):
        for _ in range(plan_cache.SPECIALIZE_AFTER_RUNS + 3):
            x = onnxnn.from_numpy(rng.standard_normal((batch, 3, 32, 32)).astype(np.float32))
            target = onnxnn.from_numpy(rng.integers(0, 10, batch))
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), target)
            loss.backward()
            optimizer.step()
            assert np.isfinite(float(loss))
    assert executor.cache_info()["misses"] == 1
    entries = list(plan_cache._entries["onnxruntime"].values())
    assert entries and all(entry.specialization is None for entry in entries)
