"""LBFGS: PyTorch's algorithm (two-loop recursion, strong Wolfe line search) on smooth problems.

Without torch: it minimizes the Rosenbrock function (minimum 0 at (1, 1)) and an ill-conditioned
quadratic whose minimizer numpy solves exactly; with torch installed, its iterates equal
torch.optim.LBFGS's step by step in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn


def _rosenbrock(xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x**2) ** 2


def _minimize(loss_of, start, steps, **options):
    parameter = onnxnn.nn.Parameter(onnxnn.tensor(np.array(start, dtype=np.float64)))
    optimizer = onnxnn.optim.LBFGS([parameter], **options)

    def closure():
        optimizer.zero_grad()
        loss = loss_of(parameter)
        loss.backward()
        return loss

    trajectory = []
    for _ in range(steps):
        optimizer.step(closure)
        trajectory.append(parameter.detach().numpy().copy())
    return np.array(trajectory), optimizer


@pytest.mark.parametrize("line_search_fn", ["strong_wolfe", None])
def test_minimizes_the_rosenbrock_function(line_search_fn):
    lr = 1.0 if line_search_fn else 0.1
    trajectory, optimizer = _minimize(_rosenbrock, [-1.5, 2.0], 15, lr=lr, line_search_fn=line_search_fn)
    final = trajectory[-1]
    if line_search_fn:
        # The iterations stop once the loss changes by less than tolerance_change (1e-9): the loss is
        # then within about that of its minimum 0, and the point within sqrt(loss / smallest curvature
        # ~ 0.4) of (1, 1).
        assert _rosenbrock(final) < 1e-9
        np.testing.assert_allclose(final, [1.0, 1.0], atol=1e-4)
    else:  # fixed steps converge slower; they must still descend a long way
        assert _rosenbrock(final) < 1e-2 * _rosenbrock(np.array([-1.5, 2.0]))
    state = optimizer.state[optimizer.param_groups[0]["params"][0]]
    assert state["func_evals"] >= state["n_iter"] >= 15


def test_solves_a_quadratic_to_its_exact_minimizer():
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    matrix = basis @ np.diag([1, 2, 5, 10, 50, 100.0]) @ basis.T
    vector = rng.standard_normal(6)
    a, b = onnxnn.tensor(matrix), onnxnn.tensor(vector)
    trajectory, _ = _minimize(lambda x: 0.5 * (x @ (a @ x)) - b @ x, np.zeros(6), 3, line_search_fn="strong_wolfe")
    solution = np.linalg.solve(matrix, vector)
    # Stopped by tolerance_change = 1e-9 on the loss: the excess loss 0.5 e^T A e is about that small,
    # so the error e is within sqrt(2e-9 / smallest eigenvalue 1) < 1e-4.
    error = trajectory[-1] - solution
    assert 0.5 * error @ matrix @ error < 1e-8
    np.testing.assert_allclose(trajectory[-1], solution, atol=1e-4)


def test_errors():
    parameter = onnxnn.nn.Parameter(onnxnn.zeros(2))
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        onnxnn.optim.LBFGS([{"params": [parameter]}, {"params": [onnxnn.nn.Parameter(onnxnn.zeros(1))]}])
    with pytest.raises(ValueError, match="Invalid learning rate"):
        onnxnn.optim.LBFGS([parameter], lr=-1)
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        onnxnn.optim.LBFGS([parameter], line_search_fn="armijo").step(lambda: parameter.sum())
    with pytest.raises(RuntimeError, match="LBFGS requires a closure"):
        onnxnn.optim.LBFGS([parameter]).step(None)


@pytest.mark.parametrize("line_search_fn", ["strong_wolfe", None])
def test_iterates_equal_torch(line_search_fn):
    torch = pytest.importorskip("torch")
    ours, _ = _minimize(_rosenbrock, [-1.5, 2.0], 6, lr=0.5, history_size=3, line_search_fn=line_search_fn)
    parameter = torch.nn.Parameter(torch.tensor([-1.5, 2.0], dtype=torch.float64))
    optimizer = torch.optim.LBFGS([parameter], lr=0.5, history_size=3, line_search_fn=line_search_fn)

    def closure():
        optimizer.zero_grad()
        loss = _rosenbrock(parameter)
        loss.backward()
        return loss

    theirs = []
    for _ in range(6):
        optimizer.step(closure)
        theirs.append(parameter.detach().numpy().copy())
    # The same float64 algorithm; the losses round differently (onnxruntime's kernels against
    # PyTorch's), and a stop decided by tolerance_change = 1e-9 on the loss can then come one
    # iteration apart, a step of at most about sqrt(1e-9) near the minimum.
    np.testing.assert_allclose(ours, np.array(theirs), rtol=0, atol=1e-4)
    # Far from the minimum no stop is near its threshold: the first steps agree to rounding.
    np.testing.assert_allclose(ours[:2], np.array(theirs[:2]), rtol=1e-7)
