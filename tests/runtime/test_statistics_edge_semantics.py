"""PyTorch's semantics at the edges of statistics and reductions: NaN in quantiles and searches,
``var(x, unbiased)``'s overload, empty dim lists, ``all``/``any`` dtypes, and einsum's scalar,
0-d and broadcast operands. Expectations from numpy's formulas (which share these semantics) and
finite differences.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import assert_within, gamma

import onnxnn

rng = np.random.default_rng(31)
WITH_NANS = rng.standard_normal((4, 7))
WITH_NANS[0, 2] = WITH_NANS[2, [1, 5]] = np.nan
WITH_NANS[3, :] = np.nan  # a line of NaNs only
METHODS = ["linear", "lower", "higher", "nearest", "midpoint"]
QS = np.array([0.0, 0.2, 0.5, 0.93, 1.0])  # float64, as the input (PyTorch requires it)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "function, reference", [("quantile", np.quantile), ("nanquantile", np.nanquantile)], ids=["quantile", "nanquantile"]
)
@pytest.mark.parametrize("dim", [1, 0, None], ids=["dim1", "dim0", "flat"])
def test_quantiles_of_lines_holding_nans(function, reference, method, dim):
    # quantile: a line holding a NaN has NaN quantiles; nanquantile: the quantiles of its numbers,
    # NaN for a line of NaNs only.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's all-NaN slice warning
        expected = reference(WITH_NANS, QS, axis=dim, method=method)
    actual = getattr(onnxnn, function)(onnxnn.tensor(WITH_NANS), onnxnn.tensor(QS), dim, interpolation=method)
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(actual.numpy()), np.isnan(expected))
    finite = ~np.isnan(expected)
    # An interpolation between two sorted values: a few roundings of their magnitude.
    assert_within(actual.numpy()[finite], expected[finite], gamma(4, np.float64) * np.nanmax(np.abs(WITH_NANS)))


def test_nanquantile_gradient_reaches_only_the_numbers():
    x = WITH_NANS[:3].copy()

    def quantiles(t):
        return onnxnn.nanquantile(t, onnxnn.tensor([0.3, 0.75]), 1)

    check_gradients(quantiles, [x])


def test_a_quantile_of_nothing_raises():
    with pytest.raises(RuntimeError, match="non-empty"):
        onnxnn.quantile(onnxnn.zeros(0), 0.5)


@pytest.mark.parametrize("function", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize(
    "arguments, ddof, axis",
    [
        ((False,), 0, None),  # PyTorch's (input, unbiased) overload, not dim 0
        ((True,), 1, None),  # not dim 1
        (((),), 1, None),  # an empty dim list reduces every dim, as sum's does
        (([],), 1, None),
        ((1, False), 0, 1),
        ((0, True, True), 1, 0),
    ],
    ids=["unbiased_false", "unbiased_true", "empty_tuple", "empty_list", "dim_unbiased", "dim_unbiased_keepdim"],
)
def test_var_and_std_read_a_bool_as_unbiased_and_no_dims_as_all(function, arguments, ddof, axis):
    x = rng.standard_normal((3, 5))
    keepdims = len(arguments) == 3
    variance = np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)
    first = variance if function.startswith("var") else np.sqrt(variance)
    result = getattr(onnxnn, function)(onnxnn.tensor(x), *arguments)
    actual = result[0] if function.endswith("_mean") else result
    assert actual.shape == first.shape
    assert_within(actual.numpy(), first, gamma(2 * x.size, np.float64) * np.abs(first) + 1e-15)
    assert getattr(onnxnn.tensor(x), function.split("_")[0])(*arguments).shape == first.shape


@pytest.mark.parametrize("function", ["all", "any"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.float32, np.bool_])
@pytest.mark.parametrize("dim", [None, 1, ()], ids=["all_dims", "dim1", "empty"])
def test_all_and_any_keep_uint8_and_reduce_nothing_over_no_dims(function, dtype, dim):
    x = np.array([[1, 0, 2], [3, 4, 0], [5, 6, 7]]).astype(dtype)
    reference = getattr(np, function)
    expected = x.astype(bool) if dim == () else reference(x, axis=dim)
    actual = (
        getattr(onnxnn, function)(onnxnn.tensor(x)) if dim is None else getattr(onnxnn, function)(onnxnn.tensor(x), dim)
    )
    assert actual.dtype == (onnxnn.uint8 if dtype == np.uint8 else onnxnn.bool)
    np.testing.assert_array_equal(actual.numpy().astype(bool), expected)


@pytest.mark.parametrize("right", [False, True])
def test_a_nan_is_searched_after_every_boundary(right):
    boundaries = np.array([1.0, 2.0, 2.0, 3.0])
    values = np.array([0.0, 2.0, 2.5, np.nan, np.inf, -np.inf])
    expected = np.searchsorted(boundaries, values, side="right" if right else "left")  # numpy sorts NaN last too
    np.testing.assert_array_equal(
        onnxnn.searchsorted(onnxnn.tensor(boundaries), onnxnn.tensor(values), right=right).numpy(), expected
    )
    np.testing.assert_array_equal(
        onnxnn.bucketize(onnxnn.tensor(values), onnxnn.tensor(boundaries), right=right).numpy(), expected
    )
    rows = np.stack([boundaries, boundaries + 1])
    np.testing.assert_array_equal(
        onnxnn.searchsorted(onnxnn.tensor(rows), onnxnn.tensor(np.stack([values, values])), right=right).numpy()[0],
        expected,
    )


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("i,i->", [(3,), (3,)]),
        ("ij->", [(2, 3)]),
        ("ij,ij", [(2, 3), (2, 3)]),  # implicit scalar output
        ("i,->i", [(3,), ()]),  # a 0-d operand
        ("ij,j->i", [(2, 1), (3,)]),  # a size-1 dim broadcast against the other operand
        ("bij,bjk->bik", [(1, 2, 3), (4, 3, 5)]),
        ("ij,kj->ikj", [(1, 3), (4, 1)]),
    ],
)
def test_einsum_values_and_gradients_of_scalar_0d_and_broadcast_operands(equation, shapes):
    arrays = [rng.standard_normal(shape) for shape in shapes]
    result = onnxnn.einsum(equation, *[onnxnn.tensor(a) for a in arrays])
    expected = np.einsum(equation, *arrays)
    assert_within(result.numpy(), expected, gamma(12, np.float64) * np.einsum(equation, *map(np.abs, arrays)))
    check_gradients(lambda *tensors: onnxnn.einsum(equation, *tensors), arrays)


def test_einsum_takes_the_sublist_format():
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    bound = gamma(3, np.float64) * (np.abs(a) @ np.abs(b))
    explicit = onnxnn.einsum(onnxnn.tensor(a), [0, 1], onnxnn.tensor(b), [1, 2], [0, 2])
    implicit = onnxnn.einsum(onnxnn.tensor(a), [0, 1], onnxnn.tensor(b), [1, 2])
    for result in (explicit, implicit):
        assert_within(result.numpy(), a @ b, bound)
    diagonal = onnxnn.einsum(onnxnn.tensor(a), [Ellipsis, 1], onnxnn.tensor(c), [1, Ellipsis])
    assert_within(diagonal.numpy(), np.einsum("...j,j...", a, c), gamma(3, np.float64) * np.diag(np.abs(a) @ np.abs(c)))
    with pytest.raises(ValueError, match="valid range"):
        onnxnn.einsum(onnxnn.tensor(a), [0, 60])


@pytest.mark.parametrize(
    "dtype, kwargs, result_dtype",
    [
        (onnxnn.int32, {"dtype": onnxnn.int32}, onnxnn.int32),
        (onnxnn.int64, {"dtype": onnxnn.int16}, onnxnn.int16),
        (onnxnn.int32, {}, onnxnn.int64),  # integers accumulate in int64 unless told otherwise
        (onnxnn.bool, {}, onnxnn.int64),
        (onnxnn.int32, {"dtype": onnxnn.float64}, onnxnn.float64),
    ],
)
def test_cumprod_returns_the_dtype_asked_for(dtype, kwargs, result_dtype):
    x = np.array([[1, 2, 0], [3, 1, 2]])
    result = onnxnn.cumprod(onnxnn.tensor(x).to(dtype), 1, **kwargs)
    assert result.dtype == result_dtype
    np.testing.assert_array_equal(result.numpy(), np.cumprod(x.astype(bool) if dtype == onnxnn.bool else x, 1))


def test_diff_of_order_zero_is_the_input():
    x = onnxnn.tensor([1.0, 4.0, 9.0])
    np.testing.assert_array_equal(
        onnxnn.diff(x, n=0, prepend=onnxnn.tensor([0.0]), append=onnxnn.tensor([1.0])).numpy(),
        np.diff([1.0, 4.0, 9.0], n=0, prepend=[0.0], append=[1.0]),
    )


def test_unique_keeps_every_nan_apart():
    x = np.array([1.0, np.nan, 1.0, np.nan, 3.0])
    values, inverse, counts = onnxnn.unique(onnxnn.tensor(x), return_inverse=True, return_counts=True)
    expected = np.unique(x, return_inverse=True, return_counts=True, equal_nan=False)
    for actual, wanted in zip((values, inverse, counts), expected):
        np.testing.assert_array_equal(actual.numpy(), wanted)


def test_the_mode_of_a_line_of_mostly_nans_is_nan():
    values, indices = onnxnn.mode(onnxnn.tensor([[np.nan, np.nan, 1.0], [2.0, 5.0, 2.0]]))
    np.testing.assert_array_equal(values.numpy(), [np.nan, 2.0])
    assert np.isnan([np.nan, np.nan, 1.0][indices[0].item()]) and indices[1].item() in (0, 2)


BOOLS = np.array([[True, False, True, False], [False, False, True, True]])


@pytest.mark.parametrize("descending", [False, True])
def test_bool_tensors_sort(descending):
    values, indices = onnxnn.sort(onnxnn.tensor(BOOLS), descending=descending, stable=True)
    order = np.argsort(-BOOLS.astype(int) if descending else BOOLS, axis=-1, kind="stable")
    assert values.dtype == onnxnn.bool
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(BOOLS, order, -1))
    np.testing.assert_array_equal(indices.numpy(), order)


@pytest.mark.parametrize("function, running", [("cummax", np.maximum), ("cummin", np.minimum)])
def test_bool_tensors_take_running_extrema(function, running):
    values, indices = getattr(onnxnn, function)(onnxnn.tensor(BOOLS), 1)
    expected = running.accumulate(BOOLS, axis=1)
    # PyTorch's index: the latest position holding the running extremum.
    positions = [
        [max(j for j in range(i + 1) if row[j] == line[i]) for i in range(4)] for row, line in zip(BOOLS, expected)
    ]
    assert values.dtype == onnxnn.bool
    np.testing.assert_array_equal(values.numpy(), expected)
    np.testing.assert_array_equal(indices.numpy(), positions)
