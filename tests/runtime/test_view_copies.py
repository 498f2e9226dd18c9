"""PyTorch's ``*_copy`` functions: a view op's values as a tensor of their own, which writes change alone.

numpy's views of an array stand in as the oracle for the values; a write to the copy must leave the
input as it was (the view op itself aliases its base: tests/runtime/test_views.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.ops.view_copies import VIEW_COPIES

BASE = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

# name -> (arguments after the input, numpy's values of the view, input to use instead of BASE)
CASES = {
    "alias_copy": ((), lambda a: a, None),
    "detach_copy": ((), lambda a: a, None),
    "diagonal_copy": ((0, 1, 2), lambda a: np.diagonal(a, 0, 1, 2), None),
    "expand_copy": (((2, 2, 3, 4),), lambda a: np.broadcast_to(a, (2, 2, 3, 4)), None),
    "narrow_copy": ((2, 1, 2), lambda a: a[:, :, 1:3], None),
    "permute_copy": (((2, 0, 1),), lambda a: a.transpose(2, 0, 1), None),
    "select_copy": ((1, -1), lambda a: a[:, -1], None),
    "slice_copy": ((2, 1, None, 2), lambda a: a[:, :, 1::2], None),
    "squeeze_copy": ((), lambda a: a.squeeze(), BASE[:1]),
    "t_copy": ((), lambda a: a.T, BASE[0]),
    "transpose_copy": ((0, 2), lambda a: a.swapaxes(0, 2), None),
    "unfold_copy": ((2, 2, 2), lambda a: np.stack([a[:, :, 0:2], a[:, :, 2:4]], axis=2), None),
    "unsqueeze_copy": ((1,), lambda a: a[:, None], None),
    "view_copy": (((6, 4),), lambda a: a.reshape(6, 4), None),
}
SPLITS = {
    "split_copy": ((2, 2), lambda a: [a[:, :, 0:2], a[:, :, 2:4]]),
    "split_with_sizes_copy": (([1, 3], 2), lambda a: [a[:, :, 0:1], a[:, :, 1:4]]),
    "unbind_copy": ((1,), lambda a: [a[:, i] for i in range(3)]),
}


def test_every_copy_function_is_specified_here():
    assert set(CASES) | set(SPLITS) == set(VIEW_COPIES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_copy_has_the_views_values_and_writes_change_it_alone(name):
    arguments, view_of, source = CASES[name]
    array = BASE if source is None else source
    x = onnxnn.tensor(array)
    copy = getattr(onnxnn, name)(x, *arguments)
    np.testing.assert_array_equal(copy.numpy(), view_of(array))
    copy.fill_(-1.0)  # the copy is a tensor of its own: its input keeps its values
    np.testing.assert_array_equal(x.numpy(), array)


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_a_split_copy_gives_parts_of_their_own(name):
    arguments, parts_of = SPLITS[name]
    x = onnxnn.tensor(BASE)
    parts = getattr(onnxnn, name)(x, *arguments)
    assert isinstance(parts, tuple)
    for part, expected in zip(parts, parts_of(BASE), strict=True):
        np.testing.assert_array_equal(part.numpy(), expected)
        part.zero_()
    np.testing.assert_array_equal(x.numpy(), BASE)


def test_a_copy_passes_gradients_through_like_its_view():
    x = onnxnn.tensor(BASE, requires_grad=True)
    (onnxnn.narrow_copy(x, 2, 1, 2) * 3).sum().backward()
    expected = np.zeros_like(BASE)
    expected[:, :, 1:3] = 3
    np.testing.assert_array_equal(x.grad.numpy(), expected)
