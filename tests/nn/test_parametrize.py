"""nn.utils.parametrize: registering, chaining, assigning through right_inverse, caching and removing
parametrizations, with PyTorch's class swap, state_dict keys and errors.

Expected values are numpy formulas of the parametrization; gradients are finite differences in float64.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn import nn
from onnxnn.nn.utils import parametrize, stateless


class Symmetric(nn.Module):
    """X -> triu(X) + triu(X, 1)^T, with the upper triangle as its right inverse."""

    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class Double(nn.Module):
    def forward(self, X):
        return 2.0 * X


class DoubleWithInverse(Double):
    def right_inverse(self, A):
        return 0.5 * A


class Split(nn.Module):
    """Two originals: the tensor is their sum; right_inverse stores (A, zeros)."""

    def forward(self, first, second):
        return first + second

    def right_inverse(self, A):
        return A, onnxnn.zeros_like(A)


class FirstRow(nn.Module):
    """Changes the shape: (n, k) -> (1, k)."""

    def forward(self, X):
        return X[:1]


class ToDouble(nn.Module):
    def forward(self, X):
        return X.double()


def numpy_symmetric(X):
    return np.triu(X) + np.triu(X, 1).T


def linear(rows=3, columns=3):
    return nn.Linear(columns, rows)


# ---------------------------------------------------------------------- registering


def test_register_swaps_the_class_and_moves_the_parameter():
    layer = linear()
    weight = layer.weight
    before = weight.detach().numpy().copy()
    returned = parametrize.register_parametrization(layer, "weight", Symmetric())
    assert returned is layer
    assert type(layer).__name__ == "ParametrizedLinear"
    assert isinstance(layer, nn.Linear)
    assert parametrize.type_before_parametrizations(layer) is nn.Linear
    assert type(linear()) is nn.Linear  # other instances keep their class
    assert isinstance(layer.parametrizations, nn.ModuleDict)
    assert isinstance(layer.parametrizations.weight, parametrize.ParametrizationList)
    # the same Parameter object, now holding right_inverse(weight) = triu(weight)
    assert layer.parametrizations.weight.original is weight
    np.testing.assert_array_equal(weight.detach().numpy(), np.triu(before))
    np.testing.assert_array_equal(layer.weight.detach().numpy(), numpy_symmetric(np.triu(before)))
    assert "weight" not in layer._parameters
    assert [name for name, _ in layer.named_parameters()] == ["bias", "parametrizations.weight.original"]
    assert list(layer.state_dict()) == ["bias", "parametrizations.weight.original"]


def test_forward_uses_the_parametrized_weight():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Symmetric())
    x = onnxnn.randn(2, 3)
    W = numpy_symmetric(layer.parametrizations.weight.original.detach().numpy())
    expected = x.numpy() @ W.T + layer.bias.detach().numpy()
    np.testing.assert_allclose(layer(x).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("weight", True),
        ("bias", False),
        (None, True),
    ],
)
def test_is_parametrized(name, expected):
    layer = linear()
    assert not parametrize.is_parametrized(layer)
    parametrize.register_parametrization(layer, "weight", Symmetric())
    assert parametrize.is_parametrized(layer, name) is expected


def test_parametrizations_chain_in_registration_order():
    layer = linear()
    original = layer.weight.detach().numpy().copy()
    parametrize.register_parametrization(layer, "weight", Double())  # no right_inverse: identity
    parametrize.register_parametrization(layer, "weight", Symmetric())
    assert len(layer.parametrizations.weight) == 2
    np.testing.assert_allclose(layer.weight.detach().numpy(), numpy_symmetric(2.0 * original), rtol=1e-6)


def test_buffer_is_parametrized_and_stays_a_buffer():
    layer = nn.BatchNorm1d(3)
    parametrize.register_parametrization(layer, "running_var", Double())
    assert "original" in layer.parametrizations.running_var._buffers
    assert "parametrizations.running_var.original" in dict(layer.named_buffers())
    assert not layer.parametrizations.running_var.original.requires_grad
    np.testing.assert_array_equal(layer.running_var.numpy(), np.full(3, 2.0, np.float32))
    assert "parametrizations.running_var.original" in layer.state_dict()


def test_right_inverse_returning_a_tuple_gives_numbered_originals():
    layer = linear()
    weight = layer.weight.detach().numpy().copy()
    parametrize.register_parametrization(layer, "weight", Split())
    parametrizations = layer.parametrizations.weight
    assert not parametrizations.is_tensor and parametrizations.ntensors == 2
    assert list(layer.state_dict()) == [
        "bias",
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    assert isinstance(parametrizations.original0, nn.Parameter)
    assert isinstance(parametrizations.original1, nn.Parameter)
    np.testing.assert_array_equal(parametrizations.original0.detach().numpy(), weight)
    np.testing.assert_array_equal(parametrizations.original1.detach().numpy(), np.zeros_like(weight))
    np.testing.assert_array_equal(layer.weight.detach().numpy(), weight)


# ---------------------------------------------------------------------- assigning


def test_assignment_stores_the_right_inverse_in_the_same_tensor():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", DoubleWithInverse())
    original = layer.parametrizations.weight.original
    value = np.arange(9, dtype=np.float32).reshape(3, 3)
    layer.weight = onnxnn.tensor(value)
    assert layer.parametrizations.weight.original is original
    np.testing.assert_array_equal(original.detach().numpy(), 0.5 * value)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), value)


def test_assignment_to_numbered_originals():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Split())
    value = np.ones((3, 3), np.float32)
    layer.weight = onnxnn.tensor(value)
    np.testing.assert_array_equal(layer.parametrizations.weight.original0.detach().numpy(), value)
    np.testing.assert_array_equal(layer.parametrizations.weight.original1.detach().numpy(), 0 * value)


def test_assignment_without_right_inverse_raises():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Double())
    with pytest.raises(RuntimeError, match="Double does not implement right_inverse"):
        layer.weight = onnxnn.zeros(3, 3)


# ---------------------------------------------------------------------- training and gradients


def test_gradients_reach_original_as_finite_differences_say():
    layer = linear().double()
    parametrize.register_parametrization(layer, "weight", Symmetric())
    x = np.random.default_rng(0).standard_normal((4, 3))

    def loss(original, inputs):
        output = stateless.functional_call(layer, {"parametrizations.weight.original": original}, (inputs,))
        return (output * output).sum()

    original = layer.parametrizations.weight.original.detach().numpy().astype(np.float64)
    check_gradients(loss, [original, x], requires_grad=[True, False])


def test_functional_call_by_the_parametrized_name_takes_the_value_through_right_inverse():
    # PyTorch's functional_call sets a name that is no parameter with setattr: the parametrization's
    # setter stores right_inverse(value) in the original for the call, and puts the old one back.
    layer = linear()
    parametrize.register_parametrization(layer, "weight", DoubleWithInverse())
    original = layer.parametrizations.weight.original.detach().numpy().copy()
    weight = np.random.default_rng(1).standard_normal((3, 3)).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    output = stateless.functional_call(layer, {"weight": onnxnn.tensor(weight)}, (onnxnn.tensor(x),))
    expected = x @ weight.T + layer.bias.detach().numpy()
    np.testing.assert_allclose(output.detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(layer.parametrizations.weight.original.detach().numpy(), original)


def test_sgd_step_updates_original():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Symmetric())
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.1)
    before = layer.parametrizations.weight.original.detach().numpy().copy()
    layer(onnxnn.randn(2, 3)).sum().backward()
    gradient = layer.parametrizations.weight.original.grad.numpy()
    optimizer.step()
    np.testing.assert_allclose(
        layer.parametrizations.weight.original.detach().numpy(), before - 0.1 * gradient, rtol=1e-6, atol=1e-7
    )
    W = layer.weight.detach().numpy()
    np.testing.assert_array_equal(W, W.T)


# ---------------------------------------------------------------------- cached


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, X):
        self.calls += 1
        return 2.0 * X


def test_cached_computes_the_parametrization_once():
    layer = linear()
    counter = Counting()
    parametrize.register_parametrization(layer, "weight", counter)
    calls = counter.calls
    layer.weight, layer.weight
    assert counter.calls == calls + 2
    with parametrize.cached():
        first = layer.weight
        with parametrize.cached():  # nested blocks share the cache
            assert layer.weight is first
        assert layer.weight is first
    assert counter.calls == calls + 3
    assert layer.weight is not first  # the cache is emptied on exit


# ---------------------------------------------------------------------- removing


def test_remove_leaving_the_parametrized_value():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Symmetric())
    original = layer.parametrizations.weight.original
    expected = layer.weight.detach().numpy().copy()
    parametrize.remove_parametrizations(layer, "weight")
    assert type(layer) is nn.Linear
    assert not hasattr(layer, "parametrizations")
    assert layer.weight is original  # optimizers holding it keep working
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.requires_grad
    np.testing.assert_array_equal(layer.weight.detach().numpy(), expected)
    assert list(layer.state_dict()) == ["bias", "weight"]


def test_remove_putting_back_the_original():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Double())
    stored = layer.parametrizations.weight.original.detach().numpy().copy()
    parametrize.remove_parametrizations(layer, "weight", leave_parametrized=False)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), stored)


def test_remove_one_of_two_keeps_the_class():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Double())
    parametrize.register_parametrization(layer, "bias", Double())
    parametrize.remove_parametrizations(layer, "weight")
    assert type(layer).__name__ == "ParametrizedLinear"
    assert parametrize.is_parametrized(layer, "bias") and not parametrize.is_parametrized(layer, "weight")
    # the module's own parameters come before its children's, as in PyTorch
    assert list(layer.state_dict()) == ["weight", "parametrizations.bias.original"]


def test_remove_numbered_originals_leaves_a_parameter():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Split())
    expected = layer.weight.detach().numpy().copy()
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        parametrize.remove_parametrizations(layer, "weight", leave_parametrized=False)
    assert parametrize.is_parametrized(layer, "weight")  # unchanged by the refused call
    parametrize.remove_parametrizations(layer, "weight")
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.requires_grad
    np.testing.assert_array_equal(layer.weight.detach().numpy(), expected)


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("parametrization", "message"),
    [
        (FirstRow(), "may not change the shape of the tensor, unless `unsafe`"),
        (ToDouble(), "may not change the dtype of the tensor, unless `unsafe`"),
    ],
)
def test_inconsistent_parametrization_is_refused_and_the_module_unchanged(parametrization, message):
    layer = linear()
    weight = layer.weight
    before = weight.detach().numpy().copy()
    with pytest.raises(ValueError, match=message):
        parametrize.register_parametrization(layer, "weight", parametrization)
    assert type(layer) is nn.Linear and layer.weight is weight
    np.testing.assert_array_equal(weight.detach().numpy(), before)


@pytest.mark.parametrize(
    ("parametrization", "message"),
    [
        (FirstRow(), "module.weight.shape"),
        (ToDouble(), "module.weight.dtype"),
    ],
)
def test_inconsistent_parametrization_appended_to_a_chain_is_refused(parametrization, message):
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Double())
    with pytest.raises(ValueError, match=message):
        parametrize.register_parametrization(layer, "weight", parametrization)
    assert len(layer.parametrizations.weight) == 1


def test_unsafe_allows_changing_the_shape():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", FirstRow(), unsafe=True)
    assert layer.weight.shape == (1, 3)
    assert layer.parametrizations.weight.unsafe


def test_right_inverse_may_not_change_the_dtype_of_a_single_original():
    class Widening(nn.Module):
        def forward(self, X):
            return X.float()

        def right_inverse(self, A):
            return A.double()

    with pytest.raises(ValueError, match="may not change the dtype"):
        parametrize.register_parametrization(linear(), "weight", Widening(), unsafe=True)


def test_unknown_tensor_name():
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name"):
        parametrize.register_parametrization(linear(), "kernel", Double())


def test_removing_a_tensor_that_is_not_parametrized():
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(linear(), "weight")


def test_assigning_a_parameter_to_a_parametrized_name_is_refused():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", DoubleWithInverse())
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        layer.weight = nn.Parameter(onnxnn.zeros(3, 3))


# ---------------------------------------------------------------------- copying, state_dict, transfer


def test_deepcopy_works_and_pickling_is_refused():
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Symmetric())
    replica = copy.deepcopy(layer)
    assert type(replica) is type(layer)
    assert replica.parametrizations.weight.original is not layer.parametrizations.weight.original
    np.testing.assert_array_equal(replica.weight.detach().numpy(), layer.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(layer)


def test_state_dict_round_trip():
    source, target = linear(), linear()
    for layer in (source, target):
        parametrize.register_parametrization(layer, "weight", Symmetric())
    target.load_state_dict(source.state_dict())
    x = onnxnn.randn(2, 3)
    np.testing.assert_array_equal(target(x).detach().numpy(), source(x).detach().numpy())


def test_transfer_parametrizations_and_params():
    source = linear()
    parametrize.register_parametrization(source, "weight", Symmetric())
    target = linear()
    returned = parametrize.transfer_parametrizations_and_params(source, target)
    assert returned is target
    assert target.parametrizations.weight.original is source.parametrizations.weight.original
    np.testing.assert_array_equal(target.weight.detach().numpy(), source.weight.detach().numpy())


def test_same_state_dict_keys_as_torch():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import parametrize as torch_parametrize

    class TorchSplit(torch.nn.Module):
        def forward(self, first, second):
            return first + second

        def right_inverse(self, A):
            return A, torch.zeros_like(A)

    torch_layer = torch.nn.Linear(3, 3)
    torch_parametrize.register_parametrization(torch_layer, "weight", TorchSplit())
    torch_parametrize.register_parametrization(torch_layer, "bias", torch.nn.Identity())
    layer = linear()
    parametrize.register_parametrization(layer, "weight", Split())
    parametrize.register_parametrization(layer, "bias", nn.Identity())
    assert list(layer.state_dict()) == list(torch_layer.state_dict())
    assert type(layer).__name__ == type(torch_layer).__name__
