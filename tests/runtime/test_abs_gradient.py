"""Abs's gradient is one ``AbsGradient`` node (runtime/ops/abs_gradient.py): ``G * sgn(X)`` with
PyTorch's sgn, 0 at NaN, alike in onnxnn's kernels and in the standard ops onnxruntime runs."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.ops.abs_gradient import abs_gradient

X = [2.5, -1.0, 0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30]
G = [-3.0, 2.0, np.inf, -1.0, 4.0, -0.5, 0.25, np.nan]


def _expected(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    sgn = (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)  # PyTorch's sgn: 0 at NaN
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, as in PyTorch
        return g * sgn


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_gradient_is_g_times_sgn_of_x(executor, dtype):
    x = onnxnn.tensor(np.array(X, dtype), requires_grad=True)
    g = np.array(G, dtype)
    with onnxnn.set_executor(executor):
        x.abs().backward(onnxnn.tensor(g))
        np.testing.assert_array_equal(x.grad.numpy(), _expected(g, np.array(X, dtype)))


def test_backward_records_one_node():
    x = onnxnn.randn(3, requires_grad=True)
    (grad,) = onnxnn.autograd.grad(x.abs().sum(), [x])
    node = grad._value.node
    assert (node.domain, node.op_type) == ("ai.onnxnn", "AbsGradient")


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_the_gradient_is_linear_in_g(executor):
    # d/dg sum(w * g * sgn(x)) = w * sgn(x); x gets none (sgn is piecewise constant).
    x = np.array([1.5, -2.0, 0.0, np.nan], np.float32)
    w = np.array([2.0, 3.0, 5.0, 7.0], np.float32)
    g = onnxnn.ones(4, requires_grad=True)
    with onnxnn.set_executor(executor):
        (grad,) = onnxnn.autograd.grad((abs_gradient(g, onnxnn.tensor(x)) * onnxnn.tensor(w)).sum(), [g])
        np.testing.assert_array_equal(grad.numpy(), _expected(w, x))
