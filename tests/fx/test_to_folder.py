"""GraphModule.to_folder writes an importable package that computes what the GraphModule computes."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import onnxnn
from onnxnn import fx, nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.act = nn.Sequential(nn.ReLU())  # not rebuilt from its repr: pickled
        self.p = nn.Parameter(onnxnn.full((3,), 1.5))
        self.register_buffer("b", onnxnn.full((3,), 2.0))
        self.register_buffer("nb", onnxnn.full((3,), 5.0), persistent=False)

    def forward(self, x, flag=1):
        return self.act(self.fc(x)) * self.p + self.b + self.nb


def load_written(folder, module_name):
    spec = importlib.util.spec_from_file_location(f"_fx_folder_{id(folder)}", folder / "module.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return getattr(module, module_name)


def test_the_written_module_computes_what_the_graph_module_computes(tmp_path):
    gm = fx.symbolic_trace(Model(), concrete_args={"flag": 1})
    with pytest.warns(UserWarning, match=r"saved as pickled files instead: \['act'\]"):
        gm.to_folder(tmp_path / "pkg", "MyModule")
    assert sorted(path.name for path in (tmp_path / "pkg").iterdir()) == [
        "__init__.py",
        "act.pt",
        "buffers.pt",
        "module.py",
        "state_dict.pt",
    ]
    source = (tmp_path / "pkg" / "module.py").read_text()
    assert "setattr(self, 'fc', Linear(in_features=4, out_features=3, bias=True))" in source
    # The package reads its files beside itself: it still loads once moved, under a path with a quote.
    moved = (tmp_path / "pkg").rename(tmp_path / "it's moved")
    rebuilt = load_written(moved, "MyModule")()
    assert list(rebuilt.state_dict()) == list(gm.state_dict())
    x = onnxnn.randn(2, 4)
    weight, bias = gm.fc.weight.detach().numpy(), gm.fc.bias.detach().numpy()
    expected = np.maximum(x.numpy() @ weight.T + bias, 0) * 1.5 + 2 + 5
    with onnxnn.no_grad():
        np.testing.assert_array_equal(rebuilt(x).numpy(), gm(x).numpy())  # same ops, same weights
        np.testing.assert_allclose(gm(x).numpy(), expected, rtol=1e-6, atol=1e-6)  # 4-term float32 dot products
