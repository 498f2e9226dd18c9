"""Gradients at special points, as PyTorch 2.13 defines them: ties, zeros, padding, NaN and infinity.

- max pooling: a window whose elements inside the input all hold -inf (a masked feature map) points at
  its first element inside the input, never at its padding (PyTorch starts each window there and
  replaces it only on a strictly greater value);
- ``matrix_norm(ord=2 / -2)``: the ``amax`` / ``amin`` of the singular values, so a repeated extreme
  singular value shares the gradient evenly;
- ``cdist`` / ``pdist`` with ``p=inf``: each coordinate tied at the largest magnitude takes the whole
  gradient times its sign (PyTorch's ``_cdist_backward``; ``amax`` would split it);
- ``prod`` / ``cumprod``: the derivative is the product of the other elements, exactly, to second order
  with two zeros and next to a NaN or inf;
- ``amax`` / ``amin`` over a line holding NaN: NaN at every element of the line (PyTorch divides by
  the count of elements equal to the result, 0 there), while ``max()`` and the vector inf-norms keep
  giving it to the NaNs.

Expected values come from the formulas, in exact small-integer arithmetic where possible.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import onnxnn
from onnxnn.nn import functional as F

EXECUTORS = ["kernels", "onnxruntime"]
INF = math.inf
NAN = math.nan


# ---------------------------------------------------------------- max pooling of -inf with padding


def first_inside_max_pool(x: np.ndarray, kernel: int, stride: int, padding: int, dilation: int):
    """PyTorch's max pooling over the spatial axes of ``x`` (same geometry on each, floor mode): each
    window starts at its first position inside ``x`` and moves on only to a strictly greater value.
    Returns the values and the flat indices into each plane."""
    spatial = x.shape[2:]
    counts = [(size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1 for size in spatial]
    values = np.empty(x.shape[:2] + tuple(counts), x.dtype)
    indices = np.empty(values.shape, np.int64)
    for plane in itertools.product(*(range(size) for size in x.shape[:2])):
        for window in itertools.product(*(range(count) for count in counts)):
            best, best_index = None, None
            for taps in itertools.product(range(kernel), repeat=len(spatial)):
                position = [w * stride - padding + t * dilation for w, t in zip(window, taps)]
                if not all(0 <= p < size for p, size in zip(position, spatial)):
                    continue
                value = x[plane + tuple(position)]
                if best is None or value > best:
                    best, best_index = value, int(np.ravel_multi_index(position, spatial))
            values[plane + window], indices[plane + window] = best, best_index
    return values, indices


def masked_map(shape, fraction: float, seed: int) -> np.ndarray:
    """Random values with about ``fraction`` of them -inf (a masked feature map); the first plane all -inf."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    x[rng.random(shape) < fraction] = -INF
    x[0, 0] = -INF
    return x


POOL_CASES = {
    # name: (input shape, kernel, stride, padding, dilation)
    "1d": ((2, 2, 9), 3, 2, 1, 1),
    "1d dilated": ((2, 2, 11), 3, 2, 1, 2),
    "2d": ((1, 2, 6, 7), 3, 2, 1, 1),
    "2d stride 1": ((1, 2, 5, 5), 3, 1, 1, 1),
    "3d": ((1, 2, 4, 5, 6), 3, 2, 1, 1),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_max_pool_of_negative_infinity_points_inside_the_input(executor, case, dtype):
    shape, kernel, stride, padding, dilation = POOL_CASES[case]
    x_values = masked_map(shape, 0.7, seed=len(shape) + kernel + padding).astype(dtype)
    expected_values, expected_indices = first_inside_max_pool(x_values, kernel, stride, padding, dilation)
    pool = getattr(F, f"max_pool{len(shape) - 2}d")
    weights = np.arange(1, expected_values.size + 1, dtype=dtype).reshape(expected_values.shape)
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(x_values, requires_grad=True)
        y, indices = pool(x, kernel, stride, padding, dilation, return_indices=True)
        (y * onnxnn.tensor(weights)).sum().backward()
        np.testing.assert_array_equal(y.detach().numpy(), expected_values)
        np.testing.assert_array_equal(indices.numpy(), expected_indices)
        # The gradient without return_indices recomputes them, and lands where they point.
        x_again = onnxnn.tensor(x_values, requires_grad=True)
        (pool(x_again, kernel, stride, padding, dilation) * onnxnn.tensor(weights)).sum().backward()
        gradient, gradient_again = x.grad.numpy(), x_again.grad.numpy()  # realized on ``executor``
    expected_grad = np.zeros(x_values.shape, dtype)
    planes = expected_grad.reshape(shape[:2] + (-1,))
    for plane in itertools.product(*(range(size) for size in shape[:2])):
        np.add.at(planes[plane], expected_indices[plane].ravel(), weights[plane].ravel())
    np.testing.assert_array_equal(gradient, expected_grad)
    np.testing.assert_array_equal(gradient_again, expected_grad)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_max_pool_of_a_large_negative_infinity_map_points_inside_the_input(executor):
    # Large enough (65536 elements of float32) for onnxnn's sessions to take the compiled pooling loop.
    x_values = np.full((1, 4, 128, 128), -INF, np.float32)
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(x_values, requires_grad=True)
        y, indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        y.sum().backward()
        pointed, gradient = indices.numpy(), x.grad.numpy()  # realized on ``executor`` (onnxnn is lazy)
    rows, columns = np.meshgrid(np.maximum(np.arange(64) * 2 - 1, 0), np.maximum(np.arange(64) * 2 - 1, 0))
    expected = (rows.T * 128 + columns.T)[None, None].repeat(4, axis=1)
    np.testing.assert_array_equal(pointed, expected)
    reached = np.isin(np.arange(128 * 128), expected[0, 0]).reshape(1, 1, 128, 128).repeat(4, axis=1)
    np.testing.assert_array_equal(gradient, reached.astype(np.float32))


# ---------------------------------------------------------------- spectral norms with repeated extremes


SPECTRAL_CASES = {
    # name: (matrix, ord, gradient): the average of u v^T over the tied singular pairs
    "largest repeated": ([[2.0, 0, 0], [0, 2, 0], [0, 0, 1]], 2, [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 0]]),
    "smallest repeated": ([[1.0, 0], [0, 1]], -2, [[0.5, 0], [0, 0.5]]),
    "zero matrix": ([[0.0, 0], [0, 0]], 2, [[0.5, 0], [0, 0.5]]),
    "permutation, largest": ([[0.0, 1], [1, 0]], 2, [[0, 0.5], [0.5, 0]]),
    "permutation, smallest": ([[0.0, 1], [1, 0]], -2, [[0, 0.5], [0.5, 0]]),
    "distinct": ([[3.0, 0], [0, -1]], 2, [[1, 0], [0, 0]]),
}


@pytest.mark.parametrize("function", ["matrix_norm", "norm"])
@pytest.mark.parametrize("case", SPECTRAL_CASES)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_repeated_extreme_singular_value_shares_the_gradient_evenly(executor, case, function):
    matrix, order, expected = SPECTRAL_CASES[case]
    with onnxnn.set_executor(executor):
        a = onnxnn.tensor(matrix, dtype=onnxnn.float64, requires_grad=True)
        getattr(onnxnn.linalg, function)(a, order).backward()
        gradient = a.grad.numpy()  # realized on ``executor`` (onnxnn is lazy)
    # The Jacobi iteration's singular vectors are accurate to a few roundings of the entries.
    np.testing.assert_allclose(gradient, expected, rtol=0, atol=1e-14)


# ---------------------------------------------------------------- cdist / pdist with p = inf


def chebyshev_gradients(a: np.ndarray, b: np.ndarray, weights: np.ndarray):
    """Gradients of ``sum(weights * cdist(a, b, inf))``: ``sign(d)`` at every coordinate of the largest ``|d|``."""
    differences = a[:, None, :] - b[None, :, :]
    magnitudes = np.abs(differences)
    tied = magnitudes == magnitudes.max(-1, keepdims=True)
    per_pair = weights[:, :, None] * np.sign(differences) * tied
    return per_pair.sum(1), -per_pair.sum(0)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_cdist_inf_gives_each_tied_coordinate_the_whole_gradient(executor):
    rng = np.random.default_rng(3)
    a_values, b_values = rng.integers(-2, 3, (4, 3)).astype(float), rng.integers(-2, 3, (5, 3)).astype(float)
    weights = rng.integers(1, 4, (4, 5)).astype(float)
    expected_a, expected_b = chebyshev_gradients(a_values, b_values, weights)
    assert ((np.abs(a_values[:, None] - b_values[None]) == 2).sum(-1) > 1).any()  # ties to test
    with onnxnn.set_executor(executor):
        a = onnxnn.tensor(a_values, requires_grad=True)
        b = onnxnn.tensor(b_values, requires_grad=True)
        distances = onnxnn.cdist(a, b, p=INF)
        (distances * onnxnn.tensor(weights)).sum().backward()
        # Realized on ``executor`` (onnxnn is lazy: a graph run after the block would run on "auto").
        values, a_gradient, b_gradient = distances.detach().numpy(), a.grad.numpy(), b.grad.numpy()
    np.testing.assert_array_equal(values, np.abs(a_values[:, None] - b_values[None]).max(-1))
    np.testing.assert_array_equal(a_gradient, expected_a)
    np.testing.assert_array_equal(b_gradient, expected_b)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_pdist_inf_gives_each_tied_coordinate_the_whole_gradient(executor):
    x_values = np.array([[0.0, 0.0], [1.0, 1.0], [3.0, -1.0]])
    first, second = np.triu_indices(3, 1)
    weights = np.array([1.0, 2.0, 4.0])
    pair_weights = np.zeros((3, 3))
    pair_weights[first, second] = weights
    expected_a, expected_b = chebyshev_gradients(x_values, x_values, pair_weights)
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(x_values, requires_grad=True)
        (F.pdist(x, p=INF) * onnxnn.tensor(weights)).sum().backward()
        gradient = x.grad.numpy()  # realized on ``executor`` (onnxnn is lazy)
    np.testing.assert_array_equal(gradient, expected_a + expected_b)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_cdist_inf_keeps_infinite_distances_and_no_coordinates(executor):
    with onnxnn.set_executor(executor):
        a = onnxnn.tensor([[INF, 1.0], [2.0, -3.0]])
        b = onnxnn.tensor([[0.0, 1.0], [-INF, 0.0]])
        np.testing.assert_array_equal(onnxnn.cdist(a, b, p=INF).numpy(), [[INF, INF], [4.0, INF]])
        np.testing.assert_array_equal(
            onnxnn.cdist(onnxnn.zeros(2, 0), onnxnn.zeros(3, 0), p=INF).numpy(), np.zeros((2, 3))
        )


# ---------------------------------------------------------------- prod and cumprod


def product_of_others(values, excluded) -> float:
    """The product of ``values`` leaving out the positions in ``excluded`` (IEEE: 0 * inf is NaN)."""
    result = 1.0
    for position, value in enumerate(values):
        if position not in excluded:
            result *= value
    return result


def prod_and_hessian(values, executor):
    """The gradient of prod(x) and the Hessian (row k: the gradient of the gradient's k-th element)."""
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values, dtype=onnxnn.float64, requires_grad=True)
        (gradient,) = onnxnn.autograd.grad(onnxnn.prod(x), x, create_graph=True)
        rows = [onnxnn.autograd.grad(gradient[k], x, retain_graph=True)[0].numpy() for k in range(len(values))]
        return gradient.detach().numpy(), np.array(rows)


PRODUCTS = {
    "two zeros": [2.0, 0.0, 3.0, 0.0],
    "one zero": [2.0, 0.0, -3.0, 5.0],
    "three zeros": [0.0, 2.0, 0.0, 0.0],
    "no zero": [2.0, -1.0, 3.0, 0.5],
    "negative zero twice": [-0.0, 4.0, 0.0],
}


@pytest.mark.parametrize("case", PRODUCTS)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_prod_is_differentiated_twice_exactly_at_zeros(executor, case):
    values = PRODUCTS[case]
    gradient, hessian = prod_and_hessian(values, executor)
    size = len(values)
    np.testing.assert_array_equal(gradient, [product_of_others(values, {i}) for i in range(size)])
    expected = [[0.0 if i == j else product_of_others(values, {i, j}) for j in range(size)] for i in range(size)]
    np.testing.assert_array_equal(hessian, expected)


NONFINITE_PRODUCTS = [
    [NAN, 0.0, 3.0],
    [INF, 0.0, 3.0],
    [-INF, 0.0, 2.0],
    [INF, 0.0, 0.0],
    [NAN, INF, 0.0, 2.0],
]


@pytest.mark.parametrize("values", NONFINITE_PRODUCTS, ids=str)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_prod_next_to_a_zero_gives_a_nonfinite_element_the_product_of_the_others(executor, values):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values, dtype=onnxnn.float64, requires_grad=True)
        onnxnn.prod(x).backward()
        gradient = x.grad.numpy()  # realized on ``executor`` (onnxnn is lazy)
    np.testing.assert_array_equal(gradient, [product_of_others(values, {i}) for i in range(len(values))])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_prod_over_a_dim_with_two_zeros_in_a_row_is_differentiated_twice(executor):
    values = np.array([[2.0, 0.0, 3.0, 0.0], [1.0, 2.0, 0.0, 4.0], [1.0, -2.0, 3.0, 2.0]])
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values, requires_grad=True)
        (gradient,) = onnxnn.autograd.grad(onnxnn.prod(x, 1).sum(), x, create_graph=True)
        (second,) = onnxnn.autograd.grad(gradient.sum(), x)
        second = second.numpy()  # realized on ``executor`` (onnxnn is lazy)
    # d/dx_j of sum_i prod(others of i): sum over i != j of the product leaving out i and j.
    expected = [
        [math.fsum(product_of_others(row, {i, j}) for i in range(4) if i != j) for j in range(4)] for row in values
    ]
    np.testing.assert_array_equal(second, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_cumprod_is_differentiated_twice_exactly_at_zeros(executor):
    values = [2.0, 0.0, 3.0, 0.0]
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values, dtype=onnxnn.float64, requires_grad=True)
        (gradient,) = onnxnn.autograd.grad(onnxnn.cumprod(x, 0).sum(), x, create_graph=True)
        (second,) = onnxnn.autograd.grad(gradient.sum(), x)
        second = second.numpy()  # realized on ``executor`` (onnxnn is lazy)
    # d2/dx_i dx_j of sum_m prod(x[:m+1]) is the sum over m >= max(i, j) of the prefix leaving out i and j.
    expected = [
        math.fsum(product_of_others(values[: m + 1], {i, j}) for i in range(4) if i != j for m in range(max(i, j), 4))
        for j in range(4)
    ]
    np.testing.assert_array_equal(second, expected)
    assert expected == [4.0, 12.0, 2.0, 6.0]


# ---------------------------------------------------------------- amax / amin over NaN


@pytest.mark.parametrize("function", ["amax", "amin"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_amax_over_a_line_holding_nan_gives_nan_everywhere_in_it(executor, function):
    values = np.array([[1.0, NAN, NAN], [1.0, 2.0, 2.0], [-1.0, 0.5, -1.0]])
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values, requires_grad=True)
        getattr(x, function)(1).sum().backward()
        whole = onnxnn.tensor(values, requires_grad=True)
        getattr(whole, function)().backward()
        gradient, whole_gradient = x.grad.numpy(), whole.grad.numpy()  # realized on ``executor`` (onnxnn is lazy)
    extremes = values.max(1, keepdims=True) if function == "amax" else values.min(1, keepdims=True)
    tied = (values == extremes).astype(float)
    expected = tied / tied.sum(1, keepdims=True)
    expected[0] = NAN
    np.testing.assert_array_equal(gradient, expected)
    np.testing.assert_array_equal(whole_gradient, np.full(values.shape, NAN))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_max_and_inf_norms_over_nan_keep_the_gradient_on_the_nans(executor):
    values = np.array([[1.0, NAN, NAN], [1.0, 2.0, -2.0]])
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values, requires_grad=True)
        x.max().backward()
        y = onnxnn.tensor(values, requires_grad=True)
        onnxnn.linalg.vector_norm(y, INF, dim=1).sum().backward()
        x_gradient, y_gradient = x.grad.numpy(), y.grad.numpy()  # realized on ``executor`` (onnxnn is lazy)
    # max(): the NaNs share it (PyTorch's evenly_distribute_backward); the inf-norm: the NaNs take it
    # times sign(NaN), which PyTorch takes as 0.
    np.testing.assert_array_equal(x_gradient, [[0, 0.5, 0.5], [0, 0, 0]])
    np.testing.assert_array_equal(y_gradient, [[0, 0, 0], [0, 0.5, -0.5]])


# Under create_graph, a gradient that reaches x only through comparisons or indices (piecewise-linear
# ops) still depends on x, with derivative 0, as PyTorch's backward nodes take their saved tensors as
# inputs: a second grad gives zeros instead of raising that the gradient does not require grad.
PIECEWISE_LINEAR = [
    ("relu", lambda x: onnxnn.nn.functional.relu(x)),
    ("leaky_relu", lambda x: onnxnn.nn.functional.leaky_relu(x, 0.1)),
    ("hardtanh", lambda x: onnxnn.nn.functional.hardtanh(x)),
    ("relu6", lambda x: onnxnn.nn.functional.relu6(x)),
    ("max_pool1d", lambda x: onnxnn.nn.functional.max_pool1d(x.reshape(1, 1, 4), 2)),
    ("nll_loss", lambda x: onnxnn.nn.functional.nll_loss(x.reshape(2, 2), onnxnn.tensor([0, 1]))),
]


@pytest.mark.parametrize("function", [case[1] for case in PIECEWISE_LINEAR], ids=[case[0] for case in PIECEWISE_LINEAR])
def test_a_piecewise_linear_gradient_is_differentiable_again(function):
    x = onnxnn.tensor([0.5, -1.5, 2.0, -0.2], requires_grad=True)
    (gradient,) = onnxnn.autograd.grad(function(x).sum(), x, create_graph=True)
    assert gradient.requires_grad
    (second,) = onnxnn.autograd.grad(gradient.sum(), x)
    np.testing.assert_array_equal(second.numpy(), np.zeros(4, np.float32))
