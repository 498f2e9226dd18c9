"""Edge cases of the statistics ops, as PyTorch 2.13 gives them.

- ``quantile``/``nanquantile`` rank in the input's dtype: ``q * (n - 1)`` rounded there (float32's
  ``0.7 * 10`` is 7, where float64's is just above it), then floor, ceil or round half to even;
  linear and midpoint interpolation is ``lerp`` (``a + w * (b - a)`` for ``w < 0.5``, else
  ``b - (b - a) * (1 - w)``), so an infinite neighbour gives NaN or an infinity as that formula
  does. An empty ``q`` gives an empty result with a leading dim of 0; a linear quantile is
  differentiable in a ``q`` requiring grad (``(above - below) * (n - 1)`` per line, 0 on a line
  holding NaN).
- ``cov``: a normalizer ``<= 0`` (correction at least the weights' sum) warns and divides by 0;
  a single variable's covariance is 0-d; negative or badly typed weights are refused.
- int64 ``max``/``min``/``amax``/``amin`` along a dim of a tensor with no elements give empty results.
- ``topk`` of a 0-d tensor with ``k = 0`` is the tensor itself (index 0); ``unique_consecutive`` and
  ``unique`` along an empty dim give empty results, other zero-size dims are refused.
- ``cdist`` with ``p = 0`` counts nonzero differences, NaN where a difference is NaN (``inf - inf``);
  ``cumulative_trapezoid`` along an empty dim is empty, and an ``x`` of fewer dims than ``y`` is
  laid out with leading dims of 1.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
INF, NAN = float("inf"), float("nan")


def _lerp(a, b, w):
    """PyTorch's lerp in the operands' dtype (numpy scalars keep it)."""
    return a + w * (b - a) if abs(w) < 0.5 else b - (b - a) * (w.dtype.type(1) - w)


def _reference_quantile(values: np.ndarray, q: float, interpolation: str) -> float:
    """PyTorch's quantile of a 1-D array without NaNs, ranked in the array's dtype."""
    ordered = np.sort(values)
    scalar = values.dtype.type
    rank = scalar(q) * scalar(ordered.size - 1)
    rank = {"lower": np.floor, "higher": np.ceil, "nearest": np.round}.get(interpolation, lambda r: r)(rank)
    below, above = ordered[int(np.floor(rank))], ordered[int(np.ceil(rank))]
    if interpolation in ("lower", "higher", "nearest"):
        return below
    weight = scalar(0.5) if interpolation == "midpoint" else rank - np.floor(rank)
    with np.errstate(invalid="ignore"):
        return _lerp(below, above, weight)


RANK_CASES = [
    # (values, q, interpolation): float64's rank 7.000000000000001 would take element 8
    (np.arange(11, dtype=np.float32), 0.7000000000000001, "higher"),
    (np.arange(101, dtype=np.float32) * np.float32(0.37), 0.07, "higher"),
    (np.arange(101, dtype=np.float32) * np.float32(0.37), 0.15, "higher"),
    (np.linspace(-1, 1, 13).astype(np.float32) ** 3, 0.0125, "linear"),
    (np.linspace(-1, 1, 13).astype(np.float32) ** 3, 0.8, "linear"),
    (np.linspace(-1, 1, 13).astype(np.float32) ** 3, 0.3, "midpoint"),
    (np.linspace(0, 3, 7) ** 2, 0.55, "nearest"),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("values, q, interpolation", RANK_CASES)
@pytest.mark.parametrize("function", ["quantile", "nanquantile"])
def test_quantile_ranks_in_the_input_dtype(executor, function, values, q, interpolation):
    expected = _reference_quantile(values, q, interpolation)
    with onnxnn.set_executor(executor):
        actual = getattr(onnxnn, function)(onnxnn.tensor(values), q, interpolation=interpolation).item()
    assert actual == expected


INFINITE_CASES = [
    # (values, q, interpolation, expected): each from lerp's formula by hand
    ([INF], 0.5, "linear", NAN),  # inf + 0 * (inf - inf)
    ([INF], 0.5, "midpoint", NAN),
    ([INF], 0.5, "lower", INF),
    ([-INF, 1.0, 2.0], 0.0, "linear", NAN),  # -inf + 0 * (-inf - -inf)
    ([-INF, 1.0, 2.0], 0.25, "linear", -INF),  # weight 0.5: 1 - (1 - -inf) * 0.5
    ([-INF, 1.0, 2.0], 0.25, "midpoint", -INF),
    ([-INF, 1.0, 2.0], 0.0, "midpoint", NAN),
    ([1.0, 2.0, INF], 1.0, "linear", NAN),
    ([1.0, 2.0, INF], 0.75, "linear", NAN),  # weight 0.5: inf - (inf - 2) * 0.5
    ([1.0, 2.0, INF], 0.7, "linear", INF),  # weight < 0.5: 2 + w * (inf - 2)
    ([-INF, -INF, 3.0], 0.5, "linear", NAN),
    ([-INF, INF], 0.5, "nearest", -INF),  # rank 0.5 rounds half to even
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("values, q, interpolation, expected", INFINITE_CASES)
@pytest.mark.parametrize("function", ["quantile", "nanquantile"])
def test_quantile_interpolates_infinities_as_lerp(executor, function, values, q, interpolation, expected):
    with onnxnn.set_executor(executor):
        actual = getattr(onnxnn, function)(onnxnn.tensor(values), q, interpolation=interpolation).item()
    np.testing.assert_equal(actual, expected)


EMPTY_Q_CASES = [
    # (dim, keepdim, result shape) for a (2, 3) input
    (1, False, (0, 2)),
    (1, True, (0, 2, 1)),
    (0, False, (0, 3)),
    (None, False, (0,)),
    (None, True, (0, 1, 1)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dim, keepdim, shape", EMPTY_Q_CASES)
@pytest.mark.parametrize("function", ["quantile", "nanquantile"])
def test_an_empty_q_gives_an_empty_result(executor, function, dim, keepdim, shape):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]], requires_grad=True)
        result = getattr(onnxnn, function)(x, onnxnn.tensor([]), dim=dim, keepdim=keepdim)
        assert tuple(result.shape) == shape
        assert result.tolist() == np.zeros(shape).tolist()
        result.sum().backward()
        assert x.grad.tolist() == [[0.0] * 3] * 2


Q_GRADIENT_CASES = [
    # (rows, q, interpolation, expected q.grad): sum over rows of (above - below) * (n - 1), n = 3
    ([[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]], [0.3, 0.7], "linear", [(2 - 1) * 2 + (5 - 4) * 2, (3 - 2) * 2 + (7 - 5) * 2]),
    ([[1.0, NAN, 3.0], [1.0, 2.0, 3.0]], [0.3, 0.7], "linear", [2.0, 2.0]),  # a line with a NaN adds 0
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("rows, q, interpolation, expected", Q_GRADIENT_CASES)
def test_quantile_gradient_with_respect_to_q(executor, rows, q, interpolation, expected):
    with onnxnn.set_executor(executor):
        q_tensor = onnxnn.tensor(q, requires_grad=True)
        onnxnn.quantile(onnxnn.tensor(rows), q_tensor, dim=1, interpolation=interpolation).sum().backward()
    np.testing.assert_allclose(q_tensor.grad.tolist(), expected, rtol=4 * np.finfo(np.float32).eps)


def test_nanquantile_q_gradient_counts_each_lines_numbers():
    # q * (count - 1): the all-NaN line's rank -q is read as 0 (no gradient) except at q = 0 (-0.0, kept:
    # its lerp of NaNs gives NaN); the other line, count 2, adds (2 - 1) * (2 - 1) = 1.
    q = onnxnn.tensor([0.0, 0.7], requires_grad=True)
    rows = onnxnn.tensor([[NAN, NAN, NAN], [1.0, 2.0, NAN]])
    onnxnn.nanquantile(rows, q, dim=1).sum().backward()
    np.testing.assert_equal(q.grad.tolist(), [NAN, 1.0])


QUANTILE_REFUSALS = [
    (lambda: onnxnn.quantile(onnxnn.ones(3), onnxnn.zeros(2, 2)), "q must be a scalar or 1D tensor"),
    (lambda: onnxnn.quantile(onnxnn.ones(3, dtype=onnxnn.float16), 0.5), "either float or double dtype"),
    (lambda: onnxnn.quantile(onnxnn.ones(3), onnxnn.tensor([0.5, NAN])), r"q values must be in the range \[0, 1\]"),
    (lambda: onnxnn.nanquantile(onnxnn.ones(3), NAN), r"q values must be in the range \[0, 1\]"),
    (
        lambda: onnxnn.quantile(onnxnn.ones(3), 0.5, interpolation="cubic"),
        "one of linear, lower, higher, midpoint or nearest, but got cubic",
    ),
    (lambda: onnxnn.nanquantile(onnxnn.zeros(0), 0.5), r"^quantile\(\) input tensor must be non-empty"),
]


@pytest.mark.parametrize("call, message", QUANTILE_REFUSALS)
def test_quantile_refuses_as_pytorch(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


X = np.array([[1.0, 2.0, 4.0], [3.0, 1.0, 0.5]], dtype=np.float32)


def _weighted_cov_numerator(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    average = (x * weights).sum(1, keepdims=True) / weights.sum()
    centered = x - average
    return (centered * weights) @ centered.T


DEGENERATE_COV_CASES = [
    # (keyword arguments, normalizer): correction at or past the weights' sum divides by 0
    ({"correction": 3, "fweights": np.array([1, 1, 1])}, 0.0),
    ({"correction": 5, "fweights": np.array([1, 1, 1])}, 0.0),  # 3 - 5 < 0: 0 as well
    ({"correction": 1, "aweights": np.array([1.0, 0.0, 0.0], np.float32)}, 0.0),
    ({"correction": 2, "aweights": np.array([1.0, 1.0, 0.0], np.float32)}, 0.0),
    ({"correction": 3}, 0.0),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("arguments, normalizer", DEGENERATE_COV_CASES)
def test_cov_with_no_degrees_of_freedom_warns_and_divides_by_zero(executor, arguments, normalizer):
    weights = np.ones(3, np.float32)
    for name in ("fweights", "aweights"):
        if name in arguments:
            weights = weights * arguments[name].astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = _weighted_cov_numerator(X, weights) / np.float32(normalizer)
    tensors = {
        key: onnxnn.tensor(value) if isinstance(value, np.ndarray) else value for key, value in arguments.items()
    }
    with onnxnn.set_executor(executor), pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        actual = onnxnn.cov(onnxnn.tensor(X), **tensors).numpy()
    np.testing.assert_equal(np.sign(actual), np.sign(expected))  # infinities of the numerator's sign, NaN for 0


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "arguments",
    [{}, {"fweights": np.array([1, 2, 1])}, {"aweights": np.array([0.5, 1.0, 2.0], np.float32)}],
)
def test_cov_of_one_variable_is_0_d(executor, arguments):
    row = X[:1]
    weights = np.ones(3, np.float32)
    for value in arguments.values():
        weights = weights * value.astype(np.float32)
    total = weights.sum()
    normalizer = total - 1 if "aweights" not in arguments else total - (weights * arguments["aweights"]).sum() / total
    expected = _weighted_cov_numerator(row, weights)[0, 0] / normalizer
    tensors = {key: onnxnn.tensor(value) for key, value in arguments.items()}
    with onnxnn.set_executor(executor), warnings.catch_warnings():
        warnings.simplefilter("error")
        result = onnxnn.cov(onnxnn.tensor(row), **tensors)
        correlation = onnxnn.corrcoef(onnxnn.tensor(row))
    assert tuple(result.shape) == () and tuple(correlation.shape) == ()
    np.testing.assert_allclose(result.item(), expected, rtol=8 * np.finfo(np.float32).eps)
    assert correlation.item() == 1.0


COV_REFUSALS = [
    ({"fweights": [1, -1, 1]}, "fweights cannot be negative"),
    ({"aweights": [1.0, -1.0, 1.0]}, "aweights cannot be negative"),
    ({"fweights": [1.0, 1.0, 1.0]}, "expected fweights to have integral dtype but got fweights with Float dtype"),
    ({"aweights": [1, 1, 1]}, "expected aweights to have floating point dtype but got aweights with Long dtype"),
    ({"fweights": [1, 1]}, "same numel as there are observations in the input but got 2 != 3"),
    ({"aweights": [[1.0, 1.0, 1.0]]}, "expected aweights to have one or fewer dimensions but got aweights with 2"),
    ({"aweights": [0.0, 0.0, 0.0]}, "weights sum to zero, can't be normalized"),
]


@pytest.mark.parametrize("arguments, message", COV_REFUSALS)
def test_cov_refuses_bad_weights_as_pytorch(arguments, message):
    tensors = {key: onnxnn.tensor(value) for key, value in arguments.items()}
    with pytest.raises(RuntimeError, match=message):
        onnxnn.cov(onnxnn.tensor(X), **tensors)


def test_cov_and_corrcoef_refuse_bools_and_three_dims():
    with pytest.raises(RuntimeError, match="bool dtype is not supported"):
        onnxnn.cov(onnxnn.tensor([True, False]))
    with pytest.raises(RuntimeError, match=r"^corrcoef\(\): expected input to have two or fewer dimensions"):
        onnxnn.corrcoef(onnxnn.zeros(2, 2, 2))


EMPTY_EXTREMA_CASES = [
    # (shape, dim, result shape): no elements, the reduced dim not empty
    ((0, 3), 1, (0,)),
    ((0, 3, 2), 2, (0, 3)),
    ((2, 0, 9), 2, (2, 0)),
    ((2, 0, 9), -1, (2, 0)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("shape, dim, result_shape", EMPTY_EXTREMA_CASES)
@pytest.mark.parametrize("function", ["max", "min", "amax", "amin"])
def test_int64_extrema_of_a_tensor_without_elements(executor, function, shape, dim, result_shape):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(np.zeros(shape, np.int64))
        result = getattr(onnxnn, function)(x, dim)
        parts = tuple(result) if function in ("max", "min") else (result,)
        for part in parts:
            assert tuple(part.shape) == result_shape
            assert part.numpy().size == 0


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("value, k, dim", [(3.0, 0, 0), (3.0, 0, -1), (3.0, 1, 0), (7, 0, -1)])
def test_topk_of_a_0_d_tensor_is_itself(executor, value, k, dim):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(value, requires_grad=isinstance(value, float))
        values, indices = onnxnn.topk(x, k, dim=dim)
        assert tuple(values.shape) == () and tuple(indices.shape) == ()
        assert values.item() == value and indices.item() == 0
        if x.requires_grad:
            values.backward()
            assert x.grad.item() == 1.0


UNIQUE_EMPTY_CASES = [
    # (shape, dim): the selected dim is the only empty one
    ((0, 3), 0),
    ((3, 0), 1),
    ((0,), 0),
    ((2, 0, 2), 1),
    ((2, 0), -1),
]


@pytest.mark.parametrize("shape, dim", UNIQUE_EMPTY_CASES)
@pytest.mark.parametrize("function", ["unique", "unique_consecutive"])
def test_unique_along_an_empty_dim_is_empty(function, shape, dim):
    values, inverse, counts = getattr(onnxnn, function)(
        onnxnn.zeros(shape), dim=dim, return_inverse=True, return_counts=True
    )
    assert tuple(values.shape) == shape
    assert tuple(inverse.shape) == (0,) and tuple(counts.shape) == (0,)


UNIQUE_REFUSALS = [
    (lambda f: f(onnxnn.tensor(2.0), dim=0), IndexError, "Dimension specified as 0 but tensor has no dimensions"),
    (lambda f: f(onnxnn.zeros(0, 3), dim=1), RuntimeError, "There are 0 sized dimensions, and they aren't selected"),
    (lambda f: f(onnxnn.zeros(3, 0), dim=0), RuntimeError, "There are 0 sized dimensions, and they aren't selected"),
    (lambda f: f(onnxnn.zeros(0, 0), dim=0), RuntimeError, "Number of zero sized dimensions is more than one"),
]


@pytest.mark.parametrize("call, error, message", UNIQUE_REFUSALS)
@pytest.mark.parametrize("function", ["unique", "unique_consecutive"])
def test_unique_refuses_zero_size_dims_as_pytorch(function, call, error, message):
    with pytest.raises(error, match=message):
        call(getattr(onnxnn, function))


CDIST_ZERO_CASES = [
    # (x1, x2, expected): the count of nonzero differences, NaN where one is NaN
    ([[0.0, 1.0, INF, 3.0]], [[0.0, 2.0, INF, 1.0]], [[NAN]]),  # inf - inf
    ([[INF, -INF, 2.0, 0.0]], [[0.0, 2.0, INF, 1.0], [1e-45, 0.0, -0.0, 3.0]], [[4.0, 4.0]]),
    ([[NAN]], [[1.0]], [[NAN]]),
    ([[3e38]], [[-3e38]], [[1.0]]),  # the difference overflows to inf: still one nonzero
    ([[1.0, 2.0]], [[1.0, 2.0]], [[0.0]]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("x1, x2, expected", CDIST_ZERO_CASES)
def test_cdist_p_0_counts_nonzero_differences(executor, x1, x2, expected):
    with onnxnn.set_executor(executor):
        actual = onnxnn.cdist(onnxnn.tensor(x1), onnxnn.tensor(x2), p=0).tolist()
    np.testing.assert_equal(actual, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("shape, dim", [((0,), 0), ((3, 0), 1), ((0, 3), 0), ((2, 0, 3), 1), ((1,), 0)])
@pytest.mark.parametrize("with_x", [False, True])
def test_cumulative_trapezoid_along_an_empty_dim_is_empty(executor, shape, dim, with_x):
    expected_shape = tuple(max(size - 1, 0) if axis == dim else size for axis, size in enumerate(shape))
    with onnxnn.set_executor(executor):
        y = onnxnn.ones(shape)
        result = onnxnn.cumulative_trapezoid(y, onnxnn.ones(shape) if with_x else None, dim=dim)
        assert tuple(result.shape) == expected_shape
        assert result.numpy().size == 0


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("function", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_lays_a_shorter_x_out_with_leading_dims(executor, function):
    y = np.arange(24, dtype=np.float64).reshape(2, 3, 4) ** 2
    x = np.cumsum(np.arange(1, 4, dtype=np.float64)).reshape(3, 1)  # (3, 1): as (1, 3, 1), along dim 1
    areas = (y[:, 1:] + y[:, :-1]) * (x[1:] - x[:-1]) / 2
    expected = areas.sum(1) if function == "trapezoid" else np.cumsum(areas, 1)
    with onnxnn.set_executor(executor):
        actual = getattr(onnxnn, function)(onnxnn.tensor(y), onnxnn.tensor(x), dim=1).numpy()
    np.testing.assert_allclose(actual, expected, rtol=4 * np.finfo(np.float64).eps)


TRAPEZOID_REFUSALS = [
    (lambda: onnxnn.cumulative_trapezoid(onnxnn.tensor(2.0)), IndexError, "slice\\(\\) cannot be applied to a 0-dim"),
    (
        lambda: onnxnn.cumulative_trapezoid(onnxnn.ones(3), onnxnn.ones(2)),
        RuntimeError,
        "cumulative_trapezoid: There must be one `x` value for each sample point",
    ),
    (
        lambda: onnxnn.trapezoid(onnxnn.ones(3), onnxnn.ones(2)),
        RuntimeError,
        "^trapezoid: There must be one `x` value for each sample point",
    ),
    (lambda: onnxnn.trapezoid(onnxnn.tensor([True, False])), RuntimeError, "bool input for `y`"),
]


@pytest.mark.parametrize("call, error, message", TRAPEZOID_REFUSALS)
def test_trapezoid_refuses_as_pytorch(call, error, message):
    with pytest.raises(error, match=message):
        call()
