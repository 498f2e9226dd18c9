"""``tensor.data`` shares the tensor's value: in-place writes through either reach both, as in PyTorch."""

from __future__ import annotations

import copy
import gc
import pickle

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.runtime.aliases import ALIAS_GROUPS

START = np.array([[0.5, -1.5, 2.0], [-0.25, 3.0, -2.5]], dtype=np.float32)
OTHER = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)

# (name, write through a tensor, the values it leaves, from numpy)
WRITES = [
    ("fill_", lambda t: t.fill_(0.75), lambda x: np.full_like(x, 0.75)),
    ("zero_", lambda t: t.zero_(), np.zeros_like),
    ("add_", lambda t: t.add_(1.0), lambda x: x + np.float32(1.0)),
    ("mul_", lambda t: t.mul_(-2.0), lambda x: x * np.float32(-2.0)),
    ("clamp_", lambda t: t.clamp_(-1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0)),
    ("copy_", lambda t: t.copy_(onnxnn.tensor(OTHER)), lambda x: OTHER),
    ("setitem", lambda t: t.__setitem__((0, 1), 9.0), lambda x: np.where(np.arange(6).reshape(2, 3) == 1, 9.0, x)),
    ("sub_ of itself", lambda t: t.sub_(t * 0.5), lambda x: x - x * np.float32(0.5)),
]


@pytest.fixture
def parameter():
    return nn.Parameter(onnxnn.tensor(START.copy()))


@pytest.mark.parametrize("name, write, expected", WRITES, ids=[case[0] for case in WRITES])
def test_a_write_through_data_changes_the_tensor(parameter, name, write, expected):
    write(parameter.data)  # gradients recorded: .data is outside autograd, as in PyTorch
    np.testing.assert_array_equal(parameter.detach().numpy(), expected(START))
    assert parameter.is_leaf and parameter.requires_grad and parameter.grad_fn is None


@pytest.mark.parametrize("name, write, expected", WRITES, ids=[case[0] for case in WRITES])
def test_a_write_to_the_tensor_reaches_its_data_taken_before(parameter, name, write, expected):
    data = parameter.data
    with onnxnn.no_grad():
        write(parameter)
    np.testing.assert_array_equal(data.numpy(), expected(START))
    assert not data.requires_grad


def test_random_initialization_through_data_initializes_the_layer():
    onnxnn.manual_seed(0)
    layer = nn.Linear(3, 2)
    layer.weight.data.normal_(0.0, 0.02)
    layer.bias.data.fill_(0.1)
    weight = layer.weight.detach().numpy()
    assert np.abs(weight).max() < 0.2  # the default initialization's bound is 1/sqrt(3)
    inputs = np.ones((4, 3), dtype=np.float32)
    output = layer(onnxnn.tensor(inputs)).detach().numpy()
    np.testing.assert_allclose(output, inputs @ weight.T + np.float32(0.1), rtol=1e-6, atol=1e-6)


def test_an_optimizer_step_reaches_the_data_taken_before(parameter):
    data = parameter.data
    optimizer = onnxnn.optim.SGD([parameter], lr=0.1)
    (parameter * parameter).sum().backward()
    optimizer.step()
    expected = START - np.float32(0.1) * (np.float32(2.0) * START)
    np.testing.assert_allclose(data.numpy(), expected, rtol=1e-6)


def test_a_soft_target_update_through_data():
    onnxnn.manual_seed(0)
    online, target = nn.Linear(3, 2), nn.Linear(3, 2)
    before = {name: p.detach().numpy().copy() for name, p in target.named_parameters()}
    for target_parameter, parameter in zip(target.parameters(), online.parameters()):
        target_parameter.data.copy_(0.25 * parameter.data + 0.75 * target_parameter.data)
    for name, parameter in online.named_parameters():
        expected = np.float32(0.25) * parameter.detach().numpy() + np.float32(0.75) * before[name]
        np.testing.assert_allclose(getattr(target, name).detach().numpy(), expected, rtol=1e-6)


def test_data_of_data_and_every_member_share_one_value(parameter):
    first = parameter.data
    second = first.data
    second.fill_(2.0)
    for member in (parameter, first, second):
        np.testing.assert_array_equal(member.detach().numpy(), np.full_like(START, 2.0))


def test_a_backward_reads_the_values_its_forward_saved(parameter):
    loss = (parameter * parameter).sum()
    parameter.data.zero_()
    loss.backward()
    # PyTorch's backward would read the zeroed storage; onnxnn's saved values are never overwritten.
    np.testing.assert_allclose(parameter.grad.numpy(), 2.0 * START, rtol=1e-6)


@pytest.mark.parametrize(
    "leave",
    [
        lambda tensor, data: tensor.__setattr__("data", onnxnn.zeros(2, 3)),  # a new storage
        lambda tensor, data: data.t_(),  # a new shape
    ],
    ids=["data setter", "t_"],
)
def test_a_member_leaves_its_group(parameter, leave):
    data = parameter.data
    leave(parameter, data)
    kept = data.detach().numpy().copy()
    with onnxnn.no_grad():
        parameter.fill_(5.0)
    np.testing.assert_array_equal(data.numpy(), kept)
    np.testing.assert_array_equal(parameter.detach().numpy(), np.full((2, 3), 5.0, np.float32))


def test_copies_and_pickles_never_join_the_group(parameter):
    data = parameter.data
    copied = copy.deepcopy(parameter)
    loaded = pickle.loads(pickle.dumps(parameter))
    with onnxnn.no_grad():
        copied.fill_(7.0)
        loaded.fill_(8.0)
    np.testing.assert_array_equal(parameter.detach().numpy(), START)
    np.testing.assert_array_equal(data.numpy(), START)


def test_collected_members_leave_no_group_behind(parameter):
    data = parameter.data
    assert id(parameter) in ALIAS_GROUPS and id(data) in ALIAS_GROUPS
    del data
    gc.collect()
    assert id(parameter) not in ALIAS_GROUPS  # alone again: its writes look nothing up
    with onnxnn.no_grad():
        parameter.add_(1.0)
    np.testing.assert_array_equal(parameter.detach().numpy(), START + np.float32(1.0))


def test_a_view_of_data_reaches_the_tensor_once_the_data_is_gone(parameter):
    parameter.data[1].zero_()  # Hugging Face's padding_idx initialization, gradients recorded
    expected = START.copy()
    expected[1] = 0.0
    np.testing.assert_array_equal(parameter.detach().numpy(), expected)
    assert parameter.is_leaf and parameter.requires_grad and parameter.grad_fn is None


def test_detach_shares_the_value_as_pytorchs_shares_the_storage(parameter):
    detached = parameter.detach()
    detached.fill_(3.0)  # a write through the detached tensor reaches the parameter
    np.testing.assert_array_equal(parameter.detach().numpy(), np.full_like(START, 3.0))
    with onnxnn.no_grad():
        parameter.mul_(2.0)  # and a write to the parameter reaches the detached tensor
    np.testing.assert_array_equal(detached.numpy(), np.full_like(START, 6.0))
    assert not detached.requires_grad and parameter.requires_grad and parameter.is_leaf


def test_state_dict_tensors_write_the_module():
    layer = onnxnn.nn.Linear(3, 2)
    layer.state_dict()["weight"].zero_()  # as in PyTorch, whose state_dict holds detached parameters
    np.testing.assert_array_equal(layer.weight.detach().numpy(), np.zeros((2, 3), np.float32))


# (id, requires grad, value assigned to .data, PyTorch's error, its message)
REFUSED_DATA = [
    ("list", False, [1.0, 2.0, 3.0], TypeError, "Variable data has to be a tensor, but got list"),
    ("none_into_parameter", True, None, TypeError, "Variable data has to be a tensor, but got NoneType"),
    ("numpy_array", False, OTHER, TypeError, "Variable data has to be a tensor, but got ndarray"),
    (
        "int64_into_parameter",
        True,
        onnxnn.tensor(OTHER.astype(np.int64)),
        RuntimeError,
        "data set to a tensor that requires gradients must be floating point or complex dtype",
    ),
    ("bool_into_parameter", True, onnxnn.ones(2, 3, dtype=onnxnn.bool), RuntimeError, "must be floating point"),
]


@pytest.mark.parametrize(
    "name, requires_grad, value, error, message", REFUSED_DATA, ids=[case[0] for case in REFUSED_DATA]
)
def test_a_refused_data_assignment_changes_nothing(name, requires_grad, value, error, message):
    base = nn.Parameter(onnxnn.tensor(START.copy()), requires_grad=requires_grad)
    data, row = base.data, base.detach()[0]
    with pytest.raises(error, match=message):
        base.data = value
    assert base.dtype == onnxnn.float32 and base.requires_grad == requires_grad
    row.add_(1.0)  # the links taken before still write the tensor, and the tensor them
    with onnxnn.no_grad():
        base[1, 2] = 7.0
    expected = START.copy()
    expected[0] += np.float32(1.0)
    expected[1, 2] = 7.0
    np.testing.assert_array_equal(base.detach().numpy(), expected)
    np.testing.assert_array_equal(data.numpy(), expected)
    np.testing.assert_array_equal(row.numpy(), expected[0])


@pytest.mark.parametrize(
    "requires_grad, value",
    [
        (False, onnxnn.tensor([3, 4])),  # any dtype and shape where no gradient is required
        (True, onnxnn.zeros(4, dtype=onnxnn.float64)),  # any floating dtype and shape where it is
    ],
    ids=["int64_into_plain_tensor", "float64_of_another_shape_into_parameter"],
)
def test_data_takes_another_dtype_and_shape_where_pytorch_does(requires_grad, value):
    base = nn.Parameter(onnxnn.tensor(START.copy()), requires_grad=requires_grad)
    base.data = value
    assert base.dtype == value.dtype and base.shape == value.shape and base.requires_grad == requires_grad
    np.testing.assert_array_equal(base.detach().numpy(), value.numpy())


# PyTorch makes these over their source's storage: a later write to the source reaches the module.
WRAPPERS = [
    ("Parameter", lambda source: nn.Parameter(source)),
    ("Buffer", lambda source: nn.Buffer(source)),
    ("ParameterList", lambda source: nn.ParameterList([source])[0]),
    ("Embedding.from_pretrained", lambda source: nn.Embedding.from_pretrained(source).weight),
]


@pytest.mark.parametrize("make", [case[1] for case in WRAPPERS], ids=[case[0] for case in WRAPPERS])
def test_a_wrapped_tensor_shares_its_value_with_its_source(make):
    source = onnxnn.zeros(2, 3)
    wrapped = make(source)
    nn.init.ones_(source)  # the idiom: initialize the tensor after wrapping it
    np.testing.assert_array_equal(wrapped.detach().numpy(), np.ones((2, 3)))
    with onnxnn.no_grad():
        wrapped.mul_(3.0)
    np.testing.assert_array_equal(source.numpy(), np.full((2, 3), 3.0))


def test_a_deep_copy_of_a_wrapped_tensor_shares_nothing():
    source = onnxnn.zeros(2)
    parameter = nn.Parameter(source)
    copied = copy.deepcopy(parameter)
    with onnxnn.no_grad():
        copied.fill_(5.0)
    assert source.tolist() == [0.0, 0.0] and parameter.tolist() == [0.0, 0.0]
