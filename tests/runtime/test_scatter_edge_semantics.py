"""Scatters whose ``src`` is larger than ``index`` in some dimension: PyTorch reads only the leading
index-shaped block of ``src`` (the first ``index.size(d)`` entries along each dim ``d``), and ``src``'s
gradient keeps ``src``'s shape, zeros beyond that block. Expected values from a numpy loop over the
index, gradients from float64 finite differences.

The values are multiples of 1/8 of a few bits, so the sums, products and extrema of at most 3 terms
are exact; the mean divides such a sum once, so it is correctly rounded (and the same on both sides).
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
rng = np.random.default_rng(5)
X = np.round(rng.standard_normal((4, 3)) * 8) / 8
# Larger than the index in both dimensions; distinct values, so that amax/amin have no ties.
SOURCE = (rng.permutation(30).reshape(5, 6) - 15) / 8
# (3, 2), with repeated targets along either dim.
INDEX = {0: np.array([[0, 1], [2, 0], [0, 3]]), 1: np.array([[0, 1], [2, 0], [0, 2]])}
REDUCE = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}


def _block(source: np.ndarray, index: np.ndarray) -> np.ndarray:
    return source[tuple(slice(0, size) for size in index.shape)]


def _reference(x, dim, index, source, reduce, include_self):
    """``scatter_reduce`` by a loop over the index's positions, reading ``source`` at the same position."""
    pools: dict = {}
    for position in np.ndindex(index.shape):
        target = list(position)
        target[dim] = index[position]
        pools.setdefault(tuple(target), []).append(source[position])
    out = x.copy()
    for target, pool in pools.items():
        out[target] = REDUCE[reduce](pool + [x[target]] if include_self else pool)
    return out


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduce", list(REDUCE))
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_reduce_reads_the_leading_block_of_a_larger_src(executor, reduce, include_self, dim):
    index = INDEX[dim]
    expected = _reference(X, dim, index, SOURCE, reduce, include_self)
    with onnxnn.set_executor(executor):
        result = onnxnn.tensor(X).scatter_reduce(
            dim, onnxnn.tensor(index), onnxnn.tensor(SOURCE), reduce, include_self=include_self
        )
        in_place = onnxnn.tensor(X)
        in_place.scatter_reduce_(dim, onnxnn.tensor(index), onnxnn.tensor(SOURCE), reduce, include_self=include_self)
        np.testing.assert_array_equal(result.numpy(), expected)
        np.testing.assert_array_equal(in_place.numpy(), expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_longer_1d_src(executor):
    # PyTorch: tensor([2., 1., 0., 0., 0.]); the last three ones of src are never read.
    with onnxnn.set_executor(executor):
        result = onnxnn.zeros(5).scatter_reduce(0, onnxnn.tensor([0, 1, 0]), onnxnn.ones(6), "sum")
        np.testing.assert_array_equal(result.numpy(), [2.0, 1.0, 0.0, 0.0, 0.0])


SCATTERS = {
    "scatter": (lambda x, i, s: x.scatter(0, i, s), "none"),
    "scatter_add": (lambda x, i, s: x.scatter_add(0, i, s), "sum"),
    "scatter_reduce_": (lambda x, i, s: x.clone().scatter_reduce_(0, i, s, "sum"), "sum"),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", list(SCATTERS))
def test_every_scatter_reads_the_leading_block(executor, name):
    function, reduce = SCATTERS[name]
    index = np.array([[0, 1], [2, 2], [3, 0]])  # no repeated target: scatter's overwrite is defined
    if reduce == "none":
        expected = X.copy()
        for position in np.ndindex(index.shape):
            expected[index[position], position[1]] = SOURCE[position]
    else:
        expected = _reference(X, 0, index, SOURCE, reduce, True)
    with onnxnn.set_executor(executor):
        result = function(onnxnn.tensor(X), onnxnn.tensor(index), onnxnn.tensor(SOURCE))
        np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduce", list(REDUCE))
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_with_a_larger_src(executor, reduce, include_self):
    index = onnxnn.tensor(INDEX[1])
    with onnxnn.set_executor(executor):
        check_gradients(
            lambda x, source: x.scatter_reduce(1, index, source, reduce, include_self=include_self), [X, SOURCE]
        )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_src_gradient_is_zero_beyond_the_block(executor):
    # d sum(out * w) / d src[p] = w at p's target inside the block, and 0 outside it.
    index = INDEX[0]
    weights = rng.standard_normal(X.shape)
    with onnxnn.set_executor(executor):
        source = onnxnn.tensor(SOURCE, requires_grad=True)
        out = onnxnn.tensor(X).scatter_reduce(0, onnxnn.tensor(index), source, "sum")
        (out * onnxnn.tensor(weights)).sum().backward()
        gradient = source.grad.numpy()  # computed when read: inside the executor's scope
    expected = np.zeros_like(SOURCE)
    block = _block(expected, index)
    for position in np.ndindex(index.shape):
        block[position] = weights[index[position], position[1]]
    np.testing.assert_array_equal(gradient, expected)


def test_a_src_smaller_than_the_index_is_refused_when_recorded():
    with pytest.raises(RuntimeError, match="smaller than src"):
        onnxnn.zeros(5).scatter_reduce(0, onnxnn.tensor([0, 1, 0]), onnxnn.ones(2), "sum")


# Bools reduce as PyTorch's: sum is "any", prod "all", amax/amin their or/and; no mean.
BOOL_REDUCE = {"sum": np.any, "prod": np.all, "amax": np.any, "amin": np.all}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduce", list(BOOL_REDUCE))
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_of_bools(executor, reduce, include_self):
    x = X > 0
    source = SOURCE[:3, :2] > 0
    index = INDEX[1]
    pools: dict = {}
    for position in np.ndindex(index.shape):
        pools.setdefault((position[0], index[position]), []).append(source[position])
    expected = x.copy()
    for target, pool in pools.items():
        expected[target] = BOOL_REDUCE[reduce](pool + [x[target]] if include_self else pool)
    with onnxnn.set_executor(executor):
        result = onnxnn.tensor(x).scatter_reduce(
            1, onnxnn.tensor(index), onnxnn.tensor(source), reduce, include_self=include_self
        )
        np.testing.assert_array_equal(result.numpy(), expected)


def test_scatter_reduce_mean_refuses_bools_as_pytorch():
    x = onnxnn.tensor(X > 0)
    with pytest.raises(NotImplementedError, match="reduce_mean\" not implemented for 'Bool'"):
        x.scatter_reduce(1, onnxnn.tensor(INDEX[1]), x[:, :2], "mean")
