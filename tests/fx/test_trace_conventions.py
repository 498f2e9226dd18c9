"""Conventions symbolic_trace and GraphModule share with torch.fx: placeholders for ``*args``/``**kwargs``,
names of tensor attributes and aliased submodules, the order of copied state, and insertion points."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

import onnxnn
from onnxnn import fx, nn


def values(*arrays):
    return [onnxnn.tensor(np.asarray(array, dtype=np.float32)) for array in arrays]


# ---------------------------------------------------------------------------- *args and **kwargs
class VarPositional(nn.Module):
    def forward(self, *args):
        return args[0] + args[1]


class Everything(nn.Module):
    def forward(self, x, *args, y=2.0, **kw):
        return x * y + args[0] + kw["z"]


class KeywordOnly(nn.Module):
    def forward(self, x, *, y):
        return x - y


class VarKeyword(nn.Module):
    def forward(self, **kwargs):
        return kwargs["a"] * 3


@pytest.mark.parametrize(
    "model, concrete_args, targets, names, header",
    [
        (VarPositional(), None, ["*args"], ["_args"], "def forward(self, *args):"),
        # concrete_args does not apply to *args, as in torch.fx
        (VarPositional(), {"args": 3}, ["*args"], ["_args"], "def forward(self, *args):"),
        # keyword-only parameters come before *args (the code's local-name order, as torch.fx)
        (
            Everything(),
            None,
            ["x", "y", "*args", "**kw"],
            ["x", "y", "_args", "_kw"],
            "def forward(self, x, y = 2.0, *args, **kw):",
        ),
        (KeywordOnly(), None, ["x", "y"], ["x", "y"], "def forward(self, x, y):"),
        (VarKeyword(), None, ["**kwargs"], ["_kwargs"], "def forward(self, **kwargs):"),
    ],
)
def test_placeholders_of_a_forward_with_varargs(model, concrete_args, targets, names, header):
    gm = fx.symbolic_trace(model, concrete_args=concrete_args)
    placeholders = gm.graph.find_nodes(op="placeholder")
    assert [node.target for node in placeholders] == targets
    assert [node.name for node in placeholders] == names
    assert gm.code.splitlines()[0] == header
    for node in placeholders:
        if node.target.startswith("*"):  # the node is bound from the starred parameter, as torch.fx writes it
            assert f"    {node.name} = {node.target.lstrip('*')}" in gm.code.splitlines()


@pytest.mark.parametrize(
    "model, call, expected",
    [
        (VarPositional(), lambda gm, a, b, c: gm(a, b), lambda a, b, c: a + b),
        (Everything(), lambda gm, a, b, c: gm(a, 3.0, b, z=c), lambda a, b, c: a * 3 + b + c),
        (KeywordOnly(), lambda gm, a, b, c: gm(a, b), lambda a, b, c: a - b),
        (VarKeyword(), lambda gm, a, b, c: gm(a=c), lambda a, b, c: c * 3),
    ],
)
def test_a_traced_varargs_forward_computes_its_formula(model, call, expected):
    a, b, c = np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([4.0, 8.0])
    gm = fx.symbolic_trace(model)
    with onnxnn.no_grad():
        result = call(gm, *values(a, b, c)).numpy()
    # one or two float32 roundings of exactly representable values
    np.testing.assert_allclose(result, expected(a, b, c), rtol=1e-6)


def passing_through(forward):
    @functools.wraps(forward)
    def wrapper(*args, **kwargs):
        return forward(*args, **kwargs)

    return wrapper


class DecoratedKeywordOnly(nn.Module):
    @passing_through
    def forward(self, x, *, y):
        return x - y


class DecoratedVarPositional(nn.Module):
    @passing_through
    def forward(self, *args):
        return args[0]


def free_function(x, *rest, k=2.0):
    return x + rest[0] * k


def test_a_free_function_and_a_decorated_forward_are_traced_by_their_signature():
    a, b = values([1.0, 2.0], [0.5, 4.0])
    traced_function = fx.symbolic_trace(free_function)
    assert traced_function.code.splitlines()[0] == "def forward(self, x, k = 2.0, *rest):"
    decorated = fx.symbolic_trace(DecoratedKeywordOnly())  # its keyword-only y passed by keyword
    with onnxnn.no_grad():
        np.testing.assert_array_equal(traced_function(a, 2.0, b).numpy(), [2.0, 10.0])
        np.testing.assert_array_equal(decorated(a, b).numpy(), [0.5, -2.0])
    # a wrapper's code cannot be made to take a Proxy for *args
    with pytest.raises(fx.TraceError, match="cannot trace the \\*args or \\*\\*kwargs"):
        fx.symbolic_trace(DecoratedVarPositional())


def test_the_interpreter_gives_a_starred_placeholder_all_remaining_arguments():
    graph = fx.Graph()
    x, rest, kw = graph.placeholder("x"), graph.placeholder("*args"), graph.placeholder("**kw")
    graph.output((x, rest, kw))
    gm = fx.GraphModule(nn.Module(), graph)
    # every value after x goes to *args, none is left for **kw: as torch.fx's Interpreter
    assert fx.Interpreter(gm).run(1, 2, 3) == (1, [2, 3], [])
    assert gm(1, 2, 3, k=4) == (1, (2, 3), {"k": 4})


@pytest.mark.parametrize(
    "target, name, code",
    [
        ("*args", "_args", "def forward(self, *args):\n    _args = args\n"),
        ("**kwargs", "_kwargs", "def forward(self, **kwargs):\n    _kwargs = kwargs\n"),
        ("a..b", "a_b", "def forward(self, a_b):\n"),  # each run of illegal characters: one "_"
        ("input", "input_1", "def forward(self, input):\n    input_1 = input\n"),  # a builtin's name
        ("myInput", "my_input", "def forward(self, myInput):\n    my_input = myInput\n"),
    ],
)
def test_a_placeholder_is_named_and_written_as_torch_fx_does(target, name, code):
    graph = fx.Graph()
    node = graph.placeholder(target)
    graph.output(None)
    assert node.name == name
    assert graph.python_code("self").src.startswith(code)


# ---------------------------------------------------------------------------- tensor attributes
class WithConstant(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = onnxnn.full((3,), 3.0)

    def forward(self, x):
        return x + self.c


class TensorAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", onnxnn.ones(3))
        self.w = nn.Parameter(onnxnn.full((3,), 2.0))
        self.t = onnxnn.arange(3, dtype=onnxnn.float32)
        self.sub = WithConstant()

    def forward(self, x):
        return self.sub(x) * self.t + self.t + self.b + self.w + self.w + onnxnn.ones(3)


def test_a_plain_tensor_attribute_is_read_by_its_path_at_each_use():
    model = TensorAttributes()
    gm = fx.symbolic_trace(model)
    reads = [(node.target, node.name) for node in gm.graph.find_nodes(op="get_attr")]
    # plain tensors and forward-built constants: a node per use; parameters and buffers: one per name
    assert reads == [
        ("sub.c", "sub_c"),
        ("t", "t"),
        ("t", "t_1"),
        ("b", "b"),
        ("w", "w"),
        ("_tensor_constant0", "_tensor_constant0"),
    ]
    assert gm.t is model.t and gm.sub.c is model.sub.c
    x = np.array([1.0, -2.0, 0.5])
    with onnxnn.no_grad():
        result = gm(*values(x)).numpy()
    np.testing.assert_allclose(result, (x + 3) * np.arange(3) + np.arange(3) + 1 + 2 + 2 + 1, rtol=1e-6)


def test_plain_tensors_become_buffers_of_the_graph_module_in_the_order_used():
    gm = fx.symbolic_trace(TensorAttributes())
    assert list(gm.state_dict()) == ["w", "t", "b", "_tensor_constant0", "sub.c"]
    assert [name for name, _ in gm.named_buffers()] == ["t", "b", "_tensor_constant0", "sub.c"]


def test_a_tensor_shared_by_two_plain_attributes_is_read_by_the_last_path():
    model = nn.Module()
    model.inner = nn.Module()
    model.t = model.inner.t = onnxnn.ones(2)
    graph = fx.Tracer().trace(WithSharedTensor(model))
    assert [node.target for node in graph.find_nodes(op="get_attr")] == ["m.inner.t"]


class WithSharedTensor(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return x + self.m.t


# ---------------------------------------------------------------------------- submodules and state order
class Aliased(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc2 = nn.Linear(3, 3)
        self.fc1 = nn.Linear(3, 3)
        self.alias = self.fc1
        self.register_buffer("zb", onnxnn.ones(3))
        self.a = nn.Parameter(onnxnn.ones(3))

    def forward(self, x):
        return self.alias(self.fc1(x)) + self.fc2(x) + self.zb + self.a


def test_an_aliased_submodule_is_called_and_copied_by_its_first_name():
    gm = fx.symbolic_trace(Aliased())
    assert [node.target for node in gm.graph.find_nodes(op="call_module")] == ["fc1", "fc1", "fc2"]
    assert [name for name, _ in gm.named_modules(remove_duplicate=False)] == ["", "fc1", "fc2"]


def test_state_dict_keys_follow_the_graph_order():
    gm = fx.symbolic_trace(Aliased())
    # copied as the graph first uses them: fc1 before fc2, although fc2 is defined first
    assert list(gm.state_dict()) == ["a", "zb", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


class ReadsInsideACalledModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("nb", onnxnn.ones(2), persistent=False)
        self.lin = nn.Linear(2, 2)
        self.lin.t = onnxnn.ones(2)

    def forward(self, x):
        return self.lin(x) + self.nb + self.lin.weight.sum() + self.lin.t


def test_a_read_under_a_copied_module_copies_nothing_more():
    model = ReadsInsideACalledModule()
    gm = fx.symbolic_trace(model)
    # lin is the original module: its plain tensor t is not made a buffer of it
    assert gm.lin is model.lin and "t" not in model.lin._buffers
    # A non-persistent buffer stays out of state_dict (torch.fx 2.13 would make it persistent).
    assert list(gm.state_dict()) == ["lin.weight", "lin.bias"]


# ---------------------------------------------------------------------------- insertion points
def graph_with_x():
    graph = fx.Graph()
    x = graph.placeholder("x")
    return graph, x, graph.output(x)


@pytest.mark.parametrize(
    "anchor, expected",
    [
        # torch.fx: each node goes right after the anchor, so the later one comes first
        ("after x", ["x", "pos", "neg", "output"]),
        ("before output", ["x", "neg", "pos", "output"]),
        ("before None", ["pos", "neg", "x", "output"]),  # the start of the graph: after its root
        ("after None", ["x", "output", "neg", "pos"]),  # the end of the graph
    ],
)
def test_order_of_two_nodes_inserted_in_one_context(anchor, expected):
    graph, x, output = graph_with_x()
    where, node = anchor.split()
    point = {"x": x, "output": output, "None": None}[node]
    context = graph.inserting_after(point) if where == "after" else graph.inserting_before(point)
    with context:
        graph.call_function(operator.neg, (1,))
        graph.call_function(operator.pos, (1,))
    assert [node.name for node in graph.nodes] == expected


@pytest.mark.parametrize("method, word", [("inserting_after", "after"), ("inserting_before", "before")])
def test_an_insertion_point_in_another_graph_raises(method, word):
    other, x, _ = graph_with_x()
    with pytest.raises(AssertionError, match=f"Node to insert {word} is not in graph"):
        getattr(fx.Graph(), method)(x)
