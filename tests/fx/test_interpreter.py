"""Interpreter runs a graph node by node through overridable methods; Transformer rewrites it."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import onnxnn
from onnxnn import fx
from onnxnn.fx.passes.shape_prop import ShapeProp, TensorMetadata

from .fx_models import Mixed


@pytest.fixture
def mixed():
    model = Mixed()
    return model, fx.symbolic_trace(model), onnxnn.randn(3, 4), onnxnn.randn(3, 6)


def test_interpreter_run_equals_the_module(mixed):
    _, gm, x, y = mixed
    with onnxnn.no_grad():
        np.testing.assert_array_equal(fx.Interpreter(gm).run(x, y).numpy(), gm(x, y).numpy())


def test_every_node_goes_through_run_node_and_its_opcode_method(mixed):
    _, gm, x, y = mixed
    seen = []

    class Recording(fx.Interpreter):
        def run_node(self, n):
            seen.append(n.name)
            return super().run_node(n)

        def call_module(self, target, args, kwargs):
            seen.append(f"module:{target}")
            return super().call_module(target, args, kwargs)

    with onnxnn.no_grad():
        Recording(gm).run(x, y)
    names = [n.name for n in gm.graph.nodes]
    assert [item for item in seen if not item.startswith("module:")] == names
    assert [item for item in seen if item.startswith("module:")] == ["module:fc", "module:block.linear"]


def test_overriding_call_function_changes_the_result(mixed):
    model, gm, x, y = mixed

    class TanhToIdentity(fx.Interpreter):
        def call_function(self, target, args, kwargs):
            if target is onnxnn.tanh:
                return args[0]
            return super().call_function(target, args, kwargs)

    changed = TanhToIdentity(gm).run(x, y)
    with onnxnn.no_grad():
        # tanh(h) * 2 - y with tanh gone: compare against the module with onnxnn.tanh as identity
        expected = fx.symbolic_trace(model)
        for node in expected.graph.find_nodes(op="call_function", target=onnxnn.tanh):
            node.replace_all_uses_with(node.args[0])
            expected.graph.erase_node(node)
        expected.recompile()
        np.testing.assert_array_equal(changed.detach().numpy(), expected(x, y).numpy())


def test_values_are_released_after_their_last_use(mixed):
    _, gm, x, y = mixed
    sizes = []

    class Watching(fx.Interpreter):
        def run_node(self, n):
            sizes.append(len(self.env))
            return super().run_node(n)

    Watching(gm).run(x, y)
    kept = Watching(gm, garbage_collect_values=False)
    sizes_kept = []
    kept.run_node = lambda n: sizes_kept.append(len(kept.env)) or fx.Interpreter.run_node(kept, n)  # type: ignore[method-assign]
    kept.run(x, y)
    assert max(sizes) < max(sizes_kept) == len(gm.graph.nodes) - 1


def test_an_error_names_the_node_that_failed():
    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(onnxnn.matmul, (x, x)))
    gm = fx.GraphModule({}, graph)
    with pytest.raises(Exception, match="While executing %matmul"):
        fx.Interpreter(gm).run(onnxnn.randn(2, 3))


def test_transformer_rewrites_calls_and_returns_a_new_module(mixed):
    model, gm, x, y = mixed

    class AddToSub(fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target is operator.add:
                target = operator.sub
            return super().call_function(target, args, kwargs)

    new_gm = AddToSub(gm).transform()
    assert operator.add not in [n.target for n in new_gm.graph.nodes]
    assert [n.op for n in new_gm.graph.nodes] == [n.op for n in gm.graph.nodes]
    with onnxnn.no_grad():
        expected = mixed_with_sub(model, x, y)
        np.testing.assert_array_equal(new_gm(x, y).numpy(), expected)


def mixed_with_sub(model, x, y):
    gm = fx.symbolic_trace(model)
    for node in gm.graph.find_nodes(op="call_function", target=operator.add):
        node.target = operator.sub
    gm.recompile()
    return gm(x, y).numpy()


def test_transformer_proxies_record_new_operations(mixed):
    _, gm, x, y = mixed

    class DoubleTanh(fx.Transformer):
        def call_function(self, target, args, kwargs):
            result = super().call_function(target, args, kwargs)
            return result * 2 if target is onnxnn.tanh else result

    doubled = DoubleTanh(gm).transform()
    assert len(doubled.graph.nodes) == len(gm.graph.nodes) + 1
    doubled.graph.lint()


def test_shape_prop_records_every_tensor_shape_and_dtype(mixed):
    _, gm, x, y = mixed
    ShapeProp(gm).propagate(x, y)
    meta = {n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes}
    assert meta["x"] == TensorMetadata((3, 4), onnxnn.float32, False)
    assert meta["fc"].shape == (3, 6) and meta["fc"].requires_grad
    assert meta["transpose"].shape == (6, 3)
    assert meta["cat"].shape == (6, 4)
    assert meta["getitem"] is None  # rows: an int, not a tensor
    assert gm.graph.find_nodes(op="call_function", target=operator.getitem)[0].meta["type"] is int
    assert meta["output"].shape == (4,)
