"""Views share their base's storage the way PyTorch's do, in the cases where onnxnn's links once let go.

Each scenario takes the tensor module (``onnxnn``, or ``torch`` where installed) and returns a
tensor whose values follow from PyTorch's documented storage semantics; the expected values are
written from those semantics (numpy's views alias the same way). ``contiguous()`` copies exactly
when the view is not row-major consecutive in its storage, which numpy's ``flags.c_contiguous``
tells for the same view.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import onnxnn
from onnxnn import nn

EXECUTORS = ["kernels", "onnxruntime"]
BASE = np.arange(12, dtype=np.float32).reshape(3, 4)

# (name, the view in onnxnn or torch, the same view in numpy)
VIEWS = [
    ("row", lambda x: x[1], lambda a: a[1]),
    ("rows from 1", lambda x: x[1:], lambda a: a[1:]),
    ("column", lambda x: x[:, 0], lambda a: a[:, 0]),
    ("column kept as a dim", lambda x: x[:, :1], lambda a: a[:, :1]),
    ("middle columns", lambda x: x[:, 1:3], lambda a: a[:, 1:3]),
    ("full columns", lambda x: x[:, 0:4], lambda a: a[:, 0:4]),
    ("t", lambda x: x.t(), lambda a: a.T),
    ("permute", lambda x: x.permute(1, 0), lambda a: a.transpose(1, 0)),
    ("transpose of a 3-d view", lambda x: x.view(3, 2, 2).transpose(1, 2), lambda a: a.reshape(3, 2, 2).swapaxes(1, 2)),
    ("t of t", lambda x: x.t().t(), lambda a: a.T.T),
    ("narrow rows", lambda x: x.narrow(0, 1, 2), lambda a: a[1:3]),
    ("view", lambda x: x.view(2, 6), lambda a: a.reshape(2, 6)),
    ("unsqueeze", lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("diagonal", lambda x: x.diagonal(), lambda a: a.reshape(-1)[::5][:3]),
    ("stepped row", lambda x: x[0, ::2], lambda a: a[0, ::2]),
    ("one element", lambda x: x[2, 3:], lambda a: a[2, 3:]),
    ("chunk of columns", lambda x: x.chunk(2, 1)[1], lambda a: a[:, 2:]),
    ("t of a row block", lambda x: x[1:2].t(), lambda a: a[1:2].T),
]


@pytest.mark.parametrize("name, view, numpy_view", VIEWS, ids=[case[0] for case in VIEWS])
def test_is_contiguous_tells_whether_a_view_is_row_major_consecutive(name, view, numpy_view):
    x = onnxnn.tensor(BASE.copy())
    assert view(x).is_contiguous() == numpy_view(BASE.copy()).flags.c_contiguous
    assert x.is_contiguous() and x.clone().is_contiguous()


@pytest.mark.parametrize("name, view, numpy_view", VIEWS, ids=[case[0] for case in VIEWS])
def test_numpy_tells_pytorchs_contiguity(name, view, numpy_view):
    torch = pytest.importorskip("torch")
    assert view(torch.tensor(BASE.copy())).is_contiguous() == numpy_view(BASE.copy()).flags.c_contiguous


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, view, numpy_view", VIEWS, ids=[case[0] for case in VIEWS])
def test_contiguous_copies_exactly_a_view_that_is_not_contiguous(executor, name, view, numpy_view):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(BASE.copy())
        result = view(x).contiguous()
        result.fill_(-1.0)
        expected = BASE.copy()
        np.ascontiguousarray(numpy_view(expected))[...] = -1.0  # writes ``expected`` only where it is no copy
        np.testing.assert_array_equal(x.numpy(), expected)
        assert result.is_contiguous()


def test_contiguous_of_a_transposed_view_is_a_clone_gradients_flow_through():
    weight = onnxnn.tensor(BASE.copy(), requires_grad=True)
    scale = np.arange(12, dtype=np.float32).reshape(4, 3)
    copied = weight.t().contiguous()
    assert type(copied.grad_fn).__name__ == "CloneBackward0"
    (copied * onnxnn.tensor(scale)).sum().backward()
    np.testing.assert_array_equal(weight.grad.numpy(), scale.T)


def test_contiguous_returns_a_contiguous_view_itself():
    x = onnxnn.tensor(BASE.copy())
    row = x[1]
    assert row.contiguous() is row and x.contiguous() is x


def _parameter_of_view(T):
    x = T.zeros(2, 3)
    parameter = T.nn.Parameter(x[0])
    with T.no_grad():
        parameter.fill_(1.0)
    assert parameter.requires_grad and parameter.is_leaf
    return x


def _parameter_of_view_follows_base(T):
    x = T.zeros(2, 3)
    parameter = T.nn.Parameter(x[:, 1])
    x.add_(2.0)
    assert parameter.requires_grad
    return parameter


def _detach_of_live_view_follows_base(T):
    x = T.zeros(2, 3)
    view = x[0]
    detached = view.detach()
    x.add_(2.0)
    return detached + 0 * view


def _data_of_view_of_view(T):
    x = T.zeros(2, 3)
    x.t()[1].data.fill_(4.0)  # x[:, 1]
    return x


def _detach_then_view(T):
    x = T.zeros(3, 4)
    x[1:].detach()[0, ::2].fill_(5.0)  # x[1, 0] and x[1, 2]
    return x


def _grad_row_zeroed_through_detach(T):
    weight = T.ones(2, 3, requires_grad=True)
    (weight * 3.0).sum().backward()
    weight.grad[0].detach().zero_()
    return weight.grad


def _data_isub_reaches_detached(T):
    parameter = T.ones(3, requires_grad=True)
    detached = parameter.detach()
    parameter.data -= 0.5
    parameter.data -= 0.5
    return detached


def _data_isub_reaches_view(T):
    parameter = T.ones(2, 3, requires_grad=True)
    row = parameter[0]
    for _ in range(2):
        parameter.data -= 0.25
    return row


def _data_assigned_own_data(T):
    parameter = T.ones(3, requires_grad=True)
    detached = parameter.detach()
    parameter.data = parameter.data
    with T.no_grad():
        parameter.mul_(3.0)
    return detached


def _data_assigned_other_shares(T):
    parameter, other = T.ones(3), T.zeros(3)
    parameter.data = other
    other.add_(5.0)
    parameter.mul_(2.0)  # reaches other too
    return T.stack([parameter, other])


def _data_assigned_a_view_shares_its_base(T):
    x = T.zeros(2, 3)
    parameter = T.ones(3)
    parameter.data = x[1]
    parameter.fill_(3.0)
    x[1, 0] = 7.0
    return T.cat([x.reshape(-1), parameter])


def _weight_tying_through_data(T):
    encoder, decoder = T.nn.Linear(2, 2, bias=False), T.nn.Linear(2, 2, bias=False)
    decoder.weight.data = encoder.weight.data
    with T.no_grad():
        encoder.weight.fill_(0.5)
        encoder.weight.add_(1.0)
    return decoder.weight.detach()


def _data_assigned_views_keep_old_storage(T):
    parameter = T.zeros(3)
    head, tail = parameter[:2], parameter[1:]
    parameter.data = T.ones(3)
    head.fill_(9.0)  # the old storage: tail sees it, parameter does not
    return T.cat([parameter, tail])


def _views_of_a_collected_base(T):
    a = T.arange(5.0)
    b = a[1:]
    a = a[:-1]  # the first tensor is only reachable through the views now
    gc.collect()
    a[1] = 70.0
    return b


def _transpose_and_row_of_a_deleted_base(T):
    y = T.zeros(3, 4)
    transposed, row = y.t(), y[0]
    del y
    gc.collect()
    row.fill_(-1.0)
    return transposed[:, 0] + transposed[:, 1]


def _view_of_view_of_a_deleted_base(T):
    y = T.zeros(2, 3)
    first, second = y[0], y[:, 1]
    del y
    gc.collect()
    first[1:].fill_(2.0)  # y[0, 1:], which second[0] is too
    return second


def _gradient_through_a_deleted_base(T):
    weight = T.ones(3, requires_grad=True)
    y = weight * 1.0
    head, tail = y[0:2], y[1:3]
    del y
    head.mul_(3.0)  # tail[0] is head[1]
    tail.sum().backward()
    return weight.grad


def _views_after_base_transposed_in_place(T):
    x = T.zeros(2, 3)
    row, column = x[0], x[:, 0]
    x.t_()
    row.fill_(1.0)  # x[0, 0] of the storage, which column[0] is
    return column


def _views_after_base_unsqueezed_in_place(T):
    x = T.zeros(3)
    head, tail = x[:2], x[1:]
    x.unsqueeze_(0)
    tail.fill_(4.0)
    return head


def _base_transposed_in_place_then_written(T):
    x = T.zeros(2, 3)
    row = x[0]
    x.t_()
    x.add_(1.0)  # every element of the storage, row's included
    x[1].fill_(5.0)  # the storage's column 1: row[1]
    return row


def _base_written_through_an_earlier_view_after_t_(T):
    x = T.zeros(2, 3)
    row = x[0]
    x.t_()
    row.fill_(5.0)
    return x  # column 0 of the 3x2 tensor is the storage's row 0


def _views_after_base_transposed_twice(T):
    x = T.zeros(2, 3)
    row = x[0]
    x.t_()
    x.transpose_(0, 1)  # its first shape again, on the same storage
    x[0, 1:].fill_(6.0)
    return T.cat([row, x.reshape(-1)])


def _views_after_base_squeezed_in_place(T):
    x = T.zeros(1, 3)
    tail = x[0, 1:]
    x.squeeze_(0)
    x.fill_(2.0)
    tail.mul_(4.0)
    return T.cat([x, tail])


def _view_transposed_in_place_writes_the_base(T):
    x = T.zeros(2, 3)
    block = x[:, :2]
    block.t_()
    block[0].fill_(7.0)  # the block's column 0 before t_(): x[:, 0]
    return x


def _view_transposed_in_place_follows_the_base(T):
    x = T.arange(6.0).reshape(2, 3)
    block = x[:, 1:]
    block.t_()
    x.mul_(10.0)
    return block


def _gradient_through_a_view_of_a_base_transposed_in_place(T):
    weight = T.ones(2, 3, requires_grad=True)
    y = weight * 1.0
    row = y[0]
    y.t_()
    row.mul_(2.0)
    (y * T.arange(6.0).reshape(3, 2)).sum().backward()
    return weight.grad  # d/dw of sum(y * c) with y = w.t() and its storage row 0 doubled: 2 c.t()[0] there


def _long_chain_of_views(T):
    first = T.arange(3000.0)[:]
    gc.collect()  # the arange is gone: its views are a family of their own
    tail = first
    for _ in range(2500):  # each a view of the one before
        tail = tail[1:]
    assert tail.is_contiguous()
    tail.fill_(-1.0)
    return first[2498:2502]


def _index_tensor_read_once(T):
    x = T.arange(6.0).reshape(3, 2)
    index = T.tensor(0)
    row = x[index]
    index.fill_(2)
    row.fill_(-1.0)
    x.add_(100.0)
    return T.cat([x.reshape(-1), row])


def _narrow_start_tensor_read_once(T):
    x = T.arange(6.0).reshape(2, 3)
    start = T.tensor(0)
    part = x.narrow(1, start, 2)
    start.fill_(1)
    part.fill_(-1.0)
    return x


# (name, scenario, expected values, from PyTorch's storage semantics)
SCENARIOS = [
    ("Parameter of a view writes the base", _parameter_of_view, [[1, 1, 1], [0, 0, 0]]),
    ("Parameter of a view follows the base", _parameter_of_view_follows_base, [2, 2]),
    ("detach of a live view follows the base", _detach_of_live_view_follows_base, [2, 2, 2]),
    (".data of a view of a view writes the base", _data_of_view_of_view, [[0, 4, 0], [0, 4, 0]]),
    ("a view of a view's detach writes the base", _detach_then_view, [[0, 0, 0, 0], [5, 0, 5, 0], [0, 0, 0, 0]]),
    ("grad[0].detach().zero_()", _grad_row_zeroed_through_detach, [[0, 0, 0], [3, 3, 3]]),
    ("p.data -= x reaches detach()", _data_isub_reaches_detached, [0, 0, 0]),
    ("p.data -= x reaches views", _data_isub_reaches_view, [0.5, 0.5, 0.5]),
    ("p.data = p.data keeps sharing", _data_assigned_own_data, [3, 3, 3]),
    ("p.data = other shares other", _data_assigned_other_shares, [[10, 10, 10], [10, 10, 10]]),
    ("p.data = view shares its base", _data_assigned_a_view_shares_its_base, [0, 0, 0, 7, 3, 3, 7, 3, 3]),
    ("weight tying through .data", _weight_tying_through_data, [[1.5, 1.5], [1.5, 1.5]]),
    ("p.data = other: old views keep the old storage", _data_assigned_views_keep_old_storage, [1, 1, 1, 9, 0]),
    ("views of a collected base", _views_of_a_collected_base, [70, 2, 3, 4]),
    ("t() and a row of a deleted base", _transpose_and_row_of_a_deleted_base, [-1, -1, -1, -1]),
    ("a view of a view of a deleted base", _view_of_view_of_a_deleted_base, [2, 0]),
    ("gradient through a deleted base", _gradient_through_a_deleted_base, [0, 3, 1]),
    ("views after base.t_()", _views_after_base_transposed_in_place, [1, 0]),
    ("views after base.unsqueeze_()", _views_after_base_unsqueezed_in_place, [0, 4]),
    ("base.t_() then written: earlier views follow", _base_transposed_in_place_then_written, [1, 5, 1]),
    (
        "base.t_(): an earlier view writes the base",
        _base_written_through_an_earlier_view_after_t_,
        [[5, 0], [5, 0], [5, 0]],
    ),
    ("base transposed twice in place", _views_after_base_transposed_twice, [0, 6, 6, 0, 6, 6, 0, 0, 0]),
    ("views after base.squeeze_()", _views_after_base_squeezed_in_place, [2, 8, 8, 8, 8]),
    ("a view's t_() writes the base", _view_transposed_in_place_writes_the_base, [[7, 0, 0], [7, 0, 0]]),
    ("a view's t_() follows the base", _view_transposed_in_place_follows_the_base, [[10, 40], [20, 50]]),
    (
        "gradient through a view of a base after t_()",
        _gradient_through_a_view_of_a_base_transposed_in_place,
        [[0, 4, 8], [1, 3, 5]],
    ),
    ("a chain of 2500 views of a collected base", _long_chain_of_views, [2498, 2499, -1, -1]),
    ("0-d index tensor read once", _index_tensor_read_once, [99, 99, 102, 103, 104, 105, 99, 99]),
    ("narrow start tensor read once", _narrow_start_tensor_read_once, [[-1, -1, 2], [-1, -1, 5]]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, scenario, expected", SCENARIOS, ids=[case[0] for case in SCENARIOS])
def test_storage_is_shared_as_in_pytorch(executor, name, scenario, expected):
    with onnxnn.set_executor(executor):
        result = scenario(onnxnn)
        np.testing.assert_array_equal(result.detach().numpy(), np.array(expected, np.float32))


@pytest.mark.parametrize("name, scenario, expected", SCENARIOS, ids=[case[0] for case in SCENARIOS])
def test_expected_values_are_pytorchs(name, scenario, expected):
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(scenario(torch).detach().numpy(), np.array(expected, np.float32))


def test_a_buffer_of_a_view_writes_the_base():
    x = onnxnn.zeros(2, 3)
    buffer = nn.Buffer(x[1])
    buffer.fill_(6.0)
    np.testing.assert_array_equal(x.numpy(), [[0, 0, 0], [6, 6, 6]])


# View attributes: PyTorch's ``_base`` is the root a view was made from (None for a tensor that is no
# view), ``_is_view()`` says whether it has one, and a view follows its root's ``requires_grad`` set
# after the view was made.
def _view_attributes(T):
    x = T.zeros(2, 3)
    row = x[0]
    element = row[1:]  # a view of a view: of the root
    y = x * 1
    z = T.zeros(2, 3)
    z_row = z[0]
    z.t_()  # a base that changes its shape in place is still no view
    del z_row  # (its view lived through the t_())
    return [
        z.is_contiguous(),  # its storage is z_row's still, laid out as before
        z._is_view(),
        z._base is None,
        row._base is x,
        element._base is x,
        row._is_view(),
        x._base is None,
        x._is_view(),
        y._is_view(),
        x.detach()[0]._base is not None,
    ]


def test_view_attributes_are_pytorchs():
    assert _view_attributes(onnxnn) == [False, False, True, True, True, True, True, False, False, True]


def test_view_attributes_expected_values_are_pytorchs():
    torch = pytest.importorskip("torch")
    assert _view_attributes(torch) == [False, False, True, True, True, True, True, False, False, True]


def _requires_grad_after_the_view(T):
    x = T.ones(3)
    view, detached = x[:2], x[1:].detach()
    with T.no_grad():
        made_without_grad = x[:1]  # follows its root as well
    x.requires_grad_()
    return [
        view.requires_grad,
        view.is_leaf,
        view.grad_fn is None,
        detached.requires_grad,
        made_without_grad.requires_grad,
    ]


def test_a_view_follows_its_roots_requires_grad():
    assert _requires_grad_after_the_view(onnxnn) == [True, True, True, False, True]


def test_requires_grad_after_the_view_expected_values_are_pytorchs():
    torch = pytest.importorskip("torch")
    assert _requires_grad_after_the_view(torch) == [True, True, True, False, True]
