"""Editing a Graph: inserting, replacing, erasing nodes and dead code, checked against numpy."""

from __future__ import annotations

import copy
import operator

import numpy as np
import pytest

import onnxnn
from onnxnn import fx, nn


class TwoRelus(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x):
        h = onnxnn.relu(self.linear(x))
        unused = h.exp()  # noqa: F841  (dead code: eliminate_dead_code removes it)
        return onnxnn.relu(h - 0.5) + x


def reference(model: TwoRelus, x: np.ndarray, after_relu=lambda v: v, activation=None) -> np.ndarray:
    activation = activation or (lambda v: np.maximum(v, 0))
    weight, bias = model.linear.weight.detach().numpy(), model.linear.bias.detach().numpy()
    h = after_relu(activation(x @ weight.T + bias))
    return after_relu(activation(h - 0.5)) + x


@pytest.fixture
def traced():
    model = TwoRelus()
    x = onnxnn.randn(4, 3)
    return model, fx.symbolic_trace(model), x


def run(gm, x):
    with onnxnn.no_grad():
        return gm(x).numpy()


def test_a_node_inserted_after_each_relu_doubles_it(traced):
    model, gm, x = traced
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is onnxnn.relu:
            with gm.graph.inserting_after(node):
                doubled = gm.graph.call_function(operator.mul, (node, 2))
            node.replace_all_uses_with(doubled, delete_user_cb=lambda user: user is not doubled)
    gm.graph.lint()
    gm.recompile()
    assert gm.code.count("* 2") == 2
    np.testing.assert_allclose(run(gm, x), reference(model, x.numpy(), lambda v: v * 2), rtol=1e-5, atol=1e-6)


def test_replacing_a_call_function_target(traced):
    model, gm, x = traced
    for node in gm.graph.find_nodes(op="call_function", target=onnxnn.relu):
        node.target = onnxnn.sigmoid
    gm.recompile()
    assert gm.code.count("onnxnn.sigmoid(") == 2 and "onnxnn.relu" not in gm.code

    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    np.testing.assert_allclose(run(gm, x), reference(model, x.numpy(), activation=sigmoid), rtol=1e-5, atol=1e-6)


def test_erasing_a_node_after_redirecting_its_users(traced):
    model, gm, x = traced
    second_relu = gm.graph.find_nodes(op="call_function", target=onnxnn.relu)[1]
    second_relu.replace_all_uses_with(second_relu.args[0])
    gm.graph.erase_node(second_relu)
    gm.recompile()
    weight, bias = model.linear.weight.detach().numpy(), model.linear.bias.detach().numpy()
    expected = np.maximum(x.numpy() @ weight.T + bias, 0) - 0.5 + x.numpy()
    np.testing.assert_allclose(run(gm, x), expected, rtol=1e-5, atol=1e-6)


def test_erasing_a_node_that_still_has_users_raises(traced):
    _, gm, _ = traced
    relu = gm.graph.find_nodes(op="call_function", target=onnxnn.relu)[0]
    before = len(gm.graph.nodes)
    with pytest.raises(RuntimeError, match="still had 2 users"):
        gm.graph.erase_node(relu)
    assert len(gm.graph.nodes) == before
    gm.graph.lint()


def test_dead_code_elimination_removes_only_unused_pure_nodes(traced):
    model, gm, x = traced
    assert [n.target for n in gm.graph.nodes if n.op == "call_method"] == ["exp"]
    before = run(gm, x)
    assert gm.graph.eliminate_dead_code() is True
    assert [n.target for n in gm.graph.nodes if n.op == "call_method"] == []
    assert gm.graph.eliminate_dead_code() is False
    gm.recompile()
    assert "exp" not in gm.code
    np.testing.assert_array_equal(run(gm, x), before)
    np.testing.assert_allclose(before, reference(model, x.numpy()), rtol=1e-5, atol=1e-6)


def test_lint_catches_a_node_used_before_its_definition(traced):
    _, gm, _ = traced
    relus = gm.graph.find_nodes(op="call_function", target=onnxnn.relu)
    relus[0].prepend(relus[1])  # the second relu now runs before its input exists
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        gm.graph.lint()


def test_lint_catches_a_missing_submodule(traced):
    _, gm, _ = traced
    gm.graph.find_nodes(op="call_module")[0].target = "missing"
    with pytest.raises(RuntimeError, match="nonexistent module missing"):
        gm.graph.lint()


def test_a_graph_built_by_hand_runs_in_a_graph_module():
    graph = fx.Graph()
    x = graph.placeholder("x")
    weight = graph.get_attr("weight")
    product = graph.call_function(onnxnn.matmul, (x, weight))
    total = graph.call_method("sum", (product,), {"dim": 1})
    graph.output(total)
    weight_value = onnxnn.randn(3, 2)
    gm = fx.GraphModule({"weight": weight_value}, graph)
    x_value = onnxnn.randn(4, 3)
    np.testing.assert_allclose(
        gm(x_value).numpy(), (x_value.numpy() @ weight_value.numpy()).sum(1), rtol=1e-5, atol=1e-6
    )
    assert gm.code == (
        "def forward(self, x):\n"
        "    weight = self.weight\n"
        "    matmul = onnxnn.matmul(x, weight);  x = weight = None\n"
        "    sum_1 = matmul.sum(dim = 1);  matmul = None\n"
        "    return sum_1\n"
    )
    assert str(graph).splitlines() == [
        "graph(x):",
        "    %x : [num_users=1] = placeholder[target=x]",
        "    %weight : [num_users=1] = get_attr[target=weight]",
        "    %matmul : [num_users=1] = call_function[target=onnxnn.matmul](args = (%x, %weight), kwargs = {})",
        "    %sum_1 : [num_users=1] = call_method[target=sum](args = (%matmul,), kwargs = {dim: 1})",
        "    return %sum_1",
    ]


def test_linked_list_users_and_input_replacement():
    graph = fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    added = graph.call_function(operator.add, (a, a))
    graph.output(added)
    assert list(a.users) == [added] and added.all_input_nodes == [a]
    assert a.next is b and b.prev is a and added.next.op == "output"
    added.replace_input_with(a, b)
    assert added.args == (b, b) and not a.users and list(b.users) == [added]
    added.update_kwarg("alpha", a)
    assert added.all_input_nodes == [b, a]
    added.kwargs = {}
    with graph.inserting_before(added):
        first = graph.call_function(operator.neg, (b,))
        second = graph.call_function(operator.abs, (first,))
    with graph.inserting_after(added):
        third = graph.call_function(operator.pos, (added,))
    with graph.inserting_after(third):  # each node goes right after the anchor: one context per node
        fourth = graph.call_function(operator.pos, (third,))
    assert [n.name for n in graph.nodes] == ["a", "b", "neg", "abs_1", "add", "pos", "pos_1", "output"]
    assert second.args == (first,) and fourth.args == (third,)
    assert [n.name for n in reversed(graph.nodes)][0] == "output"


def test_node_copy_graph_copy_and_deepcopy_keep_structure():
    graph = fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(onnxnn.relu, (x,))
    y.meta["note"] = "kept"
    graph.output(graph.call_function(operator.mul, (y, 3)))
    copied = fx.Graph()
    val_map = {}
    output = copied.graph_copy(graph, val_map)
    copied.output(output)
    assert [(n.op, n.name) for n in copied.nodes] == [(n.op, n.name) for n in graph.nodes]
    assert val_map[y].meta == {"note": "kept"} and val_map[y].graph is copied
    deep = copy.deepcopy(graph)
    assert str(deep) == str(graph)
    assert all(node.graph is deep for node in deep.nodes)


def test_print_tabular_lists_every_node(capsys):
    gm = fx.symbolic_trace(TwoRelus())
    gm.graph.print_tabular()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert len(lines) == 2 + len(gm.graph.nodes)
    assert lines[3].split()[:3] == ["call_module", "linear", "linear"]
    assert lines[4].split()[:3] == ["call_function", "relu", "onnxnn.relu"]
