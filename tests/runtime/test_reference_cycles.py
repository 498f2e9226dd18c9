"""A training step leaves no reference cycles: everything it records is freed by reference counting.

Cycles would keep recorded graphs (and the arrays they hold) alive until the cycle collector runs,
and make it run every few steps of a training loop, which costs more than the step's own work.
"""

from __future__ import annotations

import gc

import pytest

import onnxnn
from onnxnn import nn


def _linear_regression_step(model, optimizer, input, target):
    loss = ((model(input) - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


@pytest.mark.parametrize("executor", ["auto", "onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "optimizer_options", [dict(momentum=0.9, weight_decay=0.01), dict()], ids=["momentum", "plain"]
)
def test_training_steps_leave_no_cyclic_garbage(executor, optimizer_options):
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.01, **optimizer_options)
    input, target = onnxnn.randn(8, 4), onnxnn.randn(8, 1)
    with onnxnn.set_executor(executor):
        for _ in range(3):  # compile what the loop needs first
            _linear_regression_step(model, optimizer, input, target)
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(20):
                _linear_regression_step(model, optimizer, input, target)
            assert gc.collect() == 0
        finally:
            if was_enabled:
                gc.enable()
