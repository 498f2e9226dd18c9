"""Views alias their base, as PyTorch's (and numpy's) do: writes through either reach the other.

numpy's views alias too, so each case names the same view in numpy, and the expected base after a
write through the view (or the expected view after a write to the base) is numpy's.
"""

from __future__ import annotations

import copy
import gc

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.runtime.views import VIEW_LINKS

BASE = np.arange(12, dtype=np.float32).reshape(3, 4)


def _diagonal(array):
    # numpy's diagonal() is read-only; the same elements as a writable view
    return array.reshape(-1)[:: array.shape[1] + 1][: min(array.shape)]


# (name, the view in onnxnn, the same view in numpy)
VIEWS = [
    ("index", lambda x: x[1], lambda a: a[1]),
    ("slice with step", lambda x: x[:, 1::2], lambda a: a[:, 1::2]),
    ("ellipsis and None", lambda x: x[..., None, 2], lambda a: a[..., None, 2]),
    ("select", lambda x: x.select(1, 2), lambda a: a[:, 2]),
    ("narrow", lambda x: x.narrow(1, 1, 2), lambda a: a[:, 1:3]),
    ("t", lambda x: x.t(), lambda a: a.T),
    ("T", lambda x: x.T, lambda a: a.T),
    ("mT", lambda x: x.mT, lambda a: np.swapaxes(a, -2, -1)),
    ("transpose", lambda x: x.transpose(0, 1), lambda a: np.swapaxes(a, 0, 1)),
    ("permute", lambda x: x.permute(1, 0), lambda a: a.transpose(1, 0)),
    ("movedim", lambda x: x.movedim(0, 1), lambda a: np.moveaxis(a, 0, 1)),
    ("view", lambda x: x.view(2, 6), lambda a: a.reshape(2, 6)),
    ("unsqueeze", lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("unflatten", lambda x: x.unflatten(1, (2, 2)), lambda a: a.reshape(3, 2, 2)),
    ("diagonal", lambda x: x.diagonal(), _diagonal),
    ("unbind", lambda x: x.unbind(0)[2], lambda a: a[2]),
    ("split", lambda x: x.split(2, dim=1)[1], lambda a: a[:, 2:4]),
    ("chunk", lambda x: x.chunk(3, 0)[1], lambda a: a[1:2]),
    ("swapaxes by name", lambda x: x.swapaxes(axis0=0, axis1=1), lambda a: np.swapaxes(a, 0, 1)),
    ("permute by name", lambda x: x.permute(dims=(1, 0)), lambda a: a.T),
    ("view by name", lambda x: x.view(size=(2, 6)), lambda a: a.reshape(2, 6)),
    ("swapdims by name", lambda x: x.swapdims(dim0=1, dim1=0), lambda a: a.T),
    ("tensor_split by indices=", lambda x: x.tensor_split(indices=[1], dim=1)[1], lambda a: a[:, 1:]),
    ("onnxnn.tensor_split by sections=", lambda x: onnxnn.tensor_split(x, sections=2, dim=1)[1], lambda a: a[:, 2:]),
    ("mH", lambda x: x.mH, lambda a: np.swapaxes(a, -2, -1)),
    ("H", lambda x: x.H, lambda a: a.T),
    ("adjoint", lambda x: x.adjoint(), lambda a: np.swapaxes(a, -2, -1)),
    ("split_with_sizes", lambda x: x.split_with_sizes([1, 3], 1)[1], lambda a: a[:, 1:4]),
    ("hsplit", lambda x: x.hsplit(2)[1], lambda a: a[:, 2:4]),
    ("vsplit", lambda x: x.vsplit([1])[1], lambda a: a[1:]),
    ("dsplit", lambda x: x.view(3, 2, 2).dsplit(2)[0], lambda a: a.reshape(3, 2, 2)[:, :, 0:1]),
    # The functions are the same views as the methods, as PyTorch's.
    ("onnxnn.transpose", lambda x: onnxnn.transpose(x, 0, 1), lambda a: np.swapaxes(a, 0, 1)),
    ("onnxnn.t", lambda x: onnxnn.t(x), lambda a: a.T),
    ("onnxnn.adjoint", lambda x: onnxnn.adjoint(x), lambda a: a.T),
    ("onnxnn.swapdims", lambda x: onnxnn.swapdims(x, 1, 0), lambda a: a.T),
    ("onnxnn.permute", lambda x: onnxnn.permute(x, (1, 0)), lambda a: a.T),
    ("onnxnn.movedim", lambda x: onnxnn.movedim(x, 1, 0), lambda a: a.T),
    ("onnxnn.select", lambda x: onnxnn.select(x, 0, 2), lambda a: a[2]),
    ("onnxnn.narrow", lambda x: onnxnn.narrow(input=x, dim=1, start=3, length=1), lambda a: a[:, 3:]),
    ("onnxnn.diagonal", lambda x: onnxnn.diagonal(x), _diagonal),
    ("onnxnn.squeeze", lambda x: onnxnn.squeeze(x[None], 0), lambda a: a),
    ("onnxnn.unsqueeze", lambda x: onnxnn.unsqueeze(x, 0), lambda a: a[None]),
    ("onnxnn.unflatten", lambda x: onnxnn.unflatten(x, 1, (2, 2)), lambda a: a.reshape(3, 2, 2)),
    ("onnxnn.unbind", lambda x: onnxnn.unbind(x, 1)[1], lambda a: a[:, 1]),
    ("onnxnn.split", lambda x: onnxnn.split(x, 2, 1)[0], lambda a: a[:, :2]),
    ("onnxnn.chunk", lambda x: onnxnn.chunk(x, 3)[2], lambda a: a[2:]),
    ("onnxnn.tensor_split", lambda x: onnxnn.tensor_split(x, [1], 1)[1], lambda a: a[:, 1:]),
    ("onnxnn.split_with_sizes", lambda x: onnxnn.split_with_sizes(x, [2, 1])[1], lambda a: a[2:]),
    ("onnxnn.hsplit", lambda x: onnxnn.hsplit(x, 2)[0], lambda a: a[:, :2]),
    ("onnxnn.vsplit", lambda x: onnxnn.vsplit(x, 3)[1], lambda a: a[1:2]),
    ("view of a view", lambda x: x.t()[1], lambda a: a.T[1]),
    ("view of a view of a view", lambda x: x.view(2, 6)[1].narrow(0, 2, 3), lambda a: a.reshape(2, 6)[1][2:5]),
]
IDS = [case[0] for case in VIEWS]


@pytest.mark.parametrize("name, make, make_numpy", VIEWS, ids=IDS)
def test_a_write_through_a_view_changes_its_base(name, make, make_numpy):
    x = onnxnn.tensor(BASE.copy())
    view = make(x)
    view.add_(100.0)
    view.mul_(-1.0)
    expected = BASE.copy()
    numpy_view = make_numpy(expected)
    numpy_view += 100.0
    numpy_view *= -1.0
    np.testing.assert_array_equal(x.numpy(), expected)
    np.testing.assert_array_equal(view.numpy(), numpy_view)


@pytest.mark.parametrize("name, make, make_numpy", VIEWS, ids=IDS)
def test_a_write_to_the_base_reaches_its_views(name, make, make_numpy):
    x = onnxnn.tensor(BASE.copy())
    view = make(x)
    x.mul_(2.0)
    x[0, 0] = -5.0
    expected = BASE.copy() * np.float32(2.0)
    expected[0, 0] = -5.0
    np.testing.assert_array_equal(view.numpy(), make_numpy(expected))


def test_sibling_views_see_each_others_writes():
    x = onnxnn.tensor(BASE.copy())
    row, column = x[1], x[:, 2]
    row.fill_(0.0)
    expected = BASE.copy()
    expected[1] = 0.0
    np.testing.assert_array_equal(column.numpy(), expected[:, 2])


def test_in_place_functional_ops_on_a_view():
    x = onnxnn.tensor([[-1.0, 2.0], [3.0, -4.0]])
    nn.functional.relu(x[1], inplace=True)
    x.diagonal().zero_()
    np.testing.assert_array_equal(x.numpy(), [[0.0, 2.0], [3.0, 0.0]])


def test_initializing_part_of_a_parameter_under_no_grad():
    layer = nn.Linear(3, 2)
    before = layer.weight.detach().numpy().copy()
    with onnxnn.no_grad():
        layer.weight[0].fill_(1.0)
        nn.init.zeros_(layer.weight[:, 2])
    expected = before.copy()
    expected[0] = 1.0
    expected[:, 2] = 0.0
    np.testing.assert_array_equal(layer.weight.detach().numpy(), expected)
    assert layer.weight.is_leaf and layer.weight.grad_fn is None


def test_a_view_of_a_leaf_that_requires_grad_is_not_written_while_recording():
    weight = nn.Parameter(onnxnn.tensor(BASE.copy()))
    view = weight[0]
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        view.fill_(1.0)
    np.testing.assert_array_equal(weight.detach().numpy(), BASE)  # nothing changed
    np.testing.assert_array_equal(view.detach().numpy(), BASE[0])


def test_a_view_made_under_no_grad_is_not_written_while_recording():
    # Whether such a write is tracked is ambiguous: PyTorch refuses it, before anything changes.
    a = onnxnn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = a * 2
    with onnxnn.no_grad():
        view = y[:2]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being modified inplace"):
        view.mul_(3.0)
    np.testing.assert_array_equal(y.detach().numpy(), [2.0, 4.0, 6.0])
    with onnxnn.no_grad():  # the write untracked, as the view: allowed
        view.mul_(3.0)
    np.testing.assert_array_equal(y.detach().numpy(), [6.0, 12.0, 6.0])
    plain = onnxnn.tensor([1.0, 2.0])
    with onnxnn.no_grad():
        plain_view = plain[:1]
    plain_view.add_(1.0)  # nothing requires grad: nothing is ambiguous
    assert plain.tolist() == [2.0, 2.0]


def test_gradients_flow_through_a_write_to_a_view():
    w = onnxnn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w * 2.0
    y[1:].mul_(onnxnn.tensor([3.0, 5.0]))  # y = [2 w0, 6 w1, 10 w2]
    (y * onnxnn.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 60.0, 1000.0], rtol=1e-6)


def test_a_view_keeps_its_gradient_when_its_base_is_updated():
    w = nn.Parameter(onnxnn.tensor([1.0, 2.0, 3.0]))
    first = w[0]
    with onnxnn.no_grad():
        w.add_(1.0)  # as an optimizer's step
    assert first.item() == 2.0 and first.requires_grad
    (first * 3.0).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 0.0, 0.0])


def test_a_backward_through_a_view_saved_before_its_base_changed_refuses_to_run():
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    view = y[0]
    z = view * view  # saves the view
    with onnxnn.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


@pytest.mark.parametrize(
    "copy_of",
    [
        lambda x: x.reshape(12),
        lambda x: x.flatten(),
        lambda x: x[[0, 2]],
        lambda x: x[x > 5],
        lambda x: x.clone(),
        lambda x: x.view(onnxnn.int32),
    ],
    ids=["reshape", "flatten", "index list", "mask", "clone", "view(dtype)"],
)
def test_copies_do_not_alias(copy_of):
    x = onnxnn.tensor(BASE.copy())
    copied = copy_of(x)
    before = copied.numpy().copy()
    copied.zero_()
    x.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), BASE + np.float32(1.0))
    np.testing.assert_array_equal(copied.numpy(), np.zeros_like(before))


def test_a_new_shape_or_storage_in_place_unlinks():
    x = onnxnn.tensor(BASE.copy())
    row, column = x[0], x[:, 0]
    row.unsqueeze_(0)  # its own shape: PyTorch's metadata change; onnxnn stops sharing
    x.data = onnxnn.zeros(3, 4)  # a new storage: the old views keep the old one
    row.fill_(-1.0)
    column.fill_(-2.0)
    np.testing.assert_array_equal(x.numpy(), np.zeros((3, 4), np.float32))


def test_copies_of_a_view_are_not_views():
    x = onnxnn.tensor(BASE.copy())
    view = x[0]
    copied = copy.deepcopy(view)
    copied.fill_(9.0)
    np.testing.assert_array_equal(x.numpy(), BASE)


def test_a_collected_view_leaves_no_link_behind():
    x = onnxnn.tensor(BASE.copy())
    before = len(VIEW_LINKS)
    for _ in range(1_000):
        x[0].sum()
    kept = x[1]
    gc.collect()
    assert len(VIEW_LINKS) == before + 1  # the live view's link only
    kept.fill_(0.0)
    assert x.numpy()[1].tolist() == [0.0] * 4


# Views that change nothing: PyTorch returns a new tensor viewing the same storage.
NO_OP_VIEWS = [
    ("view of the same shape", lambda x: x.view(3, 4)),
    ("view_as itself", lambda x: x.view_as(x)),
    ("squeeze without size-1 dims", lambda x: x.squeeze()),
    ("identity permute", lambda x: x.permute(0, 1)),
    ("transpose of a dim with itself", lambda x: x.transpose(1, 1)),
    ("the one chunk", lambda x: x.chunk(1)[0]),
    ("the one split", lambda x: x.split(10)[0]),
]
NO_OP_IDS = [case[0] for case in NO_OP_VIEWS]


@pytest.mark.parametrize("name, make", NO_OP_VIEWS, ids=NO_OP_IDS)
def test_a_view_that_changes_nothing_is_a_tensor_of_its_own_that_aliases(name, make):
    x = onnxnn.tensor(BASE)
    view = make(x)
    assert view is not x
    view[0, 0] = -1.0
    x[2, 3] = -2.0  # a write to the base after a write through the view: both reach both
    expected = BASE.copy()
    expected[0, 0], expected[2, 3] = -1.0, -2.0
    np.testing.assert_array_equal(x.numpy(), expected)
    np.testing.assert_array_equal(view.numpy(), expected)


@pytest.mark.parametrize("name, make", NO_OP_VIEWS, ids=NO_OP_IDS)
def test_a_hook_on_a_view_that_changes_nothing_sees_only_its_own_gradient(name, make):
    x = onnxnn.tensor(BASE, requires_grad=True)
    view = make(x)
    assert not view.is_leaf and view.grad_fn is not None
    seen = []
    view.register_hook(seen.append)
    (view * 2 + x * 3).sum().backward()
    np.testing.assert_array_equal(seen[0].numpy(), np.full(BASE.shape, 2.0, np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.full(BASE.shape, 5.0, np.float32))


def test_an_in_place_shape_change_of_a_view_that_changes_nothing_leaves_the_base_alone():
    x = onnxnn.tensor(BASE)
    view = x.squeeze()
    view.unsqueeze_(0)
    assert x.shape == (3, 4) and view.shape == (1, 3, 4)
