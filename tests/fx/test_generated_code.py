"""The text of ``gm.code``: line for line what torch.fx 2.13 writes for the same model (with
``torch`` read as ``onnxnn``), including its ``;  name = None`` releases of values no longer read."""

from __future__ import annotations

import operator

import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import fx, nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.layers = nn.Sequential(nn.ReLU(), nn.Linear(4, 2))

    def forward(self, x, input, flag=True):
        h = F.relu(self.fc(x)).transpose(0, 1)
        y = onnxnn.cat([h, h], dim=0)
        z = y.sum(dim=-1, keepdim=True) + x.shape[0] - input
        return self.layers(z.view(-1, 4)), onnxnn.tanh(-z) * 2, {"a": z[:, 0:1]}


# torch.fx 2.13's text for the same model, but for ``torch.`` (and relu's recorded ``inplace = False``)
EXPECTED = """def forward(self, x, input, flag = True):
    input_1 = input
    fc = self.fc(x)
    relu = onnxnn.nn.functional.relu(fc);  fc = None
    transpose = relu.transpose(0, 1);  relu = None
    cat = onnxnn.cat([transpose, transpose], dim = 0);  transpose = None
    sum_1 = cat.sum(dim = -1, keepdim = True);  cat = None
    getattr_1 = x.shape;  x = None
    getitem = getattr_1[0];  getattr_1 = None
    add = sum_1 + getitem;  sum_1 = getitem = None
    sub = add - input_1;  add = input_1 = None
    view = sub.view(-1, 4)
    layers_0 = getattr(self.layers, "0")(view);  view = None
    layers_1 = getattr(self.layers, "1")(layers_0);  layers_0 = None
    neg = -sub
    tanh = onnxnn.tanh(neg);  neg = None
    mul = tanh * 2;  tanh = None
    getitem_1 = sub[(slice(None, None, None), slice(0, 1, None))];  sub = None
    return (layers_1, mul, {'a': getitem_1})
"""


def test_the_code_of_a_traced_model_reads_as_torch_fx_writes_it():
    assert fx.symbolic_trace(Model()).code == EXPECTED


@pytest.mark.parametrize(
    "target, args, line",
    [
        # a node nobody uses frees its own result
        (operator.setitem, (0, 1.0), "    x[0] = 1.0;  setitem = x;  setitem = None"),
        (operator.iadd, (2,), "    x += 2;  iadd = x;  iadd = None"),
        (operator.imul, (2,), "    x *= 2;  imul = x;  imul = None"),
    ],
)
def test_an_in_place_operator_is_written_as_a_statement(target, args, line):
    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(target, (x, *args))
    graph.output(x)
    assert graph.python_code("self").src.splitlines()[1] == line


def test_in_place_statements_update_the_value_they_name():
    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(operator.setitem, (x, 0, 5.0))
    graph.output(graph.call_function(operator.iadd, (x, [1.0])))
    gm = fx.GraphModule(nn.Module(), graph)
    value = [1.0, 2.0]
    assert gm(value) == [5.0, 2.0, 1.0] == value  # list += iterable: extended in place
