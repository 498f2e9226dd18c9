"""The ``from_onnx`` tests' models and checks (test_from_onnx_round_trips.py, test_from_onnx_graphs.py):
one-node models, the onnxnn modules exported for round trips, and the comparison with onnxruntime
running the same ONNX model.
"""

from __future__ import annotations


import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

from layer_chains import chain_steps, relu_step

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def make_model(nodes, inputs, outputs, initializers=(), opset=21, **kwargs) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    opsets = kwargs.pop("opset_imports", [helper.make_opsetid("", opset)])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10, **kwargs)


def run_onnxruntime(model: onnx.ModelProto, *inputs) -> list:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {info.name: value for info, value in zip(session.get_inputs(), inputs)})


def as_list(outputs) -> list:
    return list(outputs) if isinstance(outputs, tuple) else [outputs]


def assert_matches_onnxruntime(model: onnx.ModelProto, *inputs) -> None:
    """Same values as onnxruntime, bit for bit: the models given here add and multiply small
    integers and halves, which float32 represents exactly at every step, so no order of
    evaluation can round differently."""
    expected = run_onnxruntime(model, *inputs)
    with onnxnn.no_grad():
        actual = as_list(from_onnx(model)(*inputs))
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)
        self.inner = nn.Sequential(nn.Linear(6, 3), nn.Tanh())

    def forward(self, x):
        return self.inner(self.linear(x).relu())

    def chain_steps(self, shape):
        return chain_steps(self.linear) + [relu_step()] + chain_steps(self.inner)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 6), nn.Sigmoid())
        self.head = Block()

    def forward(self, x):
        return self.head(self.encoder(x)) * 0.5

    def chain_steps(self, shape):
        return chain_steps(self.encoder) + chain_steps(self.head) + [("apply", lambda v: v * 0.5, 0)]


class Clamped(nn.Module):
    """Its export holds a constant of onnxnn's own writing (a clamp's infinite upper bound), which is
    part of the graph, not state a fine-tuning step may move."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x).clamp(min=0)

    def chain_steps(self, shape):
        return chain_steps(self.linear) + [relu_step()]


def batchnorm_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    model(onnxnn.randn(8, 4))  # one training step gives the running statistics non-default values
    return model.eval()


ROUND_TRIP_MODELS = {
    "mlp": lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
    "batchnorm_eval": batchnorm_model,
    "nested": Nested,
    "clamped": Clamped,
}


def exported(name: str):
    model = ROUND_TRIP_MODELS[name]().eval()
    x = onnxnn.randn(3, 4)
    return model, x, to_onnx(model, x)


def exported_state(model: nn.Module) -> dict:
    # The exporter writes the state the graph uses: BatchNorm's num_batches_tracked is not.
    return {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
