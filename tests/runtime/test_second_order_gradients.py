"""Second-order gradients through rules that see only part of their node's output gradients.

A gradient penalty differentiates a first gradient again; where that first gradient was linear in a
node's main output, the second pass reaches the node through its other outputs only (LayerNorm's
Mean and InvStdDev) or through a rule's input that only scales (Abs's sign). Expectations are central
differences of the float64 first gradient (error ``eps^2`` truncation plus ``1e-16 / eps`` rounding),
or exact zeros where the derivative is zero.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

_rng = np.random.default_rng(4)


def first_gradient(x: np.ndarray, weights: np.ndarray, dtype=onnxnn.float64) -> np.ndarray:
    input = onnxnn.tensor(x, dtype=dtype, requires_grad=True)
    (gradient,) = onnxnn.autograd.grad(
        (F.layer_norm(input, (x.shape[-1],)) * onnxnn.tensor(weights, dtype=dtype)).sum(), [input]
    )
    return gradient.numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
def test_layer_norms_hessian_vector_product_when_the_loss_is_linear_in_its_output(dtype):
    x, weights, direction = (_rng.standard_normal((2, 6)) for _ in range(3))
    input = onnxnn.tensor(x, dtype=dtype, requires_grad=True)
    loss = (F.layer_norm(input, (6,)) * onnxnn.tensor(weights, dtype=dtype)).sum()
    (gradient,) = onnxnn.autograd.grad(loss, [input], create_graph=True)
    (product,) = onnxnn.autograd.grad((gradient * onnxnn.tensor(direction, dtype=dtype)).sum(), [input])
    eps = 1e-6
    expected = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        expected[index] = np.sum((first_gradient(x + step, weights) - first_gradient(x - step, weights)) * direction)
    expected /= 2 * eps
    # float32: a few dozen roundings of order-1 terms; float64: the differences' own error.
    tolerance = 1e-4 if dtype is onnxnn.float32 else 1e-7
    np.testing.assert_allclose(product.numpy(), expected, rtol=tolerance, atol=tolerance)


def test_abs_second_derivative_is_zeros():
    x = onnxnn.tensor(np.array([-1.0, 0.5, 2.0, -0.3]), requires_grad=True)
    (gradient,) = onnxnn.autograd.grad(x.abs().sum(), [x], create_graph=True)
    (second,) = onnxnn.autograd.grad(gradient.sum(), [x])
    np.testing.assert_array_equal(second.numpy(), np.zeros(4))
    hessian = onnxnn.autograd.functional.hessian(lambda t: t.abs().sum(), x.detach())
    np.testing.assert_array_equal(hessian.numpy(), np.zeros((4, 4)))
