"""Empty and zero-dimensional tensors where PyTorch has a rule of its own.

- ``cat`` skips 1-D empty tensors beside tensors of other ranks (``acc = tensor([])`` grown in a loop
  by ``cat([acc, row])``), which still take part in the dtype promotion; beside vectors they are
  concatenated and get their empty gradient;
- ``combinations`` of more elements than there are is an empty table of ``r`` columns, and of none
  (``r = 0``) an empty vector, where itertools has one empty row;
- a scalar's dims wrap as one axis's (0 and -1): ``flip``, ``movedim`` and the scans of a scalar give the
  scalar, any other dim is out of range, and what needs an axis (``chunk``, ``split``, ``trapezoid``) raises;
- an empty batch goes through ``grid_sample`` and its backward;
- ``aminmax`` over a dim beside an empty one is empty, and over an empty dim an IndexError.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F


@pytest.mark.parametrize(
    "pieces, dim",
    [
        ([np.zeros(0, np.float32), np.ones((2, 3), np.float32)], 0),
        ([np.ones((2, 3), np.float32), np.zeros(0, np.float32), np.ones((1, 3), np.float32)], 0),
        ([np.ones((2, 1, 3), np.float32), np.zeros(0, np.float32), np.ones((2, 2, 3), np.float32)], 1),
    ],
    ids=["empty_first", "empty_between", "along_axis_1"],
)
def test_cat_skips_one_dimensional_empty_tensors(pieces, dim):
    result = onnxnn.cat([onnxnn.tensor(piece) for piece in pieces], dim)
    np.testing.assert_array_equal(result.numpy(), np.concatenate([p for p in pieces if p.shape != (0,)], dim))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_empty_vectors_beside_vectors_are_concatenated_and_take_an_empty_gradient(executor):
    # parameters_to_vector of a model with a zero-size parameter: PyTorch gives it an empty .grad.
    with onnxnn.set_executor(executor):
        empty, full = onnxnn.zeros(0, requires_grad=True), onnxnn.tensor([1.0, 2.0], requires_grad=True)
        result = onnxnn.cat([empty, full, empty])
        (result * 2).sum().backward()
        assert result.tolist() == [1.0, 2.0] and full.grad.tolist() == [2.0, 2.0]
        assert empty.grad is not None and tuple(empty.grad.shape) == (0,)


def test_a_skipped_empty_tensor_still_promotes_the_dtype():
    result = onnxnn.cat([onnxnn.tensor(np.zeros(0, np.float64)), onnxnn.ones(2, 3)])
    assert result.dtype is onnxnn.float64 and tuple(result.shape) == (2, 3)


@pytest.mark.parametrize("n, r", [(1, 2), (2, 3), (0, 2), (3, 0), (0, 0), (4, 2)])
@pytest.mark.parametrize("with_replacement", [False, True])
def test_combinations_shape_follows_pytorch(n, r, with_replacement):
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    expected = np.zeros(0) if r == 0 else np.array(list(choose(range(n), r)), np.int64).reshape(-1, r)
    result = onnxnn.combinations(onnxnn.arange(n), r, with_replacement=with_replacement)
    assert tuple(result.shape) == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize(
    "call",
    [lambda s: s.flip(0), lambda s: onnxnn.flip(s, (-1,)), lambda s: s.movedim(0, 0), lambda s: s.movedim(-1, 0)],
)
def test_a_scalars_dims_wrap_as_one_axis(call):
    scalar = onnxnn.tensor(1.5)
    result = call(scalar)
    assert result.shape == () and float(result) == 1.5


def test_a_scalar_has_no_axis_1():
    with pytest.raises(IndexError, match="Dimension out of range"):
        onnxnn.tensor(1.5).flip(1)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
def test_grid_sample_of_an_empty_batch(dtype):
    x = onnxnn.zeros(0, 3, 4, 4, dtype=dtype, requires_grad=True)
    grid = onnxnn.zeros(0, 2, 5, 2, dtype=dtype, requires_grad=True)
    y = F.grid_sample(x, grid, align_corners=False)
    assert tuple(y.shape) == (0, 3, 2, 5)
    gradient_x, gradient_grid = onnxnn.autograd.grad(y.sum(), [x, grid])
    assert tuple(gradient_x.shape) == (0, 3, 4, 4) and tuple(gradient_grid.shape) == (0, 2, 5, 2)


def test_aminmax_over_a_dim_beside_an_empty_one_is_empty():
    for shape, dim, expected in (((0, 3), 1, (0,)), ((2, 0, 4), -1, (2, 0))):
        low, high = onnxnn.aminmax(onnxnn.zeros(*shape), dim=dim)
        assert tuple(low.shape) == tuple(high.shape) == expected


def test_aminmax_over_an_empty_dim_raises_pytorchs_errors():
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        onnxnn.aminmax(onnxnn.zeros(0, 3), dim=0)
    with pytest.raises(RuntimeError, match="no identity"):
        onnxnn.aminmax(onnxnn.zeros(0, 3))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda s: onnxnn.cumsum(s, 1), IndexError, r"expected to be in range of \[-1, 0\], but got 1"),
        (lambda s: onnxnn.cumprod(s, 1), IndexError, r"expected to be in range of \[-1, 0\], but got 1"),
        (lambda s: onnxnn.logcumsumexp(s, 5), IndexError, r"expected to be in range of \[-1, 0\], but got 5"),
        (lambda s: onnxnn.cummax(s, 2), IndexError, r"expected to be in range of \[-1, 0\], but got 2"),
        (lambda s: onnxnn.chunk(s, 2), RuntimeError, "chunk expects at least a 1-dimensional tensor"),
        (lambda s: onnxnn.split(s, 1), RuntimeError, "split expects at least a 1-dimensional tensor"),
        (lambda s: onnxnn.trapezoid(s), IndexError, "Dimension specified as -1 but tensor has no dimensions"),
    ],
    ids=["cumsum", "cumprod", "logcumsumexp", "cummax", "chunk", "split", "trapezoid"],
)
def test_a_scalar_refuses_what_needs_an_axis_with_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(onnxnn.tensor(1.5))


def test_a_scalars_scan_along_its_wrapped_axis_is_itself():
    scalar = onnxnn.tensor(1.5)
    for scan in (onnxnn.cumsum, onnxnn.cumprod, onnxnn.logcumsumexp):
        assert float(scan(scalar, 0)) == float(scan(scalar, -1)) == 1.5
