"""``onnxnn.autograd.functional``: Jacobians, Hessians and their vector products, against analytic
derivatives in float64 (numpy formulas), with PyTorch's nesting of tuples and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.autograd import functional

X = np.array([0.5, -1.2, 2.0])
Y = np.array([[1.0, 2.0], [0.3, -0.7]])
V = np.array([1.0, -2.0, 0.5])


def tensor(array) -> onnxnn.Tensor:
    return onnxnn.tensor(array, dtype=onnxnn.float64)


def elementwise(x):
    return x.exp() * x.sin()


def elementwise_jacobian(x):
    return np.diag(np.exp(x) * (np.sin(x) + np.cos(x)))


def cubic_sum(x):
    return (x**3).sum()


def cubic_sum_hessian(x):
    return np.diag(6 * x)


def test_jacobian_of_one_input_and_output():
    np.testing.assert_allclose(functional.jacobian(elementwise, tensor(X)).numpy(), elementwise_jacobian(X), rtol=1e-14)


def test_jacobian_nests_outputs_then_inputs():
    # f(a, b) = (sum(a) * b, prod(a**2)): J[0][0][i, j, k] = b[i, j], J[0][1][i, j, k, l] = sum(a) [ij == kl],
    # J[1][0][k] = 2 prod(a**2) / a[k], J[1][1] = 0.
    (j00, j01), (j10, j11) = functional.jacobian(lambda a, b: (a.sum() * b, (a**2).prod()), (tensor(X), tensor(Y)))
    np.testing.assert_allclose(j00.numpy(), np.broadcast_to(Y[:, :, None], (2, 2, 3)), rtol=1e-14)
    np.testing.assert_allclose(j01.numpy(), X.sum() * np.eye(4).reshape(2, 2, 2, 2), rtol=1e-14)
    np.testing.assert_allclose(j10.numpy(), 2 * np.prod(X**2) / X, rtol=1e-14)
    np.testing.assert_array_equal(j11.numpy(), np.zeros((2, 2)))


def test_hessian_of_one_and_of_two_inputs():
    np.testing.assert_allclose(functional.hessian(cubic_sum, tensor(X)).numpy(), cubic_sum_hessian(X), rtol=1e-14)
    # g(a, b) = sum(a) * sum(b): H[0][1] = H[1][0]^T = ones, the diagonal blocks zero.
    (h00, h01), (h10, h11) = functional.hessian(lambda a, b: a.sum() * b.sum(), (tensor(X), tensor(Y)))
    np.testing.assert_array_equal(h01.numpy(), np.ones((3, 2, 2)))
    np.testing.assert_array_equal(h10.numpy(), np.ones((2, 2, 3)))
    np.testing.assert_array_equal(h00.numpy(), np.zeros((3, 3)))
    np.testing.assert_array_equal(h11.numpy(), np.zeros((2, 2, 2, 2)))


@pytest.mark.parametrize(
    "product, function, expected",
    [
        (functional.vjp, elementwise, lambda: V @ elementwise_jacobian(X)),
        (functional.jvp, elementwise, lambda: elementwise_jacobian(X) @ V),
        (functional.vhp, cubic_sum, lambda: V @ cubic_sum_hessian(X)),
        (functional.hvp, cubic_sum, lambda: cubic_sum_hessian(X) @ V),
    ],
    ids=["vjp", "jvp", "vhp", "hvp"],
)
def test_vector_products(product, function, expected):
    output, result = product(function, tensor(X), tensor(V))
    np.testing.assert_allclose(output.numpy(), function(tensor(X)).numpy(), rtol=1e-15)
    np.testing.assert_allclose(result.numpy(), expected(), rtol=1e-14)
    assert not result.requires_grad and not output.requires_grad


def test_jvp_through_piecewise_linear_layers():
    # relu's and max pooling's gradient rules are linear in the incoming gradient: the double-backward
    # trick differentiates them with respect to it.
    x = np.array([0.5, -1.2, 2.0, 0.1])
    v = np.array([1.0, 2.0, 3.0, 4.0])
    _, result = functional.jvp(
        lambda a: onnxnn.nn.functional.max_pool1d(a.relu().reshape(1, 1, 4), 2), tensor(x), tensor(v)
    )
    np.testing.assert_array_equal(result.numpy().reshape(-1), [1.0, 3.0])


def test_create_graph_keeps_the_result_differentiable():
    a = tensor([0.5, 1.5]).requires_grad_()
    jacobian = functional.jacobian(lambda t: t**3, a, create_graph=True)
    assert jacobian.requires_grad
    jacobian.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 6 * np.array([0.5, 1.5]), rtol=1e-15)


def test_an_independent_input_gets_zeros_unless_strict():
    jacobians = functional.jacobian(lambda a, b: a * 2, (tensor(X), tensor(Y)))
    np.testing.assert_array_equal(jacobians[1].numpy(), np.zeros((3, 2, 2)))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        functional.jacobian(lambda a, b: a * 2, (tensor(X), tensor(Y)), strict=True)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: functional.vjp(elementwise, tensor(X)), RuntimeError, "v can only be None"),
        (lambda: functional.jvp(elementwise, tensor(X), tensor([1.0])), RuntimeError, "v has invalid size"),
        (lambda: functional.vjp(lambda a: (a, a), tensor(X), (tensor(V),)), RuntimeError, "invalid length"),
        (lambda: functional.hessian(elementwise, tensor(X)), RuntimeError, "should contain a single element"),
        (lambda: functional.jacobian(elementwise, [tensor(X)]), TypeError, "must be either a Tensor or a tuple"),
        (lambda: functional.jacobian(elementwise, (tensor(X), 1.0)), TypeError, "value at index 1"),
        (
            lambda: functional.jacobian(elementwise, tensor(X), strategy="forward-mode"),
            NotImplementedError,
            "vectorize=True",
        ),
        (lambda: functional.jacobian(elementwise, tensor(X), strategy="sideways"), AssertionError, "strategy"),
        (
            lambda: functional.jacobian(elementwise, tensor(X), strict=True, vectorize=True),
            RuntimeError,
            "not supported together",
        ),
    ],
    ids=[
        "vjp_without_v",
        "jvp_v_shape",
        "vjp_v_count",
        "hessian_not_scalar",
        "list_inputs",
        "number_input",
        "forward_unvectorized",
        "unknown_strategy",
        "strict_vectorized",
    ],
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()
