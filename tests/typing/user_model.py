"""A small user script, type-checked by tests/test_types.py against the installed package.

It is what a user of onnxnn writes (a Module subclass, a training step, a checkpoint, export and
import), annotated the way a type-checked project annotates it: every assignment to an annotated
name is an assertion that onnxnn's public API declares that type. The file is also run as a
script by the test, so it stays a working program, not only a well-typed one.
"""

from __future__ import annotations

import io
from collections import OrderedDict

import onnx

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import GraphModule, from_onnx
from onnxnn.nn import functional as F


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.head = nn.Sequential(OrderedDict([("flat", nn.Flatten()), ("linear", nn.Linear(4 * 6 * 6, 3))]))

    def forward(self, x: onnxnn.Tensor) -> onnxnn.Tensor:
        hidden: onnxnn.Tensor = F.relu(self.conv(x))
        return self.head(hidden)


def train_step(model: nn.Module, optimizer: onnxnn.optim.Optimizer, x: onnxnn.Tensor, y: onnxnn.Tensor) -> float:
    optimizer.zero_grad()
    loss: onnxnn.Tensor = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def main() -> None:
    onnxnn.manual_seed(0)
    model = SmallNet()
    weight: nn.Parameter = model.conv.weight
    bias: nn.Parameter | None = model.conv.bias
    shape: onnxnn.Size = weight.shape
    dtype: onnxnn.dtype = weight.dtype
    assert bias is not None and tuple(shape) == (4, 1, 3, 3) and dtype is onnxnn.float32

    x: onnxnn.Tensor = onnxnn.randn(2, 1, 6, 6)
    y: onnxnn.Tensor = onnxnn.tensor([0, 2])
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    first: float = train_step(model, optimizer, x, y)
    assert first == first  # a number, not NaN

    # Methods attached to Tensor from tables are declared for type checkers too.
    lower: onnxnn.Tensor = x.tril(1)
    values, indices = x.flatten(1).topk(2)
    lower.tril_()
    assert tuple(values.shape) == tuple(indices.shape) == (2, 2)

    state: dict[str, onnxnn.Tensor] = model.state_dict()
    restored = SmallNet()
    restored.load_state_dict(state)
    buffer = io.BytesIO()
    onnxnn.save(state, buffer)

    proto: onnx.ModelProto = to_onnx(model.eval(), (x,), input_names=["x"])
    imported: GraphModule = from_onnx(proto)
    output: onnxnn.Tensor = imported(x)
    expected: onnxnn.Tensor = model(x)
    assert onnxnn.allclose(output, expected, atol=1e-5)


if __name__ == "__main__":
    main()
