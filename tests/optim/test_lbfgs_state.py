"""LBFGS's state as PyTorch 2.13 keeps it (tensors, lists of tensors, numbers), so that it saves,
loads and steps on; and its strong Wolfe line search, which spends only what is left of the step's
``max_eval`` closure evaluations (PyTorch passes ``max_ls=max_eval - current_evals``)."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.optim import LBFGS


def _rosenbrock(**options):
    """Two parameters of a Rosenbrock function, their LBFGS, and a closure counting its calls."""
    x = onnxnn.nn.Parameter(onnxnn.tensor([-1.2, 0.5, 1.5], dtype=onnxnn.float64))
    y = onnxnn.nn.Parameter(onnxnn.tensor([1.0, -0.3, 2.0], dtype=onnxnn.float64))
    optimizer = LBFGS([x, y], **options)
    calls = []

    def closure():
        optimizer.zero_grad()
        loss = ((1 - x) ** 2).sum() + 100 * ((y - x**2) ** 2).sum()
        loss.backward()
        calls.append(1)
        return loss

    return (x, y), optimizer, closure, calls


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_the_state_holds_tensors_as_pytorchs(line_search_fn):
    history_size = 4
    _, optimizer, closure, _ = _rosenbrock(max_iter=6, history_size=history_size, line_search_fn=line_search_fn)
    optimizer.step(closure)
    state = optimizer.state_dict()["state"][0]
    for key in ("d", "prev_flat_grad", "H_diag"):
        assert isinstance(state[key], onnxnn.Tensor), key
    assert state["d"].shape == state["prev_flat_grad"].shape == (6,)
    assert state["H_diag"].shape == ()
    assert 0 < len(state["old_dirs"]) == len(state["old_stps"]) == len(state["ro"]) <= history_size
    for key in ("old_dirs", "old_stps", "ro"):
        assert all(isinstance(item, onnxnn.Tensor) for item in state[key]), key
    # The two-loop recursion's buffer: history_size entries, those past the history never written.
    assert len(state["al"]) == history_size
    written = len(state["old_dirs"])
    assert all(isinstance(item, onnxnn.Tensor) and item.shape == () for item in state["al"][:written])
    assert all(item is None for item in state["al"][written:])
    assert isinstance(state["t"], (int, float)) and isinstance(state["prev_loss"], float)
    assert isinstance(state["func_evals"], int) and isinstance(state["n_iter"], int)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_the_state_saves_loads_and_steps_on_as_if_never_saved(tmp_path, line_search_fn):
    options = dict(max_iter=3, history_size=5, line_search_fn=line_search_fn)
    parameters, optimizer, closure, _ = _rosenbrock(**options)
    optimizer.step(closure)
    path = tmp_path / "lbfgs.pt"
    onnxnn.save(optimizer.state_dict(), path)
    resumed_parameters, resumed, resumed_closure, _ = _rosenbrock(**options)
    with onnxnn.no_grad():
        for resumed_parameter, parameter in zip(resumed_parameters, parameters):
            resumed_parameter.copy_(parameter)
    resumed.load_state_dict(onnxnn.load(path))
    optimizer.step(closure)
    resumed.step(resumed_closure)
    for resumed_parameter, parameter in zip(resumed_parameters, parameters):
        np.testing.assert_array_equal(resumed_parameter.detach().numpy(), parameter.detach().numpy())


def test_a_state_of_pytorchs_types_steps():
    # PyTorch's first step length may be a 0-d tensor, its first H_diag the int 1.
    parameters, optimizer, closure, _ = _rosenbrock(max_iter=2)
    optimizer.step(closure)
    state = optimizer.state_dict()
    entry = state["state"][0]
    entry["t"] = onnxnn.tensor(float(entry["t"]), dtype=onnxnn.float64)
    resumed_parameters, resumed, resumed_closure, _ = _rosenbrock(max_iter=2)
    with onnxnn.no_grad():
        for resumed_parameter, parameter in zip(resumed_parameters, parameters):
            resumed_parameter.copy_(parameter)
    resumed.load_state_dict(state)
    resumed.step(resumed_closure)
    optimizer.step(closure)
    for resumed_parameter, parameter in zip(resumed_parameters, parameters):
        np.testing.assert_array_equal(resumed_parameter.detach().numpy(), parameter.detach().numpy())


def test_the_line_search_spends_only_the_steps_remaining_evaluations():
    # max_iter=1 gives max_eval = 1 * 5 // 4 = 1: after the step's first evaluation the line search
    # may take max_eval - 1 = 0 more than its first trial, so every step calls the closure twice.
    _, optimizer, closure, calls = _rosenbrock(lr=0.1, max_iter=1, line_search_fn="strong_wolfe")
    per_step = []
    for _ in range(3):
        before = len(calls)
        optimizer.step(closure)
        per_step.append(len(calls) - before)
    assert per_step == [2, 2, 2]
    assert optimizer.state[optimizer.param_groups[0]["params"][0]]["func_evals"] == 6
