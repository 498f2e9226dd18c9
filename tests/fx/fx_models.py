"""Small models the fx tests trace: each mixes the ways a forward can compute."""

from __future__ import annotations

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn


class Block(nn.Module):
    """A non-leaf submodule: traced through, its leaves recorded under ``block.*``."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 6)
        self.scale = nn.Parameter(onnxnn.full((6,), 0.5))

    def forward(self, x):
        return self.linear(x) * self.scale


class Mixed(nn.Module):
    """Submodules, F.* calls, onnxnn.* calls, Tensor methods, arithmetic, indexing and shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.block = Block()
        self.register_buffer("offset", onnxnn.arange(6, dtype=onnxnn.float32) / 10)

    def forward(self, x, y):
        h = self.fc(x)  # call_module
        h = F.relu(h) + self.offset  # call_function F.relu, get_attr, operator.add
        h = self.block(h)  # traced through: call_module block.linear, get_attr block.scale
        h = onnxnn.tanh(h) * 2.0 - y  # onnxnn.tanh, operator.mul/sub
        h = h.transpose(0, 1).contiguous()  # call_method
        rows = h.shape[1]  # getattr node + getitem
        return onnxnn.cat([h[:, :1], h], dim=1).sum(0) / rows  # onnxnn.cat, getitem, method, truediv


def mixed_numpy(model: Mixed, x, y):
    """``Mixed.forward`` written with numpy from the model's weights."""
    import numpy as np

    def weights(module):
        return module.weight.detach().numpy(), module.bias.detach().numpy()

    w, b = weights(model.fc)
    h = np.maximum(x @ w.T + b, 0) + model.offset.numpy()
    w2, b2 = weights(model.block.linear)
    h = (h @ w2.T + b2) * model.block.scale.detach().numpy()
    h = np.tanh(h) * 2.0 - y
    h = h.T
    return np.concatenate([h[:, :1], h], axis=1).sum(0) / h.shape[1]
