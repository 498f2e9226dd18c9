"""Empty tensors where PyTorch has a rule of its own.

- ``cat`` skips 1-D empty tensors beside tensors of other shapes (``acc = tensor([])`` grown in a loop
  by ``cat([acc, row])``), which still take part in the dtype promotion;
- ``combinations`` of more elements than there are is an empty table of ``r`` columns, and of none
  (``r = 0``) an empty vector, where itertools has one empty row.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import onnxnn


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
