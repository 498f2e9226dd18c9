"""Module.zero_grad keeps its tree's parameter list between calls: every change of the tree shows."""

import gc

import pytest

import onnxnn
from onnxnn import nn
from onnxnn.nn.modules import _parameter_lists
from onnxnn.nn.modules.module import Module


def _net():
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))


def _with_gradients(module):
    for param in module.parameters():
        param.grad = onnxnn.ones_like(param)
    return module


def _add_parameter(net):
    net[2].extra = nn.Parameter(onnxnn.ones(2))


def _replace_parameter(net):
    net[0].weight = nn.Parameter(onnxnn.ones(3, 4))


def _register_in_table(net):
    net[0]._parameters["table_entry"] = nn.Parameter(onnxnn.ones(5))


def _replace_submodule(net):
    net[2] = nn.Linear(3, 2)


def _append_submodule(net):
    net.append(nn.Linear(1, 1))


def _nest_submodule(net):
    net[1].inner = nn.Linear(2, 2)


def _delete_parameter(net):
    del net[0].bias


def _parametrize(net):
    nn.utils.parametrize.register_parametrization(net[0], "weight", nn.Identity())


CHANGES = [
    _add_parameter,
    _replace_parameter,
    _register_in_table,
    _replace_submodule,
    _append_submodule,
    _nest_submodule,
    _delete_parameter,
    _parametrize,
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda change: change.__name__.strip("_"))
def test_zero_grad_after_the_tree_changes_clears_exactly_the_new_parameters(change):
    net = _net()
    net.zero_grad()  # the list is kept from here
    change(net)
    _with_gradients(net).zero_grad()
    assert [param.grad for param in net.parameters()] == [None] * len(list(net.parameters()))
    assert _parameter_lists.parameters_of(net, Module) == tuple(net.parameters())


def test_the_list_is_reused_while_the_tree_is_unchanged():
    net = _net()
    first = _parameter_lists.parameters_of(net, Module)
    net(onnxnn.randn(4)).sum().backward()  # a training step changes no module
    onnxnn.optim.SGD(net.parameters(), lr=0.1).step()
    assert _parameter_lists.parameters_of(net, Module) is first
    net.eval()  # an attribute set: the tree is walked again, to the same parameters
    assert _parameter_lists.parameters_of(net, Module) == first


def test_a_change_elsewhere_does_not_drop_the_list():
    net, other = _net(), _net()
    first = _parameter_lists.parameters_of(net, Module)
    other[0].weight = nn.Parameter(onnxnn.ones(3, 4))
    assert _parameter_lists.parameters_of(net, Module) is first


def test_shared_parameters_are_listed_once():
    net = _net()
    net.append(net[0])
    _with_gradients(net).zero_grad()
    assert len(_parameter_lists.parameters_of(net, Module)) == 4
    assert all(param.grad is None for param in net.parameters())


def test_an_overridden_walk_is_asked_every_time():
    class OnlyFirst(nn.Sequential):
        def __init__(self, *layers):
            super().__init__(*layers)
            self.calls = 0

        def parameters(self, recurse=True):
            self.calls += 1
            return iter(list(self[0].parameters()))

    net = OnlyFirst(nn.Linear(4, 3), nn.Linear(3, 1))
    for layer in net:
        _with_gradients(layer)
    net.zero_grad()
    net.zero_grad()
    assert net.calls == 2
    assert net[0].weight.grad is None
    assert net[1].weight.grad is not None  # the override left it out, as PyTorch's zero_grad would


def test_an_overridden_named_modules_below_the_root_is_asked_every_time():
    class Hidden(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(2, 2)

        def named_modules(self, memo=None, prefix="", remove_duplicate=True):
            yield prefix, self  # hides its layer from every walk

    net = nn.Sequential(nn.Linear(4, 2), Hidden())
    assert _parameter_lists.parameters_of(net, Module) == tuple(net.parameters())
    assert len(_parameter_lists.parameters_of(net, Module)) == 2
    assert id(net) not in _parameter_lists._kept


def test_a_collected_module_is_forgotten():
    net = _net()
    _parameter_lists.parameters_of(net, Module)
    key = id(net)
    del net
    gc.collect()
    assert key not in _parameter_lists._kept
