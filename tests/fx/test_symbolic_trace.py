"""symbolic_trace records what a forward does as torch.fx would: the nodes' ops, targets and names."""

from __future__ import annotations

import builtins
import operator

import numpy as np
import pytest
from .fx_models import Block, Mixed, mixed_numpy

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import fx, nn
from onnxnn.fx.node import check_specialized
from onnxnn.fx.tracer import Tracer

EXPECTED_MIXED = [
    ("placeholder", "x"),
    ("placeholder", "y"),
    ("call_module", "fc"),
    ("call_function", F.relu),
    ("get_attr", "offset"),
    ("call_function", operator.add),
    ("call_module", "block.linear"),
    ("get_attr", "block.scale"),
    ("call_function", operator.mul),
    ("call_function", onnxnn.tanh),
    ("call_function", operator.mul),
    ("call_function", operator.sub),
    ("call_method", "transpose"),
    ("call_method", "contiguous"),
    ("call_function", builtins.getattr),
    ("call_function", operator.getitem),
    ("call_function", operator.getitem),
    ("call_function", onnxnn.cat),
    ("call_method", "sum"),
    ("call_function", operator.truediv),
    ("output", "output"),
]


def test_tracing_records_each_kind_of_operation():
    gm = fx.symbolic_trace(Mixed())
    assert [(node.op, node.target) for node in gm.graph.nodes] == EXPECTED_MIXED
    names = [node.name for node in gm.graph.nodes]
    assert names[:8] == ["x", "y", "fc", "relu", "offset", "add", "block_linear", "block_scale"]
    assert len(set(names)) == len(names)
    cat = gm.graph.find_nodes(op="call_function", target=onnxnn.cat)[0]
    assert cat.kwargs == {"dim": 1} and isinstance(cat.args[0], list)
    assert cat.args[0][0].args[1] == (slice(None, None, None), slice(None, 1, None))


def test_the_traced_module_computes_what_the_original_and_numpy_compute():
    model = Mixed()
    gm = fx.symbolic_trace(model)
    x, y = onnxnn.randn(3, 4), onnxnn.randn(3, 6)
    with onnxnn.no_grad():
        traced, original = gm(x, y).numpy(), model(x, y).numpy()
    # The same ops in the same order on the same executor: bitwise equal.
    np.testing.assert_array_equal(traced, original)
    np.testing.assert_allclose(traced, mixed_numpy(model, x.numpy(), y.numpy()), rtol=1e-5, atol=1e-6)


def test_module_stack_metadata_names_the_enclosing_modules():
    gm = fx.symbolic_trace(Mixed())
    by_name = {node.name: node for node in gm.graph.nodes}
    assert list(by_name["block_linear"].meta["nn_module_stack"]) == ["block", "block.linear"]
    assert by_name["block_linear"].meta["nn_module_stack"]["block"] == ("block", Block)
    assert list(by_name["fc"].meta["nn_module_stack"]) == ["fc"]
    assert by_name["relu"].meta["nn_module_stack"] == {}


@pytest.mark.parametrize(
    "module, leaf",
    [
        (nn.Linear(2, 2), True),
        (nn.Conv2d(1, 1, 1), True),
        (nn.Sequential(nn.ReLU()), False),
        (Block(), False),
    ],
)
def test_onnxnn_nn_modules_are_leaves_but_sequential_and_user_modules_are_not(module, leaf):
    assert Tracer().is_leaf_module(module, "") is leaf


def test_sequential_is_traced_through_to_its_layers():
    gm = fx.symbolic_trace(nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 2))))
    assert [(n.op, n.target) for n in gm.graph.nodes] == [
        ("placeholder", "input"),
        ("call_module", "0"),
        ("call_module", "1"),
        ("call_module", "2.0"),
        ("output", "output"),
    ]
    assert 'getattr(self, "2")' in gm.code.replace("'", '"')


def test_a_custom_leaf_rule_keeps_a_user_module_whole():
    class KeepBlocks(Tracer):
        def is_leaf_module(self, m, module_qualified_name):
            return isinstance(m, Block) or super().is_leaf_module(m, module_qualified_name)

    model = Mixed()
    graph = KeepBlocks().trace(model)
    assert [n.target for n in graph.nodes if n.op == "call_module"] == ["fc", "block"]


def test_functions_tensor_constants_and_reflected_operators():
    table = onnxnn.tensor([1.0, 2.0, 3.0])

    def f(x):
        return table * x + onnxnn.ones(3)  # tensor * proxy: a reflected mul; ones: a constant

    gm = fx.symbolic_trace(f)
    ops = [(n.op, n.target) for n in gm.graph.nodes]
    assert ops == [
        ("placeholder", "x"),
        ("get_attr", "_tensor_constant0"),
        ("call_function", operator.mul),
        ("get_attr", "_tensor_constant1"),
        ("call_function", operator.add),
        ("output", "output"),
    ]
    x = onnxnn.tensor([2.0, 0.5, -1.0])
    np.testing.assert_array_equal(gm(x).numpy(), [3.0, 2.0, -2.0])


def my_scale(x, factor):
    return x * factor if factor > 0 else x  # control flow on its arguments: must not be traced


fx.wrap("my_scale")


def test_wrapped_functions_are_recorded_as_calls():
    gm = fx.symbolic_trace(lambda x: my_scale(x, 3.0) + 1)
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == [my_scale, operator.add]
    np.testing.assert_array_equal(gm(onnxnn.tensor([1.0, 2.0])).numpy(), [4.0, 7.0])


def test_patched_functions_are_restored_after_tracing_even_on_error():
    relu, functional_relu, call, add = onnxnn.relu, F.relu, nn.Module.__call__, onnxnn.Tensor.__add__

    def bad(x):
        onnxnn.relu(x)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fx.symbolic_trace(bad)
    assert onnxnn.relu is relu and F.relu is functional_relu and nn.Module.__call__ is call
    assert onnxnn.Tensor.__add__ is add
    assert not hasattr(globals()["my_scale"], "__wrapped__")  # fx.wrap's global is back too


class Branchy(nn.Module):
    def forward(self, x, flag=False):
        if flag:
            return x + 1
        return x - 1


def test_control_flow_on_a_proxy_raises_trace_error():
    class DataDependent(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(fx.TraceError, match="symbolically traced variables cannot be used as inputs to control flow"):
        fx.symbolic_trace(DataDependent())
    with pytest.raises(fx.TraceError, match="symbolically traced variables"):
        fx.symbolic_trace(Branchy())


def test_concrete_args_specialize_control_flow():
    gm = fx.symbolic_trace(Branchy(), concrete_args={"flag": True})
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [check_specialized, operator.add]
    np.testing.assert_array_equal(gm(onnxnn.tensor([1.0])).numpy(), [2.0])
    np.testing.assert_array_equal(gm(onnxnn.tensor([1.0]), True).numpy(), [2.0])
    # The graph holds the branch True took: another value raises, as torch.fx's assertion does.
    with pytest.raises(AssertionError, match="flag has been specialized to have value True but got another value"):
        gm(onnxnn.tensor([1.0]), False)
    gm.graph.eliminate_dead_code()
    assert check_specialized in [n.target for n in gm.graph.nodes]
    # A name forward does not take is ignored, as torch.fx ignores it.
    ignored = fx.symbolic_trace(Branchy(), concrete_args={"flag": False, "nope": 1})
    assert ignored.code == fx.symbolic_trace(Branchy(), concrete_args={"flag": False}).code


def test_iterating_a_proxy_raises_trace_error_and_len_is_refused():
    with pytest.raises(fx.TraceError, match="cannot be iterated"):
        fx.symbolic_trace(lambda x: [row for row in x])
    with pytest.raises(RuntimeError, match="'len' is not supported"):
        fx.symbolic_trace(lambda x: len(x))


class _ScaledByItsOwnState(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(onnxnn.ones(3))
        self.register_buffer("b", onnxnn.arange(3.0))

    def forward(self, x):
        return x + self.p * self.b * 2  # arithmetic on parameters and buffers alone, before x


def test_arithmetic_on_parameters_and_buffers_is_traced_not_frozen():
    module = _ScaledByItsOwnState()
    traced = fx.symbolic_trace(module)
    reads = [node.target for node in traced.graph.nodes if node.op == "get_attr"]
    assert sorted(reads) == ["b", "p"] and [name for name, _ in traced.named_parameters()] == ["p"]
    x = onnxnn.zeros(3)
    traced(x).sum().backward()
    np.testing.assert_array_equal(traced.p.grad.numpy(), np.arange(3.0) * 2)  # d/dp of p * b * 2
    with onnxnn.no_grad():
        module.p.fill_(5.0)  # a later change of the parameter reaches the traced module
    np.testing.assert_array_equal(traced(x).detach().numpy(), 5.0 * np.arange(3.0) * 2)
