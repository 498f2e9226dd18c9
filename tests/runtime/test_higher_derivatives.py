"""Second and third derivatives against exact formulas, on both executors.

- ``hypot`` and ``atan2`` take PyTorch's derivative formulas (runtime/ops/derivative_formulas.py),
  checked where differentiating the composites that compute their values went wrong: ties
  ``|x| == |y|`` (hypot's Max and Min split the gradient: second derivatives 0) and points near
  the y axis (atan2 through ``atan(y / x)``: the second derivative's terms cancel), besides
  ordinary points and extreme magnitudes.
- ``einsum`` reading a diagonal (a subscript repeated within one operand): gradients and
  Hessian-vector products of quadratic functions, whose exact values come from numpy's einsum.
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
import pytest

import onnxnn

EXECUTORS = ["onnxruntime", "kernels"]

# Each derivative below is a few dozen roundings of terms that do not cancel by more than a factor
# of 4 at these points (hypot's 1/h - x^2/h^3 is y^2/h^3, at least a quarter of 1/h where |y| >= |x|/sqrt(3)):
# 64 units of rounding of the dtype bound them, the operands' own rounding included.
ROUNDINGS = 64


def _hypot_derivatives(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """d/dx, d2/dx2, d2/dxdy, d2/dy2 and d3/dx3 of hypot(x, y), written with x/h and y/h so that no
    square overflows: y^2/h^3, -xy/h^3, x^2/h^3 and -3xy^2/h^5."""
    h = np.hypot(x, y)
    c, s = x / h, y / h
    return {"x": c, "xx": s * s / h, "xy": -c * s / h, "yy": c * c / h, "xxx": -3 * c * s * s / (h * h)}


def _atan2_derivatives(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """The same of atan2(y, x), with r = x^2 + y^2: -y/r, 2xy/r^2, (y^2 - x^2)/r^2, -2xy/r^2 and
    2y(y^2 - 3x^2)/r^3, written with x/h and y/h (h = hypot(x, y))."""
    h = np.hypot(x, y)
    c, s = x / h, y / h
    return {
        "x": -s / h,
        "xx": 2 * c * s / (h * h),
        "xy": (s * s - c * c) / (h * h),
        "yy": -2 * c * s / (h * h),
        "xxx": 2 * s * (s * s - 3 * c * c) / (h * h * h),
    }


ALL = ("x", "xx", "xy", "yy", "xxx")
# Beyond 1e154 (below 1e-154) in float64 the squares x^2 + y^2 overflow (vanish), where PyTorch's
# atan2 gradient, x / (x^2 + y^2), is 0 or NaN; there third derivatives (1 / h^2) are out of range
# too, and atan2's second ones: those cases check the orders that are representable.
FIRST_TWO = ("x", "xx", "xy", "yy")

# (id, function of (x, y), exact derivatives, points as (x, y) pairs, dtype, derivatives checked)
SMOOTH_CASES = [
    (
        "hypot_ties",
        onnxnn.hypot,
        _hypot_derivatives,
        [(3.0, 3.0), (-3.0, 3.0), (3.0, -3.0), (1e-3, 1e-3), (-1e-3, 1e-3), (2.5, -2.5), (3.0, 4.0)],
        np.float64,
        ALL,
    ),
    ("hypot_ties_float32", onnxnn.hypot, _hypot_derivatives, [(3.0, 3.0), (-0.5, 0.5), (3.0, 4.0)], np.float32, ALL),
    (
        "hypot_ties_extreme_magnitudes",
        onnxnn.hypot,
        _hypot_derivatives,
        [(1e160, 1e160), (1e-160, -1e-160), (-3e200, 4e200)],
        np.float64,
        FIRST_TWO,
    ),
    (
        "atan2_near_the_y_axis",
        lambda x, y: onnxnn.atan2(y, x),
        _atan2_derivatives,
        [(1e-8, 1.0), (-1e-5, 2.0), (0.0081, 0.36), (1e-3, -1.0), (0.3, 1.7), (-2.0, 0.5)],
        np.float64,
        ALL,
    ),
    (
        "atan2_near_the_y_axis_float32",
        lambda x, y: onnxnn.atan2(y, x),
        _atan2_derivatives,
        [(0.01, 1.0), (-0.02, 1.5), (0.3, 1.7)],
        np.float32,
        ALL,
    ),
    (
        "atan2_extreme_magnitudes",
        lambda x, y: onnxnn.atan2(y, x),
        _atan2_derivatives,
        [(1e200, 1e200), (-3e-200, 4e-200), (0.0, 1e-200)],
        np.float64,
        ("x",),
    ),
]


def _derivatives(function: Callable, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """The derivatives ``_hypot_derivatives`` lists, elementwise, by backward passes with create_graph."""
    xt, yt = onnxnn.tensor(x, requires_grad=True), onnxnn.tensor(y, requires_grad=True)
    (first,) = onnxnn.autograd.grad(function(xt, yt).sum(), xt, create_graph=True)
    second_x, second_y = onnxnn.autograd.grad(first.sum(), (xt, yt), create_graph=True)
    (mixed_y,) = onnxnn.autograd.grad(function(xt, yt).sum(), yt, create_graph=True)
    (second_yy,) = onnxnn.autograd.grad(mixed_y.sum(), yt)
    (third,) = onnxnn.autograd.grad(second_x.sum(), xt)
    tensors = {"x": first, "xx": second_x, "xy": second_y, "yy": second_yy, "xxx": third}
    return {name: tensor.detach().numpy() for name, tensor in tensors.items()}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "case_id, function, exact, points, dtype, names", SMOOTH_CASES, ids=[case[0] for case in SMOOTH_CASES]
)
def test_second_and_third_derivatives_match_the_exact_ones(case_id, function, exact, points, dtype, names, executor):
    x, y = (np.array(coordinates, dtype) for coordinates in zip(*points))
    with onnxnn.set_executor(executor):
        actual = _derivatives(function, x, y)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # orders out of range go unchecked
        expected = exact(x.astype(np.float64), y.astype(np.float64))
    for name in names:
        values = expected[name]
        bound = ROUNDINGS * np.finfo(dtype).eps * np.abs(values)
        assert np.all(np.abs(actual[name] - values) <= bound), (name, actual[name], values)


INF, NAN = np.inf, np.nan

# (function, first operand, second operand, gradient of each): PyTorch's formulas where they are
# not smooth. hypot's x / h is NaN at the origin and at inf / inf; atan2's reciprocal of
# x^2 + y^2 is made 0 at the origin, so both gradients are zeros, of the signs of x and -y.
SPECIAL_POINTS = [
    (onnxnn.hypot, 0.0, 0.0, NAN, NAN),
    (onnxnn.hypot, -0.0, 0.0, NAN, NAN),
    (onnxnn.hypot, INF, 1.0, NAN, 0.0),
    (onnxnn.hypot, 1.0, -INF, 0.0, NAN),
    (onnxnn.hypot, 3.0, -4.0, 0.6, -0.8),
    (onnxnn.atan2, 0.0, 0.0, 0.0, -0.0),
    (onnxnn.atan2, -0.0, -0.0, -0.0, 0.0),
    (onnxnn.atan2, INF, 1.0, 0.0, NAN),
    (onnxnn.atan2, 1.0, INF, NAN, -0.0),
    (onnxnn.atan2, 2.0, 0.0, 0.0, -0.5),
]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_gradients_at_the_origin_and_infinities_are_pytorchs(executor):
    for function, first, second, *expected in SPECIAL_POINTS:
        a = onnxnn.tensor([first], dtype=onnxnn.float64, requires_grad=True)
        b = onnxnn.tensor([second], dtype=onnxnn.float64, requires_grad=True)
        with onnxnn.set_executor(executor):
            actual = [gradient.numpy()[0] for gradient in onnxnn.autograd.grad(function(a, b).sum(), (a, b))]
        point = (function.__name__, first, second)
        np.testing.assert_array_equal(actual, expected, err_msg=str(point))
        numbers = ~np.isnan(expected)  # and the signs of zeros
        assert list(np.signbit(actual)[numbers]) == list(np.signbit(expected)[numbers]), point


# ---------------------------------------------------------------- einsum reading diagonals


def _quadratic(equation: str, operand_count: int) -> Callable:
    """``a -> einsum(equation, a * a)`` (one operand) or ``einsum(equation, a, a)`` (two): quadratic in a."""
    if operand_count == 1:
        return lambda library, a: library.einsum(equation, a * a)
    return lambda library, a: library.einsum(equation, a, a)


# (equation, operand shape, how many times the equation reads the operand)
DIAGONAL_CASES = [
    ("ii->", (3, 3), 1),
    ("ii->i", (3, 3), 1),
    ("bii->b", (2, 3, 3), 1),
    ("bii->bi", (2, 3, 3), 1),
    ("iij->j", (3, 3, 2), 1),
    ("iij->ji", (3, 3, 2), 1),
    ("iii->i", (2, 2, 2), 1),
    ("ijij->ji", (2, 3, 2, 3), 1),
    ("...ii->...i", (2, 3, 3), 1),
    ("ii,ij->j", (3, 3), 2),
    ("iij,kkj->ik", (2, 2, 2), 2),
]


def _exact_hessian(function: Callable, weights: np.ndarray, shape: tuple) -> np.ndarray:
    """The symmetric matrix Q of the quadratic form ``a -> sum(weights * function(a)) = a^T Q a``, by
    polarization over pairs of basis tensors: exact, for weights that are small integers."""
    size = int(np.prod(shape))

    def form(a: np.ndarray) -> float:
        return float(np.sum(weights * function(np, a.reshape(shape))))

    basis = np.eye(size)
    diagonal = [form(basis[p]) for p in range(size)]
    q = np.empty((size, size))
    for p, r in itertools.product(range(size), repeat=2):
        q[p, r] = (form(basis[p] + basis[r]) - diagonal[p] - diagonal[r]) / 2
    return q


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("equation, shape, operand_count", DIAGONAL_CASES, ids=[case[0] for case in DIAGONAL_CASES])
def test_einsum_reading_a_diagonal_has_exact_gradient_and_hessian_vector_product(
    equation, shape, operand_count, executor
):
    rng = np.random.default_rng(3)
    function = _quadratic(equation, operand_count)
    a, direction = rng.standard_normal(shape), rng.standard_normal(shape)
    weights = rng.integers(-3, 4, function(np, a).shape).astype(np.float64)
    q = _exact_hessian(function, weights, shape)
    with onnxnn.set_executor(executor):
        leaf = onnxnn.tensor(a, requires_grad=True)
        loss = (function(onnxnn, leaf) * onnxnn.tensor(weights)).sum()
        (gradient,) = onnxnn.autograd.grad(loss, leaf, create_graph=True)
        (hessian_vector,) = onnxnn.autograd.grad((gradient * onnxnn.tensor(direction)).sum(), leaf)
        gradient = gradient.detach().numpy()
        hessian_vector = hessian_vector.numpy()
    for actual, vector in ((gradient, a), (hessian_vector, direction)):
        expected = 2 * q @ vector.reshape(-1)
        # Sums of at most ``terms`` products of two or three factors each.
        terms = int(np.count_nonzero(q, axis=1).max(initial=1))
        bound = 4 * terms * np.finfo(np.float64).eps * (2 * np.abs(q) @ np.abs(vector.reshape(-1)))
        np.testing.assert_array_less(np.abs(actual.reshape(-1) - expected), bound + np.finfo(np.float64).tiny)


def test_einsum_diagonal_gradient_keeps_an_infinite_gradient_on_the_diagonal():
    # An exact scatter, not a product with a 0/1 mask: off the diagonal stays 0, never inf * 0 = NaN.
    a = onnxnn.tensor(np.ones((2, 2)), requires_grad=True)
    (gradient,) = onnxnn.autograd.grad(onnxnn.einsum("ii->i", a), a, onnxnn.tensor([np.inf, 1.0]))
    np.testing.assert_array_equal(gradient.numpy(), [[np.inf, 0.0], [0.0, 1.0]])
