"""An exported graph follows its inputs however deep the model: nothing the trace computed is baked in.

Recording realizes a pending history deeper than ``depth.MAX_PENDING_DEPTH`` (``runtime/depth.py``).
During ``to_onnx``'s trace such realized values must stay computed from the graph inputs, never become
constants. The model is a residual stack, ``x = x + linear(x)`` (a value used twice per layer, as in
every transformer and ResNet), in float64, fed an input other than the traced one; the exported
graph on plain onnxruntime must give onnxnn's forward.

Tolerance: each layer's output element is a sum of ``width + 2`` terms (``x_j``, ``W_jk x_k``, ``b_j``)
whose magnitudes are ``(I + |W|) |x| + |b|``; an error carried in from earlier layers is scaled by at
most ``I + |W|``. So two evaluations differ by at most ``2 * gamma(layers * (width + 2)) * M``, with
``M`` the chain run on ``|x|`` with ``I + |W|`` and ``|b|`` (Higham, section 3.5).
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.runtime import depth
from tolerances import gamma

WIDTH = 8


class ResidualStack(nn.Module):
    def __init__(self, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x

    def magnitude(self, x: np.ndarray) -> np.ndarray:
        m = np.abs(x)
        for layer in self.layers:
            m = m + m @ np.abs(layer.weight.detach().numpy()).T + np.abs(layer.bias.detach().numpy())
        return m


@pytest.mark.parametrize("layers", [depth.MAX_PENDING_DEPTH // 8, depth.MAX_PENDING_DEPTH])
def test_exported_deep_residual_model_follows_a_new_input(layers):
    onnxnn.manual_seed(layers)
    model = ResidualStack(layers).double().eval()
    with onnxnn.no_grad():
        for layer in model.layers:  # small updates: the signal stays of the input's size through the stack
            layer.weight.mul_(0.05)
            layer.bias.mul_(0.05)
    rng = np.random.default_rng(0)
    traced, other = (rng.normal(size=(4, WIDTH)) for _ in range(2))
    proto = onnxnn.export.to_onnx(model, onnxnn.from_numpy(traced), input_names=["x"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (served,) = session.run(None, {"x": other})
    with onnxnn.no_grad():
        ours = model(onnxnn.from_numpy(other)).numpy()
    bound = 2 * gamma(layers * (WIDTH + 2), np.float64) * model.magnitude(other)
    assert np.all(np.abs(served - ours) <= bound), float(np.max(np.abs(served - ours) / bound))
