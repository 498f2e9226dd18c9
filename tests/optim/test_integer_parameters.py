"""Optimizer steps refuse integer and bool parameters, as PyTorch's do.

An integer tensor cannot require grad, so only a ``.grad`` assigned by hand gets one to a step. Its
update would be truncated (``5 - 0.5`` stays 5), overflow or be lost; PyTorch's steps raise in
their first op that casts a float result into it ("result type Float can't be cast to the desired
output type Long"). onnxnn raises that RuntimeError before any group's state changes.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn import optim

OPTIMIZERS = [
    ("SGD", {"lr": 0.5}),
    ("SGD", {"lr": 0.5, "momentum": 0.9}),
    ("Adam", {"lr": 0.5}),
    ("AdamW", {"lr": 0.5}),
    ("Adagrad", {"lr": 0.5}),
    ("Adadelta", {"lr": 0.5}),
    ("Adamax", {"lr": 0.5}),
    ("ASGD", {"lr": 0.5}),
    ("NAdam", {"lr": 0.5}),
    ("RAdam", {"lr": 0.5}),
    ("RMSprop", {"lr": 0.5}),
    ("Rprop", {"lr": 0.5}),
    ("Adafactor", {"lr": 0.5}),
    ("Muon", {"lr": 0.5}),
]

INTEGER_DTYPES = [(onnxnn.int64, "Long"), (onnxnn.int32, "Int"), (onnxnn.bool, "Bool")]


def _state_snapshot(optimizer) -> dict:
    return {
        id(param): {
            key: np.array(value.tolist()) if isinstance(value, onnxnn.Tensor) else value for key, value in s.items()
        }
        for param, s in optimizer.state.items()
    }


@pytest.mark.parametrize("dtype, name", INTEGER_DTYPES, ids=lambda value: str(value))
@pytest.mark.parametrize("optimizer_name, settings", OPTIMIZERS, ids=lambda value: str(value))
def test_a_step_of_an_integer_parameter_with_a_gradient_raises_before_changing_anything(
    optimizer_name, settings, dtype, name
):
    weights = onnxnn.tensor([[0.25, -1.0, 2.0]], requires_grad=True)  # stepped before it in PyTorch
    integers = onnxnn.ones(1, 3, dtype=dtype)
    optimizer = getattr(optim, optimizer_name)([{"params": [weights]}, {"params": [integers]}], **settings)
    weights.grad = onnxnn.tensor([[1.0, 1.0, 1.0]])
    integers.grad = onnxnn.ones(1, 3, dtype=dtype)
    state_before = _state_snapshot(optimizer)

    with pytest.raises(RuntimeError, match=f"result type Float can't be cast to the desired output type {name}"):
        optimizer.step()

    assert weights.tolist() == [[0.25, -1.0, 2.0]]
    assert integers.tolist() == onnxnn.ones(1, 3, dtype=dtype).tolist()
    state_after = _state_snapshot(optimizer)
    assert state_after.keys() == state_before.keys()
    for key, entries in state_before.items():
        for entry, value in entries.items():
            np.testing.assert_array_equal(state_after[key][entry], value)


@pytest.mark.parametrize("optimizer_name, settings", OPTIMIZERS[:3], ids=lambda value: str(value))
def test_an_integer_parameter_without_a_gradient_is_skipped(optimizer_name, settings):
    weights = onnxnn.tensor([[0.5, 1.0]], requires_grad=True)
    counter = onnxnn.tensor([[7, 7]])  # no gradient: left alone, as any parameter without one
    optimizer = getattr(optim, optimizer_name)([weights, counter], **settings)
    weights.grad = onnxnn.tensor([[1.0, 1.0]])
    optimizer.step()
    assert counter.tolist() == [[7, 7]]
    assert weights.tolist() != [[0.5, 1.0]]


def test_lbfgs_refuses_an_integer_parameter_its_closure_gave_a_gradient():
    integers = onnxnn.tensor([5, 5, 5])
    optimizer = optim.LBFGS([integers], lr=0.5)

    def closure():
        integers.grad = onnxnn.tensor([1, 1, 1])
        return onnxnn.tensor(1.0)

    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        optimizer.step(closure)
    assert integers.tolist() == [5, 5, 5]
