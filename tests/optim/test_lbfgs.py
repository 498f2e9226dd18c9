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
    armijo = onnxnn.optim.LBFGS([parameter], line_search_fn="armijo")

    def descending():  # a nonzero gradient: the step reaches its line search
        armijo.zero_grad()
        loss = (parameter - 1).square().sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        armijo.step(descending)
    with pytest.raises(TypeError, match="'NoneType' object is not callable"):  # as PyTorch's: closure() fails
        onnxnn.optim.LBFGS([parameter]).step(None)


@pytest.mark.parametrize("line_search_fn", ["strong_wolfe", None])
@pytest.mark.parametrize("lr", [1.0, 0.5])
def test_a_tensor_lr_is_read_as_its_value(lr, line_search_fn):
    rng = np.random.default_rng(1)
    basis, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    matrix = basis @ np.diag([1, 2, 3, 4.0]) @ basis.T
    vector = rng.standard_normal(4)
    a, b = onnxnn.tensor(matrix), onnxnn.tensor(vector)
    trajectory, optimizer = _minimize(
        lambda x: 0.5 * (x @ (a @ x)) - b @ x, np.zeros(4), 5, lr=onnxnn.tensor(lr), line_search_fn=line_search_fn
    )
    np.testing.assert_allclose(trajectory[-1], np.linalg.solve(matrix, vector), atol=1e-4)
    assert isinstance(optimizer.param_groups[0]["lr"], onnxnn.Tensor)


# (start, lr, options, what state["t"] holds after one step) for the loss sum(x**4), gradient 4 x**3:
# PyTorch's first step length is min(1, 1 / |g|_1) * lr, a 0-d tensor where the min picks the
# tensor 1 / |g|_1 or lr is a tensor; later ones are lr itself; an accepted line search trial keeps
# its type.
STEP_LENGTH_CASES = [
    ([3.0, -4.0, 5.0], 0.5, dict(max_iter=1), ("tensor", 0.5 / 864)),
    ([0.1, -0.2, 0.3], 0.5, dict(max_iter=1), ("number", 0.5)),  # |g|_1 = 0.144
    ([0.1, -0.2, 0.3], "tensor 0.5", dict(max_iter=1), ("tensor", 0.5)),
    ([3.0, -4.0, 5.0], 0.5, dict(max_iter=3), ("number", 0.5)),
    ([3.0, -4.0, 5.0], 1, dict(max_iter=1, line_search_fn="strong_wolfe"), ("tensor", 1 / 864)),
]


@pytest.mark.parametrize("start, lr, options, expected", STEP_LENGTH_CASES)
def test_the_saved_step_length_has_pytorchs_type(start, lr, options, expected):
    lr = onnxnn.tensor(0.5) if lr == "tensor 0.5" else lr
    _, optimizer = _minimize(lambda x: (x**4).sum(), start, 1, lr=lr, **options)
    t = optimizer.state_dict()["state"][0]["t"]
    kind, value = expected
    assert isinstance(t, onnxnn.Tensor) if kind == "tensor" else isinstance(t, (int, float))
    np.testing.assert_allclose(float(t), value, rtol=1e-6)


# LBFGS's line search: an unknown one is refused where the step would run it, as PyTorch's.
def _lbfgs_closure(optimizer, param, loss_of):
    def closure():
        optimizer.zero_grad()
        loss = loss_of(param)
        loss.backward()
        return loss

    return closure


def test_lbfgs_with_an_unknown_line_search_returns_where_no_line_search_is_reached():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = onnxnn.optim.LBFGS([param], line_search_fn="foo")
    loss = optimizer.step(_lbfgs_closure(optimizer, param, lambda p: (p * 0).sum()))  # zero gradient: done
    assert loss.item() == 0.0
    assert param.tolist() == [1.0, 2.0]


def test_lbfgs_with_an_unknown_line_search_raises_where_it_would_search():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = onnxnn.optim.LBFGS([param], line_search_fn="foo")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        optimizer.step(_lbfgs_closure(optimizer, param, lambda p: (p * p).sum()))
    assert param.tolist() == [1.0, 2.0]
