"""PyTorch's conventions in ``onnxnn.autograd.functional`` and ``onnxnn.autograd.grad``: the shapes of
returned function values, materialized zero gradients (their shapes and ``requires_grad``), and the errors
of strict mode and of unsupported argument combinations. Expected values are numpy formulas in float64;
the last test checks the same calls against PyTorch itself where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.autograd import functional

X = np.array([0.5, -1.2, 2.0])
V = np.array([1.0, -2.0, 0.5])


def tensor(array, lib=onnxnn):
    return lib.tensor(np.asarray(array, dtype=np.float64), dtype=lib.float64)


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)], ids=["0d", "1", "1x1"])
@pytest.mark.parametrize("product", ["vjp", "jvp", "vhp", "hvp"])
def test_products_return_the_value_in_the_shape_the_function_gave(product, shape):
    # f(x) = sum(x**3) reshaped: v^T J = 3 x**2 (v = 1 for one output), J v = 3 x**2 . v, H v = 6 x * v.
    output, result = getattr(functional, product)(
        lambda x: (x**3).sum().reshape(shape), tensor(X), None if product == "vjp" else tensor(V)
    )
    assert tuple(output.shape) == shape
    np.testing.assert_allclose(output.detach().numpy(), np.full(shape, (X**3).sum()), rtol=1e-15)
    expected = {"vjp": 3 * X**2, "jvp": np.full(shape, 3 * X**2 @ V), "vhp": 6 * X * V, "hvp": 6 * X * V}[product]
    np.testing.assert_allclose(result.detach().numpy(), expected, rtol=1e-14)


def test_hessian_of_a_one_element_output_is_shaped_by_the_inputs_only():
    hessian = functional.hessian(lambda x: (x**3).sum().reshape(1, 1), tensor(X))
    np.testing.assert_allclose(hessian.detach().numpy(), np.diag(6 * X), rtol=1e-14)


def batched_grad(**options):
    # d(2x)/dx for 4 rows of ones: 2 each; y is not used.
    x = tensor(X).requires_grad_()
    y = tensor([1.0, 2.0]).requires_grad_()
    return onnxnn.autograd.grad(
        x * 2, (x, y), onnxnn.ones(4, 3, dtype=onnxnn.float64), is_grads_batched=True, **options
    )


@pytest.mark.parametrize(
    "options, unused_shape, unused_requires_grad",
    [
        ({"materialize_grads": True}, (2,), False),
        ({"materialize_grads": True, "allow_unused": True}, (2,), False),
        ({"materialize_grads": True, "create_graph": True}, (2,), True),
        ({"allow_unused": True}, None, None),
    ],
    ids=["materialize", "materialize_allow_unused", "materialize_create_graph", "allow_unused"],
)
def test_batched_grad_materializes_unbatched_zeros_for_an_unused_input(options, unused_shape, unused_requires_grad):
    # PyTorch fills in the zeros after its vmap: shaped as the input, without the batch dimension.
    used, unused = batched_grad(**options)
    np.testing.assert_array_equal(used.detach().numpy(), np.full((4, 3), 2.0))
    if unused_shape is None:
        assert unused is None
    else:
        assert tuple(unused.shape) == unused_shape and unused.requires_grad == unused_requires_grad
        np.testing.assert_array_equal(unused.detach().numpy(), np.zeros(unused_shape))


def test_batched_grad_names_the_unused_input():
    with pytest.raises(RuntimeError, match="differentiated Tensor at index 1 appears to not have been used"):
        batched_grad()


@pytest.mark.parametrize("create_graph", [False, True])
def test_materialized_zeros_require_grad_exactly_under_create_graph(create_graph):
    x = tensor(X).requires_grad_()
    y = tensor([1.0, 2.0]).requires_grad_()
    gx, gy = onnxnn.autograd.grad((x * x).sum(), (x, y), create_graph=create_graph, materialize_grads=True)
    np.testing.assert_array_equal(gy.detach().numpy(), np.zeros(2))
    assert gy.requires_grad == create_graph and gy.grad_fn is None
    if create_graph:
        # A further backward takes them: d/dx sum((2x)^2) = 8x, and the zeros (a leaf) get ones.
        ((gx * gx).sum() + gy.sum()).backward()
        np.testing.assert_allclose(x.grad.detach().numpy(), 8 * X, rtol=1e-15)
        np.testing.assert_array_equal(gy.grad.detach().numpy(), np.ones(2))


@pytest.mark.parametrize("create_graph", [False, True])
def test_functional_zeros_for_an_unused_input_do_not_require_grad(create_graph):
    # As PyTorch's _fill_in_zeros: plain zeros, whatever create_graph.
    _, (ga, gb) = functional.vjp(
        lambda a, b: a * a, (tensor(X), tensor([1.0, 2.0])), tensor(V), create_graph=create_graph
    )
    np.testing.assert_allclose(ga.detach().numpy(), 2 * X * V, rtol=1e-15)
    np.testing.assert_array_equal(gb.detach().numpy(), np.zeros(2))
    assert not gb.requires_grad


@pytest.mark.parametrize("product", ["vhp", "hvp"])
def test_strict_create_graph_keeps_a_hessian_that_depends_on_the_input(product):
    x = tensor(X).requires_grad_()
    _, result = getattr(functional, product)(lambda a: (a**3).sum(), x, tensor(V), strict=True, create_graph=True)
    np.testing.assert_allclose(result.detach().numpy(), 6 * X * V, rtol=1e-14)
    # d/dx sum(6 x v) = 6 v.
    result.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * V, rtol=1e-15)


@pytest.mark.parametrize("vectorize", [False, True])
def test_vectorized_create_graph_blocks_of_an_input_require_grad_together(vectorize):
    # f(a, b) = (a**3 sum(b), sum(b)): d f0 / d b = a**3 (requires grad), d f1 / d b = 1 (constant), d f1 / d a
    # = 0 (none). PyTorch's vectorized Jacobian is one tensor per input split by output, so every block of an
    # input with one block that requires grad then requires grad.
    (_, f0_b), (f1_a, f1_b) = functional.jacobian(
        lambda a, b: (a**3 * b.sum(), b.sum()), (tensor(X), tensor([1.0, 2.0])), create_graph=True, vectorize=vectorize
    )
    np.testing.assert_allclose(f0_b.detach().numpy(), np.repeat((X**3)[:, None], 2, axis=1), rtol=1e-15)
    np.testing.assert_array_equal(f1_b.detach().numpy(), np.ones(2))
    np.testing.assert_array_equal(f1_a.detach().numpy(), np.zeros(3))
    assert f0_b.requires_grad and f1_b.requires_grad == vectorize and f1_a.requires_grad == vectorize


def test_grad_refuses_empty_inputs():
    x = tensor(X).requires_grad_()
    with pytest.raises(RuntimeError, match="`inputs` argument to `grad\\(\\)` cannot be empty"):
        onnxnn.autograd.grad(x.sum(), [])


def ones(lib, *shape):
    return lib.full(shape, 0.5, dtype=lib.float64)


def with_captured_weight(lib, functional_module, name):
    # f(a, b) = sum(a**3) + sum(b * w), w captured: d f / d b = w requires grad but no input reaches it.
    w = ones(lib, 2).requires_grad_()
    point = (ones(lib, 3), ones(lib, 2))
    return getattr(functional_module, name)(lambda a, b: (a**3).sum() + (b * w).sum(), point, point, strict=True)


# Each call takes the library and its functional module, so that the last test runs it on PyTorch too.
ERRORS = {
    "vjp_strict_create_graph_linear": (
        lambda L, F: F.vjp(lambda a: a * 2, ones(L, 3), ones(L, 3), strict=True, create_graph=True),
        RuntimeError,
        "jacobian of the user-provided function is independent of input 0. This is not allowed in strict mode when "
        "create_graph=True",
    ),
    "jvp_strict_create_graph_linear": (
        lambda L, F: F.jvp(lambda a: a * 2, ones(L, 3), ones(L, 3), strict=True, create_graph=True),
        RuntimeError,
        "jacobian of the user-provided function is independent of input 0",
    ),
    "jvp_strict_gradient_ignores_grad_output": (
        lambda L, F: F.jvp(lambda a: a.sign(), ones(L, 3), ones(L, 3), strict=True),
        RuntimeError,
        "The gradient with respect to input 0 is independent of the inputs of the user-provided function",
    ),
    "jacobian_strict_unused": (
        lambda L, F: F.jacobian(lambda a, b: a * 2, (ones(L, 3), ones(L, 2)), strict=True),
        RuntimeError,
        "Output 0 of the user-provided function is independent of input 1",
    ),
    "jacobian_strict_vectorize_bad_output": (
        lambda L, F: F.jacobian(lambda a: 3.0, ones(L, 3), strict=True, vectorize=True),
        TypeError,
        "outputs of the user-provided function given to jacobian must be either a Tensor",
    ),
    "jacobian_forward_strict": (
        lambda L, F: F.jacobian(lambda a: a * 2, ones(L, 3), strict=True, vectorize=True, strategy="forward-mode"),
        RuntimeError,
        '`strict=True` and `strategy="forward-mode"` are not supported together',
    ),
    "jacobian_forward_list_inputs": (
        lambda L, F: F.jacobian(lambda a: a * 2, [ones(L, 3)], strategy="forward-mode"),
        TypeError,
        "The inputs given to jacobian must be either a Tensor or a tuple of Tensors",
    ),
    "jacobian_forward_create_graph": (
        lambda L, F: F.jacobian(lambda a: a * 2, ones(L, 3), strategy="forward-mode", create_graph=True),
        NotImplementedError,
        '`create_graph=True` and `strategy="forward-mode"` are not supported together',
    ),
    "jacobian_unknown_strategy": (
        lambda L, F: F.jacobian(lambda a: a * 2, ones(L, 3), strategy="sideways"),
        AssertionError,
        '"forward-mode" tends to be more performant',
    ),
    "hessian_list_inputs_before_strategy": (
        lambda L, F: F.hessian(lambda a: a.sum(), [ones(L, 3)], outer_jacobian_strategy="sideways"),
        TypeError,
        "The inputs given to hessian must be either a Tensor or a tuple of Tensors",
    ),
    "hessian_strict_linear": (
        lambda L, F: F.hessian(lambda a: a.sum() * 2, ones(L, 3), strict=True),
        RuntimeError,
        "While computing the hessian, found that the jacobian of the user-provided function with respect to input 0",
    ),
    "hessian_strict_unused": (
        lambda L, F: F.hessian(lambda a, b: (a**3).sum(), (ones(L, 3), ones(L, 2)), strict=True),
        RuntimeError,
        "jacobian of the user-provided function with respect to input 1 is independent of the input",
    ),
    "vhp_strict_linear": (
        lambda L, F: F.vhp(lambda a: a.sum() * 2, ones(L, 3), ones(L, 3), strict=True),
        RuntimeError,
        "While computing the hessian, found that the jacobian",
    ),
    "hvp_strict_linear": (
        lambda L, F: F.hvp(lambda a: a.sum() * 2, ones(L, 3), ones(L, 3), strict=True),
        RuntimeError,
        "While computing the hessian, found that the jacobian",
    ),
    "hessian_strict_create_graph_quadratic": (
        # The Hessian of sum(a * a) is constant: with create_graph it has no graph to give (a**2 alike here,
        # where onnxnn records it as a * a; PyTorch's pow keeps a graph through a.pow(1)).
        lambda L, F: F.hessian(lambda a: (a * a).sum(), ones(L, 3), strict=True, create_graph=True),
        RuntimeError,
        "The jacobian of the user-provided function is independent of input 0. This is not allowed in strict mode "
        "when create_graph=True",
    ),
    "vhp_strict_create_graph_quadratic": (
        lambda L, F: F.vhp(lambda a: (a * a).sum(), ones(L, 3), ones(L, 3), strict=True, create_graph=True),
        RuntimeError,
        "The hessian of the user-provided function is independent of input 0. This is not allowed in strict mode "
        "when create_graph=True",
    ),
    "vhp_strict_captured_weight": (
        lambda L, F: with_captured_weight(L, F, "vhp"),
        RuntimeError,
        "The jacobian of the user-provided function is independent of input 1. This is not allowed in strict mode.",
    ),
    "hvp_strict_captured_weight": (
        lambda L, F: with_captured_weight(L, F, "hvp"),
        RuntimeError,
        "The hessian of the user-provided function is independent of entry 1 in the grad_jacobian",
    ),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(name):
    call, error, message = ERRORS[name]
    with pytest.raises(error) as raised:
        call(onnxnn, functional)
    assert message in str(raised.value)


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(name):
    torch = pytest.importorskip("torch")
    from torch.autograd import functional as torch_functional

    call, _, _ = ERRORS[name]
    with pytest.raises(Exception) as expected:
        call(torch, torch_functional)
    with pytest.raises(Exception) as raised:
        call(onnxnn, functional)
    assert type(raised.value) is type(expected.value)
    assert str(raised.value) == str(expected.value).replace("torch.autograd", "onnxnn.autograd")
