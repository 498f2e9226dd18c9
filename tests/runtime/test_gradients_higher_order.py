"""Higher-order gradients: second derivatives against differences of the recorded gradient, the third
derivative of tanh, and the refusal of a second gradient rule for one op type.

First-order gradients of every rule are in test_gradients_first_order.py; the input makers in
gradient_cases.py.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn.runtime.ops import pad_constant, slice_axis

from .gradient_cases import nonzero, op, positive, randn

# ---------------------------------------------------------------- higher order


def _first_gradient(function: Callable, cotangent: np.ndarray) -> Callable:
    """x -> d<function(x), cotangent>/dx, recorded with create_graph so it is differentiable again."""

    def gradient(x):
        with onnxnn.enable_grad():
            leaf = x if x.requires_grad else x.detach().requires_grad_()
            output = function(leaf)
            (result,) = onnxnn.autograd.grad(
                output, leaf, onnxnn.tensor(cotangent, dtype=output.dtype), create_graph=True
            )
        # Differentiated again only when the caller's x carries history; otherwise a plain value.
        return result if x.requires_grad else result.detach()

    return gradient


SECOND_ORDER_CASES = [
    ("tanh", lambda x: x.tanh(), randn(2, 3)),
    ("sigmoid", lambda x: x.sigmoid(), randn(2, 3)),
    ("exp_times_sin", lambda x: x.exp() * x.sin(), randn(4)),
    ("log", lambda x: x.log(), positive(3)),
    ("pow_tensor_exponent", lambda x: x**x, positive(3)),
    ("softmax", lambda x: x.softmax(-1), randn(2, 3)),
    ("log_softmax", lambda x: x.log_softmax(0), randn(3, 2)),
    ("matmul_with_itself", lambda x: x @ x, randn(3, 3)),
    ("div", lambda x: 1.0 / (x * x + 1.0), randn(4)),
    ("gelu_tanh", lambda x: onnxnn.gelu(x, approximate="tanh"), randn(4)),
    ("norm_then_sqrt", lambda x: (x * x).sum(1).sqrt(), randn(2, 3)),
    ("norm_reduce_l2", lambda x: x.norm(dim=0), randn(3, 2)),
    ("prod", lambda x: x.prod(1), nonzero(2, 3)),
    ("pow_scalar_exponent", lambda x: x**3.0, randn(3)),
    ("gemm_transposed", lambda x: op("Gemm", x, x, x, transB=1, alpha=0.5), randn(2, 2)),
    ("strided_slice_of_square", lambda x: slice_axis(x * x, 0, 0, 5, 2), randn(5)),
    ("padded_square", lambda x: pad_constant(x * x, [1, 2]), randn(3)),
]


@pytest.mark.parametrize("name, function, x", SECOND_ORDER_CASES, ids=[c[0] for c in SECOND_ORDER_CASES])
def test_second_derivative_matches_differences_of_the_gradient(name, function, x) -> None:
    with onnxnn.no_grad():
        shape = function(onnxnn.tensor(x)).shape
    cotangent = np.random.default_rng(7).standard_normal(shape)
    check_gradients(_first_gradient(function, cotangent), [x], rtol=1e-4, atol=1e-6)


def test_third_derivative_of_tanh() -> None:
    def third(x):
        with onnxnn.enable_grad():
            leaf = x if x.requires_grad else x.detach().requires_grad_()
            (first,) = onnxnn.autograd.grad(leaf.tanh().sum(), leaf, create_graph=True)
            (second,) = onnxnn.autograd.grad(first.sum(), leaf, create_graph=True)
            (result,) = onnxnn.autograd.grad(second.sum(), leaf, create_graph=True)
        return result if x.requires_grad else result.detach()

    x = np.array([-0.7, 0.1, 0.9])
    t = np.tanh(x)
    # d^3/dx^3 tanh = -2 (1 - t^2) (1 - 3 t^2)
    np.testing.assert_allclose(third(onnxnn.tensor(x)).numpy(), -2 * (1 - t**2) * (1 - 3 * t**2), rtol=1e-10)
    check_gradients(third, [x], rtol=1e-4, atol=1e-6)


def test_a_second_rule_for_one_op_type_is_refused_naming_both():
    from onnxnn.ir.registry import Registry

    rules = Registry("gradient rule")

    @rules.register("Sin")
    def first(ctx, g):
        return (g,)

    with pytest.raises(ValueError, match=r"two gradient rules for op_type 'Sin'.*first.*second"):

        @rules.register("Sin")
        def second(ctx, g):
            return (g,)

    assert rules.get("Sin") is first
