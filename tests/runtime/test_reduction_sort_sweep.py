"""Reductions, sorting and searching where a differential sweep against PyTorch 2.13 found them apart.

Expected values come from numpy formulas of PyTorch's documented behaviour or of its CPU kernels:

- ``argmax``/``argmin`` without ``dim`` and with ``keepdim`` keep every dim at size 1; a dim named twice
  in a reduction's dims is a RuntimeError; ``var``/``std`` take ``unbiased`` or ``correction``, not both.
- ``var``'s gradient is ``var_backward``'s ``2 (x - mean) / (N - correction)`` (no term through the
  mean: an infinity in a line leaves the other elements finite gradients); over all elements with
  ``N - correction <= 0`` it is inf, NaN where ``x == mean``.
- ``median``/``nanmedian``/``kthvalue`` refuse bool inputs with NotImplementedError after their other
  checks; ``median()`` of no elements is NaN with a zero gradient; ``nanmedian()`` of NaNs only spreads
  its gradient over them.
- ``bincount``'s weighted counts are float32 for float32 weights and float64 for any other; ``histc`` and
  ``diff`` check their arguments as PyTorch does.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
NAN, INF = float("nan"), float("inf")


@pytest.fixture(params=EXECUTORS)
def executor(request):
    with onnxnn.set_executor(request.param):
        yield request.param


# ---------------------------------------------------------------- argmax/argmin, dims


ARG_CASES = [
    (np.array([3, 1, 4, 1, 5, 9, 2], np.int64), "argmax"),
    (np.array([[1, 3, 3], [7, -1, 7]], np.int32), "argmax"),
    (np.array([[[2, 0], [0, 5]]], np.uint8), "argmin"),
    (np.array([[1.0, 3.0], [NAN, 0.0]]), "argmin"),
]


@pytest.mark.parametrize("data, name", ARG_CASES)
def test_arg_reduction_over_all_dims_keeps_them(executor, data, name):
    result = getattr(onnxnn, name)(onnxnn.tensor(data), None, True)
    flat = data.reshape(-1)
    position = int(np.argmax(np.isnan(flat))) if data.dtype.kind == "f" and np.isnan(flat).any() else None
    expected = position if position is not None else int(getattr(np, name)(flat))
    assert tuple(result.shape) == (1,) * data.ndim
    assert result.numpy().reshape(-1).tolist() == [expected]


DUPLICATE_DIMS = [
    ("sum", (0, 0)),
    ("sum", (1, -1)),
    ("mean", (0, -2)),
    ("amax", (0, 0)),
    ("amin", [1, -1]),
    ("var", (0, 0)),
    ("std", (1, -1)),
    ("count_nonzero", (0, 0)),
    ("all", (0, 0)),
    ("logsumexp", (0, -2)),
]


@pytest.mark.parametrize("name, dims", DUPLICATE_DIMS)
def test_a_dim_named_twice_is_refused(name, dims):
    x = onnxnn.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(RuntimeError, match="appears multiple times in the list of dims"):
        getattr(onnxnn, name)(x, dims)


@pytest.mark.parametrize("name", ["var", "std"])
def test_unbiased_and_correction_together_are_refused(name):
    with pytest.raises(TypeError):
        getattr(onnxnn, name)(onnxnn.tensor([1.0, 2.0]), 0, True, correction=0)


# ---------------------------------------------------------------- var / std gradients


def _var_gradient(x: np.ndarray, axis, correction: float, weights: np.ndarray) -> np.ndarray:
    """PyTorch's ``var_backward``: ``2 (x - mean) / dof`` along dims; over all elements a ``dof <= 0``
    gives inf, NaN where ``x == mean``."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = x.mean(axis=axis, keepdims=True)
        count = x.size if axis is None else x.shape[axis]
        dof = count - correction
        kept = weights if axis is None else np.expand_dims(weights, axis)
        if axis is None and dof <= 0:
            return kept * np.where(x == mean, NAN, INF)
        scale = 2.0 / dof if dof != 0 else INF
        return kept * (x - mean) * scale


VAR_GRADIENT_CASES = [
    # (x, dim, correction): an infinity among finite elements, N == correction, N < correction
    (np.array([[-INF, -INF, 2.0, 4.0], [1.0, 2.0, 3.0, 5.0]]), 1, 1),
    (np.array([[1.0, INF, 3.0], [2.0, 2.0, 7.0]]), 1, 0),
    (np.array([[1.0, 2.0, 2.0], [4.0, 0.0, 3.0]]), 0, 2),
    (np.array([[1.0, 2.0, 2.0], [4.0, 0.0, 3.0]]), 1, 5),
    (np.array([[1.0, 2.0], [4.0, 4.0]]), None, 4),
    (np.array([[1.0, 2.0], [4.0, 4.0]]), None, 1),
    (np.array(2.5), None, 2),
]


@pytest.mark.parametrize("x, dim, correction", VAR_GRADIENT_CASES)
def test_var_gradient_is_pytorchs_formula(executor, x, dim, correction):
    t = onnxnn.tensor(x, requires_grad=True)
    value = onnxnn.var(t, dim, correction=correction)
    weights = np.linspace(0.5, 1.5, max(value.numel(), 1)).reshape(tuple(value.shape))
    (value * onnxnn.tensor(weights)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), _var_gradient(x, dim, correction, weights), rtol=1e-12)


def test_var_second_derivative(executor):
    # f = sum of the squared gradient of var along dim 1: df/dx = 8 (x - mean) / dof^2.
    x = np.array([[1.0, 2.0, 6.0], [4.0, 4.0, -1.0]])
    t = onnxnn.tensor(x, requires_grad=True)
    (gradient,) = onnxnn.autograd.grad(onnxnn.var(t, 1).sum(), t, create_graph=True)
    (gradient * gradient).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), 8 * (x - x.mean(1, keepdims=True)) / 2**2, rtol=1e-12)


# ---------------------------------------------------------------- median / kthvalue / mode


BOOL_REFUSALS = [
    (lambda x: onnxnn.median(x), '"median_cpu"'),
    (lambda x: onnxnn.nanmedian(x), '"median_cpu"'),
    (lambda x: onnxnn.median(x, 0), '"median_out"'),
    (lambda x: onnxnn.nanmedian(x, -1, True), '"median_out"'),
    (lambda x: onnxnn.kthvalue(x, 1, 0), '"kthvalue_cpu"'),
]


@pytest.mark.parametrize("call, kernel", BOOL_REFUSALS)
def test_selections_refuse_bools(call, kernel):
    with pytest.raises(NotImplementedError, match=kernel):
        call(onnxnn.tensor([True, False, True]))


def test_bool_checks_come_after_the_others():
    with pytest.raises(RuntimeError, match="k out of range"):
        onnxnn.kthvalue(onnxnn.tensor([True, False]), 3, 0)
    with pytest.raises(IndexError, match="non-zero size"):
        onnxnn.median(onnxnn.zeros((2, 0), dtype=onnxnn.bool), 1)
    single = onnxnn.kthvalue(onnxnn.tensor(True), 1)  # a 0-d tensor is its own k-th value
    assert single.values.item() is True and single.indices.item() == 0


@pytest.mark.parametrize("function", ["median", "nanmedian"])
def test_median_of_no_elements_has_a_zero_gradient(executor, function):
    t = onnxnn.tensor(np.zeros((2, 0)), requires_grad=True)
    result = getattr(onnxnn, function)(t)
    assert np.isnan(result.item())
    result.backward()
    assert t.grad.shape == (2, 0)


def test_nanmedian_of_nans_spreads_its_gradient_over_them(executor):
    t = onnxnn.tensor([NAN, NAN, NAN, NAN], requires_grad=True)
    result = onnxnn.nanmedian(t)
    assert np.isnan(result.item())
    result.backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.full(4, 0.25))


# ---------------------------------------------------------------- bincount / histc / diff


@pytest.mark.parametrize(
    "weights_dtype, expected_dtype",
    [
        (onnxnn.float32, onnxnn.float32),
        (onnxnn.float64, onnxnn.float64),
        (onnxnn.float16, onnxnn.float64),
        (onnxnn.int64, onnxnn.float64),
    ],
)
def test_bincount_weights_dtype(weights_dtype, expected_dtype):
    values = np.array([1, 0, 3, 3, 1, 1])
    weights = np.linspace(0, 1, 6)
    result = onnxnn.bincount(onnxnn.tensor(values), onnxnn.tensor(weights).to(weights_dtype))
    assert result.dtype == expected_dtype
    rounded = onnxnn.tensor(weights).to(weights_dtype).to(onnxnn.float64).numpy()
    np.testing.assert_allclose(result.to(onnxnn.float64).numpy(), np.bincount(values, rounded), rtol=1e-6)


def test_bincount_weights_of_another_length_are_refused():
    with pytest.raises(RuntimeError, match="same length as input"):
        onnxnn.bincount(onnxnn.tensor([1, 2]), onnxnn.tensor([1.0]))


@pytest.mark.parametrize(
    "bins, low, high, message",
    [(5, 1, 0, "max must be larger than min"), (0, 0, 1, "bins must be > 0"), (3, -INF, 1, "is not finite")],
)
def test_histc_checks_its_arguments_before_the_dtype(bins, low, high, message):
    with pytest.raises(RuntimeError, match=message):
        onnxnn.histc(onnxnn.tensor([1, 2, 3]), bins, low, high)


@pytest.mark.parametrize(
    "extra, message",
    [
        (np.ones(3), "same dimension as input"),
        (np.ones((2, 2)), r"input.size\(0\) = 3, but got tensor.size\(0\) = 2"),
        (np.array(1.0), "same dimension as input"),
    ],
)
@pytest.mark.parametrize("where", ["prepend", "append"])
def test_diff_checks_what_it_extends_with(extra, message, where):
    with pytest.raises(RuntimeError, match=message):
        onnxnn.diff(onnxnn.tensor(np.ones((3, 4))), 0, -1, **{where: onnxnn.tensor(extra)})
