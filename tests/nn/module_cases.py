"""Small modules the nn.Module tests build on (test_module_registration.py,
test_module_traversal_and_conversion.py): a Linear-like layer, a net of them, a module with buffers,
and an empty one.
"""

from __future__ import annotations


import onnxnn
from onnxnn import nn


class TinyLinear(nn.Module):
    """A layer built from Parameters and onnxnn ops only, printed like nn.Linear."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(onnxnn.randn(out_features, in_features))
        self.bias = nn.Parameter(onnxnn.randn(out_features))

    def forward(self, x):
        return x @ self.weight.t() + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias=True"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = TinyLinear(4, 3)
        self.l2 = TinyLinear(3, 2)

    def forward(self, x):
        return self.l2(self.l1(x).relu())


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(onnxnn.ones(2))
        self.register_buffer("running", onnxnn.zeros(2))
        self.register_buffer("count", onnxnn.tensor([3, 4]))
        self.register_buffer("scratch", onnxnn.ones(2), persistent=False)

    def forward(self, x):
        return x * self.scale + self.running


class Empty(nn.Module):
    pass
