"""torch.segment_reduce (onnxnn/runtime/ops/segments.py): every reduction, with and without
``initial``, from lengths or offsets, against numpy's reductions of the same segments on both
executors, against torch, and with float64 finite-difference gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from tests.gradcheck import check_gradients

EXECUTORS = ("onnxruntime", "kernels")
RNG = np.random.default_rng(0)
NUMPY = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
EMPTY = {"sum": 0.0, "mean": np.nan, "max": -np.inf, "min": np.inf, "prod": 1.0}


def numpy_segment_reduce(data, reduce, lengths, initial):
    """Each segment of dim 0 reduced by numpy; ``initial`` joins it as PyTorch documents by example."""
    results, start = [], 0
    for length in lengths:
        part = data[start : start + length]
        start += length
        if length == 0:
            results.append(np.full(data.shape[1:], EMPTY[reduce] if initial is None else initial))
        elif initial is None:
            results.append(NUMPY[reduce](part, axis=0))
        elif reduce == "mean":
            results.append((part.sum(0) + initial) / length)
        else:
            with_initial = np.concatenate([part, np.full((1,) + data.shape[1:], initial)], 0)
            results.append(NUMPY[reduce](with_initial, axis=0))
    return np.stack(results, 0)


LENGTHS = [2, 0, 3, 1]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("initial", [None, 0.5])
@pytest.mark.parametrize("reduce", list(NUMPY))
def test_segment_reduce_matches_numpy(reduce, initial, executor):
    data = RNG.uniform(0.5, 1.5, (6, 3))
    expected = numpy_segment_reduce(data, reduce, LENGTHS, initial)
    offsets = np.concatenate([[0], np.cumsum(LENGTHS)])
    with onnxnn.set_executor(executor):
        by_lengths = onnxnn.segment_reduce(
            onnxnn.tensor(data), reduce, lengths=onnxnn.tensor(LENGTHS), initial=initial
        ).numpy()
        by_offsets = onnxnn.segment_reduce(
            onnxnn.tensor(data), reduce, offsets=onnxnn.tensor(offsets), initial=initial
        ).numpy()
    np.testing.assert_allclose(by_lengths, expected, rtol=1e-12)
    np.testing.assert_array_equal(by_offsets, by_lengths)
    torch = pytest.importorskip("torch")
    theirs = torch.segment_reduce(torch.from_numpy(data), reduce, lengths=torch.tensor(LENGTHS), initial=initial)
    np.testing.assert_allclose(by_lengths, theirs.numpy(), rtol=1e-12)


def test_segment_reduce_with_batched_lengths_along_a_later_axis():
    data = RNG.standard_normal((2, 5, 3))
    lengths = np.array([[2, 3], [4, 1]])
    actual = onnxnn.segment_reduce(onnxnn.tensor(data), "sum", lengths=onnxnn.tensor(lengths), axis=1).numpy()
    expected = np.stack([numpy_segment_reduce(data[row], "sum", lengths[row], None) for row in range(2)])
    np.testing.assert_allclose(actual, expected, rtol=1e-12)


@pytest.mark.parametrize("reduce", list(NUMPY))
def test_segment_reduce_gradients_match_finite_differences(reduce):
    check_gradients(
        lambda x: onnxnn.segment_reduce(x, reduce, lengths=onnxnn.tensor(LENGTHS), initial=0.25),
        [RNG.uniform(0.5, 1.5, (6, 2))],
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"reduce": "foo", "lengths": [6]},
            RuntimeError,
            "reduce argument must be either sum, prod, mean, amax or amin",
        ),
        ({"reduce": "sum"}, RuntimeError, "Either lengths or offsets must be defined"),
        ({"reduce": "sum", "lengths": [2, 3]}, RuntimeError, "Expected all rows of lengths along axis to sum to"),
        (
            {"reduce": "sum", "lengths": [6], "axis": 1},
            RuntimeError,
            "Expected axis to be the last dimension of lengths",
        ),
    ],
)
def test_segment_reduce_errors_use_torchs_wording(kwargs, error, message):
    if "lengths" in kwargs:
        kwargs = {**kwargs, "lengths": onnxnn.tensor(kwargs["lengths"])}
    with pytest.raises(error, match=message):
        onnxnn.segment_reduce(onnxnn.randn(6, 2), **kwargs)
