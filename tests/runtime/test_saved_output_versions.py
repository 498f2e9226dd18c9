"""Saved outputs changed in place: PyTorch's version check covers the outputs a gradient rule reads
(``exp``, ``tanh``, ``sigmoid``, ``relu`` ...) as well as the inputs, and raises at backward instead
of computing a gradient from the changed values. Writes that leave the saved output alone pass.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

# Ops whose PyTorch derivative reads the result (derivatives.yaml: exp, tanh, sigmoid, relu).
OPS = {
    "exp": lambda w: w.exp(),
    "tanh": lambda w: w.tanh(),
    "sigmoid": lambda w: w.sigmoid(),
    "relu": lambda w: w.relu(),
}

# In-place writes of the result, directly or through a view of it.
WRITES = {
    "add_": lambda y: y.add_(1.0),
    "setitem": lambda y: y.__setitem__(0, 0.0),
    "view_mul_": lambda y: y[:2].mul_(3.0),
    "no_grad_add_": lambda y: _under_no_grad(lambda: y.add_(1.0)),
}

EXECUTORS = ("kernels", "onnxruntime")


def _under_no_grad(write) -> None:
    with onnxnn.no_grad():
        write()


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_a_saved_output_written_in_place_raises_at_backward(op, write, executor):
    with onnxnn.set_executor(executor):
        w = onnxnn.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = op(w)
        write(y)
        with pytest.raises(RuntimeError, match="modified by an inplace operation.*output 0 of"):
            y.sum().backward()


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_a_replayed_backward_still_checks_its_saved_outputs(op):
    # The same structure, backward after backward, is replayed by the fast path: a write under
    # no_grad leaves that structure as it was and must still be refused.
    for _ in range(6):
        w = onnxnn.tensor([0.5, 1.0, 2.0], requires_grad=True)
        (op(w) * 2).sum().backward()
    w = onnxnn.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = op(w)
    z = y * 2
    _under_no_grad(lambda: y.add_(1.0))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_an_in_place_op_whose_own_result_is_saved_passes():
    # y.exp_() saves its own result, y at its new version: d sum(exp(x)) / dx = exp(x).
    x = onnxnn.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = x * 1
    y.exp_()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0, 2.0]), rtol=4 * np.finfo(np.float32).eps)


def test_a_write_after_the_backward_read_the_output_passes():
    x = onnxnn.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.sum().backward()
    y.detach().zero_()  # the gradient was already computed from the saved output
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0, 2.0]), rtol=4 * np.finfo(np.float32).eps)


def test_an_output_no_rule_reads_may_be_written():
    # Mul's gradient reads its inputs, not its output: writing the product changes nothing it needs.
    x = onnxnn.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = x * 3
    y.add_(1.0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


def test_matches_torch():
    torch = pytest.importorskip("torch")
    w = torch.ones(3, requires_grad=True)
    y = w.exp()
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*output 0 of Exp,"):
        y.sum().backward()
    w = onnxnn.ones(3, requires_grad=True)
    y = w.exp()
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*output 0 of Exp,"):
        y.sum().backward()
