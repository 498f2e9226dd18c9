"""nn.Module and nn.Parameter: registration, attribute routing, iteration, lookup, modes, conversion, repr."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.nn.modules.module import Module


class TinyLinear(nn.Module):
    """A layer built from Parameters and onnxnn ops only, printed like nn.Linear."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(onnxnn.randn(out_features, in_features))
        self.bias = nn.Parameter(onnxnn.randn(out_features))

    def forward(self, x):
        return x @ self.weight.t() + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias=True"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = TinyLinear(4, 3)
        self.l2 = TinyLinear(3, 2)

    def forward(self, x):
        return self.l2(self.l1(x).relu())


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(onnxnn.ones(2))
        self.register_buffer("running", onnxnn.zeros(2))
        self.register_buffer("count", onnxnn.tensor([3, 4]))
        self.register_buffer("scratch", onnxnn.ones(2), persistent=False)

    def forward(self, x):
        return x * self.scale + self.running


class Empty(nn.Module):
    pass


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


# ----------------------------------------------------------------------------- iteration
class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = TinyLinear(2, 2)
        self.b = self.a
        self.tied = self.a.weight
        self.c = WithBuffers()


@pytest.mark.parametrize(
    "method, kwargs, expected",
    [
        ("named_parameters", {}, ["tied", "a.bias", "c.scale"]),  # a.weight is tied: listed once
        (
            "named_parameters",
            {"remove_duplicate": False},
            ["tied", "a.weight", "a.bias", "b.weight", "b.bias", "c.scale"],
        ),
        ("named_parameters", {"prefix": "net"}, ["net.tied", "net.a.bias", "net.c.scale"]),
        ("named_parameters", {"recurse": False}, ["tied"]),
        ("named_buffers", {}, ["c.running", "c.count", "c.scratch"]),
        ("named_buffers", {"prefix": "m", "recurse": True}, ["m.c.running", "m.c.count", "m.c.scratch"]),
        ("named_buffers", {"recurse": False}, []),
        ("named_modules", {}, ["", "a", "c"]),
        ("named_modules", {"remove_duplicate": False}, ["", "a", "b", "c"]),
        ("named_modules", {"prefix": "top"}, ["top", "top.a", "top.c"]),
        ("named_children", {}, ["a", "c"]),
    ],
)
def test_named_iterators(method, kwargs, expected):
    assert [name for name, _ in getattr(Shared(), method)(**kwargs)] == expected


def test_unnamed_iterators_follow_the_named_ones():
    m = Shared()
    assert [id(p) for p in m.parameters()] == [id(p) for _, p in m.named_parameters()]
    assert [id(b) for b in m.buffers()] == [id(b) for _, b in m.named_buffers()]
    assert list(m.children()) == [m.a, m.c]
    assert list(m.modules()) == [m, m.a, m.c]
    assert len(list(m.parameters(recurse=False))) == 1


def test_named_modules_with_memo_skips_known_modules():
    m = Shared()
    assert [name for name, _ in m.named_modules(memo={m.a})] == ["", "c"]


# ----------------------------------------------------------------------------- lookup by path
class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.net_b = nn.Module()
        self.net_b.net_c = WithBuffers()
        self.net_b.linear = TinyLinear(2, 2)
        self.plain = 3


def test_get_submodule_parameter_and_buffer_by_path():
    m = Deep()
    assert m.get_submodule("") is m
    assert m.get_submodule("net_b.net_c") is m.net_b.net_c
    assert m.get_parameter("net_b.linear.weight") is m.net_b.linear.weight
    assert m.get_buffer("net_b.net_c.count") is m.net_b.net_c.count


@pytest.mark.parametrize(
    "method, target, message",
    [
        ("get_submodule", "net_b.l3", "Module has no attribute `l3`"),
        ("get_submodule", "l3", "Deep has no attribute `l3`"),
        ("get_submodule", "plain", "`plain` is not an nn.Module"),
        ("get_submodule", "net_b.net_c.scale", "`scale` is not an nn.Module"),
        ("get_parameter", "net_b.linear.missing", "TinyLinear has no attribute `missing`"),
        ("get_parameter", "net_b.net_c.running", "`running` is not an nn.Parameter"),
        ("get_parameter", "nope.weight", "Deep has no attribute `nope`"),
        ("get_buffer", "net_b.net_c.scale", "`scale` is not a buffer"),
        ("get_buffer", "net_b.net_c.missing", "WithBuffers has no attribute `missing`"),
    ],
)
def test_lookup_errors_name_the_missing_path(method, target, message):
    with pytest.raises(AttributeError) as info:
        getattr(Deep(), method)(target)
    assert str(info.value) == message


def test_set_submodule_replaces_or_adds_and_validates():
    m = Deep()
    replacement = Empty()
    m.set_submodule("net_b.linear", replacement)
    assert m.net_b.linear is replacement
    m.set_submodule("net_b.extra", Empty())
    assert "extra" in m.net_b._modules
    with pytest.raises(AttributeError, match="Module has no attribute `other`"):
        m.set_submodule("net_b.other", Empty(), strict=True)
    with pytest.raises(ValueError, match="Cannot set the submodule without a target name!"):
        m.set_submodule("", Empty())
    with pytest.raises(ValueError, match="is not an nn.Module"):
        m.set_submodule("net_b.linear", 3)
    with pytest.raises(AttributeError, match="`plain` is not an nn.Module"):
        m.set_submodule("plain", Empty())


# ----------------------------------------------------------------------------- apply, modes, grads
def test_apply_visits_children_before_self_and_returns_self():
    m = Net()
    seen = []
    assert m.apply(lambda module: seen.append(type(module).__name__)) is m
    assert seen == ["TinyLinear", "TinyLinear", "Net"]


def test_train_and_eval_propagate_and_validate():
    m = Net()
    assert m.training and m.l1.training
    assert m.eval() is m
    assert not m.training and not m.l1.training and not m.l2.training
    m.train()
    assert m.l2.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train("yes")


def test_requires_grad_freezes_every_parameter():
    m = Net()
    assert m.requires_grad_(False) is m
    assert not any(p.requires_grad for p in m.parameters())
    m.l1.requires_grad_()
    assert [p.requires_grad for p in m.parameters()] == [True, True, False, False]


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    m = Net()
    m(onnxnn.randn(2, 4)).sum().backward()
    grads = [p.grad for p in m.parameters()]
    assert all(g is not None for g in grads)
    m.zero_grad(set_to_none=set_to_none)
    for param, grad in zip(m.parameters(), grads):
        if set_to_none:
            assert param.grad is None
        else:
            assert param.grad is grad
            assert not np.any(param.grad.numpy())


# ----------------------------------------------------------------------------- conversion
@pytest.mark.parametrize(
    "convert, float_dtype",
    [
        (lambda m: m.to(onnxnn.float64), onnxnn.float64),
        (lambda m: m.to(dtype=onnxnn.float16), onnxnn.float16),
        (lambda m: m.to("cpu", onnxnn.float64), onnxnn.float64),
        (lambda m: m.to(onnxnn.zeros(1, dtype=onnxnn.float64)), onnxnn.float64),
        (lambda m: m.double(), onnxnn.float64),
        (lambda m: m.half(), onnxnn.float16),
        (lambda m: m.bfloat16(), onnxnn.bfloat16),
        (lambda m: m.double().float(), onnxnn.float32),
        (lambda m: m.to("cpu"), onnxnn.float32),
        (lambda m: m.cpu(), onnxnn.float32),
    ],
)
def test_conversions_cast_floating_state_only_and_keep_parameter_objects(convert, float_dtype):
    m = WithBuffers()
    m.scale.grad = onnxnn.ones(2)
    param, count = m.scale, m.count
    assert convert(m) is m
    assert m.scale is param and m.scale.dtype == float_dtype and m.scale.requires_grad
    assert m.scale.grad.dtype == float_dtype
    assert m.running.dtype == float_dtype and m.scratch.dtype == float_dtype
    assert m.count.dtype == onnxnn.int64
    np.testing.assert_array_equal(m.count.numpy(), count.numpy())
    np.testing.assert_allclose(m.scale.detach().numpy().astype(np.float64), [1.0, 1.0])


def test_type_casts_every_parameter_and_buffer():
    m = WithBuffers()
    m.type(onnxnn.float64)
    assert {t.dtype for t in (*m.parameters(), *m.buffers())} == {onnxnn.float64}


@pytest.mark.parametrize("dst_type", [onnxnn.int64, onnxnn.bool, "torch.LongTensor"])
def test_type_to_an_integer_type_is_refused_before_anything_changes(dst_type):
    m = Net()
    m.l1.requires_grad_(False)  # frozen ones first: PyTorch would have converted them before raising
    values = [(p._value, p.dtype) for p in m.parameters()]
    with pytest.raises(RuntimeError, match="data set to a tensor that requires gradients must be floating point"):
        m.type(dst_type)
    assert [(p._value, p.dtype) for p in m.parameters()] == values


def test_type_to_an_integer_type_converts_a_frozen_module():
    m = WithBuffers().requires_grad_(False)
    m.type(onnxnn.int32)
    assert {t.dtype for t in (*m.parameters(), *m.buffers())} == {onnxnn.int32}


def test_to_rejects_integer_dtypes_without_changing_anything():
    m = WithBuffers()
    with pytest.raises(
        TypeError,
        match="nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=onnxnn.int64",
    ):
        m.to(onnxnn.int64)
    assert m.scale.dtype == onnxnn.float32


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        (
            ("cpu", onnxnn.float64, True, 5),
            TypeError,
            r"to\(\) received an invalid combination of arguments - got \(str, ",
        ),
        ((onnxnn.float64, True, False, 1), TypeError, "invalid combination of arguments"),
        (("cpu", onnxnn.float64, True, False), RuntimeError, r"\.to\(\) does not accept copy argument"),
        ((onnxnn.float64, True, False), RuntimeError, "does not accept copy argument"),
    ],
    ids=["five_device_form", "four_dtype_form", "copy_device_form", "copy_dtype_form"],
)
def test_to_refuses_more_arguments_than_its_signatures_before_changing_anything(arguments, error, message):
    m = WithBuffers()
    with pytest.raises(error, match=message):
        m.to(*arguments)  # never read as a device: no attempt at CUDA
    assert m.scale.dtype == onnxnn.float32 and m.running.dtype == onnxnn.float32


def test_to_refuses_a_copy_keyword():
    with pytest.raises(RuntimeError, match="does not accept copy argument"):
        WithBuffers().to(onnxnn.float64, copy=False)


@pytest.mark.parametrize("flag", ["x", 1, None], ids=["str", "int", "none"])
def test_requires_grad_takes_only_a_bool(flag):
    m = Net()
    with pytest.raises(TypeError, match="requires_grad_\\(\\): argument 'requires_grad' \\(position 1\\) must be bool"):
        m.requires_grad_(flag)
    assert all(p.requires_grad for p in m.parameters())


@pytest.mark.skipif(onnxnn.cuda.is_available(), reason="checks the error raised without a GPU")
def test_cuda_without_gpu_fails_before_changing_anything():
    m = Net()
    values = [p._value for p in m.parameters()]
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        m.cuda()
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        m.to("cuda", onnxnn.float64)
    assert [p._value for p in m.parameters()] == values


def test_to_empty_and_share_memory_keep_shapes():
    m = WithBuffers()
    assert m.to_empty(device="cpu") is m and m.share_memory() is m
    assert m.scale.shape == (2,) and m.count.dtype == onnxnn.int64


def test_converted_module_still_trains():
    m = Net().double()
    out = m(onnxnn.randn(3, 4, dtype=onnxnn.float64))
    assert out.dtype == onnxnn.float64
    out.sum().backward()
    assert m.l1.weight.grad.dtype == onnxnn.float64


# ----------------------------------------------------------------------------- repr
def test_repr_nests_children_with_indentation():
    class BigNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = TinyLinear(5, 4)
            self.net = Net()

    assert repr(Net()) == (
        "Net(\n"
        "  (l1): TinyLinear(in_features=4, out_features=3, bias=True)\n"
        "  (l2): TinyLinear(in_features=3, out_features=2, bias=True)\n"
        ")"
    )
    big = BigNet()
    big.add_module("missing", None)
    assert repr(big) == (
        "BigNet(\n"
        "  (l1): TinyLinear(in_features=5, out_features=4, bias=True)\n"
        "  (net): Net(\n"
        "    (l1): TinyLinear(in_features=4, out_features=3, bias=True)\n"
        "    (l2): TinyLinear(in_features=3, out_features=2, bias=True)\n"
        "  )\n"
        "  (missing): None\n"
        ")"
    )


def test_repr_of_leaf_and_multiline_extra_repr():
    class TwoLines(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    assert repr(Empty()) == "Empty()"
    assert repr(TwoLines()) == "TwoLines(\n  a=1\n  b=2\n)"
    parent = Empty()
    parent.inner = TwoLines()
    assert repr(parent) == "Empty(\n  (inner): TwoLines(\n    a=1\n    b=2\n  )\n)"


def test_repeated_children_are_not_collapsed_by_module_repr():
    m = Empty()
    for name in ("a", "b"):
        m.add_module(name, TinyLinear(2, 2))
    assert repr(m).count("TinyLinear(in_features=2, out_features=2, bias=True)") == 2


# ----------------------------------------------------------------------------- copies and compile
@pytest.mark.parametrize(
    "roundtrip", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))], ids=["deepcopy", "pickle"]
)
def test_module_copies_are_independent_and_equal(roundtrip):
    m = WithBuffers()
    clone = roundtrip(m)
    assert isinstance(clone.scale, nn.Parameter) and clone.scale is not m.scale
    assert list(clone.state_dict()) == list(m.state_dict())
    assert clone._non_persistent_buffers_set == {"scratch"}
    with onnxnn.no_grad():
        clone.scale.add_(1.0)
    np.testing.assert_array_equal(m.scale.detach().numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(clone.scale.detach().numpy(), [2.0, 2.0])


def test_compile_keeps_results_and_hooks():
    m = Net()
    x = onnxnn.randn(2, 4)
    expected = m(x).detach().numpy()
    assert m.compile() is None
    assert m._compiled_call_impl is not None
    seen = []
    m.register_forward_hook(lambda module, args, output: seen.append(output.shape))
    # Without onnxnn.compile the same call records the same graph, run by the same cached plan.
    np.testing.assert_array_equal(m(x).detach().numpy(), expected)
    assert seen == [onnxnn.Size([2, 2])]
    compiled = Net()
    compiled.compile()
    assert pickle.loads(pickle.dumps(compiled))._compiled_call_impl is None  # dropped, as in PyTorch


def test_module_module_is_the_public_class():
    assert nn.Module is Module
