"""Pointwise ops at their special values: PyTorch's results and gradients where a bound, a base, a weight
or a step is NaN, zero, negative or infinite.

Specifies ``clamp``/``clip`` with tensor bounds (a NaN ``min`` makes the result NaN even where ``max``
applies), ``nextafter``'s gradient (passed to ``input`` where ``input != other``, zeros to ``other``),
``lerp``'s gradients with an infinite difference or weight and its 0-d weight of another dtype, and the
exponent gradient of ``pow``/``float_power`` at a negative or zero base.

Expectations come from numpy (``np.minimum``/``np.maximum`` propagate NaN, ``np.nextafter``) and from
PyTorch's derivative formulas (``derivatives.yaml``) evaluated in numpy, never from onnxnn. Tolerances:
float64's epsilon times the few operations each formula chains.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
EPS64 = float(np.finfo(np.float64).eps)
NAN, INF = math.nan, math.inf


def _leaves(*columns):
    return [
        onnxnn.tensor(np.asarray(column, np.float64), dtype=onnxnn.float64, requires_grad=True) for column in columns
    ]


def _grads(leaves):
    return [np.asarray(leaf.grad.numpy(), np.float64) for leaf in leaves]


def _assert_same(actual, expected, rtol=0.0):
    """Equal values, NaN where expected is NaN and infinities of the same sign."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(actual[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol, atol=0.0)


# ---------------------------------------------------------------- clamp with tensor bounds

BOUND_VALUES = [-1.0, 0.0, 0.5, 1.0, 3.0, NAN]
# Every (input, min, max) of the values above: min > max, NaN in each place, the bounds equal.
CLAMP_GRID = np.array(list(itertools.product(BOUND_VALUES, repeat=3))).T


@pytest.mark.parametrize("executor", EXECUTORS)
def test_clamp_with_tensor_bounds_is_nan_wherever_a_bound_is(executor):
    x, low, high = CLAMP_GRID
    with onnxnn.set_executor(executor):
        actual = onnxnn.clamp(*(onnxnn.tensor(column) for column in CLAMP_GRID)).numpy()
        clipped = onnxnn.clip(*(onnxnn.tensor(column) for column in CLAMP_GRID)).numpy()
    # PyTorch's min(max(x, min), max), NaN propagating (a NaN min too where max applies).
    expected = np.minimum(np.maximum(x, low), high).astype(np.float32)
    _assert_same(actual, expected)
    _assert_same(clipped, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_clamp_with_tensor_bounds_gradients_are_pytorchs_rule(executor):
    x, low, high = CLAMP_GRID
    with onnxnn.set_executor(executor):
        leaves = _leaves(x, low, high)
        onnxnn.clamp(*leaves).sum().backward()
    with np.errstate(invalid="ignore"):
        # clamp_backward_min_max: input where min <= x <= max, min where x < min < max, max where
        # x > max or max < min (also beside a NaN min, where the value is NaN).
        expected = [(x >= low) & (x <= high), (x < low) & (low < high), (x > high) | (high < low)]
    for actual, wanted in zip(_grads(leaves), expected):
        np.testing.assert_array_equal(actual, wanted.astype(np.float64))


# ---------------------------------------------------------------- nextafter

NEXTAFTER_CASES = [
    # (input, other): steps up and down, from and to zero, equal operands (gradient 0), NaN operands
    (1.0, 3.0),
    (2.0, 0.0),
    (0.0, 1.0),
    (-0.0, -1.0),
    (5e-324, 0.0),
    (1e308, INF),
    (-7.5, -7.5),
    (0.0, -0.0),
    (NAN, 1.0),
    (1.0, NAN),
]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_nextafter_passes_the_gradient_to_input_where_it_moves(executor):
    x, y = (np.array(column) for column in zip(*NEXTAFTER_CASES))
    with onnxnn.set_executor(executor):
        a, b = _leaves(x, y)
        result = onnxnn.nextafter(a, b)
        assert result.requires_grad
        values = result.detach().numpy()
        (result + a).sum().backward()
    np.testing.assert_array_equal(values, np.nextafter(x, y))
    # PyTorch's NextafterBackward0: where(self != other, grad, 0) for input, zeros for other.
    a_grad, b_grad = _grads([a, b])
    np.testing.assert_array_equal(a_grad, 1.0 + (x != y))
    np.testing.assert_array_equal(b_grad, np.zeros_like(y))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_nextafter_with_only_other_requiring_grad_gives_it_zeros(executor):
    with onnxnn.set_executor(executor):
        other = onnxnn.tensor([2.0, -1.0], requires_grad=True)
        result = onnxnn.nextafter(onnxnn.tensor([1.0, 1.0]), other)
        result.sum().backward()
    np.testing.assert_array_equal(other.grad.numpy(), [0.0, 0.0])


# ---------------------------------------------------------------- lerp

LERP_CASES = [
    # (start, end, weight): an infinite difference on either side of 0.5, an overflowing one, an
    # infinite weight, and ordinary values on both sides
    (0.0, INF, 0.25),
    (1e308, -1e308, 0.75),
    (1.0, 2.0, INF),
    (1.0, 2.0, -INF),
    (-INF, 0.0, 0.5),
    (3.0, -7.25, 0.1),
    (3.0, -7.25, 0.9),
]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_lerp_gradients_are_pytorchs_formulas_at_infinities(executor):
    start, end, weight = (np.array(column) for column in zip(*LERP_CASES))
    upstream = np.linspace(0.5, 2.0, len(LERP_CASES))
    with onnxnn.set_executor(executor):
        leaves = _leaves(start, end, weight)
        (onnxnn.lerp(*leaves) * onnxnn.tensor(upstream)).sum().backward()
    # LerpBackward1: grad * (1 - weight), grad * weight, grad * (end - start): no NaN from the unused side.
    expected = [upstream * (1 - weight), upstream * weight, upstream * (end - start)]
    for actual, wanted in zip(_grads(leaves), expected):
        _assert_same(actual, wanted, rtol=4 * EPS64)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "shape,dtype,weight_dtype,result_dtype",
    [
        ((2,), onnxnn.float32, onnxnn.float64, onnxnn.float32),
        ((2,), onnxnn.float64, onnxnn.float32, onnxnn.float64),
        ((2,), onnxnn.float32, onnxnn.int64, onnxnn.float32),
        ((), onnxnn.float32, onnxnn.float64, onnxnn.float64),  # all 0-d: promoted as PyTorch's result_type
    ],
)
def test_lerp_takes_a_zero_dimensional_weight_of_another_dtype(executor, shape, dtype, weight_dtype, result_dtype):
    weight = 1 if weight_dtype is onnxnn.int64 else 0.25
    with onnxnn.set_executor(executor):
        result = onnxnn.lerp(
            onnxnn.zeros(shape, dtype=dtype),
            onnxnn.full(shape, 4.0, dtype=dtype),
            onnxnn.tensor(weight, dtype=weight_dtype),
        )
    assert result.dtype is result_dtype
    np.testing.assert_array_equal(result.numpy(), np.full(shape, 4.0 * weight))


def test_lerp_gradient_of_a_zero_dimensional_weight_of_another_dtype_keeps_its_dtype():
    start = onnxnn.zeros(3, requires_grad=True)
    weight = onnxnn.tensor(0.25, dtype=onnxnn.float64, requires_grad=True)
    onnxnn.lerp(start, onnxnn.full((3,), 2.0), weight).sum().backward()
    assert weight.grad.dtype is onnxnn.float64
    assert weight.grad.item() == 6.0  # the sum of end - start
    np.testing.assert_array_equal(start.grad.numpy(), np.full(3, 0.75, np.float32))


def test_lerp_refuses_a_weight_of_another_dtype_with_dimensions():
    with pytest.raises(RuntimeError, match="for `weight`"):
        onnxnn.lerp(onnxnn.zeros(2), onnxnn.ones(2), onnxnn.tensor([0.5], dtype=onnxnn.float64))


# ---------------------------------------------------------------- pow's exponent gradient

POW_VALUES = [-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, INF, -INF, NAN]
POW_GRID = np.array(list(itertools.product(POW_VALUES, [-2.0, -1.5, -1.0, 0.0, 0.5, 2.0, 3.0, INF, -INF, NAN]))).T


def _pow_gradients(base, exponent):
    """PyTorch's pow_backward_self and pow_backward_exponent (derivatives.yaml), upstream gradient 1."""
    with np.errstate(all="ignore"):
        result = np.power(base, exponent)
        to_base = np.where(exponent == 0, 0.0, exponent * np.power(base, exponent - 1))
        to_exponent = np.where((base == 0) & (exponent >= 0), 0.0, result * np.log(base))
    return to_base, to_exponent


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("function", [onnxnn.pow, onnxnn.float_power], ids=["pow", "float_power"])
def test_pow_exponent_gradient_is_nan_below_zero_and_infinite_at_zero(executor, function):
    base, exponent = POW_GRID
    with onnxnn.set_executor(executor):
        leaves = _leaves(base, exponent)
        function(*leaves).sum().backward()
    actual_base, actual_exponent = _grads(leaves)
    expected_base, expected_exponent = _pow_gradients(base, exponent)
    # pow, log and two products: a few roundings of float64.
    _assert_same(actual_exponent, expected_exponent, rtol=8 * EPS64)
    _assert_same(actual_base, expected_base, rtol=8 * EPS64)
