"""Node names as torch.fx 2.13 makes them: snake case from the target, numbered per base name."""

from __future__ import annotations

import operator

import pytest

from onnxnn import fx


def camelFn():  # noqa: N802  (the name is what is tested)
    return None


class MyFn:
    pass


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda g, x: g.call_method("sizeOf", (x,)), "size_of"),
        (lambda g, x: g.call_method("__getitem__", (x, 0)), "getitem"),  # a dunder: its inner name
        (lambda g, x: g.get_attr("Layer.WeightA"), "layer_weight_a"),
        (lambda g, x: g.call_function(camelFn, ()), "camel_fn"),
        (lambda g, x: g.call_function(MyFn, ()), "my_fn"),
        (lambda g, x: g.call_function(len, (x,)), "len_1"),  # a builtin's name is never a local
        (lambda g, x: g.placeholder("sum"), "sum_1"),  # placeholders too
        (lambda g, x: g.placeholder("__add__"), "add"),
        (lambda g, x: g.create_node("call_function", operator.add, (x,), name="x"), "x_1"),
        (lambda g, x: g.create_node("call_function", operator.add, (x,), name="foo_01"), "foo_01"),
        (lambda g, x: g.create_node("call_function", operator.add, (x,), name="a b"), "a_b"),
        (lambda g, x: g.create_node("call_function", operator.add, (x,), name="9"), "_9"),
        (lambda g, x: g.create_node("call_function", operator.add, (x,), name="for"), "for_1"),
    ],
)
def test_the_name_a_node_gets(make, name):
    graph = fx.Graph()
    assert make(graph, graph.placeholder("x")).name == name


def test_explicit_names_collide_and_count_on_per_base():
    graph = fx.Graph()
    x = graph.placeholder("x")
    requested = ["add", "add", "add_1", "add_7", "add", None]
    made = [graph.create_node("call_function", operator.add, (x, x), name=name).name for name in requested]
    # a free explicit number is kept; later ones count on from the last number of the base
    assert made == ["add", "add_1", "add_2", "add_7", "add_8", "add_9"]
