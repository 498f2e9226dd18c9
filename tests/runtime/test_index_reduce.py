"""index_reduce (issue #12): forward against a Python loop over the indices on both executors,
gradients against float64 finite differences, export run by onnxruntime, PyTorch's errors.

prod/amax/amin of a few exactly representable values are exact; the mean divides a sum of at most
3 terms, so it is within gamma(4) of its magnitude (tests/tolerances.py).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

EXECUTORS = ("onnxruntime", "kernels")
rng = np.random.default_rng(3)
X = np.round(rng.standard_normal((4, 3)) * 8) / 8
SOURCE = np.round(rng.standard_normal((5, 3)) * 8) / 8
INDEX = np.array([0, 2, 0, 3, 2])
REDUCE = {"prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}


def _reference(x, dim, index, source, reduce, include_self):
    x, source = np.moveaxis(x, dim, 0), np.moveaxis(source, dim, 0)
    out = x.copy()
    for target in set(index.tolist()):
        pool = [source[i] for i in range(len(index)) if index[i] == target]
        if include_self:
            pool.append(x[target])
        out[target] = REDUCE[reduce](np.stack(pool), axis=0)
    return np.moveaxis(out, 0, dim)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduce", list(REDUCE))
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_matches_a_loop(executor, reduce, include_self):
    with onnxnn.set_executor(executor):
        rows = (
            onnxnn.tensor(X)
            .index_reduce(0, onnxnn.tensor(INDEX), onnxnn.tensor(SOURCE), reduce, include_self=include_self)
            .numpy()
        )
        columns = onnxnn.index_reduce(
            onnxnn.tensor(X.T), 1, onnxnn.tensor(INDEX), onnxnn.tensor(SOURCE.T), reduce, include_self=include_self
        ).numpy()
    expected = _reference(X, 0, INDEX, SOURCE, reduce, include_self)
    tolerance = gamma(4) * np.abs(expected).max() if reduce == "mean" else 0
    np.testing.assert_allclose(rows, expected, rtol=0, atol=tolerance)
    np.testing.assert_allclose(columns, expected.T, rtol=0, atol=tolerance)


def test_in_place_variant():
    x = onnxnn.tensor(X)
    x.index_reduce_(0, onnxnn.tensor(INDEX), onnxnn.tensor(SOURCE), "amax")
    np.testing.assert_array_equal(x.numpy(), _reference(X, 0, INDEX, SOURCE, "amax", True))


@pytest.mark.parametrize("reduce", list(REDUCE))
def test_gradient_matches_finite_differences(reduce):
    # Distinct values keep amax/amin away from ties, where they are not differentiable.
    x = rng.permutation(12).reshape(4, 3) * 0.37 - 2
    source = rng.permutation(15).reshape(5, 3) * 0.29 - 1.5
    check_gradients(lambda a, b: onnxnn.index_reduce(a, 0, onnxnn.tensor(INDEX), b, reduce), [x, source])


class _IndexReduce(nn.Module):
    def forward(self, x, source):
        return x.index_reduce(0, onnxnn.tensor(INDEX), source, "amax", include_self=False)


def test_exported_model_runs_in_plain_onnxruntime_like_onnxnn():
    x, source = onnxnn.tensor(X, dtype=onnxnn.float32), onnxnn.tensor(SOURCE, dtype=onnxnn.float32)
    module = _IndexReduce().eval()
    expected = module(x, source).numpy()
    proto = to_onnx(module, (x, source))
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), (x, source))}
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected)


def test_bad_arguments_raise_pytorchs_errors():
    x, source = onnxnn.ones(3, 2), onnxnn.ones(1, 2)
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin but got sum"):
        x.index_reduce(0, onnxnn.tensor([0]), source, "sum")
    with pytest.raises(IndexError, match="Index is supposed to be a vector, but got dim: 2"):
        x.index_reduce(0, onnxnn.tensor([[0]]), source, "prod")
    with pytest.raises(RuntimeError, match=r"Number of indices \(2\) should be equal to source.size\(dim\): \(1\)"):
        x.index_reduce(0, onnxnn.tensor([0, 1]), source, "prod")
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index but got: Float"):
        x.index_reduce(0, onnxnn.tensor([0.0]), source, "prod")
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_reduce(0, onnxnn.tensor([5]), source, "prod")


@pytest.mark.parametrize("zeros", [1, 2])
def test_product_gradient_with_zero_factors(zeros):
    # The product's gradient is the product of the other factors: with one zero factor only the zero
    # gets a gradient, with two none does. The function is a polynomial: finite differences are exact.
    x = np.array([[0.5, -1.5], [2.0, 3.0], [1.25, 0.75]])
    source = np.array([[0.0, 2.0], [1.5, -0.5], [3.0, 0.0], [0.75, 1.0]])
    if zeros == 2:
        source[1, 0] = 0.0  # row 0 of the result now has two zero factors in column 0
    index = onnxnn.tensor([0, 0, 1, 2])
    check_gradients(lambda a, b: onnxnn.index_reduce(a, 0, index, b, "prod"), [x, source])
    check_gradients(lambda a, b: onnxnn.index_reduce(a, 0, index, b, "prod", include_self=False), [x, source])
