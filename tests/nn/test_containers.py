"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import onnxnn
from onnxnn import nn


class AddConst(nn.Module):
    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def forward(self, x):
        return x + self.value

    def extra_repr(self) -> str:
        return f"value={self.value}"


class Scale(nn.Module):
    def __init__(self, n: int = 2):
        super().__init__()
        self.weight = nn.Parameter(onnxnn.full((n,), 2.0))

    def forward(self, x):
        return x * self.weight


def _names(container) -> list:
    return list(container._modules)


# ----------------------------------------------------------------------------- Sequential
def test_sequential_chains_modules_in_order():
    seq = nn.Sequential(AddConst(1.0), Scale(), AddConst(-3.0))
    np.testing.assert_array_equal(seq(onnxnn.tensor([1.0, 2.0])).detach().numpy(), [1.0, 3.0])
    assert _names(seq) == ["0", "1", "2"] and len(seq) == 3
    assert [name for name, _ in seq.named_parameters()] == ["1.weight"]


def test_sequential_from_ordered_dict_keeps_names_and_repr():
    seq = nn.Sequential(OrderedDict([("first", AddConst(1.0)), ("act", AddConst(2.0))]))
    assert _names(seq) == ["first", "act"]
    assert seq[1] is seq.act
    assert repr(seq) == "Sequential(\n  (first): AddConst(value=1.0)\n  (act): AddConst(value=2.0)\n)"


def test_sequential_indexing_and_slicing():
    modules = [AddConst(float(i)) for i in range(4)]
    seq = nn.Sequential(*modules)
    assert seq[0] is modules[0] and seq[-1] is modules[3]
    part = seq[1:3]
    assert type(part) is nn.Sequential and list(part) == modules[1:3] and _names(part) == ["1", "2"]
    with pytest.raises(IndexError, match="index 4 is out of range"):
        seq[4]
    replacement = AddConst(9.0)
    seq[-1] = replacement
    assert seq[3] is replacement


@pytest.mark.parametrize("index, remaining", [(0, [1, 2, 3]), (-1, [0, 1, 2]), (slice(1, 3), [0, 3])])
def test_sequential_delete_renumbers(index, remaining):
    modules = [AddConst(float(i)) for i in range(4)]
    seq = nn.Sequential(*modules)
    del seq[index]
    assert list(seq) == [modules[i] for i in remaining]
    assert _names(seq) == [str(i) for i in range(len(remaining))]


def test_sequential_append_insert_extend_pop():
    a, b, c, d = (AddConst(float(i)) for i in range(4))
    seq = nn.Sequential(a)
    assert seq.append(c) is seq
    seq.insert(1, b)
    seq.extend([d])
    assert list(seq) == [a, b, c, d]
    assert seq.pop(1) is b and list(seq) == [a, c, d]
    seq.insert(-1, b)
    assert list(seq) == [a, c, b, d]
    with pytest.raises(IndexError, match="Index out of range: 9"):
        seq.insert(9, a)
    with pytest.raises(AssertionError, match="module should be of type"):
        seq.insert(0, 3)


def test_sequential_arithmetic():
    a, b = AddConst(1.0), AddConst(2.0)
    joined = nn.Sequential(a) + nn.Sequential(b)
    assert list(joined) == [a, b]
    repeated = nn.Sequential(a, b) * 2
    assert list(repeated) == [a, b, a, b] and list(2 * nn.Sequential(a)) == [a, a]
    in_place = nn.Sequential(a)
    in_place += nn.Sequential(b)
    in_place *= 2
    assert list(in_place) == [a, b, a, b]
    with pytest.raises(ValueError, match="add operator supports only objects of Sequential class"):
        nn.Sequential(a) + [b]
    with pytest.raises(ValueError, match="Non-positive multiplication factor 0"):
        nn.Sequential(a) * 0
    with pytest.raises(TypeError, match="unsupported operand type"):
        nn.Sequential(a) * 1.5


def test_sequential_dir_hides_numeric_names():
    assert "0" not in dir(nn.Sequential(AddConst(1.0)))


# ----------------------------------------------------------------------------- ModuleList
def test_module_list_registers_and_indexes():
    layers = nn.ModuleList([Scale() for _ in range(3)])
    assert len(layers) == 3 and _names(layers) == ["0", "1", "2"]
    assert [name for name, _ in layers.named_parameters()] == ["0.weight", "1.weight", "2.weight"]
    assert layers[-1] is layers[2]
    part = layers[::2]
    assert type(part) is nn.ModuleList and list(part) == [layers[0], layers[2]]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        layers[3]
    with pytest.raises(NotImplementedError, match=r'Module \[ModuleList\] is missing the required "forward"'):
        layers(onnxnn.ones(1))


def test_module_list_mutation():
    a, b, c = AddConst(1.0), AddConst(2.0), AddConst(3.0)
    layers = nn.ModuleList([a])
    layers.append(c)
    layers.insert(1, b)
    assert list(layers) == [a, b, c]
    layers[0] = c
    assert layers[0] is c
    del layers[0]
    assert list(layers) == [b, c] and _names(layers) == ["0", "1"]
    layers += [a]
    assert list(layers) == [b, c, a] and list(layers + nn.ModuleList([b])) == [b, c, a, b]
    assert layers.pop(-1) is a and list(layers) == [b, c]
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got AddConst"):
        layers.extend(a)


def test_module_list_repr_collapses_runs_of_identical_modules_like_pytorch():
    layers = nn.ModuleList([AddConst(1.0), AddConst(1.0), AddConst(1.0), AddConst(2.0)])
    assert repr(layers) == ("ModuleList(\n  (0-2): 3 x AddConst(value=1.0)\n  (3): AddConst(value=2.0)\n)")
    assert repr(nn.ModuleList()) == "ModuleList()"


# ----------------------------------------------------------------------------- ModuleDict
@pytest.mark.parametrize(
    "source",
    [
        {"relu": "r", "lrelu": "l"},
        OrderedDict([("relu", "r"), ("lrelu", "l")]),
        [("relu", "r"), ("lrelu", "l")],
    ],
    ids=["dict", "OrderedDict", "pairs"],
)
def test_module_dict_keeps_insertion_order(source):
    modules = {"r": AddConst(1.0), "l": AddConst(2.0)}
    if isinstance(source, dict):
        source = type(source)((k, modules[v]) for k, v in source.items())
    else:
        source = [(k, modules[v]) for k, v in source]
    table = nn.ModuleDict(source)
    assert list(table) == ["relu", "lrelu"] and list(table.keys()) == ["relu", "lrelu"]
    assert table["lrelu"] is modules["l"] and "relu" in table and len(table) == 2
    assert list(table.values()) == [modules["r"], modules["l"]]


def test_module_dict_mutation_and_errors():
    table = nn.ModuleDict()
    table["a"] = AddConst(1.0)
    table.update({"b": AddConst(2.0)})
    assert table.pop("a").value == 1.0 and list(table.items())[0][0] == "b"
    del table["b"]
    assert len(table) == 0
    table["c"] = AddConst(3.0)
    table.clear()
    assert len(table) == 0
    with pytest.raises(TypeError, match="ModuleDict.update should be called with an iterable of key/value pairs"):
        table.update(3)
    with pytest.raises(ValueError, match="ModuleDict update sequence element #0 has length 3; 2 is required"):
        table.update([("a", AddConst(1.0), 3)])
    with pytest.raises(TypeError, match="ModuleDict update sequence element #0 should be Iterable"):
        table.update([5])
    with pytest.raises(KeyError, match="attribute 'forward' already exists"):
        table["forward"] = AddConst(1.0)


# ----------------------------------------------------------------------------- ParameterList
def test_parameter_list_wraps_tensors_and_registers_them():
    plist = nn.ParameterList([onnxnn.ones(2), nn.Parameter(onnxnn.zeros(3))])
    assert len(plist) == 2 and all(isinstance(p, nn.Parameter) for p in plist)
    assert [name for name, _ in plist.named_parameters()] == ["0", "1"]
    plist.append(onnxnn.ones(1))
    plist.extend([onnxnn.ones(4)])
    assert [p.shape[0] for p in plist] == [2, 3, 1, 4] and plist[-1] is plist[3]
    part = plist[1:3]
    assert type(part) is nn.ParameterList and [p.shape[0] for p in part] == [3, 1]
    plist[0] = onnxnn.full((2,), 5.0)
    np.testing.assert_array_equal(plist[0].detach().numpy(), [5.0, 5.0])
    with pytest.raises(IndexError, match="index 4 is out of range"):
        plist[4]
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable, but got Tensor"):
        plist.extend(onnxnn.ones(2))


def test_parameter_list_holds_other_objects_outside_the_parameters():
    plist = nn.ParameterList([onnxnn.ones(1), "label"])
    assert plist[1] == "label" and len(list(plist.parameters())) == 1


def test_parameter_list_repr_and_call():
    plist = nn.ParameterList([onnxnn.ones(2, 3), "x"])
    assert repr(plist) == (
        "ParameterList(\n    (0): Parameter containing: [onnxnn.float32 of size 2x3]\n    (1): Object of type: str\n)"
    )
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        plist()


# ----------------------------------------------------------------------------- ParameterDict
def test_parameter_dict_sorts_plain_dicts_and_keeps_ordered_ones():
    plain = nn.ParameterDict({"foo": onnxnn.ones(3), "bar": onnxnn.ones(4)})
    assert list(plain) == ["bar", "foo"] and list(plain.state_dict()) == ["bar", "foo"]
    ordered = nn.ParameterDict(OrderedDict([("foo", onnxnn.ones(3)), ("bar", onnxnn.ones(4))]))
    assert list(ordered) == ["foo", "bar"]
    assert all(isinstance(p, nn.Parameter) for p in plain.values())


def test_parameter_dict_mapping_api():
    pdict = nn.ParameterDict()
    pdict["a"] = onnxnn.ones(1)
    assert pdict.setdefault("b", onnxnn.zeros(2)).shape == (2,)
    assert pdict.setdefault("a").shape == (1,)
    assert pdict.get("missing") is None and "a" in pdict and len(pdict) == 2
    assert list(reversed(pdict)) == ["b", "a"]
    assert [k for k, _ in pdict.items()] == ["a", "b"]
    copied = pdict.copy()
    assert copied["a"] is pdict["a"]
    merged = pdict | nn.ParameterDict(OrderedDict([("c", onnxnn.ones(1))]))
    assert list(merged) == ["a", "b", "c"]
    key, value = pdict.popitem()
    assert key == "b" and value.shape == (2,) and list(pdict) == ["a"]
    assert pdict.pop("a").shape == (1,) and len(pdict) == 0 and list(pdict.parameters()) == []
    pdict.update([("x", onnxnn.ones(1))])
    pdict.clear()
    assert len(pdict) == 0
    assert list(pdict.fromkeys(["p", "q"], onnxnn.ones(1))) == ["p", "q"]


def test_parameter_dict_errors_and_repr():
    pdict = nn.ParameterDict({"w": onnxnn.ones(2)})
    with pytest.raises(TypeError, match="Index given to ParameterDict cannot be used as a key"):
        pdict[1] = onnxnn.ones(1)
    with pytest.raises(KeyError) as info:
        pdict["a.b"] = onnxnn.ones(1)
    assert info.value.args[0] == 'parameter name can\'t contain "."'
    assert list(pdict) == ["w"]  # failed insertions leave no key behind
    with pytest.raises(ValueError, match="ParameterDict update sequence element #0 has length 1; 2 is required"):
        pdict.update([("only",)])
    assert repr(pdict) == "ParameterDict(  (w): Parameter containing: [onnxnn.FloatTensor of size 2])"
    with pytest.raises(RuntimeError, match="ParameterDict should not be called."):
        pdict(onnxnn.ones(1))
