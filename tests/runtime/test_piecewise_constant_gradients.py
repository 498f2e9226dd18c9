"""Rounding and sign functions are differentiable with zero derivative, as in PyTorch.

Their outputs require grad when the input does, a backward pass through them alone gives the input
zeros (not None, not an error), and in a larger expression they contribute nothing (PyTorch's
RoundBackward0, FloorBackward0, CeilBackward0, TruncBackward0, SignBackward0, SgnBackward0).
``frac`` is ``x - trunc(x)``: derivative one.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

X = np.array([1.25, -2.5, 3.0, 0.0, -0.75, 7.6])

# function -> (its values by numpy, its derivative, PyTorch's name of its gradient function)
FUNCTIONS = {
    "round": (np.round, 0.0, "RoundBackward0"),
    "floor": (np.floor, 0.0, "FloorBackward0"),
    "ceil": (np.ceil, 0.0, "CeilBackward0"),
    "trunc": (np.trunc, 0.0, "TruncBackward0"),
    "fix": (np.trunc, 0.0, "TruncBackward0"),
    "sign": (np.sign, 0.0, "SignBackward0"),
    "sgn": (np.sign, 0.0, "SgnBackward0"),
    "frac": (lambda x: x - np.trunc(x), 1.0, "FracBackward0"),
}


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_backward_through_the_function_alone_gives_its_derivative(name, executor):
    values, derivative, gradient_name = FUNCTIONS[name]
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(X, requires_grad=True)
        y = getattr(onnxnn, name)(x)
        assert y.requires_grad and y.grad_fn.name() == gradient_name
        y.sum().backward()
        np.testing.assert_array_equal(y.detach().numpy(), values(X))
        np.testing.assert_array_equal(x.grad.numpy(), np.full_like(X, derivative))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_in_a_product_only_the_other_factor_is_differentiated(name):
    values, derivative, _ = FUNCTIONS[name]
    x = onnxnn.tensor(X, requires_grad=True)
    (getattr(onnxnn, name)(x) * x).sum().backward()
    # d/dx [f(x) x] = f(x) + f'(x) x
    np.testing.assert_array_equal(x.grad.numpy(), values(X) + derivative * X)


@pytest.mark.parametrize("method", ["round", "floor", "ceil", "trunc", "sign", "sgn", "fix", "frac"])
def test_tensor_methods_record_the_same_gradients(method):
    _, derivative, _ = FUNCTIONS[method]
    x = onnxnn.tensor(X, requires_grad=True)
    getattr(x, method)().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full_like(X, derivative))


def test_an_infinite_upstream_gradient_still_gives_zeros():
    # The zeros are a constant, never the upstream gradient times zero (inf * 0 would be NaN).
    x = onnxnn.tensor(X, requires_grad=True)
    (x.floor() * float("inf")).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros_like(X))


def test_a_parameter_used_only_through_round_is_updated_by_weight_decay():
    # PyTorch gives such a parameter a zero gradient, so SGD's weight decay still moves it.
    weight = onnxnn.nn.Parameter(onnxnn.tensor([1.0, -2.0]))
    optimizer = onnxnn.optim.SGD([weight], lr=0.5, weight_decay=0.1)
    weight.round().sum().backward()
    optimizer.step()
    np.testing.assert_allclose(weight.detach().numpy(), [1.0 - 0.5 * 0.1 * 1.0, -2.0 + 0.5 * 0.1 * 2.0])


@pytest.mark.parametrize("rounding_mode", ["floor", "trunc"])
def test_a_rounded_division_gives_both_operands_zeros(rounding_mode):
    # As PyTorch's DivBackward2, also where b == 0 and for a broadcast operand, and under an
    # infinite upstream gradient (the zeros never pass through Div's rule or a product).
    a = onnxnn.tensor([[1.5], [-2.0]], requires_grad=True)
    b = onnxnn.tensor([0.0, 3.0, 2.0], requires_grad=True)
    y = onnxnn.div(a, b, rounding_mode=rounding_mode)
    assert y.grad_fn.name() == "DivBackward2"
    rounding = np.floor if rounding_mode == "floor" else np.trunc
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(y.detach().numpy(), rounding(a.detach().numpy() / b.detach().numpy()))
    (y * float("inf")).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros((2, 1)))
    np.testing.assert_array_equal(b.grad.numpy(), np.zeros(3))


def test_floor_divide_has_no_gradient_as_in_pytorch():
    # PyTorch raises "derivative for floor_divide is not implemented" in backward; onnxnn's result
    # does not require grad, so backward raises too.
    a = onnxnn.tensor([1.5, -2.0], requires_grad=True)
    assert not (a // 2.0).requires_grad
    assert not onnxnn.floor_divide(a, 2.0).requires_grad
