"""nn.Module and nn.Parameter: Parameters and buffers, construction and forward, attribute routing into
the parameter, buffer and module tables, and registration errors.

Iteration, lookup by path, modes, conversion, repr and copies are in
test_module_traversal_and_conversion.py.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import onnxnn
from onnxnn import nn

from .module_cases import Empty, WithBuffers


# ----------------------------------------------------------------------------- Parameter
def test_parameter_is_a_tensor_that_requires_grad_and_prints_its_kind():
    p = nn.Parameter(onnxnn.tensor([1.0, 2.0]))
    assert isinstance(p, onnxnn.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    frozen = nn.Parameter(onnxnn.tensor([1.0]), requires_grad=False)
    assert repr(frozen) == "Parameter containing:\ntensor([1.])"


def test_parameter_detaches_its_data_and_ops_on_it_give_plain_tensors():
    source = onnxnn.tensor([1.0, 2.0], requires_grad=True) * 2
    p = nn.Parameter(source)
    assert p.is_leaf and p.requires_grad
    assert type(p * 2) is onnxnn.Tensor
    assert type(p.detach()) is onnxnn.Tensor
    np.testing.assert_array_equal(p.detach().numpy(), [2.0, 4.0])


def test_parameter_defaults_to_empty_and_refuses_integer_gradients():
    assert nn.Parameter().shape == (0,)
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        nn.Parameter(onnxnn.tensor([1, 2]))
    assert not nn.Parameter(onnxnn.tensor([1, 2]), requires_grad=False).requires_grad
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])


@pytest.mark.parametrize(
    "roundtrip", [copy.deepcopy, lambda p: pickle.loads(pickle.dumps(p))], ids=["deepcopy", "pickle"]
)
@pytest.mark.parametrize("requires_grad", [True, False])
def test_parameter_copies_stay_parameters(roundtrip, requires_grad):
    p = nn.Parameter(onnxnn.tensor([1.5, -2.0]), requires_grad=requires_grad)
    q = roundtrip(p)
    assert type(q) is nn.Parameter and q is not p
    assert q.requires_grad == requires_grad
    np.testing.assert_array_equal(q.detach().numpy(), [1.5, -2.0])


def test_buffer_assignment_registers_a_buffer_with_its_persistence():
    m = Empty()
    m.kept = nn.Buffer(onnxnn.zeros(2))
    m.dropped = nn.Buffer(onnxnn.ones(2), persistent=False)
    assert list(dict(m.named_buffers())) == ["kept", "dropped"]
    assert list(m.state_dict()) == ["kept"]


# ----------------------------------------------------------------------------- construction and forward
def test_missing_forward_raises_not_implemented_naming_the_module():
    with pytest.raises(NotImplementedError, match=r'Module \[Empty\] is missing the required "forward" function'):
        Empty()(onnxnn.ones(1))


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((1,), {}, r"Empty.__init__\(\) takes 1 positional argument but 2 were given"),
        ((), {"x": 1}, r"Empty.__init__\(\) got an unexpected keyword argument 'x'"),
    ],
)
def test_init_rejects_arguments(args, kwargs, message):
    with pytest.raises(TypeError, match=message):
        Empty(*args, **kwargs)


def test_call_runs_forward_with_args_and_kwargs():
    class AddKw(nn.Module):
        def forward(self, x, *, shift=0.0):
            return x + shift

    out = AddKw()(onnxnn.tensor([1.0]), shift=2.0)
    np.testing.assert_array_equal(out.numpy(), [3.0])


# ----------------------------------------------------------------------------- attribute routing
def test_setattr_routes_parameters_buffers_and_modules_into_their_tables():
    m = Empty()
    m.p = nn.Parameter(onnxnn.ones(1))
    m.register_buffer("b", onnxnn.zeros(1))
    m.child = Empty()
    m.plain = 3
    assert list(m._parameters) == ["p"] and list(m._buffers) == ["b"] and list(m._modules) == ["child"]
    assert "plain" in m.__dict__ and "plain" not in {*m._parameters, *m._buffers, *m._modules}
    assert m.p is m._parameters["p"] and m.child is m._modules["child"]


# Registered state is read as ordinary attributes (the tables mirror their entries into the instance
# dict: nn/modules/_tables.py); every way of changing a table must keep attribute reads equal to it.
TABLE_CHANGES = {
    "item assignment": lambda m, new: m._parameters.__setitem__("p", new),
    "setattr": lambda m, new: setattr(m, "p", new),
    "update": lambda m, new: m._parameters.update({"p": new}),
    "or-assign": lambda m, new: m._parameters.__ior__({"p": new}),
    "del": lambda m, new: m._parameters.__delitem__("p"),
    "delattr": lambda m, new: delattr(m, "p"),
    "pop": lambda m, new: m._parameters.pop("p"),
    "popitem": lambda m, new: m._parameters.popitem(),
    "clear": lambda m, new: m._parameters.clear(),
    "table replaced": lambda m, new: setattr(m, "_parameters", {"q": new}),
}


@pytest.mark.parametrize("change", list(TABLE_CHANGES))
def test_attribute_reads_follow_every_change_of_a_table(change):
    m = Empty()
    m.p = nn.Parameter(onnxnn.ones(1))
    new = nn.Parameter(onnxnn.zeros(1))
    TABLE_CHANGES[change](m, new)
    for name in ("p", "q"):
        if name in m._parameters:
            assert getattr(m, name) is m._parameters[name]
        else:
            with pytest.raises(AttributeError, match=f"has no attribute '{name}'"):
                getattr(m, name)


ENTRY_REMOVALS = {
    "del": lambda table: table.__delitem__("_buffers"),
    "pop": lambda table: table.pop("_buffers"),
    "popitem": lambda table: table.popitem(),
    "clear": lambda table: table.clear(),
}


@pytest.mark.parametrize("removal", list(ENTRY_REMOVALS))
def test_an_entry_named_like_a_table_never_touches_the_table(removal):
    # Entries named _parameters, _buffers or _modules are never mirrored, so removing one must not
    # remove the owner's table of that name either.
    m = Empty()
    m._modules["_buffers"] = nn.Identity()
    ENTRY_REMOVALS[removal](m._modules)
    assert isinstance(m.__dict__["_buffers"], dict) and m._buffers is m.__dict__["_buffers"]


def test_tables_stay_mirrored_through_pickle_deepcopy_and_shallow_copy():
    m = Empty()
    m.p = nn.Parameter(onnxnn.ones(1))
    m.child = Empty()
    for restored in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        restored.p = nn.Parameter(onnxnn.zeros(2))
        del restored._modules["child"]
        assert restored.p.shape == (2,) and not hasattr(restored, "child")
        assert m.p.shape == (1,) and isinstance(m.child, Empty)
    shallow = copy.copy(m)  # shares the tables, as PyTorch's shallow copy does
    m._parameters["p"] = nn.Parameter(onnxnn.zeros(3))
    assert shallow.p is m.p is m._parameters["p"]


def test_sequential_renumbering_leaves_no_stale_attribute():
    seq = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    del seq[1]
    assert isinstance(getattr(seq, "1"), nn.Sigmoid) and not hasattr(seq, "2")


def test_assigning_a_tensor_to_a_buffer_name_rebinds_the_buffer():
    m = WithBuffers()
    new_value = onnxnn.tensor([5.0, 6.0])
    m.running = new_value
    assert m._buffers["running"] is new_value
    m.scratch = onnxnn.zeros(2)
    assert "scratch" in m._non_persistent_buffers_set  # persistence survives reassignment
    m.running = None
    assert m._buffers["running"] is None and "running" not in m.state_dict()


def test_assigning_a_parameter_over_a_plain_attribute_or_module_replaces_it():
    m = Empty()
    m.x = 3
    m.x = nn.Parameter(onnxnn.ones(1))
    assert isinstance(m.x, nn.Parameter) and m.x is m._parameters["x"]
    m.child = Empty()
    m.child = nn.Parameter(onnxnn.ones(1))
    assert "child" not in m._modules and "child" in m._parameters
    with pytest.raises(TypeError, match="as parameter 'x'"):
        m.x = Empty()  # a name registered as a parameter only takes Parameters or None


def test_none_reservations_keep_names_for_their_kind():
    m = Empty()
    m.register_parameter("w", None)
    m.register_buffer("b", None)
    assert m.w is None and m.b is None
    assert list(m.parameters()) == [] and list(m.buffers()) == [] and list(m.state_dict()) == []
    m.w = nn.Parameter(onnxnn.ones(1))
    assert list(dict(m.named_parameters())) == ["w"]


def _before_init(value):
    class Early(nn.Module):
        def __init__(self):
            self.x = value

    return Early


@pytest.mark.parametrize(
    "action, error, message",
    [
        (
            lambda m: setattr(m, "weight", onnxnn.ones(3)),
            TypeError,
            "cannot assign 'onnxnn.FloatTensor' as parameter 'weight' (torch.nn.Parameter or None expected)",
        ),
        (
            lambda m: setattr(m, "child", 5),
            TypeError,
            "cannot assign 'int' as child module 'child' (torch.nn.Module or None expected)",
        ),
        (
            lambda m: setattr(m, "buf", "text"),
            TypeError,
            "cannot assign 'str' as buffer 'buf' (torch.nn.Buffer, torch.Tensor or None expected)",
        ),
        (lambda m: m.register_parameter("a.b", None), KeyError, 'parameter name can\'t contain "."'),
        (lambda m: m.register_parameter("", None), KeyError, 'parameter name can\'t be empty string ""'),
        (lambda m: m.register_parameter(3, None), TypeError, "parameter name should be a string. Got int"),
        (lambda m: m.register_parameter("buf", None), KeyError, "attribute 'buf' already exists"),
        (lambda m: m.register_parameter("plain", None), KeyError, "attribute 'plain' already exists"),
        (
            lambda m: m.register_parameter("w", onnxnn.ones(1)),
            TypeError,
            "cannot assign 'onnxnn.FloatTensor' object to parameter 'w' (torch.nn.Parameter or None required)",
        ),
        (lambda m: m.register_buffer("a.b", None), KeyError, 'buffer name can\'t contain "."'),
        (lambda m: m.register_buffer("", None), KeyError, 'buffer name can\'t be empty string ""'),
        (lambda m: m.register_buffer(1.5, None), TypeError, "buffer name should be a string. Got float"),
        (lambda m: m.register_buffer("weight", None), KeyError, "attribute 'weight' already exists"),
        (lambda m: m.register_buffer("child", None), KeyError, "attribute 'child' already exists"),
        (
            lambda m: m.register_buffer("b2", [1.0]),
            TypeError,
            "cannot assign 'list' object to buffer 'b2' (torch Tensor or None required)",
        ),
        (lambda m: m.add_module("a.b", Empty()), KeyError, 'module name can\'t contain ".", got: a.b'),
        (lambda m: m.add_module("", Empty()), KeyError, 'module name can\'t be empty string ""'),
        (lambda m: m.add_module(7, Empty()), TypeError, "module name should be a string. Got int"),
        (lambda m: m.add_module("weight", Empty()), KeyError, "attribute 'weight' already exists"),
        (lambda m: m.add_module("x", 3), TypeError, "int is not a Module subclass"),
        (lambda m: m.register_module("forward", Empty()), KeyError, "attribute 'forward' already exists"),
    ],
)
def test_registration_errors(action, error, message):
    m = Empty()
    m.weight = nn.Parameter(onnxnn.ones(3))
    m.register_buffer("buf", onnxnn.zeros(1))
    m.child = Empty()
    m.plain = 1
    before = (list(m._parameters), list(m._buffers), list(m._modules))
    with pytest.raises(error) as info:
        action(m)
    assert info.value.args[0] == message
    assert (list(m._parameters), list(m._buffers), list(m._modules)) == before


def test_registering_a_non_leaf_parameter_is_refused():
    m = Empty()
    p = nn.Parameter(onnxnn.ones(2))
    non_leaf = p * 2
    non_leaf.__class__ = nn.Parameter  # a Parameter-typed tensor with history
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'w'"):
        m.register_parameter("w", non_leaf)


@pytest.mark.parametrize(
    "value, message",
    [
        (nn.Parameter(onnxnn.ones(1)), "cannot assign parameters before Module.__init__() call"),
        (Empty(), "cannot assign module before Module.__init__() call"),
        (nn.Buffer(onnxnn.ones(1)), "cannot assign buffer before Module.__init__() call"),
    ],
)
def test_assignment_before_init_is_refused(value, message):
    with pytest.raises(AttributeError) as info:
        _before_init(value)()
    assert str(info.value) == message


def test_getattr_error_and_delattr_for_each_table():
    m = WithBuffers()
    m.child = Empty()
    with pytest.raises(AttributeError, match="'WithBuffers' object has no attribute 'missing'"):
        m.missing
    del m.scale, m.running, m.scratch, m.child
    assert list(m._parameters) == [] and list(m._modules) == []
    assert list(m._buffers) == ["count"] and m._non_persistent_buffers_set == set()
    m.plain = 1
    del m.plain
    assert not hasattr(m, "plain")


def test_dir_lists_registered_names_but_not_numeric_ones():
    m = WithBuffers()
    m.add_module("0", Empty())
    names = dir(m)
    assert {"scale", "running", "count", "forward", "training"} <= set(names)
    assert "0" not in names and names == sorted(names)
