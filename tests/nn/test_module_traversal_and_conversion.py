"""nn.Module: iteration, lookup by path, apply, modes and gradients, conversion (dtypes and devices),
repr, copies and compile.

Parameters, construction, attribute routing and registration are in test_module_registration.py.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.nn.modules.module import Module

from .module_cases import Empty, Net, TinyLinear, WithBuffers


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
